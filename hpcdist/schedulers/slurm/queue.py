"""What Slurm's squeue and sacct print, into a :class:`~hpcdist.schedulers.base.JobStatus`.

Pure functions on text (the caller runs the commands): one job's lines (``-o '%T|%r'``,
``-o State,ExitCode``) or several jobs' (``-o '%i|%T|%r'``, ``-o JobID,State,ExitCode``), and
what squeue and sacct say on stderr when the job is unknown or accounting is off. The
regular expressions are compiled on first use.
"""

from __future__ import annotations

import re

from hpcdist.patterns import Pattern
from hpcdist.schedulers.base import (
    CANCELLED, COMPLETED, FAILED, FINISHED_STATES, NEVER_RUNS, NODE_FAIL, OUT_OF_MEMORY, PENDING,
    PREEMPTED, REQUEUED, RUNNING, TIMEOUT, UNKNOWN, JobStatus, SchedulerOutputError, output_lines,
    output_text)

__all__ = ["parse_squeue", "parse_squeue_jobs", "parse_sacct", "parse_sacct_jobs", "parse_squeue_unknown",
           "parse_sacct_disabled"]

# Slurm's state words (job_state_string() and the flag words), as %T and
# sacct print them.
_SLURM_STATE_MAP = {
    "PENDING": PENDING,
    "REQUEUE_HOLD": PENDING,
    "REQUEUE_FED": PENDING,
    "RESV_DEL_HOLD": PENDING,
    "EXPEDITING": PENDING,
    "SUSPENDED": PENDING,
    "STOPPED": PENDING,
    "RUNNING": RUNNING,
    "CONFIGURING": RUNNING,
    "POWER_UP_NODE": RUNNING,
    "COMPLETING": RUNNING,
    "RESIZING": RUNNING,
    "SIGNALING": RUNNING,
    "STAGE_OUT": RUNNING,
    "COMPLETED": COMPLETED,
    "FAILED": FAILED,
    "SPECIAL_EXIT": FAILED,
    "CANCELLED": CANCELLED,
    "TIMEOUT": TIMEOUT,
    "DEADLINE": TIMEOUT,
    "PREEMPTED": PREEMPTED,
    "NODE_FAIL": NODE_FAIL,
    "BOOT_FAIL": NODE_FAIL,
    "OUT_OF_MEMORY": OUT_OF_MEMORY,
    "REQUEUED": REQUEUED,
}

# "CANCELLED by 1000", "CANCELLED+" (sacct truncates without -P), "RUNNING".
_SLURM_STATE_FIELD = Pattern(r"([A-Z][A-Z_]*)\+?(?: by ([0-9]+))?")


def _slurm_state(field: str, what: str, stdout: str, stderr: str) -> tuple[str, str, str | None]:
    """(state, word, 'cancelled by uid N' or None) from a Slurm state field."""
    m = _SLURM_STATE_FIELD.fullmatch(field.strip())
    if m is None:
        raise SchedulerOutputError(
            f"not a Slurm job state in {what} output: {field.strip()[:200]!r}",
            stdout,
            stderr,
            None,
            what,
        )
    word = m.group(1)
    by = f"cancelled by uid {m.group(2)}" if m.group(2) is not None else None
    return _SLURM_STATE_MAP.get(word, UNKNOWN), word, by


_NO_REASON = {"", "None", "(null)", "(None)"}
#: squeue's reasons for a pending job that no other job's end can start: only a change of the
#: request or of the site's configuration can (slurm.schedmd.com/job_reason_codes.html). Not
#: PartitionNodeLimit nor ReqNodeNotAvail: Slurm gives those for nodes that are down a while too.
NEVER_REASONS = {"DependencyNeverSatisfied", "BadConstraints", "PartitionTimeLimit",
                 "AccountNotAllowed", "InvalidAccount", "InvalidQOS", "QOSNotAllowed"}
#: ... and a request over a per-job maximum of the QOS or the association (QOSMaxNodePerJobLimit,
#: AssocMaxWallDurationPerJobLimit).
_PER_JOB_MAXIMUM = Pattern(r"(?:QOS|Assoc)Max\w*PerJob\w*", re.A)
_CLUSTER_LINE = Pattern(r"CLUSTER: \S+")


def parse_squeue(stdout, *, stderr: str = "") -> JobStatus | None:
    """The state from ``squeue -h -j ID -o '%T|%r'``; ``None`` when empty.

    Empty output means the job has left the queue (look in ``sacct``, or at
    ``squeue``'s stderr with :func:`parse_squeue_unknown`).  ``CLUSTER: foo``
    lines (printed with ``--clusters``) and a ``STATE|REASON`` header are
    skipped.  For an array, several lines: RUNNING if any task runs, else
    PENDING if any is pending, else the last line's state.
    """
    stdout, stderr = output_text(stdout), output_text(stderr)
    statuses = [_squeue_status(line, stdout, stderr) for line in _squeue_lines(stdout, "STATE|")]
    return _one_of(statuses) if statuses else None


def parse_squeue_jobs(stdout, job_ids, *, stderr: str = "") -> dict:
    """Each asked job's state from ``squeue -h -j ID,ID,... -o '%i|%T|%r'``: ``{id: JobStatus}``;
    an id left out is not in the queue. An array's lines (``%i`` is ``123_4``, or ``123_[5-9]``
    while pending) count for the array's id, as :func:`parse_squeue` counts them."""
    stdout, stderr, job_ids = output_text(stdout), output_text(stderr), set(job_ids)
    found: dict[str, list] = {}
    for line in _squeue_lines(stdout, "JOBID|"):
        job_id, sep, rest = line.partition("|")
        owner = _asked(job_id.strip(), job_ids)
        if owner is not None:
            found.setdefault(owner, []).append(_squeue_status(rest, stdout, stderr))
    return {job_id: _one_of(statuses) for job_id, statuses in found.items()}


