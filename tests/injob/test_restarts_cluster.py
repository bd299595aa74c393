"""A node lost for real, on both test clusters (issue 51): every process of the job on it killed
and its network taken down (its link on the bridge), at step 20 of the DDP example's 60, which
checkpoints every 5 steps. With ``--spare-nodes 1 --max-restarts 2`` the job completes on the other
two nodes from step 20's checkpoint; a fault in the training's code is not restarted; with no spare
the job ends naming the lost node. Each row then finds no process of the job on any node, the lost
one's included once its link is back.

Both clusters run 3 hosts here (the session's have 2): the module brings them to 3 and back. The
job script's own node (the first) is never the lost one: no scheduler lets a job outlive it
(docs/guide/restarts.md)."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

import testcluster

ROOT = testcluster.ROOT
DDP = str(ROOT / "examples" / "ddp" / "train.py")
TRAINING = [
    "--steps",
    "60",
    "--save-every",
    "5",
    "--log-every",
    "1",
    "--resume",
    "--step-delay",
    "0.3",
]
#: A training whose rank 1 raises at step 10: a fault in the code.
RAISES = r"""
import time
import hpcdist.env
env = hpcdist.env.init_distributed()
import torch, torch.distributed as dist
for step in range(60):
    dist.all_reduce(torch.ones(1))
    hpcdist.env.step()
    if step == 10 and env.rank == 1:
        raise ValueError("a bad batch at step 10")
    time.sleep(0.2)
"""
#: What keeps a test host up, which a lost node's job processes are not.
DAEMONS = ("sleep infinity", "slurmd", "sshd: /usr/sbin/sshd", "/opt/pbs/sbin/pbs_mom", "munged")
#: Where the rows' times are kept: figures, not assertions (the house's rule; a CI run under load
#: took 104 s from a fault to the next step where an idle machine takes about 40).
FIGURES = ROOT / "test-output" / "restart-times.txt"


def lose(namespace: str, link: str) -> float:
    """The node of ``namespace`` lost: every job process there killed, its link down. Its time."""
    pids = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True
    ).stdout.split()
    victims = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if not line.startswith(DAEMONS):
            victims.append(pid)
    subprocess.run(["kill", "-9", *victims], capture_output=True)
    subprocess.run(["ip", "link", "set", link, "down"], check=True)
    return time.time()


def back(link: str) -> None:
    subprocess.run(["ip", "link", "set", link, "up"], check=True)


def wait_for_step(log: str, step: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(log) and re.search(
            rf"^step {step} epoch", open(log, errors="replace").read(), re.M
        ):
            return
        time.sleep(0.3)
    pytest.fail(
        f"no step {step} in {timeout} s:\n{testcluster.log_excerpt(open(log, errors='replace').read())}"
    )


def first_step_after(log: str, fault: float) -> float | None:
    """Seconds from the fault to the first step of a rank started after it (its progress record)."""
    firsts = []
    for path in glob.glob(os.path.join(os.path.dirname(log), "progress", "rank-*.json")):
        with open(path) as f:
            rank = json.load(f)
        if (rank.get("started") or 0) > fault and rank.get("first_step"):
            firsts.append(rank["first_step"])
    return min(firsts) - fault if firsts else None


def figure(what: str, seconds: float | None) -> None:
    """A time from a fault, printed and kept in :data:`FIGURES` (issue 51's goal: about a minute
    here); the test asserts what the user sees, never how long it took."""
    line = f"{what}: {'none' if seconds is None else f'{seconds:.1f} s'}"
    print(line)
    FIGURES.parent.mkdir(exist_ok=True)
    with open(FIGURES, "a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def restarted_in_the_allocation(log: str, scheduler: str) -> None:
    """The restart was hpcdist's, inside the job's allocation: the job script ran once. A requeue
    by the scheduler (back through the queue, hours on a busy cluster) would have started it again
    and written a second ``start`` into the job's runs file. A PBS job without --requeue keeps no
    such file: PBS runs a job again only when its first node is lost, never the lost one here."""
    path = os.path.join(os.path.dirname(log), "runs")
    if scheduler == "pbs" and not os.path.exists(path):
        return
    with open(path) as f:
        starts = [line for line in f if line.startswith("start ")]
    assert len(starts) == 1, starts


def said_after(log: str, start: str, fault: float, timeout: float = 180) -> float:
    """Seconds from the fault until the log holds a line that starts with ``start``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lines_of(log, start):
            return time.time() - fault
        time.sleep(0.5)
    return float("inf")


def preflight_took(row: dict, log: str, cluster: str) -> None:
    """The job completed, and its --preflight line says its 3 nodes answered and all-reduced."""
    text = open(log).read()
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), testcluster.log_excerpt(text)
    (said,) = lines_of(log, "hpcdist: preflight: ")
    took = float(re.fullmatch(r"hpcdist: preflight: every node answered and took part in an "
                              r"all-reduce \(3, in ([\d.]+) s\)", said)[1])
    figure(f"{cluster}: --preflight at 3 nodes", took)


