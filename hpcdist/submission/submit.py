"""Submission: spec -> job folder -> scheduler -> record; and following a job to its end."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

from hpcdist import launchers
from hpcdist.jobs import JOBS_DIR, Draft, Job, JobFolderError
from hpcdist.jobs.logfiles import LogCopy, UnreadableLog, read_tail
from hpcdist.submission.render import render
from hpcdist.schedulers import QUEUED
from hpcdist.schedulers.registry import get as get_scheduler
from hpcdist.schedulers.base import FINAL_STATES, NEVER_RUNS, TIMEOUT, JobStatus
# AlreadyEnded: callers read it here (hpcdist.api, the submitit executor).
from hpcdist.schedulers.batch import UNCONFIRMED, UNREACHABLE, AlreadyEnded, MaybeQueued, SubmitError  # noqa: F401
from hpcdist.submission.spec import JobSpec
from hpcdist.jobs.subjobs import LOGS as SUBJOB_LOGS

#: hpcdist's own states for a folder whose record has no id yet (:attr:`Job.submitting`).
SUBMITTING, INTERRUPTED = "SUBMITTING", "SUBMISSION INTERRUPTED"


def submit(spec: JobSpec, *, command_line: str | None = None, root: str = JOBS_DIR, sweep=None) -> Job:
    """Write the job folder and a record marked "submitting", submit the script, record its id.

    A submission that fails before the scheduler is asked, or that the scheduler refused,
    leaves nothing; once the scheduler may have the job, its folder stays and ``status``
    lists it, with its id or as "submission interrupted". ``sweep``: one array of a sweep
    (:class:`hpcdist.sweeps.arrays.Part`); a spec with ``--sweep`` goes through :mod:`hpcdist.sweeps`.
    """
    if (spec.sweep or spec.sweep_file) and sweep is None:
        raise SubmitError("--sweep: this submits one job, and a sweep is several; submit it with `hpcdist submit "
                          "--sweep ...` (hpcdist.sweeps.arrays.submit_sweep from Python)")
    scheduler = get_scheduler(spec.scheduler, spec.dialect)
    workdir = os.getcwd()
    if spec.stage_env:  # packed once per content, before the script names the file (hpcdist.submission.stage)
        from hpcdist.submission import stage

        stage.pack(stage.plan(spec, workdir), say=lambda line: print(f"hpcdist submit: {line}", file=sys.stderr))
    draft = Draft(os.path.abspath(root), spec.job_name)
    try:
        spec = spec.replace(output=spec.output or draft.default_log)
        # An array's subjobs each write a log of their own (the scheduler names it by the index).
        subjob_logs = scheduler.array_log(spec.output) if spec.array else None
        if subjob_logs:
            spec = spec.replace(output=subjob_logs[0])
        log = os.path.join(workdir, spec.output)  # where the script really writes (a user's --output too)
        draft.write_spec(spec.as_dict())
        script = draft.write_script(render(spec, command_line=command_line, workdir=workdir, job_dir=draft.path,
                                           sweep=sweep))
        if sweep is not None:  # which subjob runs which parameter set (hpcdist.sweeps)
            from hpcdist.jobs.params import write_sweep

            write_sweep(draft, sweep.record(draft.path))
        record = {"job_id": "", "cluster": None, "scheduler": spec.scheduler, "dialect": spec.dialect,
                  "job_name": spec.job_name, "workdir": workdir, "log": log, "submitted_at": time.time(),
                  "command_line": command_line}
        if subjob_logs:
            record[SUBJOB_LOGS] = [os.path.join(workdir, subjob_logs[1]), subjob_logs[2]]
        from hpcdist.schedulers.local.job import process_start  # not at import: `status` needs none

        draft.write_pending(record, os.getpid(), process_start(os.getpid()))
    except BaseException as e:
        draft.discard()
        if isinstance(e, OSError):
            raise SubmitError(f"cannot write the job folder {draft.path}: {e.strerror or e}; "
                              f"nothing was submitted") from None
        raise
    with _signals_held(f"{scheduler.submit_program} has answered") as caught:
        try:
            job_id = scheduler.submit(script, workdir, log)
        except MaybeQueued as e:
            raise MaybeQueued(f"{e}\nIts folder stays, listed by `hpcdist status` as submission interrupted: "
                              f"{draft.path}") from None
        except SubmitError:
            draft.discard()  # refused: no job exists
            raise
        record.update(job_id=job_id.id, cluster=job_id.cluster,
                      log=log.replace("%j", job_id.id).replace("%x", spec.job_name))
        try:
            job = draft.commit(record)
        except OSError as e:
            raise SubmitError(f"{spec.scheduler} accepted job {job_id.id}, but hpcdist could not record its id in "
                              f"{draft.path}: {e.strerror or e}. Follow it with `{scheduler.queue_command}`; "
                              f"`hpcdist status` lists the folder as submission interrupted") from None
        if caught:
            print(f"hpcdist submit: job {job.job_id} is recorded in {job.path}; now stopping", file=sys.stderr,
                  flush=True)
    return job


@contextlib.contextmanager
def _signals_held(until: str):
    """SIGTERM, SIGINT and SIGHUP wait while the submit command runs and its id is recorded
    (one killed in between leaves a queued job nobody knows of); each is delivered again
    after. Yields the list of those that came. Only the main thread may set handlers."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def hold(signum, frame):
        if not caught:
            print(f"hpcdist submit: {signal.Signals(signum).name} received: stopping once {until} and the job "
                  f"id is recorded", file=sys.stderr, flush=True)
        caught.append(signum)

    held = [sig for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) if signal.getsignal(sig) != signal.SIG_IGN]
    before = {sig: signal.signal(sig, hold) for sig in held}
    try:
        yield caught
    except BaseException as e:
        if caught:  # the signal will end us before the caller could say why
            print(f"hpcdist submit: error: {e}", file=sys.stderr, flush=True)
        raise
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)