def _squeue_lines(stdout: str, header: str) -> list[str]:
    """squeue's lines less ``CLUSTER: foo`` (printed with ``--clusters``) and the header."""
    return [line for line in output_lines(stdout)
            if not (_CLUSTER_LINE.fullmatch(line) or line.upper().startswith(header))]


def _squeue_status(line: str, stdout: str, stderr: str) -> JobStatus:
    field, sep, reason = line.partition("|")
    state, word, _by = _slurm_state(field, "squeue", stdout, stderr)
    reason = reason.strip()
    if state == PENDING and _never_starts(reason):
        return JobStatus(state, None, f"{word}, {NEVER_RUNS}", reason)
    return JobStatus(state, None, word, None if reason in _NO_REASON else reason)


def _never_starts(reason: str) -> bool:
    first = reason.split(",")[0].strip()
    return first in NEVER_REASONS or bool(_PER_JOB_MAXIMUM.fullmatch(first))


def _one_of(statuses: list) -> JobStatus:
    """An array's state from its tasks': RUNNING if any runs, else PENDING if any waits, else the last."""
    for wanted in (RUNNING, PENDING):
        for status in statuses:
            if status.state == wanted:
                return status
    return statuses[-1]


def _asked(job_id: str, job_ids: set) -> str | None:
    """The asked id a line's id belongs to: itself, or the array's (``123`` for ``123_4``)."""
    if job_id in job_ids:
        return job_id
    array = job_id.partition("_")[0]
    return array if array in job_ids else None


_SACCT_EXIT = Pattern(r"([0-9]{1,9}):([0-9]{1,9})")


def parse_sacct(stdout, *, stderr: str = "") -> JobStatus | None:
    """The state from ``sacct -X -n -P -j ID -o State,ExitCode``; ``None`` when empty.

    ``ExitCode`` is ``A:B`` (exit status A, signal B): the exit code is A,
    or 128 + B when A is 0 and B is not.  When several lines come back (a
    requeued job listed with its earlier attempts) the last line is the
    current attempt.  ``exit_code`` is ``None`` unless the job finished.
    """
    stdout, stderr = output_text(stdout), output_text(stderr)
    status = None
    for fields in _sacct_rows(stdout, stderr, "State,ExitCode"):
        status = _sacct_status(fields, stdout, stderr)
    return status


def parse_sacct_jobs(stdout, job_ids, *, stderr: str = "") -> dict:
    """Each asked job's state from ``sacct -X -n -P -j ID,ID,... -o JobID,State,ExitCode``:
    ``{id: JobStatus}``, read as :func:`parse_sacct` reads one job's lines (an array's tasks,
    ``123_4``, count for ``123``); an id left out has no record."""
    stdout, stderr, job_ids = output_text(stdout), output_text(stderr), set(job_ids)
    found = {}
    for fields in _sacct_rows(stdout, stderr, "JobID,State,ExitCode"):
        owner = _asked(fields[0].strip(), job_ids)
        if owner is not None:
            found[owner] = _sacct_status(fields[1:], stdout, stderr)
    return found


def _sacct_rows(stdout: str, stderr: str, columns: str) -> list[list[str]]:
    """The fields of each line of ``sacct -P -o <columns>`` (``-p`` ends lines with "|"), less the header."""
    width, rows = columns.count(",") + 1, []
    for line in output_lines(stdout):
        if line.lower().rstrip("|") == columns.lower().replace(",", "|"):
            continue  # the header, when -n was not given
        fields = line.split("|")
        if len(fields) == width + 1 and fields[-1] == "":
            fields = fields[:-1]  # sacct -p (not -P) ends each line with "|"
        if len(fields) != width:
            raise SchedulerOutputError(
                f"expected '{columns.replace(',', '|')}' lines from sacct -P -o {columns}, "
                f"got {line[:200]!r}",
                stdout,
                stderr,
                None,
                "sacct",
            )
        rows.append(fields)
    return rows


def _sacct_status(fields: list[str], stdout: str, stderr: str) -> JobStatus:
    """One ``State|ExitCode`` line's state."""
    state, word, by = _slurm_state(fields[0], "sacct", stdout, stderr)
    exit_field = fields[1].strip()
    exit_code = None
    if exit_field:
        m = _SACCT_EXIT.fullmatch(exit_field)
        if m is None:
            raise SchedulerOutputError(
                f"expected an ExitCode like '0:0' or '1:0' from sacct, got {exit_field[:200]!r}",
                stdout,
                stderr,
                None,
                "sacct",
            )
        code, signal = int(m.group(1)), int(m.group(2))
        exit_code = 128 + signal if code == 0 and signal else code
    return JobStatus(state, exit_code if state in FINISHED_STATES else None, fields[0].strip(), by)


_INVALID_JOB = Pattern(r"Invalid job id specified", re.I)
_ACCOUNTING_OFF = Pattern(r"accounting storage is disabled", re.I)


def parse_squeue_unknown(stderr) -> bool:
    """Whether ``squeue``/``scancel`` says the job id is unknown to slurmctld
    (``slurm_load_jobs error: Invalid job id specified``): the job left the
    queue (after ``MinJobAge``) or never existed; ask ``sacct``."""
    try:
        text = output_text(stderr)
    except TypeError:
        return False
    return _INVALID_JOB.search(text) is not None


def parse_sacct_disabled(stderr) -> bool:
    """Whether ``sacct`` says the cluster keeps no accounting
    (``Slurm accounting storage is disabled``, submitit#1720): fall back to
    ``squeue``."""
    try:
        text = output_text(stderr)
    except TypeError:
        return False
    return _ACCOUNTING_OFF.search(text) is not None
