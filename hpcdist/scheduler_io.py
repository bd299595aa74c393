"""What schedulers print, into data: job ids from sbatch/qsub, states from squeue/sacct/qstat.

Pure functions on text.  Nothing here runs a command: the caller runs
``sbatch --parsable``, ``qsub``, ``squeue``, ``sacct`` or ``qstat`` and hands
over the stdout, stderr and exit status.  Standard library only (``re`` at
import, ``json`` when PBS JSON is parsed).

Every parser either returns a value or raises :class:`SchedulerOutputError`,
whose message quotes the scheduler's own stdout and stderr, so that a user
whose site wraps ``qsub`` in a script sees what that script said.

Job ids (see the reference notes, section 6)
--------------------------------------------
* Slurm: ``sbatch --parsable`` prints ``123`` or, with several clusters,
  ``123;foo``.  Without ``--parsable`` (or through a site wrapper) it prints
  ``Submitted batch job 123`` or ``Submitted batch job 123 on cluster foo``,
  and some wrappers print only ``15786755``.  The id is never ``foo``.
* PBS Pro/OpenPBS and Torque: ``qsub`` prints ``<seq>.<server>``, arrays
  ``<seq>[].<server>``.  Site wrappers may print banners (with numbers) first,
  so the id is the *last* line that is wholly an id.  ``qstat`` may show the
  id truncated (``123.polaris.al*``) or with a shorter server name
  (``38438.master`` for ``38438.master.gw4.metoffice.gov.uk``), and
  ``PBS_JOBID`` may carry an ``N:`` prefix on exotic servers, so PBS ids are
  compared by :meth:`JobId.matches` (sequence number and array index), never
  as strings.

States
------
Each status parser maps the scheduler's word onto one of :data:`STATES` and
keeps the word itself in :attr:`JobStatus.raw`.  A state word it does not
know but that has the scheduler's shape (say a state added by a newer Slurm)
becomes :data:`UNKNOWN`; text without that shape is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "PENDING",
    "RUNNING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "REQUEUED",
    "UNKNOWN",
    "STATES",
    "FINISHED_STATES",
    "MAX_QUOTED",
    "SchedulerOutputError",
    "JobId",
    "JobStatus",
    "parse_sbatch",
    "parse_qsub",
    "parse_squeue",
    "parse_sacct",
    "parse_qstat_pro_json",
    "parse_qstat_full_text",
    "parse_qstat_unknown",
    "parse_squeue_unknown",
    "parse_sacct_disabled",
]

# --------------------------------------------------------------------------
# States
# --------------------------------------------------------------------------

PENDING = "PENDING"  # queued, held, waiting, suspended: not (or no longer) running
RUNNING = "RUNNING"  # running, or still exiting/cleaning up
COMPLETED = "COMPLETED"  # finished with exit status 0
FAILED = "FAILED"  # finished with a non-zero exit status
CANCELLED = "CANCELLED"  # deleted by a user or an admin (scancel, qdel)
TIMEOUT = "TIMEOUT"  # killed at its time limit
PREEMPTED = "PREEMPTED"  # preempted and not requeued
NODE_FAIL = "NODE_FAIL"  # a node failed (or failed to boot)
OUT_OF_MEMORY = "OUT_OF_MEMORY"  # killed for exceeding its memory
REQUEUED = "REQUEUED"  # requeued: it will be pending again
UNKNOWN = "UNKNOWN"  # a state this module does not know (or PBS "moved")

STATES = frozenset(
    {
        PENDING,
        RUNNING,
        COMPLETED,
        FAILED,
        CANCELLED,
        TIMEOUT,
        PREEMPTED,
        NODE_FAIL,
        OUT_OF_MEMORY,
        REQUEUED,
        UNKNOWN,
    }
)

#: The terminal states: a job in one of these will not run again by itself.
FINISHED_STATES = frozenset(
    {COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY}
)

# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

#: How much of stdout and of stderr an error message quotes (head and tail).
MAX_QUOTED = 2000


def _trim(text: str, limit: int = MAX_QUOTED) -> str:
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


class SchedulerOutputError(ValueError):
    """A scheduler command's output could not be understood, or it failed.

    The message says what was expected and quotes the command's stdout and
    stderr (each trimmed to about :data:`MAX_QUOTED` characters).  The full
    texts are kept in :attr:`stdout` and :attr:`stderr`, the exit status in
    :attr:`returncode` (``None`` when not known), and the bare explanation in
    :attr:`problem`.
    """

    def __init__(
        self,
        problem: str,
        stdout: str = "",
        stderr: str = "",
        returncode: int | None = None,
        command: str = "the command",
    ) -> None:
        self.problem = problem
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.command = command
        parts = [problem]
        if returncode is not None:
            parts.append(f"{command} exit status: {returncode}")
        parts.append(f"--- {command} stdout ---")
        parts.append(_trim(stdout) if stdout.strip() else "(empty)")
        parts.append(f"--- {command} stderr ---")
        parts.append(_trim(stderr) if stderr.strip() else "(empty)")
        super().__init__("\n".join(parts))

    def __reduce__(self):
        return (
            type(self),
            (self.problem, self.stdout, self.stderr, self.returncode, self.command),
        )


def _text(value) -> str:
    """Accept str, bytes (decoded as UTF-8, errors replaced) or None."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        raise TypeError(f"expected the command's output as str, got {type(value).__name__}")
    return value