def scheduler_of(job: Job):
    """The scheduler (and PBS dialect) the job was submitted to."""
    return get_scheduler(job.scheduler, job.record.get("dialect"))


def unrecorded(job: Job) -> JobStatus | None:
    """For a folder whose submission never recorded an id (:attr:`Job.submitting`): still
    submitting, or interrupted with what to check; None for a recorded job."""
    marked = job.submitting
    if marked is None:
        return None
    from hpcdist.schedulers.local.job import process_start  # as in submit()

    pid, started = marked.get("pid"), marked.get("started")
    if isinstance(pid, int) and pid > 1 and started is not None and process_start(pid) == str(started):
        return JobStatus(SUBMITTING, None, "submitting", f"hpcdist submit (pid {pid}) is waiting for the answer")
    # The submit may have recorded the id and ended since the record was read: read it again
    # before calling the submission interrupted (a job being recorded was called so).
    job.reload()
    if job.submitting is None:
        return None
    queue = getattr(scheduler_of(job), "queue_command", "")
    look = f"look for job name {job.record.get('job_name')} in `{queue}`" if queue else "look for its process"
    return JobStatus(INTERRUPTED, None, "interrupted",
                     f"hpcdist submit never recorded the job id (stopped, no answer, or a full disk) and the job "
                     f"may be queued anyway: {look}; once you know, remove {job.path}")


def _without_id(job: Job, so: str, pending: JobStatus) -> SubmitError:
    """For a folder whose submission never recorded an id (``pending``: :func:`unrecorded`'s
    answer): what cannot be done, and why."""
    return SubmitError(f"no job id is recorded in {job.path}, so {so}: {pending.reason}")


def status(job: Job):
    """The job's state; for a job that resubmitted itself (PBS), its newest id's."""
    pending = unrecorded(job)
    if pending is not None:
        return pending
    scheduler = scheduler_of(job)
    while True:
        asked = job.current_id
        state = scheduler.status(job)
        # A run that resubmits itself ends a moment after it recorded the new id: an answer
        # "finished" about the id asked for may already belong to a job that goes on.
        if not state.finished or job.current_id == asked:
            return true_cause(job, state)


