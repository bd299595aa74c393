"""``--launcher nvrx``: nvidia-resiliency-ext's ft_launcher, torchrun's words with its program, its
own restarts of the workers (issue 51). Real jobs on the local backend, CPU and gloo: ft_launcher
runs there (its GPU and InfiniBand probes find none and say so), with the package installed into a
virtual environment of this test's own, beside the suite's (its pynvml would put a FutureWarning
into every torch job's log of the suite)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig

import pytest

from launch import clean_env

#: A training whose rank 1 is killed at step 3 of the first launch; every rank says which launch it
#: is (hpcdist.env.restart_count: ft_launcher's restarts, TORCHELASTIC_RESTART_COUNT).
TRAINING = r"""
import os, time
import hpcdist.env
env = hpcdist.env.init_distributed()
import torch, torch.distributed as dist
restart = hpcdist.env.restart_count()
for step in range(6):
    dist.all_reduce(torch.ones(1))
    hpcdist.env.step()
    if step == 3 and restart == 0 and env.rank == 1:
        os.kill(os.getpid(), 9)
    time.sleep(0.1)
print(f"rank {env.rank} done, restart {restart}", flush=True)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def nvrx_venv(tmp_path_factory):
    """A venv that sees the suite's packages (hpcdist, torch) and adds nvidia-resiliency-ext."""
    venv = tmp_path_factory.mktemp("nvrx") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The suite's site-packages as a site dir of this one: its .pth files (hpcdist's editable
    # install) are read too.
    with open(os.path.join(site, "suite.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "nvidia-resiliency-ext==0.4.1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv


def submit(tmp_path, venv, *args) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(TRAINING)
    return subprocess.run(
        [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--nodes", "2",
         "--procs-per-node", "2", "--launcher", "nvrx", "--venv", str(venv), "--wait", *args,
         "train.py"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300,
    )


def test_ft_launcher_restarts_the_workers_itself_and_the_training_goes_on(tmp_path, nvrx_venv):
    proc = submit(tmp_path, nvrx_venv, "--max-restarts", "2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    done = dict(re.findall(r"rank (\d) done, restart (\d)", proc.stdout))
    # Each agent counts its own restarts: the killed rank's node's workers say 1; the other node's,
    # restarted for a node that came back to the rendezvous, may say 0.
    assert sorted(done) == ["0", "1", "2", "3"] and done["1"] == "1", out
    assert "ft_launcher" in out and "hpcdist: restart " not in out  # its restart, not the script's
    row = json.loads(subprocess.run([sys.executable, "-m", "hpcdist", "status", "--json"], cwd=tmp_path,
                                    env=clean_env(), capture_output=True, text=True).stdout)[-1]
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), row


def test_without_restarts_a_killed_rank_ends_the_job_naming_it(tmp_path, nvrx_venv):
    proc = submit(tmp_path, nvrx_venv)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "the first to fail: rank 1 (local rank 1) on vm: killed by signal 9 (SIGKILL)" in out, out
