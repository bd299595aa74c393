"""torchrun: one agent per node, a c10d rendezvous on the first host; restarts and elastic size.

Where it runs: on the login node (the launch lines), and on the job's first node, where
``python -m hpcdist.launchers.torchrun --hold-store PORT`` holds the agents' rendezvous store.

``--min-nodes`` without ``--max-restarts`` is its elastic size (``--nnodes=MIN:MAX``, Slurm only);
with ``--max-restarts`` the restarts are the job script's (:mod:`hpcdist.injob.restart`), under
every launcher, and ``--min-nodes`` the fewest nodes they go on with: torchrun's own restarts are
never used. Its log names a failed rank in its "Root Cause" block.
"""

from __future__ import annotations

import os
import re
import sys
import time

from hpcdist.launchers import Launcher, exit_why, failure, program
from hpcdist.shell import BREAK, Shell

#: torchrun's summary of the first failed worker (compiled by re's cache when a log is read).
ROOT_CAUSE = (
    r"Root Cause \(first observed failure\):\s*\[\d+\]:\s*time\s*: (?P<time>\S+)\s*host\s*: (?P<host>\S+)\s*"
    r"rank\s*: (?P<rank>\d+) \(local_rank: (?P<local>\d+)\)\s*exitcode\s*: (?P<code>-?\d+)[^\n]*\n"
    r"(?:\s*error_file\s*:[^\n]*\n)?(?:\s*traceback\s*: (?P<tb>[^\n]*))?")

#: torchrun's own lines when a signal (a cancel, the walltime, a preemption) stops it: its log lines
#: of the shutdown, and the exception each of its nested handlers raises on the way out. Read by
#: :mod:`hpcdist.jobs.logfiles`, which folds that teardown into one line of ``hpcdist logs``.
TEARDOWN_LINE = (r"^[IWE]\d{4} (?P<time>\d\d:\d\d:\d\d)\.\d+ +\d+ torch/distributed/elastic/\S+\] "
                 r"(?:Received \d+ death signal|Sending process \d+ closing signal)")
#: Searched, not matched: two agents on one host cut each other's lines in the log.
SIGNAL_EXCEPTION = r"SignalException: Process \d+ got signal: (?P<signal>\d+)"
#: Any line of torchrun's agent's own log.
ELASTIC_LINE = r"[IWE]\d{4} [\d:.]+ +\d+ torch/distributed/elastic/"


