"""What the --stage-env cluster tests share: the job they run, how they submit it to the Slurm test
cluster and to the real OpenPBS, and what they read back (the start-up breakdown, each rank's
interpreter prefix).

The submit folder is the same on every run (``/tmp/hpcdist-stage-tests/<cluster>``): its
``.hpcdist/stage`` keeps the packed environment, so only the first run on a machine packs.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import time

import testcluster

ROOT = testcluster.ROOT
SLOWSHARE_SH = ROOT / "tests" / "cluster" / "slowshare.sh"
WORK = pathlib.Path("/tmp/hpcdist-stage-tests")

#: The job: every rank says which interpreter it runs from and where torch came from, then makes a
#: few optimizer steps (the first step ends the start-up).
PROBE = """\
import os, sys, time
import torch
import hpcdist.env

env = hpcdist.env.init_distributed(timeout=300)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    model(torch.ones(4, 8)).sum().backward()
    opt.step()
torch.distributed.barrier()
sys.stdout.write(f"[{os.uname().nodename}] rank {env.rank} prefix {sys.prefix} torch {torch.__file__}\\n")
sys.stdout.flush()
time.sleep(3)  # the monitor's next look sees every first step
torch.distributed.destroy_process_group()
"""

LAUNCHERS = {"torchrun": [], "mpirun": ["--launcher", "mpirun"]}


def workdir(name: str) -> pathlib.Path:
    folder = WORK / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probe.py").write_text(PROBE)
    return folder


def ran_from(log: str) -> dict[int, tuple[str, str]]:
    """rank -> (its node, its sys.prefix), from the probe's lines."""
    return {int(m[2]): (m[1], m[3]) for m in re.finditer(r"(?m)^\[([\w.-]+)\] rank (\d+) prefix (\S+) torch", log)}


def startup_lines(log: str) -> list[str]:
    """The breakdown at the end of the log: the "start-up:" line and the table under it."""
    lines = log.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("hpcdist: start-up:")]
    if not heads:
        return []
    return [line for line in lines[heads[-1]:] if line.startswith("hpcdist: ")][:12]


def slurm_submit(state, venv: str, launcher: str, staged: bool, cwd: pathlib.Path, *extra: str):
    env = testcluster.client_env(state)
    argv = [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "slurm", "--nodes", "2", "--procs-per-node", "2",
            "--venv", venv, *LAUNCHERS[launcher], *(["--stage-env"] if staged else []), *extra, "--json", "--wait",
            "probe.py"]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - started
    first = proc.stdout.splitlines()[0] if proc.stdout.startswith("{") else "{}"
    job_id = json.loads(first).get("job_id", "")
    status = subprocess.run([sys.executable, "-m", "hpcdist", "status", "--json", job_id], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=120)
    return proc, job_id, _row(status.stdout), took


def pbs_submit(pbs, venv: str, launcher: str, staged: bool, cwd: pathlib.Path, *extra: str):
    started = time.monotonic()
    proc = pbs.hpcdist("submit", "--scheduler", "pbs", "--nodes", "2", "--procs-per-node", "2", "--venv", venv,
                       *LAUNCHERS[launcher], *(["--stage-env"] if staged else []), *extra, "--json", "--wait",
                       "probe.py", cwd=cwd, timeout=900)
    took = time.monotonic() - started
    first = proc.stdout.splitlines()[0] if proc.stdout.startswith("{") else "{}"
    job_id = json.loads(first).get("job_id", "")
    status = pbs.hpcdist("status", "--json", job_id, cwd=cwd, timeout=120)
    return proc, job_id, _row(status.stdout), took


def _row(text: str) -> dict:
    try:
        rows = json.loads(text)
    except ValueError:
        return {}
    return rows[0] if rows else {}


def slowshare(*args: str) -> str:
    proc = subprocess.run(["bash", str(SLOWSHARE_SH), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"slowshare.sh {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


def pbs_holders(pbs) -> list[int]:
    """The OpenPBS hosts' holder processes (each host's private mount namespace): tests/cluster/openpbs.sh."""
    run = pbs.STATE / "run"
    return [int((run / f"{host}.holder").read_text().strip()) for host in (pbs.HEAD, *pbs.NODES)]


def leftovers(job_id: str) -> list[str]:
    """Staged copies of this job still on the nodes' /tmp (the test clusters' nodes share it)."""
    return sorted(str(p) for p in pathlib.Path("/tmp").glob("hpcdist-env-*")
                  if p.name.startswith(f"hpcdist-env-{job_id}"))
