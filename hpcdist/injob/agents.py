"""``hpcdist agents``: start a launcher's agent once on every node, and end them all when one fails.

srun and mpirun start one agent per node by themselves (the job script says so in one line).
Where neither can, the job script hands the agent's command to this command, in one line::

    python -m hpcdist agents --pbsdsh --dir "$run_dir" -- torchrun --nnodes=2 ... train.py
    python -m hpcdist agents --elastic -- srun --ntasks-per-node=1 --cpus-per-task=8 torchrun ...
    python -m hpcdist agents --local --nodes 2 -- torchrun --nnodes=2 ... train.py

How each way starts its agents is its scheduler's (``--pbsdsh``: :mod:`hpcdist.schedulers.pbs.pbsdsh`;
``--elastic``: :mod:`hpcdist.schedulers.slurm.job`; ``--local``: :mod:`hpcdist.schedulers.local.job`;
the command picks one: :func:`hpcdist.cli.in_job.run_by_hand`); what they share is here:
:func:`watch` follows the agents, and when one ends badly it says which node and why, ends the
others (:mod:`hpcdist.injob.end_all`'s rule) and exits with that status. SIGTERM, SIGINT and
SIGHUP (a cancel, the walltime) are passed on to every agent.
``--node`` is one node's own agent, for a way of starting that cannot tell how its command ended
(PBS Pro's pbsdsh exits 0 whatever its task did): it runs the command, passes signals on, and
leaves the command's status in ``--status FILE``. ``--reap`` becomes the command (exec) and leaves
nothing of it behind on its node (:func:`reap`): where the scheduler does not track what a job
starts on its other nodes (PBS, whose moms know nothing of processes started over ssh or by an MPI's
launcher), a rank stopped by a hang, or one whose launcher was killed before its own SIGKILL, would
outlive the job, holding its GPU.

Each agent gets its node's index as ``NODE_RANK``; a command that needs it in its words is
``bash -c 'exec ... --node_rank="$NODE_RANK" ...'`` (:func:`hpcdist.schedulers.base.on_each_node`).
"""

import os
import signal
import sys
import time

from hpcdist.injob.end_all import ENDING, GRACE_S

#: Seconds between two looks at the agents.
POLL_S = 0.2

USAGE = """usage: hpcdist agents --pbsdsh --dir RUN_DIR -- COMMAND...
       hpcdist agents --elastic -- srun [SRUN FLAGS] COMMAND...
       hpcdist agents --local --nodes N -- COMMAND...
       hpcdist agents --node --status FILE [--cd DIR] -- COMMAND...
       hpcdist agents --reap -- COMMAND...
Inside a job script: start COMMAND once on every node of the job; when one ends badly, end the
others and exit with its status."""


class Agent:
    """One node's agent: its process, its node's index and host, and how its status is known
    (``status_file``: the node agent's own record, where the starting command cannot tell)."""

    def __init__(self, process, node: int, host: str, status_file: "str | None" = None):
        self.process, self.node, self.host, self.status_file = process, node, host, status_file

    def status(self) -> "tuple[int, str]":
        """``(exit status, how it is known)`` once the process has ended."""
        code = exit_status(self.process.returncode)
        if self.status_file is None:
            return code, ""
        recorded = read_status(self.status_file)
        if recorded is None:
            return (code or 1), f"it left no status (its starter: {code})"
        return recorded, "" if code == 0 else f"its starter: {code}"


def exit_status(returncode: int) -> int:
    """A process's status as a shell gives it: 128+N for a signal N."""
    return 128 - returncode if returncode < 0 else returncode


