"""Submission and job state, one small class per scheduler (submitit's executor shape).

``submit(script, workdir, log)`` returns the job id; ``status(job)`` reads
the state back from the scheduler; ``cancel(job)`` ends it. The scheduler's
text is parsed by :mod:`hpcdist.scheduler_io`; every command has a timeout,
and a failure carries the scheduler's own stdout and stderr.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys

from hpcdist import jobs, retry
from hpcdist import scheduler_io as sio
from hpcdist.render import submit_argv

#: Seconds a status or cancel command (squeue, sacct, qstat, scancel, qdel) may take.
COMMAND_TIMEOUT = 60
#: Seconds sbatch/qsub may take by default (HPCDIST_SUBMIT_TIMEOUT overrides).
SUBMIT_TIMEOUT = 60.0
#: Retries after a transient controller error (HPCDIST_SCHEDULER_RETRIES overrides).
RETRIES = 2
#: Seconds before the first retry, doubled for each next one (HPCDIST_RETRY_DELAY overrides).
RETRY_DELAY = 2.0
#: JobStatus.raw of an UNKNOWN state whose cause is a controller that cannot be reached.
UNREACHABLE = "unreachable"


class SubmitError(RuntimeError):
    pass


class CommandTimeout(SubmitError):
    """A scheduler command did not answer in time."""


def _setting(name: str, default: float, *, integer: bool = False) -> float:
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


def _below(path: str, folder: str) -> str:
    """``path`` relative to ``folder`` when it lies below it, else as given."""
    relative = os.path.relpath(path, folder)
    return relative if not relative.startswith("..") else path


def submit_timeout() -> float:
    return _setting("HPCDIST_SUBMIT_TIMEOUT", SUBMIT_TIMEOUT)


def _retry_settings() -> dict:
    return {"retries": int(_setting("HPCDIST_SCHEDULER_RETRIES", RETRIES, integer=True)),
            "delay": _setting("HPCDIST_RETRY_DELAY", RETRY_DELAY)}


def _run(argv: list[str], cwd: str | None = None, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
    """Run a scheduler command, bounded by ``timeout``.

    The command gets its own session and, when it times out, the whole group
    is killed: a site's wrapper script around sbatch leaves its sbatch (a
    grandchild) holding our pipes, and subprocess.run would wait for that one
    to end after killing only the wrapper.
    """
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
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


def _query(argv: list[str]) -> subprocess.CompletedProcess:
    """A status query, retried while the controller cannot be reached (a query changes nothing)."""
    def transient(proc):
        return retry.unreachable(proc.stdout + "\n" + proc.stderr) if proc.returncode != 0 else None
    return retry.with_retries(lambda: _run(argv), transient, command=argv[0], **_retry_settings())


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class LocalBackend:
    """Runs the script on this machine in its own session; the exit code lands in a file."""

    name = "local"

    def submit(self, script: str, workdir: str, log: str) -> sio.JobId:
        folder = os.path.dirname(script)
        exit_file = jobs.exit_code_file(folder)
        # The job id is the runner's pid: numeric, so ports derive from it as from a Slurm id.
        runner = 'bash "$1" > "$2" 2>&1; status=$?; ' + jobs.write_exit_code_shell("$3")
        env = dict(os.environ)
        # The job uses the Python environment hpcdist runs from, activated or not.
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        proc = subprocess.Popen(
            ["bash", "-c", 'export HPCDIST_JOB_ID=$$; ' + runner, "hpcdist-local", script, log, exit_file],
            cwd=workdir, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        jobs.write_runner(folder, proc.pid, _process_start(proc.pid))
        return sio.JobId(id=str(proc.pid), scheduler="slurm")  # a plain number, compared exactly

    def status(self, job) -> sio.JobStatus:
        code = jobs.read_exit_code(job.path)
        if code is None and self._runner_alive(job):
            return sio.JobStatus(state="RUNNING", exit_code=None, raw="running", reason=None)
        if job.record.get("cancelled"):
            return sio.JobStatus(state="CANCELLED", exit_code=code, raw="cancelled", reason="hpcdist cancel")
        if code is None:
            return sio.JobStatus(state="FAILED", exit_code=None, raw="gone", reason="the runner ended without an exit code")
        return sio.JobStatus(state="COMPLETED" if code == 0 else "FAILED", exit_code=code, raw=f"exit {code}", reason=None)

    @staticmethod
    def _runner_alive(job) -> bool:
        """The runner's pid is alive and is still the runner (pids are reused)."""
        pid, started = jobs.read_runner(job.path) or (job.job_id, "None")
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        return started == "None" or _process_start(int(pid)) == started

    def cancel(self, job) -> None:
        job.update(cancelled=True)
        try:
            os.killpg(int(job.job_id), signal.SIGTERM)
        except ProcessLookupError:
            pass