def lines_of(log: str, *starts: str) -> list:
    return [
        line for line in open(log, errors="replace").read().splitlines() if line.startswith(starts)
    ]


# ------------------------------------------------------------------ Slurm


@pytest.fixture(scope="module")
def slurm3(cluster):
    """The Slurm test cluster with 3 nodes, for this module; 2 again after it."""
    state = testcluster.up(3)
    try:
        yield state
    finally:
        back("hpcv2")
        testcluster.up(2)


def slurm_submit(state, cwd, *args) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpcdist",
            "submit",
            "--scheduler",
            "slurm",
            "--nodes",
            "2",
            "--procs-per-node",
            "2",
            "--json",
            *args,
        ],
        cwd=cwd,
        env=testcluster.client_env(state),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


def slurm_end(state, job: dict, cwd, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = subprocess.run(
            [sys.executable, "-m", "hpcdist", "status", "--json", job["job_id"]],
            cwd=cwd,
            env=testcluster.client_env(state),
            capture_output=True,
            text=True,
            timeout=60,
        )
        row = json.loads(proc.stdout)[0]
        if row["state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "KILLED", "NODE_FAIL"):
            return row
        time.sleep(1)
    pytest.fail(
        f"job {job['job_id']} still running after {timeout} s:\n"
        f"{testcluster.log_excerpt(open(job['log'], errors='replace').read())}"
    )


def slurm_idle(state) -> None:
    back("hpcv2")
    env = testcluster.client_env(state)
    subprocess.run(
        ["scontrol", "update", "nodename=node2", "state=resume"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    testcluster.wait_idle(state, timeout=180)


@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_slurm_a_lost_node_costs_a_restart_on_the_spare(slurm3, tmp_path, launcher):
    slurm_idle(slurm3)
    job = slurm_submit(
        slurm3,
        tmp_path,
        "--launcher",
        launcher,
        "--spare-nodes",
        "1",
        "--max-restarts",
        "2",
        DDP,
        *TRAINING,
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    )
    try:
        wait_for_step(job["log"], 20)
        fault = lose("hpcdist-node2", "hpcv2")
        row = slurm_end(slurm3, job, tmp_path)
    finally:
        slurm_idle(slurm3)
    log = job["log"]
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), testcluster.log_excerpt(
        open(log).read()
    )
    (restart,) = lines_of(log, "hpcdist: restart ")
    assert "restart 1 of 2" in restart and "left out: node2, in their place: node3" in restart, (
        restart
    )
    assert row["reason"].startswith("restart 1 of 2, left out: node2"), row
    # What a follow-up job passes back: --exclude-nodes @FOLDER/bad_nodes
    assert open(os.path.join(row["folder"], "bad_nodes")).read() == "node2\n"
    resumed = lines_of(log, "resumed from ")
    assert resumed and re.search(r"at step (1[5-9]|20) \(restart 1\)$", resumed[-1]), resumed
    assert lines_of(log, "step 60 epoch"), testcluster.log_excerpt(open(log).read())
    restarted_in_the_allocation(log, "slurm")
    figure(f"slurm {launcher}: fault to the first step after it", first_step_after(log, fault))
    left = testcluster.leftover_processes(f"checkpoint-dir {tmp_path}")
    assert not left, left


def test_slurm_preflight_asks_every_one_of_three_nodes(slurm3, tmp_path):
    """--preflight before the first launch: every node of the launch answers (srun, the probe)."""
    slurm_idle(slurm3)
    quickstart = str(ROOT / "examples" / "quickstart.py")
    job = slurm_submit(slurm3, tmp_path, "--nodes", "3", "--procs-per-node", "1", "--preflight",
                       quickstart, "--steps", "5")
    preflight_took(slurm_end(slurm3, job, tmp_path), job["log"], "slurm")


def test_slurm_leaves_out_the_nodes_a_follow_up_job_passes_back(slurm3, tmp_path):
    """--exclude-nodes @FILE (a job's bad_nodes): Slurm is told (--exclude) and never gives it."""
    slurm_idle(slurm3)
    (tmp_path / "bad_nodes").write_text("node2\n")
    quickstart = str(ROOT / "examples" / "quickstart.py")
    job = slurm_submit(slurm3, tmp_path, "--exclude-nodes", f"@{tmp_path / 'bad_nodes'}",
                       quickstart, "--steps", "5")
    row = slurm_end(slurm3, job, tmp_path)
    log = open(job["log"]).read()
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), testcluster.log_excerpt(log)
    assert lines_of(job["log"], "hpcdist: nodes: node1 node3;"), testcluster.log_excerpt(log)


def test_slurm_a_fault_in_the_code_is_not_restarted(slurm3, tmp_path):
    slurm_idle(slurm3)
    (tmp_path / "raises.py").write_text(RAISES)
    job = slurm_submit(
        slurm3, tmp_path, "--spare-nodes", "1", "--max-restarts", "2", str(tmp_path / "raises.py")
    )
    row = slurm_end(slurm3, job, tmp_path)
    log = job["log"]
    assert row["state"] == "FAILED" and not lines_of(log, "hpcdist: restart "), (
        testcluster.log_excerpt(open(log).read())
    )
    (ended,) = lines_of(log, "hpcdist: the launch failed")
    assert "rank 1 on node" in ended and "ValueError: a bad batch at step 10" in ended, ended


def test_slurm_with_no_spare_the_job_ends_naming_the_lost_node(slurm3, tmp_path):
    slurm_idle(slurm3)
    job = slurm_submit(
        slurm3,
        tmp_path,
        "--directive=--nodelist=node1,node2",
        "--max-restarts",
        "2",
        DDP,
        *TRAINING,
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    )
    try:
        wait_for_step(job["log"], 20)
        fault = lose("hpcdist-node2", "hpcv2")
        took = said_after(job["log"], "hpcdist: the launch failed", fault)
        row = slurm_end(slurm3, job, tmp_path)
    finally:
        slurm_idle(slurm3)
    log = job["log"]
    assert row["state"] == "FAILED", row
    (ended,) = lines_of(log, "hpcdist: the launch failed")
    assert "node2 did not answer" in ended and "no node left to take the place of node2" in ended, (
        ended
    )
    figure("slurm no spare: fault to the end named", took)  # the scheduler's own end follows
    left = testcluster.leftover_processes(f"checkpoint-dir {tmp_path}")
    assert not left, left


# ------------------------------------------------------------------ PBS (the real OpenPBS)


@pytest.fixture(scope="module")
def pbs3(openpbs_cluster):
    """The real OpenPBS with its third mom online, for this module (the session's keeps it offline:
    tests/openpbs.py's SPARE); offline again after it, once no job of the module is left."""
    pbs = openpbs_cluster
    pbs.on("pbshead", f"pbsnodes -r {pbs.SPARE}")
    try:
        yield pbs
    finally:
        back("pbsxv-n2")
        deadline = time.monotonic() + 60  # a lost node's job may still be exiting
        while pbs.on("pbshead", "qselect").stdout.split() and time.monotonic() < deadline:
            pbs.on("pbshead", "qdel -W force $(qselect) 2>/dev/null")
            time.sleep(2)
        pbs_node2_back(pbs)
        pbs.on("pbshead", f"pbsnodes -o {pbs.SPARE}")
        pbs.qmgr("set server job_history_enable = False")


def pbs_submit(pbs, cwd, *args) -> dict:
    proc = pbs.hpcdist(
        "submit",
        "--scheduler",
        "pbs",
        "--venv",
        sys.prefix,
        "--json",
        "--nodes",
        "2",
        "--procs-per-node",
        "2",
        *args,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


def pbs_end(pbs, job: dict, cwd, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = json.loads(pbs.hpcdist("status", "--json", job["job_id"], cwd=cwd).stdout)[0]
        if row["state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "KILLED"):
            return row
        time.sleep(1)
    pytest.fail(
        f"job {job['job_id']} still running after {timeout} s:\n"
        f"{testcluster.log_excerpt(open(job['log'], errors='replace').read())}"
    )


def pbs_node2_back(pbs) -> None:
    back("pbsxv-n2")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        nodes = pbs.on("pbshead", "pbsnodes -a -F json").stdout
        try:
            states = {name: node["state"] for name, node in json.loads(nodes)["nodes"].items()}
        except (ValueError, KeyError):
            states = {}
        if states and all(state == "free" for state in states.values()):
            return
        pbs.on("pbshead", "pbsnodes -r pbsn2")
        time.sleep(2)
    pytest.fail(f"pbsn2 not free again: {nodes[-500:]}")


# Job history off and on across the launchers (pairs, not every pair: each row is ~2 minutes
# of the suite's 45); the code-fault and no-spare rows run with both.
@pytest.mark.parametrize("launcher,history", [("torchrun", "False"), ("mpirun", "True")])
def test_pbs_a_lost_node_costs_a_restart_on_the_spare(pbs3, tmp_path, launcher, history):
    pbs3.qmgr(f"set server job_history_enable = {history}")
    pbs_node2_back(pbs3)
    job = pbs_submit(
        pbs3,
        tmp_path,
        "--launcher",
        launcher,
        "--spare-nodes",
        "1",
        "--max-restarts",
        "2",
        DDP,
        *TRAINING,
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    )
    try:
        wait_for_step(job["log"], 20)
        fault = lose("pbsx-n2", "pbsxv-n2")
        row = pbs_end(pbs3, job, tmp_path)
    finally:
        pbs_node2_back(pbs3)
        pbs3.qmgr("set server job_history_enable = False")
    log = job["log"]
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), testcluster.log_excerpt(
        open(log).read()
    )
    (restart,) = lines_of(log, "hpcdist: restart ")
    assert "restart 1 of 2" in restart and "left out: pbsn2, in their place: pbsn3" in restart, (
        restart
    )
    assert row["reason"].startswith("restart 1 of 2, left out: pbsn2"), row
    assert open(os.path.join(row["folder"], "bad_nodes")).read() == "pbsn2\n"
    resumed = lines_of(log, "resumed from ")
    assert resumed and re.search(r"at step (1[5-9]|20) \(restart 1\)$", resumed[-1]), resumed
    restarted_in_the_allocation(log, "pbs")
    figure(f"pbs {launcher} (history {history}): fault to the first step after it",
           first_step_after(log, fault))
    left = testcluster.leftover_processes(f"checkpoint-dir {tmp_path}")
    assert not left, left


def test_pbs_preflight_asks_every_one_of_three_nodes(pbs3, tmp_path):
    """--preflight before the first launch: every node of the launch answers (ssh, the probe)."""
    pbs_node2_back(pbs3)
    quickstart = str(ROOT / "examples" / "quickstart.py")
    job = pbs_submit(pbs3, tmp_path, "--nodes", "3", "--procs-per-node", "1", "--preflight",
                     quickstart, "--steps", "5")
    preflight_took(pbs_end(pbs3, job, tmp_path), job["log"], "pbs")


def test_pbs_leaves_out_the_nodes_a_follow_up_job_passes_back(pbs3, tmp_path):
    """PBS cannot be told which nodes not to give: the job's set-up leaves pbsn2 out of what it
    was given, and the spare runs in its place."""
    pbs_node2_back(pbs3)
    quickstart = str(ROOT / "examples" / "quickstart.py")
    job = pbs_submit(pbs3, tmp_path, "--spare-nodes", "1", "--exclude-nodes", "pbsn2",
                     quickstart, "--steps", "5")
    row = pbs_end(pbs3, job, tmp_path)
    log = open(job["log"]).read()
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), testcluster.log_excerpt(log)
    (nodes,) = lines_of(job["log"], "hpcdist: nodes: ")
    assert nodes.startswith("hpcdist: nodes: pbsn1 pbsn3;"), nodes
    assert nodes.endswith("; left out (--exclude-nodes): pbsn2"), nodes


@pytest.mark.parametrize("history", ["False", "True"])
def test_pbs_a_fault_in_the_code_is_not_restarted(pbs3, tmp_path, history):
    pbs3.qmgr(f"set server job_history_enable = {history}")
    pbs_node2_back(pbs3)
    (tmp_path / "raises.py").write_text(RAISES)
    job = pbs_submit(
        pbs3, tmp_path, "--spare-nodes", "1", "--max-restarts", "2", str(tmp_path / "raises.py")
    )
    row = pbs_end(pbs3, job, tmp_path)
    log = job["log"]
    assert row["state"] == "FAILED" and not lines_of(log, "hpcdist: restart "), (
        testcluster.log_excerpt(open(log).read())
    )
    (ended,) = lines_of(log, "hpcdist: the launch failed")
    assert "rank 1 on pbsn" in ended and "ValueError: a bad batch at step 10" in ended, ended


# History on alone (the suite's time): history off is the --min-nodes row's, the lost node's
# restart rows have one of each (tests/injob/test_min_nodes_cluster.py, above).
@pytest.mark.parametrize("history", ["True"])
def test_pbs_with_no_spare_the_job_ends_naming_the_lost_node(pbs3, tmp_path, history):
    pbs3.qmgr(f"set server job_history_enable = {history}")
    pbs_node2_back(pbs3)
    job = pbs_submit(
        pbs3,
        tmp_path,
        "--max-restarts",
        "2",
        DDP,
        *TRAINING,
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    )
    try:
        wait_for_step(job["log"], 20)
        fault = lose("pbsx-n2", "pbsxv-n2")
        took = said_after(job["log"], "hpcdist: the launch failed", fault)
        row = pbs_end(pbs3, job, tmp_path)
    finally:
        pbs_node2_back(pbs3)
    log = job["log"]
    assert row["state"] == "FAILED", row
    (ended,) = lines_of(log, "hpcdist: the launch failed")
    assert "pbsn2 did not answer" in ended and "no node left to take the place of pbsn2" in ended, (
        ended
    )
    figure(f"pbs no spare (history {history}): fault to the end named", took)
