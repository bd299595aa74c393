"""What PBS's qstat prints, into a :class:`~hpcdist.schedulers.base.JobStatus`.

Pure functions on text, for PBS Pro/OpenPBS and Torque (the caller runs ``qstat``): the JSON of
``qstat -f -F json -x`` (repaired, or read line by line, where PBS got it wrong), the ``qstat -f``
text, and "no such job" on stderr.  The regular expressions are compiled on first use.
"""

from __future__ import annotations

import json
import re

from hpcdist.patterns import Pattern
from hpcdist.schedulers.base import (
    CANCELLED, COMPLETED, FAILED, NEVER_RUNS, NODE_FAIL, OUT_OF_MEMORY, PENDING, RUNNING, TIMEOUT,
    UNKNOWN, JobId, JobStatus, SchedulerOutputError, output_lines, output_text)

__all__ = ["parse_qstat_pro_json", "parse_qstat_jobs_json", "parse_qstat_full_text",
           "parse_qstat_jobs_text", "parse_qstat_unknown", "parse_qstat_unknown_ids",
           "parse_qstat_no_history", "EXEC_CODES"]

# job_state letters.  PBS Pro/OpenPBS: B E F H M Q R S T U W X; Torque:
# C E H Q R T W S.  No letter means different things in the two.
_STATE_MAP = {
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
_FINISHED_LETTERS = frozenset("FXC")  # F, X (subjob): PBS Pro; C: Torque

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

#: The negative exit statuses of each dialect, by its name.
EXEC_CODES = {"pro": _PRO_EXEC_CODES, "torque": _TORQUE_EXEC_CODES}

_SUBSTATE_TERMINATED = 91  # OpenPBS job.h: finished because deleted
_SUBSTATE_FAILED = 93  # OpenPBS job.h: finished and failed (an array's parent: a subjob failed)


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


def _c_int(value) -> int | None:
    """An integer as PBS keeps it (a C int), from JSON's number or a string; None for anything
    else: a float (``1e999`` is infinity), a bool, a number past a C int."""
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,12}\s*", value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return value
    return None


def _pbs_int(value, name: str, what: str, stdout: str, stderr: str) -> int | None:
    if value is None:
        return None
    number = _c_int(value)
    if number is not None:
        return number
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
    if letter not in _FINISHED_LETTERS:
        state = _STATE_MAP.get(letter, UNKNOWN)
        reason = comment
        if letter == "M" and reason is None:
            reason = "moved to another server"
        if reason and reason.startswith("Can Never Run"):  # pbs_sched's word: no node could ever take it
            return JobStatus(state, None, f"{letter}, {NEVER_RUNS}", reason)
        return JobStatus(state, None, letter, reason)

    exit_key = "exit_status" if "exit_status" in attrs else "Exit_status"
    exit_status = _pbs_int(attrs.get(exit_key), exit_key, what, stdout, stderr)
    substate = _c_int(attrs.get("substate"))  # only a hint: an odd one is ignored

    if exit_status is None:
        if substate == _SUBSTATE_TERMINATED:
            return JobStatus(CANCELLED, None, letter, comment or "deleted (substate 91)")
        return JobStatus(FAILED, None, letter, comment or "finished without an exit status")
    if exit_status == 0 and substate == _SUBSTATE_FAILED:
        # An array's parent keeps Exit_status 0 when a subjob fails: its substate says it failed.
        return JobStatus(FAILED, None, letter, f"{comment or 'failed'} (PBS substate 93 with Exit_status 0: "
                                               f"a subjob failed)")
    if exit_status == 0 and substate == _SUBSTATE_TERMINATED:
        # Deleted while it ran: OpenPBS 23.06 keeps Exit_status 0 for a job qdel ended (its
        # comment: "... terminated by USER"); the job's exit_code file says how it ended.
        return JobStatus(CANCELLED, None, letter, comment or "deleted (substate 91)")
    if exit_status == 0:
        return JobStatus(COMPLETED, 0, letter, comment)

    used = _pbs_duration(attrs.get("resources_used.walltime"))
    limit = _pbs_duration(attrs.get("Resource_List.walltime"))
    over_walltime = used is not None and limit is not None and limit > 0 and used >= limit

    def why(explanation: str) -> str:
        return f"{explanation}; {comment}" if comment else explanation

    if exit_status < 0:
        codes = EXEC_CODES[dialect]
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
    if substate == _SUBSTATE_TERMINATED:  # deleted: an array's parent says 1, a subjob deleted while queued too
        return JobStatus(CANCELLED, exit_status, letter, comment or "deleted (substate 91)")
    if exit_status in (128 + 9, 128 + 15) and over_walltime:
        # The shell reports its child killed by SIGKILL/SIGTERM: at the limit,
        # that is PBS enforcing the walltime.
        return JobStatus(TIMEOUT, exit_status, letter, why(f"killed by signal {exit_status - 128} {walltime}"))
    return JobStatus(FAILED, exit_status, letter, comment)