def read_status(path: str, wait_s: float = 10.0) -> "int | None":
    """The status a node agent left, waiting up to ``wait_s`` for it to show (a network file
    system may cache a folder's listing for a few seconds); None when there is none."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.listdir(os.path.dirname(path) or ".")  # refreshes NFS's view of the folder
            with open(path, encoding="utf-8") as f:
                text = f.read().strip()
            if text.isdigit():
                return int(text)
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)


def watch(agents: list, what: str = "agent") -> int:
    """Until every agent has ended, or one ended badly: then the others are ended. The status of
    the first that failed, else 0."""
    caught = forward_signals([agent.process for agent in agents])
    running = list(agents)
    while running:
        time.sleep(POLL_S)
        for agent in [a for a in running if a.process.poll() is not None]:
            running.remove(agent)
            code, how = agent.status()
            if code != 0 and caught:  # the job is being ended: no agent is to blame
                end(running)
                return 128 + caught[0]
            if code != 0:
                note = f" ({how})" if how else ""
                print(f"hpcdist: the {what} on node {agent.node} ({agent.host}) ended with status {code}{note}; "
                      f"ending the other {what}s", file=sys.stderr, flush=True)
                end(running)
                return code
    return 128 + caught[0] if caught else 0


def forward_signals(processes: list) -> list:
    """Pass SIGTERM, SIGINT and SIGHUP on to each of ``processes`` still running; the list the
    signals caught are added to."""
    caught = []

    def forward(signum, _frame):
        caught.append(signum)
        for process in processes:
            if process.poll() is None:
                process.send_signal(signum)

    for signum in ENDING:
        signal.signal(signum, forward)
    return caught


def end(agents: list, grace: float = GRACE_S) -> None:
    """SIGTERM to each agent still running, SIGKILL to those left after ``grace`` seconds."""
    for agent in agents:
        if agent.process.poll() is None:
            agent.process.terminate()
    deadline = time.monotonic() + grace
    while any(a.process.poll() is None for a in agents) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for agent in agents:
        if agent.process.poll() is None:
            agent.process.kill()
            agent.process.wait()


def node_agent(command: list, status_file: str, folder: "str | None") -> int:
    """One node's agent: ``command`` in ``folder``, signals passed on, its status left in
    ``status_file`` (written whole: a reader never sees it half-written)."""
    import subprocess

    if folder:
        os.chdir(folder)
    process = subprocess.Popen(command)
    forward_signals([process])
    code = exit_status(process.wait())
    with open(status_file + ".part", "w") as f:
        f.write(f"{code}\n")
    os.replace(status_file + ".part", status_file)
    return code


#: In the environment of everything a node's launcher starts: the mark by which what is left of it,
#: once the launcher has gone, is found (:func:`reap`).
MARK = "HPCDIST_NODE_MARK"
#: Seconds what is left gets after SIGCONT and SIGTERM (a checkpoint on its way out), before SIGKILL.
REAP_GRACE_S = 5.0


def reap(command: list) -> None:
    """Become ``command`` (exec: the starter's signals reach it as before) and leave nothing of it on
    this node. A watchdog, in a session of its own (out of reach of the starter's process group, as
    torchrun's workers are: each in a session of its own), waits for this process to end, however it
    ends (its status is the starter's to read), then ends every process still carrying this node's
    :data:`MARK` in its environment: SIGCONT (a stopped rank takes a signal only once it runs), SIGTERM,
    and SIGKILL after :data:`REAP_GRACE_S`. Its output goes nowhere: an MPI's launcher waits for its
    tasks' output to close."""
    token = os.urandom(8).hex()
    os.environ[MARK] = token
    launcher = os.getpid()
    if os.fork() == 0:
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            started = _start_time(launcher)
            while _start_time(launcher) == started and started is not None:
                time.sleep(POLL_S * 2)
            sweep(token)
        finally:
            os._exit(0)
    os.execvp(command[0], command)


def _start_time(pid: int) -> "bytes | None":
    """A process's start time while it runs (not a zombie), None once it has ended: a pid reused
    since is another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[:1] == [b"Z"] or len(fields) < 20 else fields[19]


def marked(token: str) -> list:
    """The pids of this user's processes on this node whose environment carries ``token``."""
    mark, me, found = f"{MARK}={token}".encode(), os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:  # another user's, or gone
                pass
    return found


def sweep(token: str, grace: float = REAP_GRACE_S) -> int:
    """End what is left of a node's launch (:func:`marked`): CONT and TERM, then KILL after ``grace``
    seconds. How many there were."""
    left = marked(token)
    for signum in (signal.SIGCONT, signal.SIGTERM):
        for pid in left:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_start_time(pid) is not None for pid in left):
        time.sleep(POLL_S)
    for pid in marked(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(left)


def parse(argv: list) -> "tuple[dict, list]":
    """``(options, command)``: the words before ``--`` and the command after it."""
    if "--" not in argv:
        raise SystemExit(f"hpcdist agents: error: no command: give it after --\n{USAGE}")
    split = argv.index("--")
    options, words = {}, argv[:split]
    while words:
        word = words.pop(0)
        if word in ("--pbsdsh", "--elastic", "--local", "--node", "--reap"):
            options["by"] = word[2:]
        elif word in ("--dir", "--nodes", "--status", "--cd") and words:
            options[word[2:]] = words.pop(0)
        else:
            raise SystemExit(f"hpcdist agents: error: unexpected {word!r}\n{USAGE}")
    command = argv[split + 1:]
    if "by" not in options or not command:
        raise SystemExit(f"hpcdist agents: error: say how (--pbsdsh, --elastic, --local, --reap) "
                         f"and what to run\n{USAGE}")
    return options, command