def recorded_exit(job) -> sio.JobStatus | None:
    """The exit code the job script wrote into its folder (see templates/common/job.sh.j2)."""
    code = jobs.read_exit_code(job.path)
    if code is None:
        return None
    return sio.JobStatus(state="COMPLETED" if code == 0 else "FAILED", exit_code=code,
                         raw=f"exit {code}", reason="from the job's exit_code file")


class BatchBackend:
    """What Slurm and PBS share: submit a script, read the id, cancel by id."""

    name: str
    cancel_command: str
    queue_command: str  # what a user runs to see their queued jobs

    def parse_submission(self, proc: subprocess.CompletedProcess) -> sio.JobId:
        raise NotImplementedError

    def submit(self, script: str, workdir: str, log: str) -> sio.JobId:
        # Paths relative to the submit folder (where the command runs): the job
        # folder's own part is a validated job name and a time, while the submit
        # folder's path may hold anything, and some qsub front ends (Slurm's
        # Torque wrapper) pass their arguments through a shell unquoted.
        argv = submit_argv(self.name, _below(script, workdir), _below(log, workdir))
        timeout, settings = submit_timeout(), _retry_settings()
        command = shlex.join(argv)
        look = self.queue_command

        def attempt():
            try:
                return _run(argv, cwd=workdir, timeout=timeout)
            except CommandTimeout:
                # Not retried: the request may have reached the controller, which may
                # have queued the job while we waited; a second try could run it twice.
                raise SubmitError(
                    f"`{command}` did not answer within {timeout:g} s (HPCDIST_SUBMIT_TIMEOUT); the controller "
                    f"may be down or overloaded. Nothing was recorded, but the job may have been queued anyway: "
                    f"check `{look}` before submitting again.") from None

        def transient(proc):
            # Retried only when the text proves the job was not accepted (the connection
            # failed): see hpcdist/retry.py for why a timeout after sending is not.
            return retry.not_sent(proc.stdout + "\n" + proc.stderr) if proc.returncode != 0 else None

        proc = retry.with_retries(attempt, transient, command=argv[0], **settings)
        try:
            return self.parse_submission(proc)
        except sio.SchedulerOutputError as e:
            raise SubmitError(self._explain(argv, proc, e, settings["retries"])) from None

    def _explain(self, argv, proc, error, retries: int) -> str:
        """Why the submission failed, in the scheduler's words, and what to do."""
        text = proc.stdout + "\n" + proc.stderr
        if proc.returncode == 0:
            return (f"{argv[0]} exited 0 but printed no job id, so hpcdist cannot follow the job and recorded "
                    f"nothing; a site wrapper may have swallowed the id, and the job may have been queued "
                    f"anyway: check `{self.queue_command}`.\ncommand: {shlex.join(argv)}\n{error}")
        lines = [f"{argv[0]} did not submit the job: {error}"]
        if retry.not_sent(text):
            tries = f" after {retries + 1} tries" if retries else ""
            lines.append(f"The scheduler's controller cannot be reached{tries}; try again when it is back "
                         f"(more tries: HPCDIST_SCHEDULER_RETRIES, now {retries}).")
        elif retry.maybe_sent(text):
            lines.append(f"The controller did not answer after the request was sent, so the job may have been "
                         f"queued anyway: check `{self.queue_command}` before submitting again "
                         f"(hpcdist does not retry this, and recorded nothing).")
        advice = retry.hint(text)
        if advice:
            lines.append(f"Fix: {advice}.")
        return "\n".join(lines)

    def cancel(self, job) -> None:
        job_id = job.current_id
        proc = _run([self.cancel_command, job_id])
        if proc.returncode != 0:
            raise SubmitError(f"{self.cancel_command} {job_id} failed: "
                              f"{proc.stderr.strip() or proc.stdout.strip()}")


