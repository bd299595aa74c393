"""The frameworks users train with see the ranks hpcdist gives, under every launcher (issue 17).

Each cell submits ``tests/job_scripts/framework_view.py`` with ``hpcdist submit
... --wait`` on the real 2-host test cluster, 2 nodes x 2 processes, as a
Lightning Fabric or accelerate user would write the script (no cluster
plugin, no variables of their own). Every rank's framework view (rank, local
rank, node rank, world size) must equal hpcdist's, the hosts must be the two
nodes with local ranks 0 and 1 each, and the parameters must be equal on all
4 ranks after training on data that differs per rank.

The frameworks table of docs/testing.md says the same, cell by cell; the cells not
run here are there with their reason. PBS's cells run on a real OpenPBS, where no Slurm variable
is about (tests/schedulers/test_openpbs.py).
"""

from __future__ import annotations

import shutil

import pytest

import testcluster
from launch import check_framework_views
from test_matrix import environment, submit

#: Every cell is on the Slurm cluster, which environment() asks for: the cluster's test process.
pytestmark = pytest.mark.slurm_cluster

VIEW = testcluster.ROOT / "tests" / "job_scripts" / "framework_view.py"

#: (framework, scheduler, launcher) as test_matrix names schedulers and launchers.
CELLS = [
    ("fabric", "slurm", "srun"),
    ("fabric", "slurm", "torchrun"),
    ("fabric", "slurm", "mpirun"),  # the failing case: the batch step's SLURM_* under mpirun
    ("fabric", "slurm", "deepspeed-pdsh"),
    ("trainer", "slurm", "mpirun"),  # the Trainer chooses as Fabric does: one cell shows it
    ("accelerate", "slurm", "srun"),
    ("accelerate", "slurm", "torchrun"),
    ("accelerate", "slurm", "mpirun"),
    ("accelerate", "slurm", "deepspeed-pdsh"),
]


@pytest.mark.parametrize("framework,scheduler,launcher", CELLS, ids=["-".join(c) for c in CELLS])
def test_the_framework_sees_hpcdist_ranks_and_trains_in_step(framework, scheduler, launcher, request, tmp_path):
    env = environment(scheduler, request)
    shutil.copy(VIEW, tmp_path)
    proc, _ = submit(scheduler, launcher, VIEW, ["--framework", framework], tmp_path, env)
    out = proc.stdout
    excerpt = testcluster.log_excerpt(out)
    assert proc.returncode == 0, f"{excerpt}\n{proc.stderr}"
    check_framework_views(out, ("node1", "node2"), excerpt)
