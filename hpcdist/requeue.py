"""After the walltime warning: put the job back in the queue, a bounded number of times.

The job script runs ``hpcdist requeue`` once the training has checkpointed
and stopped on the warning (see :mod:`hpcdist.signals`):

- Slurm: ``scontrol requeue <job>``; the same job id starts the script again
  (``SLURM_RESTART_COUNT`` counts the restarts, ``--open-mode=append`` keeps
  the log);
- PBS has no requeue a job may ask for itself: ``qsub`` the same script as a
  new job that starts after this one ends (``-W depend=afterany:<job>``),
  with ``HPCDIST_RESTART_COUNT`` counting the restarts and a log of its own
  (``job.restart<n>.log``: PBS would replace the earlier log with it).

Each resubmission is written to the job folder's ``runs`` file, beside the
``start`` line each run of the script writes, so that ``hpcdist status``
follows the job to its newest id and counts its restarts.
"""

from __future__ import annotations

import os
import shlex
import sys

#: The exit status of a run that stopped on the warning and may not go back to the queue.
NOT_REQUEUED = 3


class RequeueError(RuntimeError):
    pass


def restarts_so_far(scheduler: str, environ=os.environ) -> int:
    name = "SLURM_RESTART_COUNT" if scheduler == "slurm" else "HPCDIST_RESTART_COUNT"
    text = environ.get(name, "").strip() or "0"
    try:
        return int(text)
    except ValueError:
        raise RequeueError(f"{name}={text!r} is not a number") from None


def requeue(scheduler: str, max_restarts: int, script: str, job_dir: str | None = None,
            environ=os.environ) -> tuple[str, int]:
    """Requeue or resubmit this job: the id that goes on, and which restart this is.
    RequeueError when it may not or cannot."""
    from hpcdist import backends, jobs
    from hpcdist import scheduler_io as sio

    done = restarts_so_far(scheduler, environ)
    if done >= max_restarts:
        raise RequeueError(
            f"the training stopped on the walltime warning, and the job has been requeued {done} time(s) "
            f"already (--requeue {max_restarts}): it ends here, unfinished. Submit it again (with --resume, if "
            f"your script takes it) to go on from its last checkpoint, or ask for more with --requeue.")
    if scheduler == "slurm":
        job_id = environ.get("SLURM_JOB_ID", "")
        argv = ["scontrol", "requeue", job_id]
    else:
        job_id = environ.get("PBS_JOBID", "")
        argv, log = _resubmit_argv(script, job_dir, environ.get("PBS_O_WORKDIR", os.getcwd()), done + 1)
        # -V: the new job gets this job's environment, as a job submitted from here would.
        argv[1:1] = ["-V", "-v", f"HPCDIST_RESTART_COUNT={done + 1}", "-W", f"depend=afterany:{job_id}"]
    if not job_id:
        raise RequeueError(f"{'SLURM_JOB_ID' if scheduler == 'slurm' else 'PBS_JOBID'} is not set: "
                           f"`hpcdist requeue` runs inside a {scheduler} job")
    try:
        proc = backends._run(argv, cwd=environ.get("PBS_O_WORKDIR") if scheduler == "pbs" else None)
    except backends.SubmitError as e:
        raise RequeueError(str(e)) from None
    if proc.returncode != 0:
        raise RequeueError(f"`{shlex.join(argv)}` failed: {(proc.stderr.strip() or proc.stdout.strip())[:500]}")
    new_id = job_id
    if scheduler == "pbs":
        try:
            new_id = sio.parse_qsub(proc.stdout, proc.stderr, proc.returncode).id
        except sio.SchedulerOutputError as e:
            raise RequeueError(f"qsub printed no job id for the resubmitted job: {e}") from None
        if job_dir:
            jobs.record_resubmission(job_dir, new_id, log)
    return new_id, done + 1


def _resubmit_argv(script: str, job_dir: str | None, workdir: str, restart: int) -> tuple[list[str], str]:
    """qsub as ``hpcdist submit`` ran it, with a log of its own on the command line (which front
    ends such as Slurm's qsub wrapper read instead of the script's ``#PBS -o``); and that log."""
    from hpcdist import jobs
    from hpcdist.backends import _below
    from hpcdist.render import SUBMIT_ARGV, submit_argv

    # (Without --job-dir this reads ./record.json, as it always did.)
    recorded = jobs.recorded_log(job_dir or "")
    if recorded is None:
        return [*SUBMIT_ARGV["pbs"], script], ""
    log = jobs.restart_log(recorded, restart)
    # Relative to the submit folder, as hpcdist submit gives it: some front ends pass it through a shell.
    return submit_argv("pbs", script, _below(log, workdir)), log


def main(scheduler: str, max_restarts: int, script: str, job_dir: str | None) -> int:
    try:
        new_id, restart = requeue(scheduler, max_restarts, script, job_dir)
    except RequeueError as e:
        print(f"hpcdist requeue: {e}", file=sys.stderr, flush=True)
        return NOT_REQUEUED
    how = "requeued" if scheduler == "slurm" else f"resubmitted as job {new_id}, to start when this one ends,"
    print(f"hpcdist: the training stopped on the walltime warning; the job was {how} "
          f"(restart {restart} of at most {max_restarts}): it goes on from its last checkpoint.",
          file=sys.stderr, flush=True)
    return 0