def _lines(text: str) -> list[str]:
    """Non-empty lines, stripped (``\\r\\n`` tolerated)."""
    return [line.strip() for line in text.split("\n") if line.strip()]


# --------------------------------------------------------------------------
# Job ids
# --------------------------------------------------------------------------

# ASCII digits only: Python's \d also matches other scripts' digits.
_SLURM_ID = re.compile(r"([0-9]+)(?:_([0-9]+))?")
_PBS_ID = re.compile(r"([0-9]+)(\[[0-9]*\])?(\.[A-Za-z0-9_.-]+)?")
# What qsub may print: the same, with an optional "N:" prefix.
_QSUB_LINE = re.compile(r"(?:[0-9]+:)?([0-9]+)(\[[0-9]*\])?(\.[A-Za-z0-9_.-]+)?")
# What qstat or PBS_JOBID may show for a PBS id: an optional "N:" prefix
# (dask-jobqueue#134), and any (possibly truncated, "*"-ended) server part.
_PBS_ID_LOOSE = re.compile(r"(?:[0-9]+:)?([0-9]+)(\[[0-9]*\])?(?:\..*)?", re.S)


@dataclass(frozen=True)
class JobId:
    """A submitted job's id.

    ``id`` is what to pass to ``squeue``/``sacct``/``scancel`` (Slurm: ``123``
    or ``123_4``) or to ``qstat``/``qdel`` (PBS: the full ``123.server`` or
    ``123[].server``).  ``cluster`` is the Slurm cluster from ``123;foo`` or
    ``on cluster foo`` (pass it as ``--clusters=``), ``number`` the numeric
    sequence part, ``is_array`` whether the id names an array job (or an
    array task), and ``scheduler`` ``"slurm"`` or ``"pbs"``.

    Only ``id`` is required: ``number`` and ``is_array`` are always derived
    from it (values passed for them are replaced), and ``scheduler``, when
    not given, is ``"slurm"`` for ids of the Slurm shape (``123``,
    ``123_4``) and ``"pbs"`` otherwise; pass ``scheduler="pbs"`` for a
    server-less PBS id such as ``123``.
    """

    id: str
    cluster: str | None = None
    number: str = ""
    is_array: bool = False
    scheduler: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or self.id != self.id.strip():
            raise ValueError(f"a job id must be a non-empty string without spaces: {self.id!r}")
        scheduler = self.scheduler or ("slurm" if _SLURM_ID.fullmatch(self.id) else "pbs")
        if scheduler not in ("slurm", "pbs"):
            raise ValueError(f"scheduler must be 'slurm' or 'pbs', not {scheduler!r}")
        object.__setattr__(self, "scheduler", scheduler)
        if scheduler == "slurm":
            m = _SLURM_ID.fullmatch(self.id)
            if m is None:
                raise ValueError(f"not a Slurm job id: {self.id!r} (expected 123 or 123_4)")
            number, array = m.group(1), m.group(2) is not None
        else:
            m = _PBS_ID.fullmatch(self.id)
            if m is None:
                raise ValueError(f"not a PBS job id: {self.id!r} (expected 123.server or 123[].server)")
            number, array = m.group(1), m.group(2) is not None
        # number and is_array always follow id (a caller rebuilding a JobId
        # from a record may pass the whole id as number).
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "is_array", array)

    def __str__(self) -> str:
        return self.id

    @property
    def array_index(self) -> str | None:
        """PBS: the text in brackets (``""`` for ``123[]``); Slurm: the task
        of ``123_4``; ``None`` when the id has none."""
        if self.scheduler == "slurm":
            m = _SLURM_ID.fullmatch(self.id)
            return m.group(2) if m else None
        m = _PBS_ID.fullmatch(self.id)
        return m.group(2)[1:-1] if m and m.group(2) else None

    def matches(self, other_text) -> bool:
        """Whether ``other_text`` (a string or a JobId) names this job.

        Slurm ids compare exactly.  PBS ids compare by sequence number and
        array index (``123[]`` matches ``123[].x`` but not ``123`` nor
        ``123[4]``), ignoring the server part, because ``qstat`` may truncate
        it (``123.polaris.al*``) or show a shorter name (``38438.master``),
        and ``PBS_JOBID`` may differ in domain suffix or carry an ``N:``
        prefix.
        """
        if isinstance(other_text, JobId):
            other_text = other_text.id
        if not isinstance(other_text, str):
            return False
        other = other_text.strip()
        if self.scheduler == "slurm":
            return other == self.id
        m = _PBS_ID_LOOSE.fullmatch(other)
        if m is None:
            return False
        other_index = m.group(2)[1:-1] if m.group(2) else None
        return m.group(1) == self.number and other_index == self.array_index


