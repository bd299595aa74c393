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
import sys
import time

#: The exit status of a run that stopped on the warning and may not go back to the queue.
NOT_REQUEUED = 3


class RequeueError(RuntimeError):
    pass


def restarts_so_far(scheduler: str, environ=os.environ) -> int:
    from hpcdist import schedulers

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
    from hpcdist import schedulers
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
        raise RequeueError(str(e)) from None
    if new_id is not None and job_dir:
        record_run(job_dir, "resubmitted", new_id, log)
    return new_id, done + 1


def _next_log(job_dir: str | None, restart: int) -> str:
    """The log of the job that goes on after this one (a new job writes its own: its scheduler
    would replace this one's); "" when the job folder does not say this one's."""
    import json

    try:
        with open(os.path.join(job_dir or "", "record.json"), encoding="utf-8") as f:
            return restart_log(json.load(f)["log"], restart)
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def restart_log(log: str, restart: int) -> str:
    """``job.log`` -> ``job.restart2.log``: the log of a job's second resubmission."""
    stem, ext = os.path.splitext(log)
    return f"{stem}.restart{restart}{ext}"


def record_run(job_dir: str, event: str, job_id: str, log: str = "") -> None:
    # One short line appended with O_APPEND: whole even if two runs write at once. The log, a
    # path that may hold spaces, is the rest of the line (a newline in it would end the line).
    log = log.replace("\n", "?")
    with open(os.path.join(job_dir, "runs"), "a", encoding="utf-8") as f:
        f.write(f"{event} {int(time.time())} {job_id}{' ' + log if log else ''}\n")


def main(scheduler: str, max_restarts: int, script: str, job_dir: str | None) -> int:
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
