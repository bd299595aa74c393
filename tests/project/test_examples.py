"""examples/quickstart.py, the README's quickstart and the demo's job, trains for real under torchrun and mpirun."""

from __future__ import annotations

import os
import re
import sys

import pytest

from launch import clean_env, openmpi_run, run, torchrun

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "quickstart.py")


@pytest.mark.parametrize("launch", ["torchrun", "openmpi"])
def test_quickstart_trains_and_stays_in_sync(launch):
    argv = torchrun(2, no_python=False) if launch == "torchrun" else openmpi_run(2) + [sys.executable]
    out = run(argv + [EXAMPLE, "--steps", "30"], clean_env()).stdout
    ranks = sorted(int(r) for r in re.findall(r"rank (\d)/2 local", out))
    assert ranks == [0, 1], out
    before, after = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+) on 2 ranks", out).groups())
    assert after < before / 10
    assert "identical on all ranks: True" in out


def test_the_readme_main_command(tmp_path):
    """`bash scripts/demo.sh`, as the README says: two local jobs train and complete; it ends saying
    how to put hpcdist on PATH. Its jobs are submitted from a temporary folder (HPCDIST_DEMO_DIR), so
    that the clone's own `hpcdist status` lists only the jobs its user submitted."""
    proc = run(["bash", os.path.join(ROOT, "scripts", "demo.sh")], clean_env(HPCDIST_DEMO_DIR=str(tmp_path)),
               timeout=600)
    assert proc.stdout.count("identical on all ranks: True") == 2
    assert proc.stderr.count("is completed") == 2
    torchrun_job, mpirun_job = proc.stdout.split("== hpcdist submit")[1:3]
    # The job's set-up names the nodes and the master: under torchrun the agents' rendezvous (the
    # ranks' master is torchrun's own choice, which they print); under mpirun the ranks' own.
    assert re.search(r"hpcdist: nodes: \S+; master: 127\.0\.0\.1:\d+\n", torchrun_job), torchrun_job
    (master,) = re.findall(r"; master: (\S+)\n", mpirun_job)
    assert set(re.findall(r"via openmpi \(master (\S+),", mpirun_job)) == {master}, mpirun_job
    status = proc.stdout.split("== hpcdist status\n")[1].split("\n\n")[0].splitlines()
    assert len(status) == 3 and all(" completed  0" in line for line in status[1:]), status
    assert len(os.listdir(tmp_path / ".hpcdist" / "jobs")) == 2
    assert f"source {ROOT}/.venv/bin/activate" in proc.stdout
