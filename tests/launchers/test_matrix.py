"""Every scheduler x launcher path, end to end: a real training on 2 nodes x 2 processes.

Slurm and PBS rows run on the real 2-host test cluster (tests/testcluster.py:
root and network namespaces; skipped elsewhere, saying why). Local rows run
on this machine, where the 2 "nodes" share one host. Each job is submitted
with ``hpcdist submit ... --wait`` and judged from its own output.

The failure rows: rank 3 of 4 raises an exception or is killed half-way
while the other ranks are busy (sleeping, outside any collective), so only
the launchers can end them. Their ranks do not import torch
(tests/job_scripts/failing_rank.py): the question is the launcher's, and the
training rows above already run torch on every path. The whole job must end within 60 s of the
failure, leave no process and no allocation behind, show as failed, and
``hpcdist logs`` must name the rank, its host and why.

The PBS rows of :data:`PBS_SPREADS` start the node agents (and, for ``mpirun-pals``, the ranks)
with what a PBS site without Open MPI has. HPE Cray PALS cannot be installed here: its
``mpiexec`` is a stand-in, tests/cluster/pals-mpiexec, which takes PALS's flags, starts the ranks
with the cluster's Open MPI and gives each the variables PALS gives (PALS_RANKID, PALS_NODEID,
PMI_RANK ...) instead of Open MPI's. PBS Pro's other rows, real pbsdsh among them, run on a real
OpenPBS: tests/schedulers/test_openpbs.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid

import pytest

import testcluster
from launch import clean_env

ROOT = testcluster.ROOT
QUICKSTART = ROOT / "examples" / "quickstart.py"
FAILING = ROOT / "tests" / "job_scripts" / "failing_rank.py"  # no torch: the rows are about the launchers

SCHEDULERS = {
    "slurm": ["--scheduler", "slurm"],
    # The PBS personality: Slurm's qsub/qstat and a prolog exporting PBS_NODEFILE... Torque has no
    # server here; PBS Pro's rows run on a real OpenPBS (tests/schedulers/test_openpbs.py), but for the Cray
    # PALS rows below (a stand-in mpiexec that uses this cluster's Open MPI).
    "pbs-torque": ["--scheduler", "pbs", "--dialect", "torque"],
    "pbs-pro": ["--scheduler", "pbs", "--dialect", "pro"],
    "local": ["--scheduler", "local"],
}
LAUNCHERS = {
    "torchrun": [],
    "srun": ["--launcher", "srun"],
    "mpirun": ["--launcher", "mpirun"],
    "deepspeed-pdsh": ["--launcher", "deepspeed"],
    "deepspeed-no-ssh": ["--launcher", "deepspeed", "--no-ssh"],
    "accelerate": ["--launcher", "accelerate"],
}
#: The PALS mpiexec stand-in (tests/cluster/pals-mpiexec), where tests/cluster/cluster.sh installs it.
PALS_MPIEXEC = str(testcluster.state_dir() / "pals" / "mpiexec")
#: PBS only: the node agents (the ranks, for mpirun) started by Cray PALS (a stand-in).
PBS_SPREADS = {
    "torchrun-pals": ["--mpi", "pals", "--mpiexec", PALS_MPIEXEC],
    "mpirun-pals": ["--launcher", "mpirun", "--mpi", "pals", "--mpiexec", PALS_MPIEXEC],
    "deepspeed-no-ssh-pals": ["--launcher", "deepspeed", "--no-ssh", "--mpi", "pals", "--mpiexec", PALS_MPIEXEC],
}
LAUNCHERS.update(PBS_SPREADS)
#: What a row's log must show besides the training: the stand-in, not Open MPI, started the ranks.
SHOWS = {"mpirun-pals": r"via pals \(master [^)]*, rank from PALS_RANKID=\d\)"}
#: What a failure row's log must show: the stand-in's report of the failed agent (node2's: PALS
#: rank 1 with --ppn 1).
FAILURE_SHOWS = {"torchrun-pals": r"(?m)^node2: rank 1 exited with code 1$"}
#: The paths that do not exist, and why (the matrix in docs/testing.md says the same).
NOT_A_PATH = {
    ("pbs-torque", "srun"): "srun is Slurm's own launcher",
    ("pbs-pro", "srun"): "srun is Slurm's own launcher",
    ("local", "srun"): "srun is Slurm's own launcher",
    ("local", "deepspeed-no-ssh"): "one host: DeepSpeed starts every process without ssh anyway (the deepspeed row)",
}
#: Paths run elsewhere, and where (docs/testing.md says the same). A Torque script differs from
#: PBS Pro's in its request lines only (tests/golden/pbs-torque-*.sh): its DeepSpeed and
#: accelerate bodies run on the real OpenPBS, and the personality keeps torchrun and mpirun.
ELSEWHERE = {("pbs-torque", launcher): "the same script body runs on a real OpenPBS (tests/schedulers/test_openpbs.py)"
             for launcher in ("deepspeed-pdsh", "deepspeed-no-ssh", "accelerate")}
ROWS = [(s, launcher) for s in SCHEDULERS for launcher in LAUNCHERS
        if (s, launcher) not in {**NOT_A_PATH, **ELSEWHERE} and launcher not in PBS_SPREADS and s != "pbs-pro"] + [
    ("pbs-pro", launcher) for launcher in PBS_SPREADS]
IDS = [f"{s}-{launcher}" for s, launcher in ROWS]


def environment(scheduler: str, request) -> dict[str, str]:
    if scheduler == "local":
        return clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return testcluster.client_env(request.getfixturevalue("cluster"))


def hpcdist(*args, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def submit(scheduler, launcher, script, args, cwd, env) -> tuple[subprocess.CompletedProcess, str]:
    proc = hpcdist("submit", *SCHEDULERS[scheduler], "--nodes", "2", "--procs-per-node", "2",
                   *LAUNCHERS[launcher], "--json", "--wait", script.name, *args, cwd=cwd, env=env, timeout=300)
    first = proc.stdout.splitlines()[0] if proc.stdout else "{}"
    return proc, json.loads(first).get("job_id", "")


def state_of(job_id, cwd, env) -> str:
    (row,) = json.loads(hpcdist("status", "--json", job_id, cwd=cwd, env=env).stdout)
    return row["state"]


def rows(params: list, ids: list) -> list:
    """Each row a pytest.param; those that ask for the Slurm cluster (all but local's) marked
    ``slurm_cluster``, for the test process that holds it (tests/conftest.py, CLUSTER_GROUPS)."""
    return [pytest.param(*p, id=i, marks=() if p[0] == "local" else pytest.mark.slurm_cluster)
            for p, i in zip(params, ids)]


@pytest.mark.parametrize("scheduler,launcher", rows(ROWS, IDS))
def test_trains_on_two_nodes_of_two_processes(scheduler, launcher, request, tmp_path):
    env = environment(scheduler, request)
    shutil.copy(QUICKSTART, tmp_path)
    proc, job_id = submit(scheduler, launcher, QUICKSTART, ["--steps", "20"], tmp_path, env)
    trained_on_two_nodes(proc, job_id, scheduler, tmp_path, env)
    if launcher in SHOWS:
        assert len(re.findall(SHOWS[launcher], proc.stdout)) == 4, testcluster.log_excerpt(proc.stdout)


def trained_on_two_nodes(proc, job_id, scheduler, tmp_path, env) -> None:
    """The matrix's assertions on a training job: ranks 0..3 of 4, each host's local ranks 0 and 1,
    the loss went down and is identical on all ranks, the job COMPLETED."""
    out = proc.stdout
    assert proc.returncode == 0, f"{testcluster.log_excerpt(out)}\n{proc.stderr}"
    seen = re.findall(r"\[([\w.-]+)\] rank (\d)/(\d) local (\d)/(\d) node (\d)", out)
    assert sorted(int(r[1]) for r in seen) == [0, 1, 2, 3], testcluster.log_excerpt(out)
    assert {r[2] for r in seen} == {"4"}, testcluster.log_excerpt(out)
    hosts = sorted({r[0] for r in seen})
    if scheduler == "local":
        assert hosts == [socket.gethostname()], testcluster.log_excerpt(out)
        # One host: each "node" (torchrun, accelerate) or the one launcher holds local ranks 0.. in turn.
        for node in {r[5] for r in seen}:
            local = sorted(int(r[3]) for r in seen if r[5] == node)
            assert local == list(range(len(local))), testcluster.log_excerpt(out)
    else:
        assert hosts == ["node1", "node2"], testcluster.log_excerpt(out)
        for host in hosts:
            assert sorted(int(r[3]) for r in seen if r[0] == host) == [0, 1], testcluster.log_excerpt(out)
    before, after = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+) on 4 ranks", out).groups())
    assert after < before and "identical on all ranks: True" in out
    assert state_of(job_id, tmp_path, env) == "COMPLETED"


@pytest.fixture(scope="session")
def podman_image(cluster):
    """The test image (tests/cluster/container-image.sh: Debian bookworm, torch, hpcdist's wheel),
    built once per machine and wheel; its name, and podman's settings for this sandbox."""
    out = testcluster.state_dir().parent / "hpcdist-container"  # beside the cluster's state, outside the repository
    started = time.time()
    proc = subprocess.run(["bash", str(ROOT / "tests" / "cluster" / "container-image.sh"), str(out)],
                          capture_output=True, text=True, timeout=600, env=dict(clean_env(), PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr[-3000:]
    testcluster.ARTIFACTS.mkdir(exist_ok=True)
    with open(testcluster.ARTIFACTS / "container-image.txt", "a") as f:  # for the record, not asserted
        f.write(f"{proc.stdout.strip()}\t{time.time() - started:.0f} s\t{proc.stderr.strip()[-200:]}\n")
    image, conf = proc.stdout.strip(), str(out / "containers.conf")
    # podman --network host on node2 joins node2's namespace: the interfaces it sees are node2's,
    # not the head's (once here, for both rows).
    env = testcluster.client_env(cluster, CONTAINERS_CONF=conf, HPCDIST_CLUSTER_DIR=str(cluster))

    def interfaces_on_node2(*command) -> tuple[list, str]:
        done = subprocess.run(["bash", str(testcluster.CLUSTER_SH), "on", "node2", *command], env=env,
                              capture_output=True, text=True, timeout=60)
        return sorted(line.split(":")[0].strip() for line in done.stdout.splitlines() if ":" in line), \
            done.stdout + done.stderr

    outside, said = interfaces_on_node2("cat", "/proc/net/dev")
    assert outside and "hpcbr0" not in outside, said
    inside, said = interfaces_on_node2("podman", "run", "--rm", "--network", "host", image, "cat", "/proc/net/dev")
    assert inside == outside, said
    return image, conf


@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
def test_trains_inside_podman_on_two_nodes(launcher, podman_image, cluster, tmp_path):
    """Slurm x torchrun, each node's torchrun agent inside podman (``--container-runtime podman``);
    Slurm x srun, srun on the hosts and each rank's ``python -m hpcdist.rank`` inside podman.

    Real: Slurm on the 2-host cluster, podman 4 (Debian's) run by srun inside each node's network
    and UTS namespaces, an image of Debian's own python with torch and hpcdist (no host
    venv inside it), the c10d rendezvous and gloo across the two hosts. A torchrun and a python
    on the host's PATH that refuse to run prove the agents (the ranks) ran in the image, and with
    no hpcdist on the host's PATH the script's own steps (host file, port) ran there too. Not real: no GPU (--device
    flags untested), podman is rootful (a site's is rootless or podman-hpc), and podman runs with
    runc and cgroupfs (CONTAINERS_CONF) because this sandbox's cgroup layout makes crun refuse.
    ``--network host`` is checked (once, in the image's fixture) to join the node's own namespace.
    """
    image, conf = podman_image
    shim = tmp_path / "host-bin"
    shim.mkdir()
    for program in ("torchrun", "python"):
        (shim / program).write_text(f"#!/bin/sh\necho '{program} ran on the host, not in the image' >&2\nexit 97\n")
        (shim / program).chmod(0o755)
    env = testcluster.client_env(cluster, CONTAINERS_CONF=conf)
    # Nor is hpcdist on the host's PATH: the script's own hpcdist steps run in the image too.
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([str(shim)] + [p for p in env["PATH"].split(os.pathsep) if p != venv_bin])
    assert shutil.which("hpcdist", path=env["PATH"]) is None
    shutil.copy(QUICKSTART, tmp_path)
    proc = hpcdist("submit", *SCHEDULERS["slurm"], "--nodes", "2", "--procs-per-node", "2", "--launcher", launcher,
                   "--container-image", image, "--container-runtime", "podman", "--json", "--wait",
                   QUICKSTART.name, "--steps", "20", cwd=tmp_path, env=env, timeout=300)
    job_id = json.loads((proc.stdout.splitlines() or ["{}"])[0]).get("job_id", "")
    assert "ran on the host" not in proc.stdout + proc.stderr, testcluster.log_excerpt(proc.stdout)
    trained_on_two_nodes(proc, job_id, "slurm", tmp_path, env)


#: Of the PBS_SPREADS, the failure row that adds something: an agent that fails under PALS.
FAILING_SPREADS = ("torchrun-pals",)
FAILURES = [(s, launcher, "raise") for s, launcher in ROWS
            if launcher not in PBS_SPREADS or launcher in FAILING_SPREADS] + [
    (s, launcher, "kill") for s, launcher in ROWS if s in ("slurm", "local")]


@pytest.mark.parametrize("scheduler,launcher,how", rows(FAILURES, [f"{s}-{la}-{h}" for s, la, h in FAILURES]))
def test_a_failed_rank_ends_the_job_and_is_named(scheduler, launcher, how, request, tmp_path):
    env = environment(scheduler, request)
    shutil.copy(FAILING, tmp_path)
    run_id = uuid.uuid4().hex
    proc, job_id = submit(scheduler, launcher, FAILING,
                          ["--fail-rank", "3", "--how", how, "--run-id", run_id], tmp_path, env)
    ended = time.time()
    out = proc.stdout
    assert proc.returncode != 0, testcluster.log_excerpt(out)
    failed_at = float(re.search(r"failing now: ([\d.]+)", out).group(1))
    assert ended - failed_at < 60, \
        f"the job went on {ended - failed_at:.0f} s after rank 3 failed:\n{testcluster.log_excerpt(out)}"
    testcluster.ARTIFACTS.mkdir(exist_ok=True)
    with open(testcluster.ARTIFACTS / "failure-end-times.tsv", "a") as f:  # for the record, not asserted
        f.write(f"{scheduler}\t{launcher}\t{how}\t{ended - failed_at:.1f}\n")
    assert state_of(job_id, tmp_path, env) == "FAILED"
    if launcher in FAILURE_SHOWS:
        assert re.search(FAILURE_SHOWS[launcher], out), testcluster.log_excerpt(out)
    leftover = testcluster.leftover_processes(f"--run-id {run_id}")
    assert not leftover, f"still running after the job ended:\n{leftover}"
    if scheduler != "local":
        assert testcluster.queue(request.getfixturevalue("cluster")) == "", "the allocation is still held"

    logs = hpcdist("logs", job_id, cwd=tmp_path, env=env)
    assert "failing now" in logs.stdout
    summary = re.search(r"the first to fail: (.*)", logs.stderr)
    assert summary, f"no first failure named:\n{logs.stderr}"
    # Locally one launcher may hold all 4 slots of the one host (local rank 3).
    # srun and mpirun name a killed rank without its local rank.
    # Locally torchrun and DeepSpeed call the host "localhost".
    here = f"({re.escape(socket.gethostname())}|localhost)"
    who = rf"rank 3 (\(local rank [13]\) )?on {here}" if scheduler == "local" else (
        r"rank 3 (\(local rank 1\) )?on node2")
    assert re.match(who, summary.group(1)), summary.group(0)
    why = "ValueError: injected failure at step 5" if how == "raise" else r"(signal 9|Killed)"
    assert re.search(why, summary.group(1)), summary.group(0)
