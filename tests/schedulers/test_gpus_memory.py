"""GPU models and memory in each scheduler's words (issue 15, item 4): --gpu-type, --mem 0 (a whole
node's memory), --mem-per-gpu."""

from __future__ import annotations

import pytest

from hpcdist.submission.render import render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError


def pbs(**values):
    return build_spec({"script": "t.py", "scheduler": "pbs", **values}, check_files=False)


@pytest.mark.parametrize("scheduler,dialect,want", [
    ("slurm", None, ["#SBATCH --gpus-per-node=a100:4"]),
    ("pbs", "pro", ["#PBS -l select=2:ncpus=4:mpiprocs=4:ngpus=4:gpu_type=a100", "#PBS -l place=scatter"]),
    ("pbs", "torque", ["#PBS -l nodes=2:ppn=4:gpus=4:a100"]),
])
def test_a_gpu_model_in_each_schedulers_words(scheduler, dialect, want):
    """Slurm's --gpus-per-node=TYPE:N (sbatch(1)), PBS Pro's gpu_type chunk resource (NCAR Derecho's
    `-l gpu_type=a100`), a Torque node property after gpus= (TORQUE's nodes grammar)."""
    spec = build_spec({"script": "t.py", "scheduler": scheduler, "dialect": dialect, "nodes": 2,
                       "gpus_per_node": 4, "gpu_type": "a100"}, check_files=False)
    text = render(spec, workdir="/w")
    lines = [x for x in text.splitlines() if x.startswith(("#SBATCH --gpus", "#PBS -l select", "#PBS -l place",
                                                           "#PBS -l nodes"))]
    assert lines == want
    with pytest.raises(ValidationError, match="--gpu-type 'a100': names a GPU model, but no GPUs"):
        build_spec({"script": "t.py", "scheduler": scheduler, "dialect": dialect, "gpu_type": "a100"},
                   check_files=False)


def test_memory_for_the_whole_node_or_per_gpu_on_slurm_and_refused_on_pbs():
    def lines(**values):
        spec = build_spec({"script": "t.py", "scheduler": "slurm", **values}, check_files=False)
        return [x for x in render(spec, workdir="/w").splitlines() if x.startswith("#SBATCH --mem")]

    assert lines(mem="0") == lines(mem="all") == ["#SBATCH --mem=0"]  # sbatch(1): all of each node's memory
    assert lines(mem_per_gpu="40G", gpus_per_node=4) == ["#SBATCH --mem-per-gpu=40G"]
    with pytest.raises(ValidationError, match="--mem-per-gpu '40G': is given with --mem 8G"):
        lines(mem_per_gpu="40G", mem="8G", gpus_per_node=4)
    with pytest.raises(ValidationError, match="--mem '0': is all of a node's memory to Slurm"):
        pbs(mem="0")
    with pytest.raises(ValidationError, match="--mem-per-gpu '4G': is a Slurm setting, and --scheduler is pbs"):
        pbs(mem_per_gpu="4G", gpus_per_node=1)
