"""Which rank failed first, on which host, and why: written by the ranks, read from the log.

When one rank dies, every other rank soon fails too (its peer is gone), and
a job's log fills with a dozen tracebacks in whatever order the launchers
flushed them. Three sources tell the first failure apart:

- the rank's own report: :func:`report_failures` (installed by
  ``hpcdist.env.init_distributed()``) prints one line when an exception
  ends the process, with the rank, host and a timestamp::

      hpcdist: rank 3/4 (local rank 1 on node2) failed at 2026-11-22T13:51:35.179+00:00: ValueError: boom

- the launcher's own line, for ranks that could not report (killed by a
  signal, or ``sys.exit(3)``): torchrun's "Root Cause" block, srun's
  ``task N: Killed``, Open MPI's and MPICH's abort messages, DeepSpeed's
  ``exits with return code``, and Open MPI's refusal to run as root (no rank
  started). Each launcher's module (:mod:`hpcdist.launchers`) holds its
  patterns; this module keeps the ranks' own reports and the rule that picks
  the first failure.

- the job script's own line when its python cannot import hpcdist, and so no
  rank could start (:func:`hpcdist.submission.render.hpcdist_check` writes it).

:func:`first_failure` takes the job script's line first, then the earliest report, then the
first launcher line. ``hpcdist logs`` and ``hpcdist submit --wait`` print it for a failed job.
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
                 local_rank: int | None = None, time: str | None = None, source: str = "",
                 who: str | None = None):
        self.why, self.rank, self.host, self.local_rank, self.time, self.source = (
            why, rank, host, local_rank, time, source)
        #: What failed where it is no rank (the job's set-up, the launcher itself).
        self.who = who

    def __str__(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else (
            f"local rank {self.local_rank}" if self.local_rank is not None else self.who or "a rank")
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


#: hpcdist's own line in the log (the common template writes it): the job's hosts in order.
_NODES = re.compile(r"^hpcdist: nodes: (?P<nodes>[^;]*); ", re.M)


#: What a rank says when another rank died under it.
_PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|NCCL communicator was aborted|"
    r"remote worker crashing|ProcessGroupNCCL.*(?:Watchdog|timeout)|Socket Timeout|DistNetworkError", re.I)


def _launcher_failures(text: str, agents: bool) -> list[tuple[int, Failure]]:
    """(position in the log, failure) for each launcher line found, every launcher's patterns read
    (each launcher's module holds its own: :meth:`hpcdist.launchers.Launcher.failures`).

    With ``agents`` (one launcher per node, spread by srun or mpirun), srun's
    and mpirun's lines are about those agents: their task numbers are not
    ranks, so only their host is kept.
    """
    from hpcdist import launchers

    nodes = _NODES.search(text)
    nodes = nodes["nodes"].split() if nodes else []
    found = [(position, Failure(**fields)) for name in launchers.NAMES
             for position, fields in launchers.get(name).failures(text, agents, nodes)]
    return sorted(found, key=lambda pair: pair[0])


def _global_rank(text: str, host: str | None, local_rank: int) -> int | None:
    """A local rank's global rank, where a launcher's log lines tell it (DeepSpeed's do)."""
    from hpcdist import launchers

    for name in launchers.NAMES:
        rank = launchers.get(name).global_rank(text, host, local_rank)
        if rank is not None:
            return rank
    return None


#: The job script's line where the job's python cannot import hpcdist (its first call of hpcdist,
#: ``job-setup``, failed: :func:`hpcdist.submission.render.job_setup` writes the check).
_NO_HPCDIST = re.compile(r"^hpcdist: (?P<who>.+?) on (?P<host>\S+) (?P<why>cannot (?:import|find) (?:the )?hpcdist.*)$",
                         re.M)


def first_failure(text: str, agents: bool = False) -> Failure | None:
    """The rank that failed first according to a job's log, or None if the log shows none.

    ``agents``: the job ran one launcher per node (torchrun, accelerate,
    DeepSpeed ``--no-ssh``) spread by srun or mpirun.
    """
    missing = _NO_HPCDIST.search(text)
    if missing:  # no rank started: the job's set-up is what failed
        return Failure(f"{missing['who']} {missing['why']}", host=missing["host"], who="the job's set-up",
                       source="the job script's check")
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
        if first.rank is None and first.local_rank is not None:
            first.rank = _global_rank(text, first.host, first.local_rank)
    return first


#: The last lines of a failed job's log that are read for its last error line.
ERROR_TAIL = 256 << 10
#: The launchers' own exceptions, raised because a rank failed: not its cause.
LAUNCHER_ERRORS = ("ChildFailedError", "SignalException", "CalledProcessError")


def error_line(text: str) -> str | None:
    """The last error line in a job's log, as a rank wrote it: Python's last traceback line
    (``ValueError: ...``) or a script's own usage error (``train.py: error: ...``); not the
    launchers' exceptions, not a peer's lost connection (a symptom), not hpcdist's lines."""
    found = None
    for line in text.splitlines():
        line = re.sub(r"^(?:\[(?:default|rank)\d+\]:|\d+: )\s*", "", line.strip())  # torchrun's, srun -l's prefix
        m = re.match(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Interrupt))(?::|$)|([^\s:]+): error: ",
                     line)
        if (m and not (m[1] or "").endswith(LAUNCHER_ERRORS) and not (m[2] or "").startswith("hpcdist")
                and not _PEER_LOST.search(line)):
            found = line
    return found[:300] if found else None


def reason_in_log(text: str) -> str | None:
    """Why a failed job failed, from its log, where the scheduler says nothing (``hpcdist status``'s
    REASON, ``watch``): its set-up's line where its python cannot import hpcdist (with the fix),
    else the log's last error line (:func:`error_line`)."""
    missing = _NO_HPCDIST.search(text)
    if missing:
        return f"{missing['who']} on {missing['host']} {missing['why']}"
    return error_line(text)