def true_cause(job: Job, state: JobStatus) -> JobStatus:
    """``state`` with the cause hpcdist knows where its monitor ended the job (--hang-timeout,
    --start-timeout: :mod:`hpcdist.jobs.ending`), not the signal its launcher died of."""
    if not state.finished or state.state == "COMPLETED" or state.raw == "recorded":
        return state
    from hpcdist.jobs import ending

    cause = ending.cause(job.path)
    return state if cause is None else JobStatus(state.state, state.exit_code, state.raw, cause)


def statuses(jobs: list[Job]) -> list:
    """Each job's state, as :func:`status` gives it, with one scheduler command for many jobs
    (:meth:`~hpcdist.schedulers.base.Scheduler.statuses`) and none for a job whose end its record
    keeps (:func:`recorded_end`). One controller that cannot be reached answers for all its jobs.
    None for a broken folder (:class:`~hpcdist.jobs.Broken`: no state, a row of its own), and for
    the jobs of a scheduler that failed for the group (the local backend asks one job at a time):
    the caller asks :func:`status` about each alone, as about any one job."""
    answers: list = [None] * len(jobs)
    groups: dict = {}  # (scheduler, dialect) -> [(position, job)]
    for k, job in enumerate(jobs):
        if not isinstance(job, Job):  # a broken folder: its own row, nothing to ask
            continue
        # A Job's record names a known scheduler and dialect (jobs.Job checks it when read).
        answers[k] = unrecorded(job)
        if answers[k] is None:  # recorded (perhaps a moment ago: unrecorded read the record again)
            answers[k] = recorded_end(job)
        if answers[k] is None:
            groups.setdefault((job.scheduler, job.record.get("dialect")), []).append((k, job))
    down: dict = {}
    for (name, dialect), grouped in groups.items():
        scheduler = get_scheduler(name, dialect)
        # Only a job that resubmits itself (PBS) goes on under another id: the others' runs files
        # need not be read to know what to ask about.
        members = [(k, job, job.current_id if scheduler.resubmits else job.job_id) for k, job in grouped]
        try:
            found = scheduler.statuses([job for _, job, _ in members], [asked for _, _, asked in members], down)
        except SubmitError:  # one job's trouble (the local backend asks one at a time): each asked alone
            continue
        for (k, job, asked), state in zip(members, found):
            # As status(): an answer "finished" about an id the job has since resubmitted under
            # (PBS) belongs to a run that goes on: ask about the new id.
            resubmitted = state.finished and scheduler.resubmits and job.current_id != asked
            answers[k] = status(job) if resubmitted else true_cause(job, state)
    return answers


def recorded_end(job: Job):
    """How the job ended, as ``--wait`` recorded it once the scheduler said so (:func:`wait`), or
    None: then the scheduler is asked (always, for the local backend, which asks no one).

    What is skipped, and why only that: the job's exit_code file alone is not an end, since a
    preempted run writes it too before Slurm requeues the job, which then runs again under the
    same id (the scheduler's answer, PENDING, wins over the file today). An end is final when the
    scheduler itself said it (not an exit_code file read while the controller could not be
    asked), it is in :data:`FINAL_STATES`, and it is about the id the job goes on under (a PBS
    job that resubmitted itself since has a new id, and is asked about again)."""
    if job.scheduler not in QUEUED:  # the local backend asks no one: its answer costs nothing
        return None
    record = job.record
    state, code, reason = record.get("state"), record.get("exit_code"), record.get("reason")
    # A record edited by hand is no end unless it reads as one: then the scheduler is asked.
    if not isinstance(state, str) or state not in FINAL_STATES or not (code is None or type(code) is int):
        return None
    if "ended_id" not in record or record["ended_id"] != job.current_id:
        return None
    return JobStatus(state=state, exit_code=code, raw="recorded", reason=reason if isinstance(reason, str) else None)


def cancel(job: Job) -> None:
    """The scheduler's cancel of ``job``; :class:`AlreadyEnded` where it had ended."""
    pending = unrecorded(job)
    if pending is not None:
        raise _without_id(job, "hpcdist cannot cancel it", pending)
    scheduler_of(job).cancel(job)


#: How long --wait accepts "unknown" (job out of the queue, no record anywhere) before giving up.
UNKNOWN_PATIENCE_S = 60.0
#: How long --wait waits for a controller that cannot be reached to come back (a restart
#: or a fail-over takes minutes; the job itself runs on without it).
CONTROLLER_PATIENCE_S = 600.0


