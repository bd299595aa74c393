"""The local backend from inside its job: the runner's id (and what one looks like), and this host
as the allocation.

A local job's "nodes" all run on this host, whatever allocation the shell it was submitted from
sits in (an salloc or ``qsub -I`` shell): :func:`hpcdist.allocation.read` with
``scheduler="local"`` is this host alone.
"""

#: The local runner sets it to its own pid (hpcdist.schedulers.local.submit); submitit's LocalExecutor
#: sets the second.
JOB_ID_VARIABLES = ("HPCDIST_JOB_ID", "SUBMITIT_LOCAL_JOB_ID")
#: The master of a local job: every agent is on this host.
MASTER_ADDR = "127.0.0.1"


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid; None
    for a zombie (it has ended: only its parent has not collected it yet). (Here, not in
    ``submit``: every submission marks its record with it, and ``submit`` imports Slurm's module.)"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[:1] == ["Z"] or len(fields) < 20 else fields[19]


def is_job_id(text) -> bool:
    """Whether ``text``, read from a job's record, can be a local job's id: its runner's pid.
    (A scheduler without such a rule here takes any id word: :func:`hpcdist.jobs.folders.record_problem`.)"""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def allocation(environ, step: bool = False, slots: bool = True):
    from hpcdist.schedulers.job_hosts import this_host

    return this_host()


def start(command: list, options: dict) -> int:
    """``hpcdist agents --local --nodes N``: the job's N "nodes" as N agents on this host, each
    with its ``NODE_RANK``; when one ends badly the others are ended (:func:`hpcdist.injob.agents.watch`)."""
    import os
    import socket
    import subprocess

    from hpcdist.injob.agents import Agent, watch

    text = options.get("nodes", "1")
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise SystemExit(f"hpcdist agents --local: --nodes {text!r}: expected a whole number of at least 1")
    host = socket.gethostname()
    agents = [Agent(subprocess.Popen(command, env={**os.environ, "NODE_RANK": str(node)}), node, host)
              for node in range(int(text))]
    return watch(agents)
