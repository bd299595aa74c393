"""Slurm's srun as the launcher: every rank a task of one step; only inside a Slurm job.

Its log line ``srun: error: HOST: task N: WHY`` names a failed task: a rank,
or a node's agent where srun spread another launcher's agents.
"""

from __future__ import annotations

import re

from hpcdist import containers
from hpcdist.launchers import Launcher, failure, rank_program
from hpcdist.validate import NotHere

#: srun's line about a failed task (compiled by re's cache when a log is read).
TASK_FAILED = r"srun: error: (?P<host>\S+): tasks? (?P<rank>\d+)(?:-\d+)?: (?P<why>.+)$"


class Srun(Launcher):
    name = "srun"
    starts_ranks = ranks_through_hpcdist = True

    def check(self, values, scheduler):
        if not scheduler.runs_srun:
            raise NotHere(
                "--launcher", "srun", f"srun starts tasks only inside a Slurm job, not under {values['scheduler']}.",
                "Use --launcher torchrun or mpirun, or --scheduler slurm.")
        super().check(values, scheduler)

    def words(self, spec):
        words = ["srun", spec.count("--nodes="), f"--ntasks-per-node={spec.procs_per_node}", *spec.srun_restart_words,
                 "--kill-on-bad-exit=1"]
        if spec.cpus_per_proc:
            # Slurm 22.05 stopped passing --cpus-per-task from sbatch to srun.
            words.append(f"--cpus-per-task={spec.cpus_per_proc}")
        if spec.cpu_bind:
            words.append(f"--cpu-bind={spec.cpu_bind}")
        if spec.gpu_map == "per-task":
            # Slurm gives each task its own GPU (and sets its CUDA_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES).
            words.append("--gpus-per-task=1")
        if spec.gpu_bind:
            words.append(f"--gpu-bind={spec.gpu_bind}")
        # pyxis: srun's own flags put each rank in the image.
        return words + containers.srun_flags(spec) + rank_program(spec)

    def describe(self, spec, spread: str = ""):
        if spec.total_procs == 1:
            return "Start the one rank with srun, through hpcdist.rank (which gives every framework its rank)."
        return (f"Start the {spec.total_procs} ranks with srun, each through hpcdist.rank (which gives every "
                f"framework its rank); one that fails ends the others.")

    def failures(self, text, agents, nodes):
        # Under spread agents the task numbers are agents': only the host is kept.
        return [(m.start(), failure(m["why"].strip(), rank=None if agents else int(m["rank"]), host=m["host"],
                                    source="srun"))
                for m in re.finditer(TASK_FAILED, text, re.M)]


LAUNCHER = Srun()