def unknown_patience(state) -> float:
    """How long an UNKNOWN ``state`` is waited through before giving up on the job: a controller
    that cannot be reached longer than a job the scheduler no longer knows (--wait, and submitit's
    PBS executor)."""
    return CONTROLLER_PATIENCE_S if state.raw == UNREACHABLE else UNKNOWN_PATIENCE_S


def wait(job: Job, *, poll: float = 2.0, out=sys.stdout, quiet: bool = False) -> int:
    """Follow ``job`` to its end: state changes and new log lines. Returns its exit code."""
    pending = unrecorded(job)
    if pending is not None:
        print(f"hpcdist: cannot follow {job.path}: {pending.reason}", file=sys.stderr, flush=True)
        return 1
    last_state, unknown_since = None, None
    follow = _LogFollower(job, out)
    while True:
        job.reload()  # a cancel from another shell says so in the record: read it, never overwrite it
        state = status(job)
        down = state.raw == UNREACHABLE
        if state.state == "UNKNOWN":
            unknown_since = unknown_since or time.monotonic()
            patience = unknown_patience(state)
            if time.monotonic() - unknown_since > patience:
                follow()
                if down:
                    print(f"hpcdist: gave up waiting for job {job.job_id} after {patience:g} s: {state.reason}. "
                          f"`hpcdist status {job.job_id}` tells once the controller is back; its log is {job.log}",
                          file=sys.stderr, flush=True)
                else:
                    print(f"hpcdist: cannot tell how job {job.job_id} ended ({state.reason}); "
                          f"its log is {job.log}", file=sys.stderr, flush=True)
                return 1
        else:
            unknown_since = None
        follow()
        shown = "unknown: the controller is down" if down else state.state.lower()
        if shown != last_state and not quiet:
            print(f"hpcdist: job {job.job_id} is {shown}"
                  + (f" ({state.reason}); still waiting, up to {CONTROLLER_PATIENCE_S:g} s" if down
                     else f" ({state.reason})" if state.reason else ""), file=sys.stderr, flush=True)
            last_state = shown
        if state.raw.endswith(NEVER_RUNS):
            print(f"hpcdist: job {job.job_id} stays queued: the scheduler says it can never run as asked "
                  f"({state.reason}). Stopped waiting; remove it with `hpcdist cancel {job.job_id}` and ask for what "
                  f"the cluster has (nodes, queue, resources)", file=sys.stderr, flush=True)
            return 1
        if state.finished:
            time.sleep(0.2)
            follow()
            end = {"state": state.state, "exit_code": state.exit_code}
            if not state.raw.endswith(UNCONFIRMED):  # the scheduler's word: `status` needs not ask again
                end.update(reason=state.reason, ended_id=job.current_id)  # the id it is about (recorded_end)
            try:
                job.update(**end)
            except (OSError, JobFolderError) as e:  # a full disk, a folder removed: the end is told all the same
                print(f"hpcdist: job {job.job_id} ended ({state.state.lower()}), but its record in {job.path} could "
                      f"not say so: {getattr(e, 'strerror', None) or e}", file=sys.stderr, flush=True)
            if state.state != "COMPLETED":  # the state's line above gave its reason, unless quiet
                print_first_failure(job, None if quiet else state.reason)
            if state.state == TIMEOUT:
                print(f"hpcdist: job {job.job_id} was killed at its walltime limit ({state.reason}); give it a longer "
                      f"--walltime, or let it checkpoint and go on with --requeue", file=sys.stderr, flush=True)
            return exit_status(state)
        time.sleep(poll)


#: --wait's exit status for a job that ran out of its walltime and has no exit code a shell could
#: give (PBS's Exit_status -29): 124, as timeout(1) exits.
WALLTIME_EXIT = 124


