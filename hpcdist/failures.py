"""Which rank failed first, on which host, and why: written by the ranks, read from the log.

When one rank dies, every other rank soon fails too (its peer is gone), and
a job's log fills with a dozen tracebacks in whatever order the launchers
flushed them. Two sources tell the first failure apart:

- the rank's own report: :func:`report_failures` (installed by
  ``hpcdist.env.init_distributed()``) prints one line when an exception
  ends the process, with the rank, host and a timestamp::

      hpcdist: rank 3/4 (local rank 1 on node2) failed at 2026-11-22T13:51:35.179+00:00: ValueError: boom

- the launcher's own line, for ranks that could not report (killed by a
  signal, or ``sys.exit(3)``): torchrun's "Root Cause" block, srun's
  ``task N: Killed``, Open MPI's and MPICH's abort messages, DeepSpeed's
  ``exits with return code``.

:func:`first_failure` prefers the earliest report, then the first launcher
line. ``hpcdist logs`` and ``hpcdist submit --wait`` print it for a failed job.
"""

from __future__ import annotations

import re
import socket
import sys
from datetime import datetime, timezone

_REPORT = re.compile(
    r"hpcdist: rank (?P<rank>\d+)/(?P<world>\d+) \(local rank (?P<local>\d+) on (?P<host>\S+?)\) "
    r"failed at (?P<time>\S+): (?P<why>.*)$")


class Failure:
    """One rank's failure as a log tells it; unknown parts are None."""

    def __init__(self, why: str, *, rank: int | None = None, host: str | None = None,
                 local_rank: int | None = None, time: str | None = None, source: str = ""):
        self.why, self.rank, self.host, self.local_rank, self.time, self.source = (
            why, rank, host, local_rank, time, source)

    def __str__(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else (
            f"local rank {self.local_rank}" if self.local_rank is not None else "a rank")
        if self.rank is not None and self.local_rank is not None:
            who += f" (local rank {self.local_rank})"
        where = f" on {self.host}" if self.host else ""
        when = f" at {self.time}" if self.time else ""
        return f"{who}{where}{when}: {self.why} [from {self.source}]"

    def __repr__(self) -> str:
        return f"Failure({str(self)!r})"


def report_line(env, error: BaseException, when: datetime | None = None) -> str:
    when = when or datetime.now(timezone.utc)
    why = f"{type(error).__name__}: {error}".strip().rstrip(":")
    why = " ".join(why.split())  # one line, whatever the message
    return (f"hpcdist: rank {env.rank}/{env.world_size} (local rank {env.local_rank} on "
            f"{socket.gethostname()}) failed at {when.isoformat(timespec='milliseconds')}: {why}")


def report_failures(env) -> None:
    """Print a one-line report when an uncaught exception ends this rank (after its traceback)."""
    previous = sys.excepthook
    if getattr(previous, "_hpcdist_report", False):
        return

    def hook(kind, value, tb):
        previous(kind, value, tb)
        try:
            sys.stderr.write(report_line(env, value) + "\n")
            sys.stderr.flush()
        except Exception:  # reporting must never hide the real error
            pass

    hook._hpcdist_report = True
    sys.excepthook = hook


# The launchers' own words, for ranks that could not report. Each pattern
# yields a Failure; the job's launcher says which apply (srun's task numbers
# are agents, not ranks, under torchrun or accelerate).
_TORCHRUN_ROOT = re.compile(
    r"Root Cause \(first observed failure\):\s*\[\d+\]:\s*time\s*: (?P<time>\S+)\s*host\s*: (?P<host>\S+)\s*"
    r"rank\s*: (?P<rank>\d+) \(local_rank: (?P<local>\d+)\)\s*exitcode\s*: (?P<code>-?\d+)[^\n]*\n"
    r"(?:\s*error_file\s*:[^\n]*\n)?(?:\s*traceback\s*: (?P<tb>[^\n]*))?")
_NODES = re.compile(r"^hpcdist: nodes: (?P<nodes>[^;]*); master: ", re.M)
_DEEPSPEED_RANKS = re.compile(r"global_rank_mapping=defaultdict\(<class 'list'>, (?P<map>\{[^}]*\})\)")
_SRUN = re.compile(r"srun: error: (?P<host>\S+): tasks? (?P<rank>\d+)(?:-\d+)?: (?P<why>.+)$", re.M)
_OPENMPI_SIGNAL = re.compile(
    r"noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) exited on (?P<why>signal \d+[^.\n]*)")
_OPENMPI_EXIT = re.compile(
    r"The first process to do so was:\s*Process name: \[(?:\[\d+,\d+\],|[^\]]*?,)(?P<rank>\d+)\]\s*"
    r"(?:Exit code|Exit status):\s*(?P<code>\d+)")
_MPICH = re.compile(
    r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\s*=\s*(?:RANK (?P<rank>\d+) )?PID \d+ "
    r"RUNNING AT (?P<host>\S+)\s*=\s*(?P<why>(?:EXIT CODE|KILLED BY SIGNAL): [^\n=]*)"
    r"(?:[\s\S]*?EXIT STRING: (?P<string>[^\n]*))?")
_DEEPSPEED = re.compile(
    r"^(?:(?P<host>[^\s:]+): )?\[[^\]]*\] \[ERROR\] \[launch\.py:\d+:sigkill_handler\] .*?"
    r"'--local_rank=(?P<local>\d+)'.*exits with return code = (?P<code>-?\d+)", re.M)


#: What a rank says when another rank died under it.
_PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|NCCL communicator was aborted|"
    r"remote worker crashing|ProcessGroupNCCL.*(?:Watchdog|timeout)|Socket Timeout|DistNetworkError", re.I)