def _pbs_picks(jobs, job_ids: list):
    """``(job id, its entry)`` for each of ``job_ids`` that ``jobs`` (``[(id, attributes)]``, or
    a dict) lists: the entry under the same id, else the first whose id :meth:`JobId.matches`."""
    jobs = list(jobs.items()) if isinstance(jobs, dict) else jobs
    exact = {}
    for key, value in jobs:
        exact.setdefault(key, value)
    for job_id in job_ids:
        entry = exact.get(job_id.id)
        if entry is None:
            entry = next((value for key, value in jobs if job_id.matches(key)), None)
        if entry is not None:
            yield job_id, entry


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


_JSON_JOBS_LINE = Pattern(r'[ \t]*"Jobs"[ \t]*:[ \t]*\{[ \t\r]*')
_JSON_JOB_KEY = Pattern(r'[ \t]*"([0-9]+(?:\[[0-9]*\])?(?:\.[^"\s]*)?)"[ \t]*:[ \t]*\{[ \t\r]*')
_JSON_RESOURCES = Pattern(r'[ \t]*"(resources_used|Resource_List)"[ \t]*:[ \t]*\{[ \t\r]*')
_JSON_CLOSE = Pattern(r"[ \t]*\}[ \t]*,?[ \t\r]*")
_JSON_ATTR = Pattern(r'[ \t]*"([A-Za-z_][A-Za-z0-9_.]*)"[ \t]*:[ \t]*(.*)')
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
    """The state from ``qstat -f -F json -x ID`` (PBS Pro/OpenPBS only): see :func:`parse_qstat_jobs_json`."""
    return parse_qstat_jobs_json(stdout, [job_id], stderr=stderr).get(job_id.id)


def parse_qstat_jobs_json(stdout, job_ids: list, *, stderr: str = "") -> dict:

    """Each job's state from ``qstat -f -F json -x ID...`` (PBS Pro/OpenPBS only): ``{id: JobStatus}``.

    A job the output does not list is left out (check stderr with :func:`parse_qstat_unknown`).  The job is found with
    :meth:`JobId.matches`.  States: Q H W T S U -> PENDING (``raw`` keeps
    the letter), R E B -> RUNNING, M -> UNKNOWN, F X -> by ``Exit_status``:
    0 COMPLETED; 256+N killed by signal N (CANCELLED for 9 and 15, or
    TIMEOUT when ``resources_used.walltime`` reached the requested walltime;
    exit code 128+N); -29 TIMEOUT, -27/-26 OUT_OF_MEMORY; other non-zero
    FAILED.  JSON that PBS got wrong (openpbs#1255, #2541, PR #830, PR
    #2049) is repaired or read line by line.
    """
    stdout, stderr = output_text(stdout), output_text(stderr)
    if not stdout.strip():
        return {}
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
            return {}
        if not isinstance(jobs, dict):
            raise SchedulerOutputError(
                "'Jobs' in qstat -F json output is not an object", stdout, stderr, None, "qstat"
            )
        found = {}
        for job_id, entry in _pbs_picks(jobs, job_ids):
            if not isinstance(entry, dict):
                raise SchedulerOutputError(
                    f"the entry for job {job_id.id} in qstat -F json output is not an object",
                    stdout,
                    stderr,
                    None,
                    "qstat",
                )
            found[job_id.id] = _pbs_status(_flatten_pbs_json(entry), "pro", "qstat -F json", stdout, stderr)
        return found
    jobs = _salvage_pbs_json(stdout)
    if jobs is None:
        raise SchedulerOutputError(
            "qstat -F json printed something that is not JSON and has no \"Jobs\" object",
            stdout,
            stderr,
            None,
            "qstat",
        )
    return {job_id.id: _pbs_status(entry, "pro", "qstat -F json (malformed)", stdout, stderr)
            for job_id, entry in _pbs_picks(jobs, job_ids)}


