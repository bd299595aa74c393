"""End a fanned-out launch when one node's launcher fails.

DeepSpeed's default multi-node runner starts one ``deepspeed.launcher.launch``
per node through pdsh, and pdsh waits for every node. When the launcher of
one node ends with an error (a rank died there), the ranks of the other
nodes may be busy outside any collective, and nothing tells them: the job
keeps its allocation until the walltime. pdsh does say so at once, on
stderr::

    pdsh@node1: node2: ssh exited with exit code 1

``hpcdist supervise -- deepspeed ...`` runs the launcher, passes its stderr
through unchanged, and on that line ends the launch: it kills the runner and
its pdsh and pdsh's ssh clients (each in a session of its own), then runs
``pkill`` over pdsh on every node for this launch's own
``deepspeed.launcher.launch`` (matched by its ``--world_info`` and
``--master_port``), whose clean-up stops its ranks. A signal that ends the
job (scancel, qdel, Ctrl-C: SIGTERM, SIGINT, SIGHUP) ends a pdsh launch the
same way: DeepSpeed's runner, sent one, would pkill with a pattern that
matches every DeepSpeed launcher of the same Python on those nodes (another
job's, on a shared node). When no pdsh is found below the launcher, it gets
SIGTERM and does its own clean-up; if it is still there after a grace
period, its process group is killed. Other signals go to the launcher. The
exit status is the launcher's, or the failed node's when the launcher, once
ended, says 0.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time

from hpcdist.injob.end_all import ENDING, GRACE_S, WARNINGS

#: pdsh's report of a node whose remote command failed (``-S`` keeps it on stderr).
FAILED_NODE = re.compile(rb"^pdsh@[^:\s]+: ([^:\s]+): \S+ exited with exit code (\d+)")

#: Seconds after the start in which a pdsh launch is looked for (once a second, until found).
LOOK_FOR_LAUNCH_S = 300
#: Seconds supervise waits, at most, for the processes it killed to be gone before it returns.
KILLED_WAIT_S = 5.0


def failed_node(line: bytes) -> tuple[str, int] | None:
    """``(node, exit code)`` when the line is pdsh's report of a failed node."""
    m = FAILED_NODE.match(line)
    if m is None or int(m.group(2)) == 0:
        return None
    return m.group(1).decode(errors="replace"), int(m.group(2))


