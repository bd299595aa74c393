"""What the schedulers with a queue (Slurm, PBS) share: running their commands, submitting.

Every command has a timeout, and its whole process group is killed when it runs out; a
status query is retried while the controller cannot be reached, a submission only when the
text proves the job was not accepted (see :mod:`hpcdist.schedulers.retry`). A failure carries the
scheduler's own stdout and stderr.
"""

from __future__ import annotations

import math
import os
import shlex
import sys

from hpcdist.schedulers import retry
from hpcdist.jobs import JobFolderError, read_exit_code, read_subjob_exit_codes
from hpcdist.jobs.subjobs import missing_exit_codes
from hpcdist.schedulers.base import FINAL_STATES, JobId, JobStatus, Scheduler, SchedulerOutputError

#: Seconds a status or cancel command (squeue, sacct, qstat, scancel, qdel) may take.
COMMAND_TIMEOUT = 60
#: Seconds sbatch/qsub may take by default (HPCDIST_SUBMIT_TIMEOUT overrides).
SUBMIT_TIMEOUT = 60.0
#: Retries after a transient controller error (HPCDIST_SCHEDULER_RETRIES overrides).
RETRIES = 2
#: Seconds before the first retry, doubled for each next one (HPCDIST_RETRY_DELAY overrides).
RETRY_DELAY = 2.0
#: The most characters of job ids one status command is given: squeue's and sacct's -j list is
#: one argument, and Linux takes at most 128 KiB in one (MAX_ARG_STRLEN); half of that leaves
#: room. Each call costs a controller 50-100 ms, so as many jobs as fit go in one: 2,000 Slurm
#: ids (about 16 KB) are one call, as are 1,500 PBS ids with a long server name.
QUERY_CHARS = 64 * 1024
#: JobStatus.raw of an UNKNOWN state whose cause is a controller that cannot be reached.
UNREACHABLE = "unreachable"
#: How JobStatus.raw ends for an end read from the job's exit_code file that the scheduler
#: could not confirm (no controller to ask): a job requeued meanwhile would run again.
UNCONFIRMED = "unconfirmed"


class SubmitError(RuntimeError):
    """A job not submitted. ``said``: the scheduler's own words where it refused the job (its
    stderr, else stdout), which a caller reads to tell one refusal from another (a sweep waits
    out a per-user limit); the message around them is hpcdist's."""

    def __init__(self, message: str = "", said: str | None = None):
        super().__init__(message)
        self.said = said


class MaybeQueued(SubmitError):
    """The submit command failed without proving that the job was not queued (no answer in
    time, no id, or no answer after the request went out): its folder must stay."""


class AlreadyEnded(SubmitError):
    """A cancel of a job that had ended: nothing was cancelled, and its record is left as it is
    (it ended by itself: recording a cancel would turn a completed job into a cancelled one)."""

    @classmethod
    def of(cls, job_id: str, state: JobStatus) -> "AlreadyEnded":
        code = "" if state.exit_code is None else f", exit {state.exit_code}"
        return cls(f"job {job_id} has already ended ({state.state.lower()}{code}): nothing to cancel")


class CommandTimeout(SubmitError):
    """A scheduler command did not answer in time."""