class SlurmBackend(BatchBackend):
    name = "slurm"
    cancel_command = "scancel"
    queue_command = "squeue --me"

    def parse_submission(self, proc):
        return sio.parse_sbatch(proc.stdout, proc.stderr, proc.returncode)

    def status(self, job) -> sio.JobStatus:
        try:
            return self._status(job)
        except sio.SchedulerOutputError as e:
            return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"squeue/sacct: {e.problem}")
        except CommandTimeout as e:
            return controller_down(job, "Slurm", str(e))

    def _status(self, job) -> sio.JobStatus:
        cluster = [f"--clusters={job.record['cluster']}"] if job.record.get("cluster") else []
        job_id = job.current_id
        queued = _query(["squeue", "-h", "-j", job_id, "-o", "%T|%r", *cluster])
        if queued.returncode == 0:
            found = sio.parse_squeue(queued.stdout)
            if found is not None:
                return found
        # Left the queue (or squeue refused): accounting knows how it ended, when it is on.
        # (sacct asks slurmdbd, not slurmctld: it may answer while the controller is down.)
        done = _query(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode", *cluster])
        found = sio.parse_sacct(done.stdout) if done.returncode == 0 else None
        if found is not None:
            return found
        left_queue = queued.returncode == 0 or sio.parse_squeue_unknown(queued.stderr)
        if left_queue:  # squeue answered, without the job
            found = recorded_exit(job)
            if found is not None:
                return found
            return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="",
                                 reason="not in squeue, and sacct has no record (is accounting off?)")
        down = retry.unreachable(queued.stdout + "\n" + queued.stderr)
        if down:
            return controller_down(job, "Slurm", f"squeue: {down}")
        first = (queued.stderr.strip().splitlines() or [""])[0]
        return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="",
                             reason=f"squeue failed: {first}" if first else "squeue failed without a word")


def controller_down(job, scheduler: str, why: str) -> sio.JobStatus:
    """The state while the controller cannot be reached: unknown, never "finished",
    unless the job's own exit_code file says how it ended."""
    what = "controller" if scheduler == "Slurm" else "server"
    message = f"the {scheduler} {what} cannot be reached ({why})"
    found = recorded_exit(job)
    if found is not None:
        return sio.JobStatus(state=found.state, exit_code=found.exit_code, raw=found.raw,
                             reason=f"{found.reason}; {message}")
    return sio.JobStatus(state="UNKNOWN", exit_code=None, raw=UNREACHABLE,
                         reason=f"{message}; the job may still be queued or running")


class PbsBackend(BatchBackend):
    name = "pbs"
    cancel_command = "qdel"
    queue_command = "qstat -u $USER"

    def __init__(self, dialect: str = "pro"):
        self.dialect = dialect

    def parse_submission(self, proc):
        return sio.parse_qsub(proc.stdout, proc.stderr, proc.returncode)

    def status(self, job) -> sio.JobStatus:
        try:
            return self._status(job)
        except sio.SchedulerOutputError as e:
            return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"qstat: {e.problem}")
        except CommandTimeout as e:
            return controller_down(job, "PBS", str(e))

    def _status(self, job) -> sio.JobStatus:
        job_id = sio.JobId(id=job.current_id, scheduler="pbs")
        found, proc = None, None
        if self.dialect == "pro":
            proc = _query(["qstat", "-f", "-F", "json", "-x", job_id.id])
            if proc.returncode == 0:
                found = sio.parse_qstat_pro_json(proc.stdout, job_id)
        if found is None and (proc is None or (proc.returncode != 0 and not sio.parse_qstat_unknown(proc.stderr)
                                               and not retry.unreachable(proc.stdout + "\n" + proc.stderr))):
            # Torque, and qstat front ends without -F json or -x: the text form.
            proc = _query(["qstat", "-f", job_id.id])
            if proc.returncode == 0:
                found = sio.parse_qstat_full_text(proc.stdout, job_id)
        if found is not None:
            # Some qstat (Torque, Slurm's wrapper) say "C" with no exit status: the job said it.
            if found.state in sio.FINISHED_STATES and found.exit_code is None:
                return recorded_exit(job) or found
            return found
        if sio.parse_qstat_unknown(proc.stderr):
            return recorded_exit(job) or sio.JobStatus(
                state="UNKNOWN", exit_code=None, raw="", reason="qstat no longer knows the job")
        down = retry.unreachable(proc.stdout + "\n" + proc.stderr)
        if down:
            return controller_down(job, "PBS", f"qstat: {down}")
        first = (proc.stderr.strip().splitlines() or [""])[0]
        return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"qstat: {first}" if first else None)


def backend_for(scheduler: str, dialect: str | None = None):
    if scheduler == "slurm":
        return SlurmBackend()
    if scheduler == "pbs":
        return PbsBackend(dialect or "pro")
    return LocalBackend()