_QSTAT_JOB_ID_LINE = Pattern(r"Job Id:\s*(\S+)\s*")
_QSTAT_ATTR_LINE = Pattern(r"[ \t]+([A-Za-z_][A-Za-z0-9_.]*) = ?(.*)")
_QSTAT_TAB_ATTR = Pattern(r"\t[A-Za-z_][A-Za-z0-9_.]* = ")


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
    """The state from ``qstat -f ID`` text: see :func:`parse_qstat_jobs_text`."""
    return parse_qstat_jobs_text(stdout, [job_id], stderr=stderr).get(job_id.id)


def parse_qstat_jobs_text(stdout, job_ids: list, *, stderr: str = "") -> dict:
    """Each job's state from ``qstat -f ID...`` text (PBS Pro/OpenPBS, with ``-x``, or Torque):
    ``{id: JobStatus}``, a job the output does not list left out.

    The text is ``Job Id: 123.server`` followed by ``    key = value``
    lines; long values continue on lines that start with a tab.  PBS Pro
    prints ``Exit_status``, Torque ``exit_status`` (and ``job_state = C``
    for completed jobs); states and exit statuses map as in
    :func:`parse_qstat_jobs_json`, except that negative exit statuses are
    read as Torque's (``-11`` walltime, ``-10`` memory) when the lowercase
    ``exit_status`` shows the text is Torque's.
    """
    stdout, stderr = output_text(stdout), output_text(stderr)
    if not stdout.strip():
        return {}
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
    found = {}
    for job_id, chosen in _pbs_picks(jobs, job_ids):
        dialect = "torque" if "exit_status" in chosen or chosen.get("job_state", "").strip() == "C" else "pro"
        found[job_id.id] = _pbs_status(chosen, dialect, "qstat -f", stdout, stderr)
    return found


_QSTAT_UNKNOWN = Pattern(r"Unknown Job Id|\bhas finished\b", re.I)
_QSTAT_NO_HISTORY = Pattern(r"not configured to maintain job history", re.I)


def parse_qstat_no_history(stderr) -> bool:
    """Whether ``qstat -x`` says the server keeps no job history: ``qstat: PBS is not configured
    to maintain job history 6.pbshead`` (OpenPBS 23.06 with ``job_history_enable`` off, its
    default). It then lists no job at all, not even a running one, and exits 0."""
    try:
        text = output_text(stderr)
    except TypeError:
        return False
    return _QSTAT_NO_HISTORY.search(text) is not None



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
        text = output_text(stderr)
    except TypeError:
        return False
    return _QSTAT_UNKNOWN.search(text) is not None


def parse_qstat_unknown_ids(stderr, job_ids: list) -> set:
    """The ids among ``job_ids`` that qstat's stderr says are unknown or finished (as
    :func:`parse_qstat_unknown`): asked about several jobs, qstat lists those it knows and
    writes one such line for each of the others, naming it as it was given."""
    try:
        lines = [line for line in output_lines(output_text(stderr)) if _QSTAT_UNKNOWN.search(line)]
    except TypeError:
        return set()
    words = {word for line in lines for word in line.replace(":", " ").split()}
    return {job_id.id for job_id in job_ids if job_id.id in words or any(job_id.matches(w) for w in words)}
