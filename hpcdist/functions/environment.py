"""``submitit.JobEnvironment()`` inside a PBS job: the job id submitit knows, and every task's ranks.

Where it runs: in each task of a job the PBS executor submitted, on every node (and on the login
node, where submitit's plugin discovery makes one without reading it).

The ranks are :mod:`hpcdist.env`'s (whichever launcher started the task: the batch shell for one
task, torchrun or mpirun for several), so ``JobEnvironment()`` and ``hpcdist.env`` give every task
the same answer. The walltime warning: PBS sends none, the job script sends itself one and creates
``$HPCDIST_STOP_FILE`` (:mod:`hpcdist.signals`); a thread of each task watches for that file and
turns it into submitit's own handling, as Slurm's USR2 would: the first task calls the function's
``checkpoint()``, writes the checkpointed call over the job's pickle and stops, and the job script
resubmits the job (``hpcdist requeue``), whose tasks go on from that pickle.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from submitit.core import job_environment, utils
from submitit.core.logger import get_logger

from hpcdist.functions.parameters import id_in_job

#: How often each task looks for the stop file, in seconds.
STOP_POLL_S = 1.0
#: The signal the watcher sends its own task, so that the checkpoint runs in its main thread.
STOP_SIGNAL = signal.SIGUSR2


class PbsJobEnvironment(job_environment.JobEnvironment):
    """A task of a PBS job (``SUBMITIT_EXECUTOR=pbs``, set by the job script)."""

    _env = {"job_id": "PBS_JOBID"}

    @property
    def job_id(self) -> str:
        return id_in_job(os.environ)[0]

    @property
    def array_job_id(self):
        return id_in_job(os.environ)[1]

    @property
    def array_task_id(self):
        return id_in_job(os.environ)[2]

    @staticmethod
    def _dist():
        import hpcdist.env

        return hpcdist.env.current()

    @property
    def num_tasks(self) -> int:
        return self._dist().value("world_size")

    @property
    def num_nodes(self) -> int:
        dist = self._dist()
        return max(1, dist.value("world_size") // dist.value("local_world_size"))

    @property
    def node(self) -> int:
        return self._dist().value("node_rank")

    @property
    def global_rank(self) -> int:
        return self._dist().value("rank")

    @property
    def local_rank(self) -> int:
        return self._dist().value("local_rank")

    @property
    def hostnames(self):
        """The job's hosts, in order: the node file hpcdist's set-up wrote in the submit folder
        (every node sees it), else PBS's (on the first node only), else this host."""
        for variable in ("HPCDIST_NODEFILE", "PBS_NODEFILE"):
            path = os.environ.get(variable)
            if path and os.path.isfile(path):
                with open(path) as f:
                    return list(dict.fromkeys(line.strip() for line in f if line.strip()))
        return [self.hostname]

    def _handle_signals(self, paths: utils.JobPaths, submission: utils.DelayedSubmission) -> None:
        handler = StopHandler(self, paths, submission)
        signal.signal(STOP_SIGNAL, handler.stop)
        signal.signal(signal.SIGTERM, handler.preempted)
        stop_file = os.environ.get("HPCDIST_STOP_FILE")
        if stop_file:
            threading.Thread(target=_watch, args=(stop_file, handler), daemon=True,
                             name="hpcdist-stop-file").start()

    def _requeue(self, countdown: int) -> None:
        """The job script resubmits the job (``hpcdist requeue``) once this task has left the
        stop file's ``.stopped`` mark and ended: nothing to do here."""


def _watch(stop_file: str, handler: "StopHandler") -> None:
    while not os.path.exists(stop_file):
        time.sleep(STOP_POLL_S)
    handler.reason = _read(stop_file) or "the job script asked"
    os.kill(os.getpid(), STOP_SIGNAL)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


class StopHandler:
    """What a task does when the job script asks it to stop: on the walltime warning, submitit's
    ``checkpoint_and_try_requeue``, with PBS's requeue done by the job script; on a SIGTERM (a
    preemption, or a cancel: PBS sends both alike), submitit's handling of a preemption."""

    def __init__(self, env: PbsJobEnvironment, paths: utils.JobPaths, delayed: utils.DelayedSubmission):
        self.env, self.paths, self.delayed = env, paths, delayed
        self.reason = None  # the stop file's words, once the job script wrote it
        self.logger = get_logger()

    def stop(self, signum, frame) -> None:
        from hpcdist.signals import STOPPED_SUFFIX

        if self.reason is None:  # qsig's USR2 reaches every process: the script's stop file decides
            self.logger.info("hpcdist: SIGUSR2 reached this task; the job script's stop file says "
                             "what it asks.")
            return
        if not self.reason.startswith("walltime warning"):
            # The stop file of a SIGTERM: the task's own SIGTERM handler (preempted) has it.
            self.logger.warning(f"hpcdist: {self.reason}: bypassed (only the walltime warning checkpoints).")
            return
        self.logger.warning(f"hpcdist: {self.reason}: this job is timed-out.")
        if self.env.global_rank != 0:
            self.logger.info("Not checkpointing: the first task does (global rank 0); this one stops.")
            sys.exit(0)
        countdown = self.delayed._timeout_countdown - 1
        why = "timed-out and not checkpointable"
        if hasattr(self.delayed.function, "checkpoint") or hasattr(self.delayed.function, "__submitit_checkpoint__"):
            why = job_environment._checkpoint(self.delayed, self.paths.submitted_pickle, countdown)
        if countdown < 0:
            why = "timed-out too many times"
        if why:
            message = f"Job not requeued because: {why}."
            self.logger.info(message)
            raise utils.UncompletedJobError(message)
        # The job script reads this mark: the function checkpointed, the job goes on as a new one.
        stop_file = os.environ["HPCDIST_STOP_FILE"]
        with open(stop_file + STOPPED_SUFFIX, "w"):
            pass
        self.logger.info(f"Checkpointed; the job script resubmits the job ({countdown} timeouts left).")
        sys.exit(0)

    def preempted(self, signum, frame) -> None:
        """SIGTERM: PBS preempts a job by requeue (``qrerun``) with SIGTERM, and requeues it under
        its id; a cancel (``qdel``) sends the same. As submitit does on a preemption, the first
        task checkpoints a ``Checkpointable`` without using up a timeout (the job that runs again
        goes on from there; a cancelled one ends), and the task ends."""
        host = self.env.hostname
        self.logger.warning(f"hpcdist: SIGTERM on {host}: this job is preempted or cancelled.")
        if self.env.global_rank != 0:  # as submitit: the first task checkpoints, the rest end
            return
        delayed, countdown = self.delayed, self.delayed._timeout_countdown
        function = delayed.function
        if hasattr(function, "checkpoint") or hasattr(function, "__submitit_checkpoint__"):
            why = job_environment._checkpoint(delayed, self.paths.submitted_pickle, countdown)
            self.logger.info(f"Not checkpointed: {why}." if why else
                             f"Checkpointed ({countdown} timeouts left): a requeued job "
                             f"goes on from here.")
        sys.exit(-1)