def _stat(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command's name: state, ppid, ... (empty: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def launched_processes(root: int) -> list[tuple[int, bytes]]:
    """``(pid, start time)`` of every process below ``root``, breadth first, those in sessions of
    their own included: pdsh starts each ssh with setsid(), out of the launcher's process group,
    and an ssh left running keeps its node's launcher attached to a job that has ended. (The start
    time, field 22: a pid reused since is not ours.)"""
    children: dict[int, list[int]] = {}
    started: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if len(stat) > 19:
                children.setdefault(int(stat[1]), []).append(int(entry))
                started[int(entry)] = stat[19]
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        found.append((pid, started[pid]))
        todo += children.get(pid, [])
    return found


def pdsh_launch(launched: list[tuple[int, bytes]]) -> tuple[str, str, dict[str, str]] | None:
    """``(hosts, pattern, environment)`` of the pdsh that DeepSpeed's runner started, among its
    ``launched`` processes. The pattern matches this launch's ``deepspeed.launcher.launch`` by its
    ``--world_info`` (the hosts and slots: the same for every job of that shape) and its
    ``--master_port`` (this job's own), and not the command lines that carry the pattern ("[-]-":
    this pdsh, its ssh, a node's shell, which pkill would end first). The clean-up's pdsh needs
    the runner's environment, where it set PDSH_RCMD_TYPE=ssh (pdsh's own default is often rsh,
    which reaches no node) and its ssh port."""
    for pid, _ in launched:  # breadth first: the runner's own pdsh, not a host's helper
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == "pdsh" and "-w" in argv[:-1]:
            m = re.search(r"--world_info=(\S+) .*--master_port=(\d+)", " ".join(argv))
            if m:
                pattern = f"[-]-world_info={re.escape(m.group(1))} .*--master_port={m.group(2)}( |$)"
                return _hosts(argv), pattern, _environment(pid)
    return None


def _environment(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = [item.decode(errors="replace").split("=", 1) for item in f.read().split(b"\0") if b"=" in item]
        return dict(pairs)
    except OSError:  # gone, or not ours to read: what the runner sets, on this process's own
        return dict(os.environ, PDSH_RCMD_TYPE="ssh")


def _kill_processes(found: list[tuple[int, bytes]], wait: float = KILLED_WAIT_S) -> None:
    """SIGKILL to each of ``found`` that is still the same process, then wait up to ``wait``
    seconds for each to end: a killed process stays running until the kernel schedules it, which
    on a loaded node came after supervise had returned and the job's clean-up had looked."""
    ending = []
    for pid, started in found:
        try:
            pidfd = os.pidfd_open(pid)  # held from here on: the pid cannot be reused under it
        except OSError:  # gone already (or a kernel without pidfds: a plain kill, no wait)
            pidfd = None
        stat = _stat(pid)
        try:
            if len(stat) > 19 and stat[19] == started:
                if pidfd is None:
                    os.kill(pid, signal.SIGKILL)
                else:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    ending.append(pidfd)
                    continue
        except (ProcessLookupError, PermissionError):
            pass
        if pidfd is not None:
            os.close(pidfd)
    _wait_ended(ending, wait)


def _wait_ended(pidfds: list[int], wait: float) -> None:
    """Until every process of ``pidfds`` has ended (a pidfd reads as ready then), at most ``wait``
    seconds; the pidfds are closed."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    left, deadline = set(pidfds), time.monotonic() + wait
    while left and time.monotonic() < deadline:
        for fd, _ in poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            poller.unregister(fd)
            left.discard(fd)
    for fd in pidfds:
        os.close(fd)


def _hosts(pdsh_argv: list[str]) -> str:
    """The nodes to clean up: the job's allocation; else pdsh's ``-w`` list (which
    pdsh splits in place, so its command line shows ``-w node1 node2``)."""
    from hpcdist.allocation import read

    try:
        found = read()
    except (ValueError, OSError):  # AllocationError is a ValueError
        found = None
    if found is not None:
        return ",".join(found.host_names)
    after = pdsh_argv[pdsh_argv.index("-w") + 1:]
    hosts = []
    for word in after:
        if word.startswith("-") or not re.fullmatch(r"[\w.\-\[\]@,]+", word):
            break
        hosts.append(word)
    return ",".join(hosts)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    """One supervised launch: the launcher started in its own process group, its stderr relayed
    line by line, the signals the job gets forwarded to it, and the launch ended on every node
    when one node's launcher fails (or when the job is ended, for a pdsh launch). Its methods run
    in three threads: the main one waits for the launcher, one relays its stderr, one looks for
    its pdsh launch; the signal handler runs in the main one."""

    def __init__(self, grace: float):
        self.grace = grace
        self.child: subprocess.Popen | None = None
        self.failure: list[tuple[str, int]] = []  # (host, code) of the first node that failed
        self.ended = threading.Event()  # the launch is being ended (by a failure or a signal)
        self.child_exited = threading.Event()
        self.enders: list[threading.Thread] = []
        self.pending: list[int] = []  # signals that arrived before the launcher started
        self.launched: list[tuple[int, bytes]] = []  # what ran below the launcher when a node failed
        self.seen: list = []  # the pdsh launch once found: a job's end may have ended pdsh before

    def run(self, argv: list[str]) -> int:
        """Start the launcher, supervise it to its end; its exit status, as a shell gives it."""
        for signum in ENDING + WARNINGS:
            signal.signal(signum, self.forward)
        # Its own process group, so that the last resort reaches pdsh and ssh too.
        self.child = subprocess.Popen(argv, stderr=subprocess.PIPE, start_new_session=True)
        for signum in self.pending:
            self.child.send_signal(signum)
        threading.Thread(target=self.look_for_launch, daemon=True).start()
        relay_thread = threading.Thread(target=self.relay, daemon=True)
        relay_thread.start()
        code = self.child.wait()
        self.child_exited.set()
        if self.ended.is_set():
            self.clean_up_after_ending()
        # A grandchild may hold the pipe open: drain what is there, without waiting on it.
        relay_thread.join(timeout=2)
        return self.exit_status(code)

    def forward(self, signum, _frame) -> None:
        """A signal the job got: passed to the launcher; an ending one to a pdsh launch ends it here
        (DeepSpeed's runner would pkill every DeepSpeed launcher of its Python)."""
        child = self.child
        if child is None:
            self.pending.append(signum)
        elif child.poll() is None:
            launch = self.pdsh_below() if signum in ENDING and not self.ended.is_set() else None
            if launch is not None:
                self.start_ender(self.end_pdsh_launch, launch)
                return
            child.send_signal(signum)

    def pdsh_below(self):
        """The pdsh launch below the launcher, if any (or the one seen earlier); what runs below it is
        kept in ``launched``."""
        self.launched.extend(launched_processes(self.child.pid))
        return pdsh_launch(self.launched) or (self.seen[0] if self.seen else None)

    def look_for_launch(self) -> None:
        """Note the pdsh launch as soon as it runs: the monitor's end of a hung job signals every
        process of the job at once, pdsh and its ssh clients too, and a launch looked for only then
        was gone (its node 2 launcher and a stopped rank outlived the job)."""
        for _ in range(LOOK_FOR_LAUNCH_S):
            if self.child_exited.wait(1.0):
                return
            found = pdsh_launch(launched_processes(self.child.pid))
            if found is not None:
                self.seen.append(found)
                return

    def relay(self) -> None:
        """The launcher's stderr, line by line, to ours; the first node said to have failed ends the
        launch on every node."""
        for line in iter(self.child.stderr.readline, b""):
            _say(line)
            found = failed_node(line)
            if found and not self.ended.is_set():
                self.failure.append(found)
                _say(f"hpcdist supervise: the launcher on {found[0]} exited with code {found[1]}; "
                     f"ending the launch on every node\n".encode())
                self.start_ender(self.end_failed_launch, self.pdsh_below())

    def start_ender(self, end, launch) -> None:
        """``end`` in a thread of its own: the main thread waits for the launcher."""
        ender = threading.Thread(target=end, args=(launch,), daemon=True)
        self.enders.append(ender)
        self.ended.set()
        ender.start()

    def end_failed_launch(self, launch) -> None:
        """A node failed: its pdsh launch ended on every node; any other launcher asked to end, then
        its process group killed after the grace time."""
        if launch is not None:
            self.end_pdsh_launch(launch)
            return
        self.child.terminate()
        if self.child_exited.wait(self.grace):
            return
        _say(f"hpcdist supervise: still running after {self.grace:g} s; killing it\n".encode())
        _kill_group(self.child.pid)

    def end_pdsh_launch(self, launch) -> None:
        """The runner, its pdsh and their ssh ended here, this launch's launchers on every node."""
        hosts, pattern, environment = launch
        _kill_group(self.child.pid)
        _kill_processes(self.launched)
        try:
            # SIGCONT to the launchers' ranks first: a rank stopped by a hang takes its launcher's
            # SIGTERM only once it runs, and the launcher waits for it (DeepSpeed's, 30 s) after
            # the job has ended. pkill's status (1: nothing there) is the last command's.
            quoted = shlex.quote(pattern)
            remote = f'ranks=$(pgrep -d, -f -- {quoted}) && pkill -CONT -P "$ranks"; pkill -f -- {quoted}'
            done = subprocess.run(["pdsh", "-S", "-w", hosts, remote], timeout=self.grace,
                                  env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
            # pkill's 1 is a node with nothing left to end; anything else is said.
            said = [line for line in done.stderr.splitlines() if not line.endswith(b"exit code 1")]
        except (OSError, subprocess.TimeoutExpired) as e:
            said = [str(e).encode()]
        for line in said:
            _say(b"hpcdist supervise: ending the launch: " + line + b"\n")

    def clean_up_after_ending(self) -> None:
        """After an ended launch: the enders' clean-up on the other nodes (it runs after the launcher
        is gone), then what the ended launcher left behind here (ssh, pdsh threads)."""
        for ender in self.enders:
            ender.join(timeout=self.grace + 5)
        _kill_group(self.child.pid)
        _kill_processes(self.launched)

    def exit_status(self, code: int) -> int:
        """The launcher's status as a shell gives it (128+N for signal N); a launcher that ended 0
        after a node failed gives that node's code."""
        if code < 0:
            return 128 - code
        if code == 0 and self.failure:
            return self.failure[0][1]
        return code


def _say(line: bytes) -> None:
    sys.stderr.buffer.write(line)
    sys.stderr.buffer.flush()


def supervise(argv: list[str], grace: float = GRACE_S) -> int:
    """Run the launcher ``argv`` under a :class:`Supervisor`; its exit status."""
    return Supervisor(grace).run(argv)