_SUBMITTED = re.compile(r"Submitted batch job ([0-9]+)(?: on cluster (\S+))?")
_CLUSTER_NAME = re.compile(r"[^\s;]+")


def parse_sbatch(stdout, stderr="", returncode: int | None = 0) -> JobId:
    """The job id from ``sbatch --parsable`` (or from a site wrapper).

    A non-zero ``returncode`` is an error even when an id was printed (the
    submission may have failed after a wrapper printed something).  The id is
    the last non-empty stdout line that is not one of sbatch's own
    ``sbatch: ...`` messages, in the ``--parsable`` form ``123`` or
    ``123;cluster``; failing that, the last ``Submitted batch job 123[ on
    cluster foo]`` anywhere in stdout.
    """
    stdout, stderr = _text(stdout), _text(stderr)
    if returncode not in (0, None):
        raise SchedulerOutputError(
            f"sbatch failed (exit status {returncode}); no job was submitted, "
            "or its id cannot be trusted",
            stdout,
            stderr,
            returncode,
            "sbatch",
        )
    lines = [line for line in _lines(stdout) if not line.startswith("sbatch:")]
    if lines:
        parts = lines[-1].split(";")
        if len(parts) <= 2 and _SLURM_ID.fullmatch(parts[0]):
            cluster = parts[1].strip() if len(parts) == 2 else ""
            if not cluster or _CLUSTER_NAME.fullmatch(cluster):
                return JobId(parts[0], cluster or None, scheduler="slurm")
    found = list(_SUBMITTED.finditer(stdout))
    if found:
        m = found[-1]
        return JobId(m.group(1), m.group(2), scheduler="slurm")
    raise SchedulerOutputError(
        "could not find a job id in sbatch's output: expected a last line "
        "'123' or '123;cluster' (sbatch --parsable), or "
        "'Submitted batch job 123'",
        stdout,
        stderr,
        returncode,
        "sbatch",
    )


_NQS_REQUEST = re.compile(
    r"^[ \t]*Request ([0-9]+(?:\[[0-9]*\])?\.[A-Za-z0-9_.-]+) submitted to queue", re.M
)


def parse_qsub(stdout, stderr="", returncode: int | None = 0) -> JobId:
    """The job id printed by PBS Pro/OpenPBS or Torque ``qsub``.

    The id is the last non-empty stdout line that is wholly a job id:
    ``123.server`` or ``123[].server`` (arrays); a bare ``123`` only when it
    is the very last line.  Banner lines before it are ignored, even when
    they contain numbers (dask-jobqueue#699).  An ``N:`` prefix (``0:123.server``, seen in
    ``PBS_JOBID`` on an exotic PBS, dask-jobqueue#134) is accepted and
    dropped when a server part follows.  NQSII's ``Request 123.host
    submitted to queue: q.`` is accepted too.  A non-zero ``returncode`` is
    an error even when an id was printed.
    """
    stdout, stderr = _text(stdout), _text(stderr)
    if returncode not in (0, None):
        raise SchedulerOutputError(
            f"qsub failed (exit status {returncode}); no job was submitted, "
            "or its id cannot be trusted",
            stdout,
            stderr,
            returncode,
            "qsub",
        )
    lines = _lines(stdout)
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        m = _QSUB_LINE.fullmatch(line)
        if m is None:
            continue
        if m.group(3) is None:
            # No server part: "12:30" is a time of day, not "N:" + an id,
            # and a bare number counts only as the very last line (a banner
            # may hold a line that is just a number).
            if ":" in line or i != len(lines) - 1:
                continue
        return JobId(line[line.index(":") + 1 :] if ":" in line else line, scheduler="pbs")
    found = _NQS_REQUEST.findall(stdout)
    if found:
        return JobId(found[-1], scheduler="pbs")
    raise SchedulerOutputError(
        "could not find a job id in qsub's output: expected a last line "
        "like '123.server' or '123[].server' (was qsub run with -z, or does "
        "a site wrapper print the id differently?)",
        stdout,
        stderr,
        returncode,
        "qsub",
    )


