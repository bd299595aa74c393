"""A count in a rendered script's comments reads as a person writes it: "the one rank", never
"the 1 ranks" (srun's and mpirun's launch comments), through the real `hpcdist render`."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _comment(tmp_path, *flags) -> str:
    """The script's comment block above the launch, its lines joined."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = subprocess.run([sys.executable, "-m", "hpcdist", "render", *flags, "train.py"], cwd=tmp_path,
                          env=clean_env(HOME=str(tmp_path), PYTHONPATH=str(ROOT) + os.pathsep
                                        + os.environ.get("PYTHONPATH", "")),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Start "))
    words = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        words.append(line[1:].strip())
    return " ".join(words)


@pytest.mark.parametrize("flags, said", [
    (["--scheduler", "slurm", "--launcher", "srun"],
     "Start the one rank with srun, through hpcdist.rank (which gives every framework its rank)."),
    (["--scheduler", "slurm", "--launcher", "srun", "--nodes", "2"],
     "Start the 2 ranks with srun, each through hpcdist.rank (which gives every framework its rank); "
     "one that fails ends the others."),
    (["--scheduler", "pbs", "--launcher", "mpirun"],
     "Start the one rank with Open MPI's launcher, through hpcdist.rank (which gives every framework its rank)."),
    (["--scheduler", "pbs", "--launcher", "mpirun", "--nodes", "2", "--procs-per-node", "2"],
     "Start the 4 ranks with Open MPI's launcher, each through hpcdist.rank (which gives every framework "
     "its rank)."),
])
def test_the_launch_comment_counts_the_ranks_in_words(tmp_path, flags, said):
    assert _comment(tmp_path, *flags) == said