def _signal_name(code: int) -> str:
    import signal

    try:
        return f"killed by signal {code} ({signal.Signals(code).name})"
    except ValueError:
        return f"killed by signal {code}"


def _launcher_failures(text: str, agents: bool) -> list[tuple[int, Failure]]:
    """(position in the log, failure) for each launcher line found.

    With ``agents`` (one launcher per node, spread by srun or mpirun), srun's
    and mpirun's lines are about those agents: their task numbers are not
    ranks, so only their host is kept.
    """
    found = []
    for m in _TORCHRUN_ROOT.finditer(text):
        code = int(m["code"])
        why = _signal_name(-code) if code < 0 else f"exit code {code}"
        found.append((m.start(), Failure(why, rank=int(m["rank"]), local_rank=int(m["local"]), host=m["host"],
                                         source="torchrun")))
    def rank(m):
        return None if agents else int(m["rank"])

    nodes = _NODES.search(text)
    nodes = nodes["nodes"].split() if nodes else []
    for m in _SRUN.finditer(text):
        found.append((m.start(), Failure(m["why"].strip(), rank=rank(m), host=m["host"], source="srun")))
    for m in _OPENMPI_SIGNAL.finditer(text):
        found.append((m.start(), Failure(m["why"].strip(), rank=rank(m), host=m["host"], source="mpirun")))
    for m in _OPENMPI_EXIT.finditer(text):
        if not agents:
            found.append((m.start(), Failure(f"exit code {m['code']}", rank=int(m["rank"]), source="mpirun")))
        elif int(m["rank"]) < len(nodes):  # the agent's rank is its node's index
            found.append((m.start(), Failure(f"exit code {m['code']}", host=nodes[int(m["rank"])], source="mpirun")))
    for m in _MPICH.finditer(text):
        why = (m["string"] or m["why"]).strip()
        found.append((m.start(), Failure(why, rank=int(m["rank"]) if m["rank"] else None, host=m["host"],
                                         source="mpiexec")))
    ranks_on = _deepspeed_ranks(text)
    for m in _DEEPSPEED.finditer(text):
        code = int(m["code"])
        why = _signal_name(-code) if code < 0 else f"exit code {code}"
        local = int(m["local"])
        # Without pdsh's "host: " prefix the host is known only when there is one.
        host = m["host"] or (next(iter(ranks_on)) if len(ranks_on) == 1 else None)
        on_host = ranks_on.get(host, [])
        found.append((m.start(), Failure(why, local_rank=local, host=host, source="deepspeed",
                                         rank=on_host[local] if local < len(on_host) else None)))
    return sorted(found, key=lambda pair: pair[0])


def _deepspeed_ranks(text: str) -> dict:
    """DeepSpeed's own ``global_rank_mapping`` line: host -> its global ranks."""
    import ast

    m = _DEEPSPEED_RANKS.search(text)
    try:
        mapping = ast.literal_eval(m["map"]) if m else {}
    except (ValueError, SyntaxError):
        return {}
    return mapping if isinstance(mapping, dict) else {}


def first_failure(text: str, agents: bool = False) -> Failure | None:
    """The rank that failed first according to a job's log, or None if the log shows none.

    ``agents``: the job ran one launcher per node (torchrun, accelerate,
    DeepSpeed ``--no-ssh``) spread by srun or mpirun.
    """
    reports = []
    for line in text.splitlines():
        m = _REPORT.search(line)
        if m:
            try:
                when = datetime.fromisoformat(m["time"])
            except ValueError:
                continue
            reports.append((when, Failure(m["why"].strip(), rank=int(m["rank"]), local_rank=int(m["local"]),
                                          host=m["host"], time=m["time"], source="the rank's own report")))
    launcher_lines = _launcher_failures(text, agents)
    # A peer's death shows up in every other rank as a broken connection: a
    # symptom. A killed rank cannot report, so then the launcher's line is first.
    causes = [pair for pair in reports if not _PEER_LOST.search(pair[1].why)]
    if causes:
        return min(causes, key=lambda pair: pair[0])[1]
    ranked = [f for _, f in launcher_lines if f.rank is not None or f.local_rank is not None]
    first = ranked[0] if ranked else (launcher_lines[0][1] if launcher_lines else None)
    if first is None:
        return min(reports, key=lambda pair: pair[0])[1] if reports else None
    if first.host is None:
        # The node's agent failed with it: its line names the host.
        first.host = next((f.host for _, f in launcher_lines if f.host), None)
        on_host = _deepspeed_ranks(text).get(first.host, [])
        if first.rank is None and first.local_rank is not None and first.local_rank < len(on_host):
            first.rank = on_host[first.local_rank]
    return first