# --------------------------------------------------------------------------
# Job status
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class JobStatus:
    """A job's state, as one of :data:`STATES`.

    ``exit_code`` is set for finished jobs only: the job's exit status, or
    128 + N when a signal N ended it; it may be negative for PBS's own
    codes (e.g. ``-29``, walltime).  ``raw`` is the scheduler's own state
    word (``CANCELLED by 0``, ``F``), and ``reason`` its explanation where it
    gives one (Slurm's pending reason, the PBS comment), else ``None``.
    """

    state: str
    exit_code: int | None = None
    raw: str = ""
    reason: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


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
_SLURM_STATE_FIELD = re.compile(r"([A-Z][A-Z_]*)\+?(?: by ([0-9]+))?")


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


def parse_squeue(stdout, *, stderr: str = "") -> JobStatus | None:
    """The state from ``squeue -h -j ID -o '%T|%r'``; ``None`` when empty.

    Empty output means the job has left the queue (look in ``sacct``, or at
    ``squeue``'s stderr with :func:`parse_squeue_unknown`).  ``CLUSTER: foo``
    lines (printed with ``--clusters``) and a ``STATE|REASON`` header are
    skipped.  For an array, several lines: RUNNING if any task runs, else
    PENDING if any is pending, else the last line's state.
    """
    stdout, stderr = _text(stdout), _text(stderr)
    statuses = []
    for line in _lines(stdout):
        if re.fullmatch(r"CLUSTER: \S+", line) or line.upper().startswith("STATE|"):
            continue
        field, sep, reason = line.partition("|")
        state, word, _by = _slurm_state(field, "squeue", stdout, stderr)
        reason = reason.strip()
        statuses.append(JobStatus(state, None, word, None if reason in _NO_REASON else reason))
    if not statuses:
        return None
    for wanted in (RUNNING, PENDING):
        for status in statuses:
            if status.state == wanted:
                return status
    return statuses[-1]


_SACCT_EXIT = re.compile(r"([0-9]{1,9}):([0-9]{1,9})")


def parse_sacct(stdout, *, stderr: str = "") -> JobStatus | None:
    """The state from ``sacct -X -n -P -j ID -o State,ExitCode``; ``None`` when empty.

    ``ExitCode`` is ``A:B`` (exit status A, signal B): the exit code is A,
    or 128 + B when A is 0 and B is not.  When several lines come back (a
    requeued job listed with its earlier attempts) the last line is the
    current attempt.  ``exit_code`` is ``None`` unless the job finished.
    """
    stdout, stderr = _text(stdout), _text(stderr)
    status = None
    for line in _lines(stdout):
        if line.lower().rstrip("|") == "state|exitcode":
            continue  # the header, when -n was not given
        fields = line.split("|")
        if len(fields) == 3 and fields[2] == "":
            fields = fields[:2]  # sacct -p (not -P) ends each line with "|"
        if len(fields) != 2:
            raise SchedulerOutputError(
                "expected 'State|ExitCode' lines from sacct -P -o State,ExitCode, "
                f"got {line[:200]!r}",
                stdout,
                stderr,
                None,
                "sacct",
            )
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
        raw = fields[0].strip()
        status = JobStatus(state, exit_code if state in FINISHED_STATES else None, raw, by)
    return status


# --- PBS -----------------------------------------------------------------

# job_state letters.  PBS Pro/OpenPBS: B E F H M Q R S T U W X; Torque:
# C E H Q R T W S.  No letter means different things in the two.
_PBS_STATE_MAP = {
    "Q": PENDING,  # queued
    "H": PENDING,  # held
    "W": PENDING,  # waiting for its start time (or after a stage-in failure)
    "T": PENDING,  # in transit to another queue or server
    "S": PENDING,  # suspended
    "U": PENDING,  # suspended by a busy workstation (PBS Pro)
    "R": RUNNING,
    "E": RUNNING,  # exiting: finished, PBS is cleaning up; no exit status yet
    "B": RUNNING,  # array job begun (PBS Pro)
    "M": UNKNOWN,  # moved to another server (PBS Pro)
}
_PBS_FINISHED_LETTERS = frozenset("FXC")  # F, X (subjob): PBS Pro; C: Torque

