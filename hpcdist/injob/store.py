"""torchrun's rendezvous store, held for each launch by the node whose script runs the set-up.

Where it runs: in the job, on the node that runs its script: ``hpcdist job-setup --hold-store``
(:mod:`hpcdist.injob.job_setup`) holds the first launch's store, ``hpcdist restart`` (which runs
the set-up again between two launches: :mod:`hpcdist.injob.restart`) ends the last launch's
holder and holds the next launch's, on its new port.

The store outlives every agent: held by the first agent (torch's way), it left while the other
nodes' agents were still in their exit barrier, and a job that succeeded ended its log with their
errors (pytorch/pytorch#69520). The port is taken here, in the set-up, before torch is imported:
a child imports it and serves the store on this socket while the script starts the launcher (an
agent that connects first waits in the socket's queue), so that the launch does not wait a second
for torch. Should the child fail, the socket closes with it and the agents are refused: none
meets anything else there. The child's pid is in the run folder (:data:`PID_FILE`); it ends when
the set-up of the next launch ends it (:func:`release`) or when the job's script has ended.
"""

import os
import sys
import time

#: In the run folder: the pid of the process that holds the launch's store.
PID_FILE = "store.pid"
#: Seconds a holder has to end once told to, before it is killed.
END_S = 5


def hold(port: int, run_dir: "str | None" = None) -> None:
    """Listen on ``port`` of this node and leave a child to serve the rendezvous store there until
    :func:`release` ends it (its pid in ``run_dir``) or the caller's parent (the job's script) has
    ended; OSError, and nothing left, where the port cannot be listened on."""
    job_script = os.getppid()
    listener = _listen(port)
    child = os.fork()
    if child:
        listener.close()
        if run_dir is None:  # python -m hpcdist.launchers.torchrun --hold-store, as scripts once ran
            return
        path = os.path.join(run_dir, PID_FILE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(f"{child}\n")
        return
    try:
        _serve_store(listener, port, job_script)
    finally:
        os._exit(0)


def cannot_listen(port, error: OSError) -> str:
    """What is said where :func:`hold` cannot listen on ``port`` (the job ends: its agents must
    not meet whatever listens there)."""
    return (f"torchrun's rendezvous store cannot listen on port {port} of this node: "
            f"{error.strerror or error}")


def release(run_dir: str) -> None:
    """End the holder of the last launch's store, if there is one, and wait for its end (its port
    may be the next launch's): a stopped one is woken to take its TERM; one that does not end
    within :data:`END_S` seconds is killed."""
    path = os.path.join(run_dir, PID_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            pid = int(f.read())
        written = os.stat(path).st_mtime
    except (OSError, ValueError):
        return
    from hpcdist.progress import process_start

    started = process_start(pid)
    # A process that started after the file was written is not the holder (its pid reused).
    if started is not None and started <= written + 1:
        _end(pid)
    os.unlink(path)


def _end(pid: int) -> None:
    """``pid`` ended: told to (TERM; a stopped one woken to take it), killed after :data:`END_S`
    seconds; back once it has ended."""
    import _signal

    from hpcdist.progress.monitor import alive

    for number in (_signal.SIGTERM, _signal.SIGCONT):
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):  # gone, or not ours
            return
    deadline = time.monotonic() + END_S
    while alive(pid):
        if time.monotonic() > deadline:
            try:
                os.kill(pid, _signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline = float("inf")
        time.sleep(0.02)


def _listen(port: int):
    """A socket listening on ``port`` at every address of this host, as torch's store listens
    (IPv6 and IPv4 where the host has IPv6)."""
    import _socket  # socket.py's own imports (enum, selectors) would cost the set-up

    try:
        sock = _socket.socket(_socket.AF_INET6, _socket.SOCK_STREAM)
        address = "::"
        sock.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 0)
    except OSError:  # no IPv6 on this host
        sock, address = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM), "0.0.0.0"
    try:
        # As torch's store: a closed connection's TIME_WAIT on the port is no listener.
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(_socket.SOMAXCONN)  # every node's agent may connect before the store serves
    except OSError:
        sock.close()
        raise
    return sock


def _serve_store(listener, port: int, job_script: int) -> None:
    """The child: torch's store served on ``listener`` (its server runs in a thread of torch's)
    until the job's script has ended (or :func:`release` ends it)."""
    import _signal

    # The walltime warning is the batch shell's (a `qsig -s USR2` reaches every process of the job).
    _signal.signal(_signal.SIGUSR2, _signal.SIG_IGN)
    try:
        from datetime import timedelta

        from torch.distributed import TCPStore

        store = TCPStore("localhost", port, is_master=True, wait_for_workers=False,
                         timeout=timedelta(seconds=60), master_listen_fd=listener.fileno())
    except Exception as e:  # noqa: BLE001 - any failure is said; the socket closes with the child
        print(f"hpcdist: torchrun's rendezvous store cannot serve on port {port} of this node: "
              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return
    # Nothing more to say: the job's output is not held open by the store (whoever reads it
    # waits for its end, and may reap the script only then).
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    from hpcdist.progress.monitor import alive  # the monitor's own test of the batch shell's end

    while alive(job_script):
        time.sleep(0.5)
    del store