def setting(name: str, default: float, *, integer: bool = False) -> float:
    """A number from the environment, checked: the error names the variable, the value and the fix."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = -1
    if not math.isfinite(value) or value < 0 or (not integer and value == 0 and name.endswith("TIMEOUT")):
        kind = "a whole number >= 0" if integer else "a positive number of seconds"
        raise SubmitError(f"{name}={text!r}: expected {kind}, e.g. {name}={default:g} (the default), "
                          f"or unset it")
    return value


def below(path: str, folder: str) -> str:
    """``path`` relative to ``folder`` when it lies below it, else as given."""
    relative = os.path.relpath(path, folder)
    return relative if not relative.startswith("..") else path


def submit_timeout() -> float:
    return setting("HPCDIST_SUBMIT_TIMEOUT", SUBMIT_TIMEOUT)


def retry_settings() -> dict:
    return {"retries": int(setting("HPCDIST_SCHEDULER_RETRIES", RETRIES, integer=True)),
            "delay": setting("HPCDIST_RETRY_DELAY", RETRY_DELAY)}


def run(argv: list[str], cwd: str | None = None, timeout: float = COMMAND_TIMEOUT, env: dict | None = None):
    """Run a scheduler command, bounded by ``timeout``: a ``subprocess.CompletedProcess``.

    The command gets its own session and, when it times out, the whole group
    is killed: a site's wrapper script around sbatch leaves its sbatch (a
    grandchild) holding our pipes, and subprocess.run would wait for that one
    to end after killing only the wrapper.
    """
    # Not at the top: `hpcdist render` imports this module and runs no command (they cost it 3%).
    import signal
    import subprocess

    try:
        # errors="replace": a site's banner may be Latin-1, and the job id after it must still be read.
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                encoding="utf-8", errors="replace", stdin=subprocess.DEVNULL, start_new_session=True)
    except FileNotFoundError:
        raise SubmitError(f"{argv[0]} is not installed or not on PATH (is this a login node of the cluster?)") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as e:  # the timeout, or Ctrl-C: nothing of the command may outlive us
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # something left the group and kept a pipe: stop reading
            pass
        proc.wait()
        if isinstance(e, subprocess.TimeoutExpired):
            raise CommandTimeout(f"`{shlex.join(argv)}` did not answer within {timeout:g} s; "
                                 f"the scheduler may be down or overloaded") from None
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def run_or_fail(argv: list[str], cwd: str | None = None, env: dict | None = None):
    """:func:`run` (in ``env``, default ours), and SubmitError quoting the command's words when it exits non-zero."""
    proc = run(argv, cwd=cwd, env=env)
    if proc.returncode != 0:
        raise SubmitError(f"`{shlex.join(argv)}` failed: {(proc.stderr.strip() or proc.stdout.strip())[:500]}")
    return proc


def query(argv: list[str]):
    """A status query, retried while the controller cannot be reached (a query changes nothing)."""
    def transient(proc):
        return retry.unreachable(proc.stdout + "\n" + proc.stderr) if proc.returncode != 0 else None
    return retry.with_retries(lambda: run(argv), transient, command=argv[0], **retry_settings())


def chunks(members: list) -> list[list]:
    """``members`` (``(position, job, id)``) cut into runs whose ids, with a separator each, hold
    at most :data:`QUERY_CHARS` characters: one status command each."""
    out, size = [[]], 0
    for member in members:
        size += len(member[2]) + 1
        if size > QUERY_CHARS and out[-1]:
            out.append([])
            size = len(member[2]) + 1
        out[-1].append(member)
    return out if out[-1] else []


def _record_cancel(job, cancelled: bool) -> str | None:
    """``cancelled`` written into the job's record: None, or why it could not be (a full disk)."""
    try:
        job.update(cancelled=cancelled)
    except (OSError, JobFolderError) as e:
        return getattr(e, "strerror", None) or str(e)
    return None


def recorded_exit(job, ended: bool = True) -> JobStatus | None:
    """How the job ended by its own word, where the scheduler keeps none: the exit code the job
    script wrote into its folder (hpcdist/schedulers/job.sh.j2: 128+N when signal N stopped it);
    for an array, the first subjob that failed, by index, else 0 (each subjob writes its own
    file). A job that ``hpcdist cancel`` cancelled is CANCELLED, with or without a file (a script
    killed outright writes none); without a file and a cancel, None: the end is unknown.

    ``ended``: the scheduler said the job ended (or forgot it). Then an array's subjob that wrote
    no file was ended from outside (a qdel of it alone, its node lost): the array FAILED, never
    COMPLETED. Else such a subjob may still run, and the array's end is unknown (None).

    The record is read again after the exit codes: a follower's copy may predate a cancel from
    another shell, and an exit code written because of that cancel comes after its word."""
    codes = read_subjob_exit_codes(job.path)
    code = None if codes else read_exit_code(job.path)
    job.reload()
    cancelled = job.record.get("cancelled") is True
    if codes:
        index, code = next(((i, c) for i, c in codes.items() if c != 0), (None, 0))
        missing = missing_exit_codes(job, codes) if code == 0 else []
        if missing and not ended:
            return None
        if missing and not cancelled:
            listed = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            return JobStatus("FAILED", None, "no exit code",
                             f"subjob(s) {listed} wrote no exit_code file: ended from outside "
                             f"before their script could (a qdel of the subjob, its walltime, a "
                             f"lost node); {len(codes)} subjob(s) exited 0")
        why = (f"subjob {index} exited {code}" if index is not None else f"{len(codes)} subjob(s) exited 0")
        return _ended(code, cancelled, f"{why}, from their exit_code files")
    if code is None:
        return JobStatus("CANCELLED", None, "cancelled", "hpcdist cancel") if cancelled else None
    return _ended(code, cancelled, "from the job's exit_code file")