# Negative Exit_status values that say why PBS ended a job.
# PBS Pro/OpenPBS src/include/job.h (JOB_EXEC_KILL_*), Torque
# (JOB_EXEC_OVERLIMIT_*): the same numbers mean different things.
_PRO_EXEC_CODES = {
    -1: (FAILED, "JOB_EXEC_FAIL1: job exec failed, before files, no retry"),
    -2: (FAILED, "JOB_EXEC_FAIL2: job exec failed, after files, no retry"),
    -3: (FAILED, "JOB_EXEC_RETRY: job execution failed, do retry"),
    -4: (FAILED, "JOB_EXEC_INITABT: job aborted on MoM initialization"),
    -10: (FAILED, "JOB_EXEC_FAILUID: invalid uid/gid for job"),
    -11: (FAILED, "JOB_EXEC_RERUN: job rerun"),
    -12: (FAILED, "JOB_EXEC_CHKP: job was checkpointed and killed"),
    -14: (NODE_FAIL, "JOB_EXEC_RERUN_SIS_FAIL: mother superior lost a sister MoM"),
    -17: (FAILED, "JOB_EXEC_FAILHOOK_DELETE: a hook rejected the job"),
    -19: (FAILED, "JOB_EXEC_HOOK_DELETE: a hook deleted the job"),
    -20: (NODE_FAIL, "JOB_EXEC_RERUN_MS_FAIL: server lost the primary execution host"),
    -24: (FAILED, "JOB_EXEC_KILL_NCPUS_BURST: ncpus burst limit exceeded"),
    -25: (FAILED, "JOB_EXEC_KILL_NCPUS_SUM: ncpus sum limit exceeded"),
    -26: (OUT_OF_MEMORY, "JOB_EXEC_KILL_VMEM: vmem limit exceeded"),
    -27: (OUT_OF_MEMORY, "JOB_EXEC_KILL_MEM: mem limit exceeded"),
    -28: (TIMEOUT, "JOB_EXEC_KILL_CPUT: cput limit exceeded"),
    -29: (TIMEOUT, "JOB_EXEC_KILL_WALLTIME: walltime limit exceeded"),
}
_TORQUE_EXEC_CODES = {
    -1: (FAILED, "JOB_EXEC_FAIL1: job exec failed, before files, no retry"),
    -2: (FAILED, "JOB_EXEC_FAIL2: job exec failed, after files, no retry"),
    -3: (FAILED, "JOB_EXEC_RETRY: job execution failed, do retry"),
    -8: (FAILED, "JOB_EXEC_CMDFAIL: exec() of the user command failed"),
    -9: (FAILED, "JOB_EXEC_STDOUTFAIL: could not create/open stdout or stderr"),
    -10: (OUT_OF_MEMORY, "JOB_EXEC_OVERLIMIT_MEM: job exceeded a memory limit"),
    -11: (TIMEOUT, "JOB_EXEC_OVERLIMIT_WT: job exceeded a walltime limit"),
    -12: (TIMEOUT, "JOB_EXEC_OVERLIMIT_CPUT: job exceeded a cpu time limit"),
}

_PBS_SUBSTATE_TERMINATED = 91  # OpenPBS job.h: finished because deleted


