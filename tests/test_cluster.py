"""Every launcher, end to end, on a real multi-host Slurm cluster with a PBS personality.

Two hosts (network namespaces with their own names and addresses, one
slurmd and one sshd each, a real slurmctld), 2 processes per host, gloo on
CPU. Each job is submitted with `hpcdist submit --scheduler slurm --wait`
and judged from its own output. Needs root and network namespaces: where
those are missing the tests are skipped, saying why.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from launch import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tests", "cluster", "cluster.sh")
QUICKSTART = os.path.join(ROOT, "examples", "quickstart.py")


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root (network namespaces, slurmd, sshd)")
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("the test cluster needs iproute2 and util-linux (ip, nsenter)")
    # The script's own state folder (munged, running as munge, must reach it).
    state = pathlib.Path(os.environ.get("HPCDIST_CLUSTER_DIR", "/tmp/hpcdist-cluster"))
    env = dict(os.environ, HPCDIST_CLUSTER_DIR=str(state))
    up = subprocess.run(["bash", CLUSTER, "up", "2"], env=env, capture_output=True, text=True, timeout=900)
    try:
        assert up.returncode == 0, f"cluster up failed:\n{up.stdout}\n{up.stderr}"
        yield state
    finally:
        down = subprocess.run(["bash", CLUSTER, "down"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr


def cluster_env(state) -> dict[str, str]:
    env = clean_env(SLURM_CONF=f"{state}/slurm.conf", PDSH_RCMD_TYPE="ssh",
                    OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["PATH"] = f"{state}/bin{os.pathsep}{env['PATH']}"  # the cluster's ssh (its key)
    return env


def daemon_logs(state) -> str:
    out = []
    for name in sorted(os.listdir(state / "log")) if (state / "log").is_dir() else []:
        with open(state / "log" / name, errors="replace") as f:
            out.append(f"--- {name}\n" + "".join(f.readlines()[-30:]))
    return "\n".join(out)


LAUNCHES = {
    "torchrun": [],
    "srun": ["--launcher", "srun"],
    "mpirun": ["--launcher", "mpirun"],
    "deepspeed-pdsh": ["--launcher", "deepspeed"],
    "deepspeed-no-ssh": ["--launcher", "deepspeed", "--no-ssh"],
}
# The PBS personality: Slurm's qsub/qstat (Torque-style) and a task prolog
# exporting PBS_NODEFILE, PBS_JOBID, PBS_O_WORKDIR... (tests/cluster/cluster.sh).
MATRIX = [("slurm", name) for name in LAUNCHES] + [
    ("pbs-torque", name) for name in ("torchrun", "mpirun", "deepspeed-pdsh")] + [
    ("pbs-pro", name) for name in ("torchrun", "mpirun", "deepspeed-no-ssh")]


@pytest.mark.parametrize("scheduler,name", MATRIX, ids=[f"{s}-{n}" for s, n in MATRIX])
def test_two_hosts_two_processes_each(scheduler, name, cluster, tmp_path):
    shutil.copy(QUICKSTART, tmp_path / "quickstart.py")
    env = cluster_env(cluster)
    where = ["--scheduler", "slurm"] if scheduler == "slurm" else [
        "--scheduler", "pbs", "--dialect", scheduler.split("-")[1]]
    proc = subprocess.run(
        [sys.executable, "-m", "hpcdist", "submit", *where, "--nodes", "2",
         "--procs-per-node", "2", *LAUNCHES[name], "--json", "--wait", "quickstart.py", "--steps", "20"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr}\n{daemon_logs(cluster)}"
    seen = re.findall(r"\[(node\d)\] rank (\d)/(\d) local (\d)/(\d) node (\d)", out)
    assert sorted(int(r[1]) for r in seen) == [0, 1, 2, 3], out
    assert {r[2] for r in seen} == {"4"}
    assert sorted({r[0] for r in seen}) == ["node1", "node2"]
    for host in ("node1", "node2"):
        assert sorted(int(r[3]) for r in seen if r[0] == host) == [0, 1], out
    before, after = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+) on 4 ranks", out).groups())
    assert after < before and "identical on all ranks: True" in out
    job_id = json.loads(out.splitlines()[0])["job_id"]
    status = subprocess.run([sys.executable, "-m", "hpcdist", "status", "--json", job_id], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(status.stdout)[0]["state"] == "COMPLETED"
