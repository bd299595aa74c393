"""After the walltime warning: put the job back in the queue, a bounded number of times.

The job script runs ``hpcdist requeue`` once the training has checkpointed
and stopped on the warning (see :mod:`hpcdist.signals`). This module holds
the command, the limit and its messages; how a job goes back to the queue is
its scheduler's :meth:`~hpcdist.schedulers.base.Scheduler.requeue`:

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
import signal
import sys

#: The exit status of a run that stopped on the warning and may not go back to the queue.
NOT_REQUEUED = 3


class RequeueError(RuntimeError):
    pass


def restarts_so_far(scheduler: str, environ=os.environ) -> int:
    from hpcdist.schedulers import registry as schedulers

    name = schedulers.get(scheduler).restart_variable
    text = environ.get(name, "").strip() or "0"
    try:
        return int(text)
    except ValueError:
        raise RequeueError(f"{name}={text!r} is not a number") from None


def requeue(scheduler: str, max_restarts: int, script: str, job_dir: str | None = None,
            environ=os.environ) -> tuple[str | None, int]:
    """Requeue or resubmit this job: the new job's id (None when this one goes on), and which
    restart this is. RequeueError when it may not or cannot."""
    from hpcdist import jobs
    from hpcdist.schedulers import registry as schedulers
    from hpcdist.schedulers.batch import SubmitError

    done = restarts_so_far(scheduler, environ)
    if done >= max_restarts:
        raise RequeueError(
            f"the training stopped on the walltime warning, and the job has been requeued {done} time(s) "
            f"already (--requeue {max_restarts}): it ends here, unfinished. Submit it again (with --resume, if "
            f"your script takes it) to go on from its last checkpoint, or ask for more with --requeue.")
    queue = schedulers.get(scheduler)
    log = _next_log(job_dir, done + 1) if queue.resubmits else ""
    try:
        new_id = queue.requeue(script, done + 1, log, environ)
    except SubmitError as e:
        from hpcdist.schedulers import retry  # only on this failure path

        advice = retry.hint(str(e))  # the advice a refused submission gets (each scheduler's HINTS)
        raise RequeueError(f"{e}\nFix: {advice}." if advice else str(e)) from None
    if new_id is not None and job_dir:
        jobs.record_resubmission(job_dir, new_id, log)
    return new_id, done + 1


def _next_log(job_dir: str | None, restart: int) -> str:
    """The log of the job that goes on after this one (a new job writes its own: its scheduler
    would replace this one's); "" when the job folder does not say this one's."""
    from hpcdist import jobs

    # (Without --job-dir this reads ./record.json, as it always did.)
    recorded = jobs.recorded_log(job_dir or "")
    return "" if recorded is None else jobs.restart_log(recorded, restart)


def main(scheduler: str, max_restarts: int, script: str, job_dir: str | None) -> int:
    from hpcdist.schedulers import registry as schedulers

    if not schedulers.get(scheduler).resubmits:
        # A requeue in place (Slurm's) ends this very job: its SIGTERM reaches this process too,
        # often before the line below is written (the log then read as if the job had never
        # asked). Slurm's SIGKILL still comes after KillWait. (A resubmission leaves this job be:
        # a SIGTERM then is a cancel, and ends this process as before.)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        new_id, restart = requeue(scheduler, max_restarts, script, job_dir)
    except RequeueError as e:
        print(f"hpcdist requeue: {e}", file=sys.stderr, flush=True)
        return NOT_REQUEUED
    how = "requeued" if new_id is None else f"resubmitted as job {new_id}, to start when this one ends,"
    print(f"hpcdist: the training stopped on the walltime warning; the job was {how} "
          f"(restart {restart} of at most {max_restarts}): it goes on from its last checkpoint.",
          file=sys.stderr, flush=True)
    return 0
