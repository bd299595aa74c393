"""examples/quickstart.py, the README's main job, trains for real under torchrun and mpirun."""

from __future__ import annotations

import os
import re
import sys

import pytest

from launch import clean_env, openmpi_run, run, torchrun

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "quickstart.py")


@pytest.mark.parametrize("launch", ["torchrun", "openmpi"])
def test_quickstart_trains_and_stays_in_sync(launch):
    argv = torchrun(2, no_python=False) if launch == "torchrun" else openmpi_run(2) + [sys.executable]
    out = run(argv + [EXAMPLE, "--steps", "30"], clean_env()).stdout
    ranks = sorted(int(r) for r in re.findall(r"rank (\d)/2 local", out))
    assert ranks == [0, 1], out
    before, after = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+) on 2 ranks", out).groups())
    assert after < before / 10
    assert "identical on all ranks: True" in out


def test_the_readme_main_command():
    """`bash scripts/demo.sh`, as the README says: two local jobs train and complete."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = run(["bash", os.path.join(root, "scripts", "demo.sh")], clean_env(), timeout=600)
    assert proc.stdout.count("identical on all ranks: True") == 2
    assert proc.stderr.count("is completed") == 2