def exit_status(state: JobStatus) -> int:
    """The exit status of ``--wait`` for a finished job: its exit code, when a shell could have
    given it (1-255; 0 only for a completed job), else :data:`WALLTIME_EXIT` for a job killed at
    its walltime, 0 for a completed job and 1 for any other end (256 would wrap to 0)."""
    code = state.exit_code
    if code is not None and 0 <= code <= 255 and (code != 0) == (state.state != "COMPLETED"):
        return code
    return 0 if state.state == "COMPLETED" else WALLTIME_EXIT if state.state == TIMEOUT else 1


def log_text(job: Job) -> str | None:
    """The job's logs as :func:`write_logs` writes them, as one string (``JobHandle.logs()``);
    None while there is none."""
    import io

    text = io.StringIO()
    return text.getvalue() if write_logs(job, text) else None


def write_logs(job: Job, out) -> bool:
    """The job's log to ``out``, a chunk at a time (a 10 GB log in constant memory); for a job
    that resubmitted itself, each run's log in turn, each under a line that names its job.
    False while there is none."""
    pending = unrecorded(job)
    if pending is not None:
        raise _without_id(job, "it has no log", pending)
    logs: dict[str, str] = {}  # log -> the first job that wrote it
    for job_id, path in job.logs:
        logs.setdefault(path, job_id)
    last = None
    for path, job_id in logs.items():
        if not os.path.exists(path):
            continue
        if last is not None and not last.at_line_start:
            out.write("\n")
        if len(logs) > 1:
            out.write(f"==> hpcdist: job {job_id}, log {path} <==\n")
        copy = LogCopy(path)
        try:
            if copy.copy(out):
                last = copy
        except UnreadableLog as e:  # a folder, a file this user may not read: one line, not a traceback
            raise JobFolderError(f"cannot read the log of job {job_id} ({path!r}, as {job.path}/record.json "
                                 f"names it): {e}") from None
    return last is not None


def first_failure(job: Job):
    """The rank that failed first, from the job's log (:mod:`hpcdist.failures`), or None."""
    from hpcdist.failures import first_failure as from_log  # socket and datetime: only for a failed job

    try:
        spec = JobSpec(**job.spec_values())
        agents = launchers.get(spec.launcher).per_node(spec)
    except (OSError, ValueError, TypeError):
        agents = False
    try:
        return from_log(read_tail(job.log), agents)  # its end: a 10 GB log is not read whole
    except OSError:
        return None


def reason_in_log(job: Job) -> str | None:
    """A failed job's reason from its log's end (:func:`hpcdist.failures.reason_in_log`), for a job
    the scheduler gives none: the fix where its python lacks hpcdist, else its last error line."""
    from hpcdist.failures import ERROR_TAIL, reason_in_log as from_log  # a failed job's alone

    try:
        return from_log(read_tail(job.log, ERROR_TAIL))
    except OSError:
        return None


def print_first_failure(job: Job, said: str | None = None) -> None:
    """The rank that failed first; for a job hpcdist ended, why (unless ``said``, the state's line, said it)."""
    from hpcdist.jobs import ending

    cause = ending.cause(job.path)
    if cause is not None:  # hpcdist ended it: no rank failed first, whatever the launcher says
        if cause != said:
            print(f"hpcdist: job {job.job_id} was {cause}", file=sys.stderr, flush=True)
        return
    failure = first_failure(job)
    if failure is not None:
        print(f"hpcdist: job {job.job_id} failed; the first to fail: {failure}", file=sys.stderr, flush=True)


class _LogFollower:
    """Prints what the job's logs gained since the last call, each log in turn. A resubmitted PBS
    job writes a log of its own, which follows the last lines of the one before; an array's
    subjobs write one each (PBS copies each back whole when its subjob ends)."""

    def __init__(self, job: Job, out):
        self.job, self.out, self.copies = job, out, {}

    def __call__(self) -> None:
        for path in dict.fromkeys(path for _, path in self.job.logs):
            copy = self.copies.setdefault(path, LogCopy(path))
            try:
                copy.copy(self.out)
            except UnreadableLog as e:  # a folder, a file this user may not read: as write_logs says it
                raise JobFolderError(f"cannot read the log {path!r}: {e}") from None


__all__ = ["submit", "status", "statuses", "recorded_end", "cancel", "wait", "exit_status",
           "log_text", "write_logs", "first_failure", "SubmitError"]