class Torchrun(Launcher):
    name = "torchrun"

    def per_node(self, spec):
        return True

    def describe(self, spec, spread: str = ""):
        # The agents meet at $MASTER_ADDR:$MASTER_PORT (c10d); torchrun then gives its workers a
        # master of its own choosing (the first agent's host and a free port).
        n = spec.procs_per_node
        meeting = "this node" if holds_store(spec) else "the master"
        return f"Start torchrun on every node{spread}: {n} process{'es' if n > 1 else ''} each, meeting at {meeting}."

    def words(self, spec):
        # c10d rendezvous on the first host; the rendezvous assigns node ranks.
        # Elastic: MIN:MAX nodes; the training goes on (after a restart) with those left.
        # A job whose restarts may go on with fewer nodes: the set-up's count (spec.count).
        nnodes = Shell(f"--nnodes={spec.min_nodes}:{spec.nodes}") if spec.elastic else spec.count("--nnodes=")
        # The first node's agent hosts the store, and only it: left to guess, torch lets an agent
        # on the master's host that cannot listen on the port join whatever listens there
        # (another job's store, another user's program), and on the local backend every agent is
        # on the master's host. An elastic job's two srun steps each count their nodes from 0:
        # hpcdist agents --elastic says which agent hosts (hpcdist.schedulers.slurm.job).
        if spec.elastic:
            host = []
        elif holds_store(spec):
            host = ["--rdzv-conf=is_host=0"]
        else:
            host = [Shell('--rdzv-conf=is_host="$(( $NODE_RANK == 0 ))"')]
        # An elastic job's new round: torch's agents keep one store for every round, where a restarted
        # worker can read the dead workers' addresses (gloo "Connection refused" at every restart,
        # until torchrun gives up: pytorch/pytorch#135712, #167288). Each round then gets a store of
        # its own, as before torch 2.4.
        fresh = ["env", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"] if spec.elastic else []
        return [BREAK, *fresh, "torchrun", nnodes, f"--nproc-per-node={spec.procs_per_node}",
                "--rdzv-backend=c10d", Shell('--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"'), *host,
                Shell('--rdzv-id="$HPCDIST_JOB_ID"')] + workers(spec)

    def setup(self, spec):
        if not holds_store(spec):
            return []
        # The agents' store outlives every agent: held by the first agent (torch's way), it left
        # while the other nodes' agents were still in their exit barrier, and a job that succeeded
        # ended its log with their errors (pytorch/pytorch#69520). It returns once it listens.
        return [f"{spec.python} -m hpcdist.launchers.torchrun --hold-store \"$MASTER_PORT\""]

    def failures(self, text, agents, nodes):
        return [(m.start(), failure(exit_why(int(m["code"])), rank=int(m["rank"]), local_rank=int(m["local"]),
                                    host=m["host"], source="torchrun"))
                for m in re.finditer(ROOT_CAUSE, text)]


def workers(spec) -> list:
    """What torchrun starts: each worker through hpcdist.rank (its --module), which records its
    progress for `hpcdist watch`; the script is then an argument (a `--` after it is not torchrun's
    to swallow). In a container the script itself, as before: the image need not hold hpcdist
    (tests/launchers/test_matrix.py trains in one that does not)."""
    from hpcdist import containers

    if containers.get(spec) is not None:
        return program(spec, argparse_launcher=True)
    return ["-m", "hpcdist.rank"] + program(spec)


def holds_store(spec) -> bool:
    """Whether the job script holds the rendezvous store (:func:`hold_store`): several nodes, a
    fixed size (an elastic job's rounds are hpcdist agents --elastic's), and the host's python
    the training's (in a container the host may have no torch)."""
    from hpcdist import containers

    return spec.nodes > 1 and not spec.elastic and spec.python != "hpcdist" and containers.get(spec) is None


def hold_store(port: str) -> int:
    """Listen on ``port`` of this node, then return 0 and leave a child to serve the rendezvous
    store there until the job's script (this command's parent) has ended; 1, said, if it cannot
    listen (the agents must not meet at whatever else listens there). The port is taken here,
    before torch is imported: the child imports it and serves the store on this socket while the
    script starts the launcher (an agent that connects first waits in the socket's queue), so that
    the launch does not wait a second for torch. Should the child fail, the socket closes with it
    and the agents are refused: none meets anything else there."""
    job_script = os.getppid()
    try:
        listener = _listen(int(port))
    except OSError as e:
        print(f"hpcdist: torchrun's rendezvous store cannot listen on port {port} of this node: "
              f"{e.strerror or e}", file=sys.stderr)
        return 1
    if os.fork():
        listener.close()
        return 0
    _serve_store(listener, port, job_script)
    os._exit(0)


def _listen(port: int):
    """A socket listening on ``port`` at every address of this host, as torch's store listens
    (IPv6 and IPv4 where the host has IPv6)."""
    import _socket  # socket.py's own imports (enum, selectors) would cost the launch

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


def _serve_store(listener, port: str, job_script: int) -> None:
    """The child: torch's store served on ``listener`` (its server runs in a thread of torch's)
    until the job's script has ended."""
    try:
        from datetime import timedelta

        from torch.distributed import TCPStore

        store = TCPStore("localhost", int(port), is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60),
                         master_listen_fd=listener.fileno())
    except Exception as e:  # noqa: BLE001 - any failure is said; the socket closes as the child ends
        print(f"hpcdist: torchrun's rendezvous store cannot serve on port {port} of this node: "
              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        os._exit(1)
    # Nothing more to say: the job's output is not held open by the store (whoever reads it
    # waits for its end, and may reap the script only then).
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    from hpcdist.progress.monitor import alive  # the monitor's own test of the batch shell's end

    while alive(job_script):
        time.sleep(0.5)
    del store


LAUNCHER = Torchrun()

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--hold-store" or not sys.argv[2].isdigit():
        raise SystemExit("usage: python -m hpcdist.launchers.torchrun --hold-store PORT")
    sys.exit(hold_store(sys.argv[2]))