def _ended(code: int, cancelled: bool, source: str) -> JobStatus:
    """A recorded end: cancelled by hpcdist, completed (0) or failed, a signal named."""
    if cancelled:
        return JobStatus("CANCELLED", code, "cancelled", f"hpcdist cancel; exit {code} {source}")
    if code == 0:
        return JobStatus("COMPLETED", 0, "exit 0", source)
    return JobStatus("FAILED", code, f"exit {code}", f"{signal_words(code)}{source}")


def signal_words(code: int) -> str:
    """``"killed by SIGTERM (a cancel, the walltime or preemption); "`` for a status of 128+N."""
    import signal  # as run()'s: only for a job that ended

    try:
        name = signal.Signals(code - 128).name if 128 < code <= 128 + 64 else None
    except ValueError:
        name = None
    if name is None:
        return ""
    why = {"SIGTERM": " (a cancel, the walltime or preemption)", "SIGKILL": " (out of memory, or the end of a "
           "grace time)", "SIGINT": " (Ctrl-C)", "SIGHUP": " (its session ended)"}.get(name, "")
    return f"killed by {name}{why}; "


class BatchScheduler(Scheduler):
    """A scheduler with a queue: submit a script, read the id, ask for the state, cancel by id."""

    cancel_command: str

    def parse_submission(self, proc) -> JobId:
        raise NotImplementedError

    def query_status(self, job) -> JobStatus:
        """The job's state from the scheduler's commands (:meth:`status` turns errors into UNKNOWN):
        the same question as for many jobs, asked about one."""
        return self.query_statuses([job], [job.current_id])[0]

    def query_statuses(self, jobs: list, job_ids: list[str]) -> list[JobStatus]:
        """The states of ``jobs`` (of one :meth:`place`, their ids ``job_ids``, each well formed),
        asked for together: one command for all, not one per job."""
        raise NotImplementedError

    def place(self, job):
        """What the jobs asked about together share (Slurm: the cluster); one controller each."""
        return None

    def statuses(self, jobs: list, job_ids: list[str], down: dict | None = None) -> list[JobStatus]:
        """Each job's state, as :meth:`status` gives it, asked for as many jobs at a time as
        :data:`QUERY_CHARS` holds (:func:`chunks`).

        ``down`` (``{(scheduler, place): why}``, shared by the caller across schedulers) is how one
        controller that cannot be reached answers for the rest: the jobs after the first one it
        left unanswered are told "as for job <first>", without asking again (each try waits
        through the retries). A batch whose answer cannot be read is asked again job by job
        (:meth:`status`): one job's odd line does not cost the others theirs.
        """
        down = {} if down is None else down
        groups: dict = {}  # (scheduler, place, asked together) -> [(position, job, id)]
        for k, (job, job_id) in enumerate(zip(jobs, job_ids)):
            # An id the scheduler would not read (a damaged record) is asked alone.
            together = self.ids.split(job_id) is not None
            groups.setdefault((self.name, self.place(job), together), []).append((k, job, job_id))
        answers: list = [None] * len(jobs)
        for (name, place, together), members in groups.items():
            for chunk in (chunks(members) if together else ([member] for member in members)):
                for (k, job, _), state in zip(chunk, self._chunk_statuses(chunk, together, down.get((name, place)))):
                    if state.raw == UNREACHABLE:
                        if (name, place) in down:
                            state = self.controller_down(job, down[name, place])
                        else:
                            down[name, place] = "as for job " + job.job_id
                    answers[k] = state
        return answers

    def _chunk_statuses(self, chunk: list, together: bool, down: str | None) -> list[JobStatus]:
        jobs = [job for _, job, _ in chunk]
        if down is not None:
            return [self.controller_down(job, down) for job in jobs]
        try:
            if together:
                return self.query_statuses(jobs, [job_id for _, _, job_id in chunk])
            return [self.status(job) for job in jobs]
        except SchedulerOutputError:
            return [self.status(job) for job in jobs]
        except CommandTimeout as e:
            return [self.controller_down(job, str(e)) for job in jobs]
        except SubmitError as e:  # the command cannot be run at all (not installed, a bad setting)
            return [JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=str(e)) for _ in jobs]

    def status(self, job) -> JobStatus:
        try:
            return self.query_status(job)
        except SchedulerOutputError as e:
            return JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"{self.status_commands}: {e.problem}")
        except CommandTimeout as e:
            return self.controller_down(job, str(e))

    #: The status commands, as an UNKNOWN state's reason names them.
    status_commands: str = ""
    #: How a user points the commands at a cluster, for :meth:`cannot_reach`.
    config_fix: str = ""

    def cannot_reach(self, program: str, line: str) -> str:
        """The command exists but found no scheduler to talk to (``line``: its own words, from
        :func:`hpcdist.schedulers.retry.not_configured`): what that means, on a login node and elsewhere."""
        return (f"{program} is installed but cannot reach a {self.title} {self.controller} ({line}). On a login "
                f"node this is a site problem (ask the cluster's admins); on {self._no_cluster(line)}")

    def _no_cluster(self, line: str) -> str:
        """The way out on a machine where the commands are installed but no cluster is set up."""
        return f"a machine with no {self.title} cluster set up: use --scheduler local, or {self.configure(line)}."

    def configure(self, line: str) -> str:
        """How to point the commands at a cluster, given what they said."""
        return self.config_fix

    def not_configured(self, job, program: str, proc) -> JobStatus | None:
        """The state when ``program`` (a status command) found no scheduler at all, else None."""
        line = retry.not_configured(proc.stdout + "\n" + proc.stderr) if proc.returncode != 0 else None
        if line is None:
            return None
        why = self.cannot_reach(program, line)
        found = recorded_exit(job, ended=False)
        if found is not None:
            return JobStatus(state=found.state, exit_code=found.exit_code, raw=f"{found.raw}, {UNCONFIRMED}",
                             reason=f"{found.reason}; {why}")
        return JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=why)

    def controller_down(self, job, why: str) -> JobStatus:
        """The state while the controller cannot be reached: unknown, never "finished",
        unless the job's own exit_code file says how it ended."""
        message = f"the {self.title} {self.controller} cannot be reached ({why})"
        found = recorded_exit(job, ended=False)
        if found is not None:
            return JobStatus(state=found.state, exit_code=found.exit_code, raw=f"{found.raw}, {UNCONFIRMED}",
                             reason=f"{found.reason}; {message}")
        return JobStatus(state="UNKNOWN", exit_code=None, raw=UNREACHABLE,
                         reason=f"{message}; the job may still be queued or running")

    def submit(self, script: str, workdir: str, log: str) -> JobId:
        # Paths relative to the submit folder (where the command runs): the job
        # folder's own part is a validated job name and a time, while the submit
        # folder's path may hold anything, and some qsub front ends (Slurm's
        # Torque wrapper) pass their arguments through a shell unquoted.
        argv = self.submit_argv(below(script, workdir), below(log, workdir))
        timeout, settings = submit_timeout(), retry_settings()
        command = shlex.join(argv)
        look = self.queue_command

        def attempt():
            try:
                return run(argv, cwd=workdir, timeout=timeout)
            except CommandTimeout:
                # Not retried: the request may have reached the controller, which may
                # have queued the job while we waited; a second try could run it twice.
                raise MaybeQueued(
                    f"`{command}` did not answer within {timeout:g} s (HPCDIST_SUBMIT_TIMEOUT); the controller "
                    f"may be down or overloaded. No job id came back, but the job may have been queued anyway: "
                    f"check `{look}` before submitting again.") from None

        def transient(proc):
            # Retried only when the text proves the job was not accepted (the connection
            # failed): see hpcdist/schedulers/retry.py for why a timeout after sending is not.
            return retry.not_sent(proc.stdout + "\n" + proc.stderr) if proc.returncode != 0 else None

        proc = retry.with_retries(attempt, transient, command=argv[0], **settings)
        try:
            return self.parse_submission(proc)
        except SchedulerOutputError as e:
            said = proc.stdout + "\n" + proc.stderr  # as _explain reads it: "not sent" wins
            maybe = proc.returncode == 0 or (not retry.not_sent(said) and retry.maybe_sent(said))
            said = proc.stderr.strip() or proc.stdout.strip() or None
            explained = self._explain(argv, proc, e, settings["retries"])
            raise (MaybeQueued if maybe else SubmitError)(explained, said) from None

    def _explain(self, argv, proc, error, retries: int) -> str:
        """Why the submission failed, in the scheduler's words, and what to do."""
        text = proc.stdout + "\n" + proc.stderr
        if proc.returncode == 0:
            return (f"{argv[0]} exited 0 but printed no job id, so hpcdist cannot follow the job; "
                    f"a site wrapper may have swallowed the id, and the job may have been queued "
                    f"anyway: check `{self.queue_command}`.\ncommand: {shlex.join(argv)}\n{error}")
        missing = retry.not_configured(text)
        if missing:
            return self.cannot_reach(argv[0], missing)
        down = retry.not_sent(text)
        if down:
            tries = f" after {retries + 1} tries" if retries else ""
            return (f"{argv[0]} is installed but cannot reach a {self.title} {self.controller} ({down}).\n"
                    f"The {self.title} {self.controller} cannot be reached{tries}: on a login node it may be down or "
                    f"restarting; try again when it is back (more tries: HPCDIST_SCHEDULER_RETRIES, now {retries}). "
                    f"On {self._no_cluster(down)}")
        lines = [f"{argv[0]} did not submit the job: {error}"]
        if retry.maybe_sent(text):
            lines.append(f"The controller did not answer after the request was sent, so the job may have been "
                         f"queued anyway: check `{self.queue_command}` before submitting again "
                         f"(hpcdist does not retry this).")
        advice = retry.hint(text)
        if advice:
            lines.append(f"Fix: {advice}.")
        return "\n".join(lines)

    def cancel(self, job) -> None:
        """The scheduler's cancel, the record saying so first: a follower (``logs -f``, ``--wait``)
        that sees the end between the two must not record it as a failure (where the scheduler
        keeps no finished jobs, the script's own exit code, 143, is read as CANCELLED by it). The
        state is asked before: scancel of a completed job says nothing and exits 0, and the record
        would then turn the job's exit 0 into CANCELLED. A cancel that fails takes its word back."""
        job_id = job.current_id
        state = self.status(job)
        if state.state in FINAL_STATES:
            raise AlreadyEnded.of(job_id, state)
        unrecorded = _record_cancel(job, True)
        proc = run([self.cancel_command, job_id])
        if proc.returncode != 0 and unrecorded is None:
            _record_cancel(job, False)
        if proc.returncode != 0 and self.says_gone(proc.stderr):
            said = (proc.stderr.strip().splitlines() or [""])[0]
            raise AlreadyEnded(f"job {job_id} has already ended ({said}): nothing to cancel")
        if proc.returncode != 0:
            missing = retry.not_configured(proc.stdout + "\n" + proc.stderr)
            if missing:
                why = self.cannot_reach(self.cancel_command, missing)
                raise SubmitError(f"job {job_id} was not cancelled: {why}")
            raise SubmitError(f"{self.cancel_command} {job_id} failed: "
                              f"{proc.stderr.strip() or proc.stdout.strip()}")
        if unrecorded:  # the job is cancelled: that is what counts
            print(f"hpcdist: job {job_id} is cancelled, but its record could not say so "
                  f"({unrecorded})", file=sys.stderr)

    @staticmethod
    def says_gone(stderr: str) -> bool:
        """Whether the cancel command's ``stderr`` says the job has ended or is no longer known."""
        return False

    def job_id_for_requeue(self, environ) -> str:
        """This job's id, inside it; SubmitError when the variable is not set."""
        job_id = self.job_id_from(environ)
        if not job_id:
            raise SubmitError(f"{self.job_id_variable} is not set: `hpcdist requeue` runs inside a {self.name} job")
        return job_id
