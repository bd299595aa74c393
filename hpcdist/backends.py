"""Submission and job state, one small class per scheduler (submitit's executor shape).

``submit(script, workdir, log)`` returns the job id; ``status(job)`` reads
the state back from the scheduler; ``cancel(job)`` ends it. The scheduler's
text is parsed by :mod:`hpcdist.scheduler_io`; every command has a timeout,
and a failure carries the scheduler's own stdout and stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from hpcdist import scheduler_io as sio
from hpcdist.render import submit_argv

COMMAND_TIMEOUT = 60


class SubmitError(RuntimeError):
    pass


def _run(argv: list[str], cwd: str | None = None, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SubmitError(f"{argv[0]} is not installed or not on PATH (is this a login node of the cluster?)") from None
    except subprocess.TimeoutExpired:
        raise SubmitError(f"`{' '.join(argv)}` did not answer within {timeout:.0f} s; the scheduler may be down") from None


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
        exit_file = os.path.join(os.path.dirname(script), "exit_code")
        # The job id is the runner's pid: numeric, so ports derive from it as from a Slurm id.
        runner = (f'bash "$1" > "$2" 2>&1; status=$?; echo "$status" > "$3.tmp"; mv "$3.tmp" "$3"')
        env = dict(os.environ)
        # The job uses the Python environment hpcdist runs from, activated or not.
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        proc = subprocess.Popen(
            ["bash", "-c", 'export HPCDIST_JOB_ID=$$; ' + runner, "hpcdist-local", script, log, exit_file],
            cwd=workdir, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        with open(os.path.join(os.path.dirname(script), "runner"), "w") as f:
            f.write(f"{proc.pid} {_process_start(proc.pid)}\n")
        return sio.JobId(id=str(proc.pid), scheduler="slurm")  # a plain number, compared exactly

    def status(self, job) -> sio.JobStatus:
        exit_file = os.path.join(job.path, "exit_code")
        code = None
        if os.path.exists(exit_file):
            with open(exit_file) as f:
                code = int(f.read().strip() or 1)
        elif self._runner_alive(job):
            return sio.JobStatus(state="RUNNING", exit_code=None, raw="running", reason=None)
        if job.record.get("cancelled"):
            return sio.JobStatus(state="CANCELLED", exit_code=code, raw="cancelled", reason="hpcdist cancel")
        if code is None:
            return sio.JobStatus(state="FAILED", exit_code=None, raw="gone", reason="the runner ended without an exit code")
        return sio.JobStatus(state="COMPLETED" if code == 0 else "FAILED", exit_code=code, raw=f"exit {code}", reason=None)

    @staticmethod
    def _runner_alive(job) -> bool:
        """The runner's pid is alive and is still the runner (pids are reused)."""
        try:
            with open(os.path.join(job.path, "runner")) as f:
                pid, started = f.read().split()
        except (OSError, ValueError):
            pid, started = job.job_id, "None"
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
    try:
        with open(os.path.join(job.path, "exit_code")) as f:
            code = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return sio.JobStatus(state="COMPLETED" if code == 0 else "FAILED", exit_code=code,
                         raw=f"exit {code}", reason="from the job's exit_code file")


class BatchBackend:
    """What Slurm and PBS share: submit a script, read the id, cancel by id."""

    name: str
    cancel_command: str

    def parse_submission(self, proc: subprocess.CompletedProcess) -> sio.JobId:
        raise NotImplementedError

    def submit(self, script: str, workdir: str, log: str) -> sio.JobId:
        argv = submit_argv(self.name, script, log)
        proc = _run(argv, cwd=workdir)
        try:
            return self.parse_submission(proc)
        except sio.SchedulerOutputError as e:
            raise SubmitError(f"{argv[0]} did not submit the job: {e}") from None

    def cancel(self, job) -> None:
        proc = _run([self.cancel_command, job.job_id])
        if proc.returncode != 0:
            raise SubmitError(f"{self.cancel_command} {job.job_id} failed: "
                              f"{proc.stderr.strip() or proc.stdout.strip()}")


class SlurmBackend(BatchBackend):
    name = "slurm"
    cancel_command = "scancel"

    def parse_submission(self, proc):
        return sio.parse_sbatch(proc.stdout, proc.stderr, proc.returncode)

    def status(self, job) -> sio.JobStatus:
        try:
            return self._status(job)
        except sio.SchedulerOutputError as e:
            return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"squeue/sacct: {e.problem}")

    def _status(self, job) -> sio.JobStatus:
        cluster = [f"--clusters={job.record['cluster']}"] if job.record.get("cluster") else []
        queued = _run(["squeue", "-h", "-j", job.job_id, "-o", "%T|%r", *cluster])
        if queued.returncode == 0:
            found = sio.parse_squeue(queued.stdout)
            if found is not None:
                return found
        # Left the queue (or squeue refused): accounting knows how it ended, when it is on.
        done = _run(["sacct", "-X", "-n", "-P", "-j", job.job_id, "-o", "State,ExitCode", *cluster])
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


class PbsBackend(BatchBackend):
    name = "pbs"
    cancel_command = "qdel"

    def __init__(self, dialect: str = "pro"):
        self.dialect = dialect

    def parse_submission(self, proc):
        return sio.parse_qsub(proc.stdout, proc.stderr, proc.returncode)

    def status(self, job) -> sio.JobStatus:
        try:
            return self._status(job)
        except sio.SchedulerOutputError as e:
            return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"qstat: {e.problem}")

    def _status(self, job) -> sio.JobStatus:
        job_id = sio.JobId(id=job.job_id, scheduler="pbs")
        found, proc = None, None
        if self.dialect == "pro":
            proc = _run(["qstat", "-f", "-F", "json", "-x", job.job_id])
            if proc.returncode == 0:
                found = sio.parse_qstat_pro_json(proc.stdout, job_id)
        if found is None and (proc is None or (proc.returncode != 0 and not sio.parse_qstat_unknown(proc.stderr))):
            # Torque, and qstat front ends without -F json or -x: the text form.
            proc = _run(["qstat", "-f", job.job_id])
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
        first = (proc.stderr.strip().splitlines() or [""])[0]
        return sio.JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"qstat: {first}" if first else None)


def backend_for(scheduler: str, dialect: str | None = None):
    if scheduler == "slurm":
        return SlurmBackend()
    if scheduler == "pbs":
        return PbsBackend(dialect or "pro")
    return LocalBackend()