def _pbs_duration(value) -> int | None:
    """Seconds from a PBS duration ``[[HH:]MM:]SS`` (hours may exceed 24)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(?:(?:([0-9]{1,9}):)?([0-9]{1,9}):)?([0-9]{1,9})(?:\.[0-9]*)?\s*", value)
    if m is None:
        return None
    hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return hours * 3600 + minutes * 60 + seconds


def _pbs_int(value, name: str, what: str, stdout: str, stderr: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,12}\s*", value):
        return int(value)
    raise SchedulerOutputError(
        f"{name} in {what} output is not an integer: {str(value)[:200]!r}",
        stdout,
        stderr,
        None,
        "qstat",
    )


def _pbs_status(attrs: dict, dialect: str, what: str, stdout: str, stderr: str) -> JobStatus:
    """Map one job's attributes (flat: ``resources_used.walltime``) to a JobStatus.

    ``dialect`` is ``"pro"`` or ``"torque"`` (it decides what a negative
    exit status means).
    """
    letter = attrs.get("job_state")
    if not isinstance(letter, str) or not re.fullmatch(r"[A-Z]", letter.strip()):
        raise SchedulerOutputError(
            f"no job_state letter for the job in {what} output (got {str(letter)[:100]!r})",
            stdout,
            stderr,
            None,
            "qstat",
        )
    letter = letter.strip()
    comment = attrs.get("comment")
    comment = comment.strip() if isinstance(comment, str) and comment.strip() else None
    if letter not in _PBS_FINISHED_LETTERS:
        state = _PBS_STATE_MAP.get(letter, UNKNOWN)
        reason = comment
        if letter == "M" and reason is None:
            reason = "moved to another server"
        return JobStatus(state, None, letter, reason)

    exit_key = "exit_status" if "exit_status" in attrs else "Exit_status"
    exit_status = _pbs_int(attrs.get(exit_key), exit_key, what, stdout, stderr)
    substate = attrs.get("substate")
    try:
        substate = int(substate) if substate is not None and not isinstance(substate, bool) else None
    except (TypeError, ValueError):
        substate = None

    if exit_status is None:
        if substate == _PBS_SUBSTATE_TERMINATED:
            return JobStatus(CANCELLED, None, letter, comment or "deleted (substate 91)")
        return JobStatus(FAILED, None, letter, comment or "finished without an exit status")
    if exit_status == 0:
        return JobStatus(COMPLETED, 0, letter, comment)

    used = _pbs_duration(attrs.get("resources_used.walltime"))
    limit = _pbs_duration(attrs.get("Resource_List.walltime"))
    over_walltime = used is not None and limit is not None and limit > 0 and used >= limit

    def why(explanation: str) -> str:
        return f"{explanation}; {comment}" if comment else explanation

    if exit_status < 0:
        codes = _TORQUE_EXEC_CODES if dialect == "torque" else _PRO_EXEC_CODES
        state, meaning = codes.get(exit_status, (FAILED, f"PBS exit status {exit_status}"))
        return JobStatus(state, exit_status, letter, why(meaning))
    walltime = (
        f"after using its whole walltime ({attrs.get('resources_used.walltime')} of "
        f"{attrs.get('Resource_List.walltime')})"
    )
    if exit_status > 256:
        # 256 + N: PBS killed the job's top process with signal N (qdel, or
        # the walltime limit); PSI/J maps these to CANCELED.
        signal = exit_status - 256
        code = 128 + signal
        if signal in (9, 15) and over_walltime:
            return JobStatus(TIMEOUT, code, letter, why(f"killed by signal {signal} {walltime}"))
        state = CANCELLED if signal in (9, 15) else FAILED
        return JobStatus(state, code, letter, why(f"killed by signal {signal}"))
    if exit_status in (128 + 9, 128 + 15) and over_walltime:
        # The shell reports its child killed by SIGKILL/SIGTERM: at the limit,
        # that is PBS enforcing the walltime.
        return JobStatus(TIMEOUT, exit_status, letter, why(f"killed by signal {exit_status - 128} {walltime}"))
    return JobStatus(FAILED, exit_status, letter, comment)


def _pbs_pick(jobs: dict, job_id: JobId):
    """The entry of ``jobs`` (id -> attributes) for ``job_id``, or None."""
    if job_id.id in jobs:
        return jobs[job_id.id]
    for key, value in jobs.items():
        if job_id.matches(key):
            return value
    return None


def _flatten_pbs_json(entry: dict) -> dict:
    flat = {}
    for key, value in entry.items():
        if isinstance(value, dict) and key in ("resources_used", "Resource_List"):
            for sub, subvalue in value.items():
                flat[f"{key}.{sub}"] = subvalue
        else:
            flat[key] = value
    return flat


def _repair_pbs_json(text: str) -> str:
    """Undo the JSON mistakes PBS's ``qstat -F json`` is known to make.

    * invalid escapes such as ``\\'`` and ``\\,`` in environment values
      (openpbs PR #2049);
    * unquoted values that are not JSON numbers, such as ``"foo":005``
      (openpbs#1255).
    """

    def fix_escape(m: re.Match) -> str:
        s = m.group(1)
        if s[0] in '"\\/bfnrt' or (s[0] == "u" and len(s) == 5):
            return m.group(0)
        return "\\\\" + s

    text = re.sub(r"\\(u[0-9a-fA-F]{4}|.)", fix_escape, text, flags=re.S)

    def fix_bare(m: re.Match) -> str:
        value, comma = _split_value(m.group(2))
        if value in ("true", "false", "null") or re.fullmatch(
            r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", value
        ):
            return m.group(0)
        quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return m.group(1) + quoted + comma

    # One attribute per line: '"key":<tab>value,'.  Only whole lines are
    # touched, so colons inside strings are left alone.
    return re.sub(r'^([ \t]*"[^"\n]*"[ \t]*:[ \t]*)([^\s"{\[][^\n]*)$', fix_bare, text, flags=re.M)


def _split_value(text: str) -> tuple[str, str]:
    """``'005 ,  '`` -> (``'005'``, ``','``): a JSON value and its comma.

    (Done by hand: a lazy regex followed by optional blanks is quadratic on
    long runs of blanks.)"""
    text = text.rstrip()
    comma = ""
    if text.endswith(","):
        text, comma = text[:-1].rstrip(), ","
    return text, comma


_JSON_JOBS_LINE = re.compile(r'[ \t]*"Jobs"[ \t]*:[ \t]*\{[ \t\r]*')
_JSON_JOB_KEY = re.compile(r'[ \t]*"([0-9]+(?:\[[0-9]*\])?(?:\.[^"\s]*)?)"[ \t]*:[ \t]*\{[ \t\r]*')
_JSON_RESOURCES = re.compile(r'[ \t]*"(resources_used|Resource_List)"[ \t]*:[ \t]*\{[ \t\r]*')
_JSON_CLOSE = re.compile(r"[ \t]*\}[ \t]*,?[ \t\r]*")
_JSON_ATTR = re.compile(r'[ \t]*"([A-Za-z_][A-Za-z0-9_.]*)"[ \t]*:[ \t]*(.*)')
_SALVAGED = ("job_state", "Exit_status", "substate", "comment")


def _salvage_pbs_json(text: str) -> dict | None:
    """Jobs from JSON too broken to load, read line by line.

    PBS prints one attribute per line.  The damage documented in openpbs
    issues (#2541: ``BASH_FUNC_*`` values from ``qsub -V``; PR #830:
    unescaped quotes; #1255: bare ``005``) sits in ``Variable_List`` values
    and comments, so the few attributes needed here can still be read: a
    line ``"<digits>[.server]": {`` starts a job, ``job_state``,
    ``Exit_status``, ``substate`` and ``comment`` are taken where first seen
    in it, and ``walltime`` inside ``resources_used`` / ``Resource_List``.
    Returns ``{job id: flat attributes}``, or None when no ``"Jobs"`` object
    is seen.
    """
    jobs: dict[str, dict] = {}
    seen_jobs = False
    current: dict | None = None
    section: str | None = None
    for line in text.split("\n"):
        if not seen_jobs:
            seen_jobs = _JSON_JOBS_LINE.fullmatch(line) is not None
            continue
        m = _JSON_JOB_KEY.fullmatch(line)
        if m is not None:
            current = jobs.setdefault(m.group(1), {})
            section = None
            continue
        if current is None:
            continue
        m = _JSON_RESOURCES.fullmatch(line)
        if m is not None:
            section = m.group(1)
            continue
        if section is not None and _JSON_CLOSE.fullmatch(line):
            section = None
            continue
        m = _JSON_ATTR.fullmatch(line)
        if m is None:
            continue
        key, value = m.group(1), _split_value(m.group(2))[0]
        if section is not None:
            if key != "walltime":
                continue
            key = f"{section}.walltime"
        elif key not in _SALVAGED:
            continue
        if key in current:
            continue  # first occurrence wins
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = value[1:-1]
        current[key] = value
    return jobs if seen_jobs else None


def parse_qstat_pro_json(stdout, job_id: JobId, *, stderr: str = "") -> JobStatus | None:
    """The state from ``qstat -f -F json -x ID`` (PBS Pro/OpenPBS only).

    Returns ``None`` when the output is empty or lists no matching job
    (check stderr with :func:`parse_qstat_unknown`).  The job is found with
    :meth:`JobId.matches`.  States: Q H W T S U -> PENDING (``raw`` keeps
    the letter), R E B -> RUNNING, M -> UNKNOWN, F X -> by ``Exit_status``:
    0 COMPLETED; 256+N killed by signal N (CANCELLED for 9 and 15, or
    TIMEOUT when ``resources_used.walltime`` reached the requested walltime;
    exit code 128+N); -29 TIMEOUT, -27/-26 OUT_OF_MEMORY; other non-zero
    FAILED.  JSON that PBS got wrong (openpbs#1255, #2541, PR #830, PR
    #2049) is repaired or read line by line.
    """
    import json

    stdout, stderr = _text(stdout), _text(stderr)
    if not stdout.strip():
        return None
    unloaded = object()
    data = unloaded
    try:
        data = json.loads(stdout, strict=False)
    except (ValueError, RecursionError):
        try:
            data = json.loads(_repair_pbs_json(stdout), strict=False)
        except (ValueError, RecursionError):
            pass
    if data is not unloaded:
        if not isinstance(data, dict):
            raise SchedulerOutputError(
                "expected a JSON object from qstat -F json", stdout, stderr, None, "qstat"
            )
        jobs = data.get("Jobs")
        if jobs is None:
            return None
        if not isinstance(jobs, dict):
            raise SchedulerOutputError(
                "'Jobs' in qstat -F json output is not an object", stdout, stderr, None, "qstat"
            )
        entry = _pbs_pick(jobs, job_id)
        if entry is None:
            return None
        if not isinstance(entry, dict):
            raise SchedulerOutputError(
                f"the entry for job {job_id.id} in qstat -F json output is not an object",
                stdout,
                stderr,
                None,
                "qstat",
            )
        return _pbs_status(_flatten_pbs_json(entry), "pro", "qstat -F json", stdout, stderr)
    jobs = _salvage_pbs_json(stdout)
    if jobs is None:
        raise SchedulerOutputError(
            "qstat -F json printed something that is not JSON and has no \"Jobs\" object",
            stdout,
            stderr,
            None,
            "qstat",
        )
    entry = _pbs_pick(jobs, job_id)
    if entry is None:
        return None
    return _pbs_status(entry, "pro", "qstat -F json (malformed)", stdout, stderr)


_QSTAT_JOB_ID_LINE = re.compile(r"Job Id:\s*(\S+)\s*")
_QSTAT_ATTR_LINE = re.compile(r"[ \t]+([A-Za-z_][A-Za-z0-9_.]*) = ?(.*)")
_QSTAT_TAB_ATTR = re.compile(r"\t[A-Za-z_][A-Za-z0-9_.]* = ")


def _qstat_text_jobs(text: str) -> list[tuple[str, dict]] | None:
    """``[(job id, {attribute: value})]`` from ``qstat -f`` text, or None if
    there is no ``Job Id:`` line at all."""
    jobs: list[tuple[str, dict]] = []
    current: dict | None = None
    last_key: str | None = None
    seen = False
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        m = _QSTAT_JOB_ID_LINE.fullmatch(line)
        if m is not None:
            seen = True
            current = {}
            last_key = None
            jobs.append((m.group(1), current))
            continue
        if current is None:
            continue
        if not line.strip():
            last_key = None
            continue
        m = _QSTAT_ATTR_LINE.fullmatch(line)
        # PBS indents attributes with spaces and continuations with a tab;
        # Slurm's qstat wrapper indents attributes with a tab too.
        if line.startswith("\t") and last_key is not None and not _QSTAT_TAB_ATTR.match(line):
            current[last_key] += line[1:]  # continuation of a long value
            continue
        if m is not None:
            key, value = m.group(1), m.group(2)
            if key in current:
                last_key = None  # a repeated attribute: keep the first
            else:
                current[key] = value
                last_key = key
            continue
        if line[:1] in (" ", "\t") and last_key is not None:
            current[last_key] += line.strip()
        # Anything else is not an attribute line: skip it, and stay in the
        # block (only the next "Job Id:" ends it).
    return jobs if seen else None


def parse_qstat_full_text(stdout, job_id: JobId, *, stderr: str = "") -> JobStatus | None:
    """The state from ``qstat -f ID`` text (PBS Pro/OpenPBS, with ``-x``, or Torque).

    The text is ``Job Id: 123.server`` followed by ``    key = value``
    lines; long values continue on lines that start with a tab.  PBS Pro
    prints ``Exit_status``, Torque ``exit_status`` (and ``job_state = C``
    for completed jobs); states and exit statuses map as in
    :func:`parse_qstat_pro_json`, except that negative exit statuses are
    read as Torque's (``-11`` walltime, ``-10`` memory) when the lowercase
    ``exit_status`` shows the text is Torque's.  Returns ``None`` when the
    output is empty or lists no matching job.
    """
    stdout, stderr = _text(stdout), _text(stderr)
    if not stdout.strip():
        return None
    jobs = _qstat_text_jobs(stdout)
    if jobs is None:
        raise SchedulerOutputError(
            "expected 'Job Id: ...' blocks from qstat -f (note: Torque's qstat -x "
            "prints XML, not finished jobs)",
            stdout,
            stderr,
            None,
            "qstat",
        )
    chosen = None
    for key, attrs in jobs:
        if key == job_id.id:
            chosen = attrs
            break
    if chosen is None:
        for key, attrs in jobs:
            if job_id.matches(key):
                chosen = attrs
                break
    if chosen is None:
        return None
    dialect = "torque" if "exit_status" in chosen or chosen.get("job_state", "").strip() == "C" else "pro"
    return _pbs_status(chosen, dialect, "qstat -f", stdout, stderr)


# --------------------------------------------------------------------------
# "No such job" on stderr
# --------------------------------------------------------------------------

_QSTAT_UNKNOWN = re.compile(r"Unknown Job Id|\bhas finished\b", re.I)


def parse_qstat_unknown(stderr) -> bool:
    """Whether ``qstat`` (or ``qdel``) says the job is unknown or finished.

    True for ``qstat: Unknown Job Id 123.srv`` (both dialects; Torque adds
    ``Error``), for PBS Pro's ``qstat: 123.srv Job has finished, use -x or
    -H to obtain historical job information`` (exit status 35, Parsl#3906)
    and for ``qdel: Job 123.srv has finished``.  Neither proves the job never ran: PBS Pro keeps history
    only when ``job_history_enable`` is set, Torque keeps completed jobs for
    ``keep_completed`` seconds.
    """
    try:
        text = _text(stderr)
    except TypeError:
        return False
    return _QSTAT_UNKNOWN.search(text) is not None


def parse_squeue_unknown(stderr) -> bool:
    """Whether ``squeue``/``scancel`` says the job id is unknown to slurmctld
    (``slurm_load_jobs error: Invalid job id specified``): the job left the
    queue (after ``MinJobAge``) or never existed; ask ``sacct``."""
    try:
        text = _text(stderr)
    except TypeError:
        return False
    return re.search(r"Invalid job id specified", text, re.I) is not None


def parse_sacct_disabled(stderr) -> bool:
    """Whether ``sacct`` says the cluster keeps no accounting
    (``Slurm accounting storage is disabled``, submitit#1720): fall back to
    ``squeue``."""
    try:
        text = _text(stderr)
    except TypeError:
        return False
    return re.search(r"accounting storage is disabled", text, re.I) is not None
