"""Stop requests for the training loop: the walltime warning and preemption.

A job submitted with ``--requeue N`` (or ``--signal-margin``) asks its
training to checkpoint and stop a margin before the walltime, and when it is
preempted; the job script then puts the job back in the queue. In the
training loop::

    from hpcdist.signals import StopRequest

    stop = StopRequest()                  # before training
    for step in range(start, steps):
        train_step()
        if stop.agreed():                 # every rank, every step: one tiny all_reduce
            save_checkpoint(step)         # atomically
            break

A request is any of: the file the job script names in ``HPCDIST_STOP_FILE``
(the script creates it when the scheduler's warning or a SIGTERM reaches the
batch shell: a file reaches the ranks under every launcher, where signals do
not: torchrun passes on only INT, TERM, HUP and QUIT, NCCL takes USR1), or
SIGUSR2 or SIGTERM sent to this process (a preempted Slurm job's steps get
SIGTERM). :meth:`StopRequest.agreed` makes it the same answer on every rank,
at the same step, so that all of them checkpoint and leave together.

When :meth:`~StopRequest.agreed` says stop, the ranks that can reach the stop
file's folder (those on the batch node) leave ``<stop file>.stopped`` beside
it: the job script requeues the job only when the training did stop on the
request. A training that ends on its own after the warning came (its last
step was already done) is finished, and must not run again.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

#: Signals that ask for a stop when they reach a rank.
STOP_SIGNALS = (signal.SIGUSR2, signal.SIGTERM)
#: Added to the stop file's name: the training stopped on the request (templates/common/job.sh.j2 reads it).
STOPPED_SUFFIX = ".stopped"


class StopRequest:
    """Whether this job was asked to checkpoint and stop.

    ``signals``: the signals to catch in this process (only in the main
    thread, where Python allows handlers); a signal caught is not fatal any
    more: the training ends at its next :meth:`agreed` (launchers send
    SIGKILL after their own grace time to a rank that does not).
    """

    def __init__(self, signals=STOP_SIGNALS, stop_file: str | None = None):
        self.stop_file = stop_file if stop_file is not None else os.environ.get("HPCDIST_STOP_FILE")
        self.reason: str | None = None
        self._agreed = False
        if threading.current_thread() is threading.main_thread():
            for sig in signals:
                signal.signal(sig, self._caught)

    def _caught(self, signum, frame) -> None:
        self.reason = self.reason or f"{signal.Signals(signum).name} received"

    def requested(self) -> bool:
        """This process's own view: a signal came, or the job script created the stop file."""
        if self.reason is None and self.stop_file and os.path.exists(self.stop_file):
            try:
                with open(self.stop_file, encoding="utf-8", errors="replace") as f:
                    why = f.read().strip()
            except OSError:
                why = ""
            self.reason = f"the job script asked: {why or 'stop'}"
        return self.reason is not None

    def agreed(self) -> bool:
        """True on every rank when any rank was asked to stop (call it on all ranks, at the
        same point of each step). Without an initialised process group, :meth:`requested`."""
        if self._agreed:
            return True
        wanted = self.requested()
        dist = sys.modules.get("torch.distributed")  # torch is imported only by a job that uses it
        if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            import torch

            device = torch.device("cpu")
            if dist.get_backend() == "nccl":
                device = torch.device("cuda", torch.cuda.current_device())
            flag = torch.tensor([1.0 if wanted else 0.0], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if flag.item() > 0 and not wanted:
                self.reason = "another rank was asked to stop"
            wanted = flag.item() > 0
        self._agreed = wanted
        if wanted:
            self._say_stopped()
        return wanted

    def _say_stopped(self) -> None:
        """Tell the job script that the training stops on the request (so the job goes back to
        the queue); only where the stop file's folder is (the batch node's ranks)."""
        if not self.stop_file or not os.path.isdir(os.path.dirname(self.stop_file) or "."):
            return
        try:
            os.close(os.open(self.stop_file + STOPPED_SUFFIX, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            pass  # the folder went away: the job is ending anyway


__all__ = ["StopRequest", "STOP_SIGNALS", "STOPPED_SUFFIX"]
