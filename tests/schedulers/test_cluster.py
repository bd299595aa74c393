"""On the real 2-host test cluster: scripts submitted by hand, and `hpcdist doctor`.

The scheduler x launcher matrix runs in tests/launchers/test_matrix.py; the cluster
itself is tests/cluster/cluster.sh (the ``cluster`` fixture, tests/conftest.py).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import testcluster
from launch import wait_for

ROOT = testcluster.ROOT
QUICKSTART = ROOT / "examples" / "quickstart.py"


def qsub_and_wait(script: str, cwd, env, timeout: float = 240) -> str:
    """`qsub script` as a user types it; wait until the job left the queue; its output."""
    proc = subprocess.run(["qsub", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = proc.stdout.strip().split(".")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True, timeout=30)
        if job_id not in queued.stdout:
            break
        time.sleep(1)
    else:
        pytest.fail(f"job {job_id} still queued or running after {timeout} s")
    # Slurm's qsub wrapper writes <script>.o<id> in the submit folder, as PBS does.
    with open(cwd / f"{script}.o{job_id}", errors="replace") as f:
        return f.read()


def test_a_hand_written_seed_002_script_runs_with_plain_qsub(cluster, tmp_path):
    """The users' own way (seed 002): hostfile from $PBS_NODEFILE, `deepspeed --hostfile`."""
    shutil.copy(QUICKSTART, tmp_path)
    shutil.copy(ROOT / "tests" / "job_scripts" / "seed002_deepspeed.pbs", tmp_path)
    out = qsub_and_wait("seed002_deepspeed.pbs", tmp_path, testcluster.client_env(cluster))
    assert (tmp_path / "hosts.txt").read_text() == "node1 slots=1\nnode2 slots=1\n"
    assert sorted(re.findall(r"\[(node\d)\] rank (\d)/2", out)) == [("node1", "0"), ("node2", "1")], out
    assert "identical on all ranks: True" in out


@pytest.mark.parametrize("dialect", ["torque", "pro"])
def test_a_rendered_script_needs_no_hpcdist_to_submit(dialect, cluster, tmp_path):
    """`hpcdist render > job.pbs; qsub job.pbs`: the script stands on its own."""
    shutil.copy(QUICKSTART, tmp_path)
    env = testcluster.client_env(cluster)
    rendered = subprocess.run(
        [sys.executable, "-m", "hpcdist", "render", "--scheduler", "pbs", "--dialect", dialect, "--nodes", "2",
         "--procs-per-node", "2", "--launcher", "deepspeed", "quickstart.py", "--steps", "20"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    (tmp_path / "job.pbs").write_text(rendered.stdout)
    out = qsub_and_wait("job.pbs", tmp_path, env)
    seen = re.findall(r"\[(node\d)\] rank (\d)/4", out)
    assert sorted(r for _, r in seen) == ["0", "1", "2", "3"] and {h for h, _ in seen} == {"node1", "node2"}, out
    assert "identical on all ranks: True" in out


def doctor(*args, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", "doctor", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("where", [["--scheduler", "slurm"], ["--scheduler", "pbs", "--dialect", "torque"]],
                         ids=["slurm", "pbs"])
def test_doctor_submits_itself_and_finds_every_node_ready(where, cluster, tmp_path):
    proc = doctor(*where, "--nodes", "2", cwd=tmp_path, env=testcluster.client_env(cluster))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.startswith("node")}
    assert sorted(rows) == ["node1", "node2"], proc.stdout
    for host, row in rows.items():
        assert row[1:3] == ["ok", "3.{}.{}".format(*sys.version_info[1:3])], row  # ssh, python
    assert re.search(r"node1 .* \d+ free", proc.stdout)
    assert "All 2 node(s) ready." in proc.stdout


def test_doctor_says_what_to_fix(cluster, tmp_path):
    """No ssh key in the job (the default ssh, not the cluster's), and the master port taken on node1."""
    env = testcluster.client_env(cluster)
    port = "29511"
    holder = subprocess.Popen(
        ["bash", str(testcluster.CLUSTER_SH), "on", "node1", sys.executable, "-c",
         f"import socket, time; s = socket.socket(); s.bind(('', {port})); s.listen(); print('held', flush=True); "
         "time.sleep(120)"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline() == "held\n"
        plain_path = f"{sys.prefix}/bin:/usr/bin:/bin"  # without the cluster's ssh and its key
        proc = doctor("--scheduler", "slurm", "--nodes", "2", "--env", f"PATH={plain_path}",
                      "--env", f"MASTER_PORT={port}", cwd=tmp_path, env=env)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"node1 +FAILS .* {port} IN USE", proc.stdout), proc.stdout
    assert re.search(r"node2 +FAILS", proc.stdout), proc.stdout
    assert "node2: ssh from node1 fails" in proc.stdout and "ssh-copy-id" in proc.stdout
    assert f"node1: master port {port} is taken" in proc.stdout and "--env MASTER_PORT=" in proc.stdout


@pytest.mark.parametrize("where,launcher", [
    (["--scheduler", "slurm"], "torchrun"), (["--scheduler", "slurm"], "mpirun"),
    (["--scheduler", "pbs", "--dialect", "torque"], "torchrun"), (["--scheduler", "pbs", "--dialect", "pro"], "mpirun"),
], ids=["slurm-torchrun", "slurm-mpirun", "pbs-torque-torchrun", "pbs-pro-mpirun"])
def test_hostile_strings_reach_every_rank_on_two_hosts_and_execute_nothing(where, launcher, cluster, tmp_path):
    """The hostile corpus (tests/hostile.py) as a job's folder, arguments, variables and
    (Slurm) directive values, submitted for real: no payload runs, each rank gets them exactly."""
    import hostile

    sentinel = tmp_path / "PWNED"
    payloads = hostile.corpus(str(sentinel))
    folder = next(p for p in payloads if p.id == "dollar-paren")
    work = tmp_path / folder.value.lstrip("/")  # a submit folder named $(touch .../PWNED)
    work.mkdir(parents=True)
    (work / "dump_argv.py").write_text(hostile.DUMP_PROGRAM)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    safe = [p for p in payloads if p.argv_safe]
    args = [p.value for p in safe]
    env_items = [f"HOSTILE_{n}={p.value}" for n, p in enumerate(safe)]
    argv = [sys.executable, "-m", "hpcdist", "submit", *where, "--nodes", "2", "--launcher", launcher,
            "--env", f"DUMP_DIR={dumps}", "--wait"]
    for item in env_items:
        argv += ["--env", item]
    if where[1] == "slurm":
        # One executing payload in a directive, without whitespace or quotes: sbatch reads
        # "double quotes" in #SBATCH lines but not the shell's 'single' ones (docs/decisions.md).
        comment = next(p.value for p in payloads if p.executes and len(p.value) < 200
                       and not any(c in p.value for c in " \t'\"") and hostile.accepted(
                           {"scheduler": "slurm", "script": "x.py", "directives": [f"--comment={p.value}"]}))
        argv += [f"--directive=--comment={comment}"]
    proc = subprocess.run(argv + ["dump_argv.py", *args], cwd=work, env=testcluster.client_env(cluster),
                          capture_output=True, text=True, timeout=300)
    assert not sentinel.exists(), f"a payload was executed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = hostile.read_dumps(str(dumps))
    assert len(records) == 2, proc.stdout[-3000:]
    expected_env = dict(item.split("=", 1) for item in env_items)
    for record in records:
        assert record["argv"] == args
        assert {k: v for k, v in record["env"].items() if k[8:].isdigit()} == expected_env


def test_ending_a_failed_deepspeed_launch_spares_other_deepspeed_launchers(cluster, tmp_path):
    """hpcdist supervise ends only this launch: another job's DeepSpeed launcher on the
    same nodes (here a decoy process with such a command line) keeps running, though a job of
    the same shape has the same --world_info (its hosts and slots): its port is its own."""
    with open(shutil.which("deepspeed", path=os.path.dirname(sys.executable))) as f:
        python = f.readline()[2:].strip()  # the interpreter DeepSpeed's runner starts its launchers with
    same_shape = base64.urlsafe_b64encode(json.dumps({"node1": [0, 1], "node2": [0, 1]}).encode()).decode()
    decoy = subprocess.Popen(["bash", "-c", f'exec -a "{python} -u -m deepspeed.launcher.launch '
                              f'--world_info={same_shape} --node_rank=0 --master_addr=node1 '
                              f'--master_port=1" sleep 300'])
    try:
        shutil.copy(ROOT / "tests" / "job_scripts" / "failing_training.py", tmp_path)
        proc = subprocess.run(
            [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "slurm", "--nodes", "2", "--procs-per-node",
             "2", "--launcher", "deepspeed", "--wait", "failing_training.py", "--fail-rank", "3", "--others",
             "sleep"], cwd=tmp_path, env=testcluster.client_env(cluster), capture_output=True, text=True,
            timeout=300)
        assert proc.returncode != 0
        assert "ending the launch on every node" in proc.stderr + proc.stdout
        assert not testcluster.leftover_processes("failing_training.py --fail-rank")
        assert decoy.poll() is None, "another DeepSpeed launcher was killed with this job's"
    finally:
        decoy.kill()
        decoy.wait()


def test_wait_stops_on_a_dependency_that_can_never_be_satisfied(cluster, tmp_path):
    """``--dependency afterok:`` of a job that failed: Slurm keeps the job pending for ever
    (DependencyNeverSatisfied; the cluster has no kill_invalid_depend), and --wait said nothing
    but "pending" until its own end; now it stops, naming the reason, as on PBS's "Can Never Run"."""
    env = testcluster.client_env(cluster)
    (tmp_path / "fail.py").write_text("raise SystemExit(3)\n")
    failed = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "slurm",
                             "--launcher", "none", "--json", "--wait", "fail.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=180)
    assert failed.returncode == 3, failed.stderr
    first = json.loads(failed.stdout.splitlines()[0])["job_id"]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "slurm",
                           "--launcher", "none", "--json", "--wait", "--dependency", f"afterok:{first}",
                           "fail.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    second = json.loads(proc.stdout.splitlines()[0])["job_id"]
    subprocess.run([sys.executable, "-m", "hpcdist", "cancel", second], cwd=tmp_path, env=env,
                   capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "can never run as asked (DependencyNeverSatisfied" in proc.stderr, proc.stderr
    assert f"hpcdist cancel {second}" in proc.stderr and time.monotonic() - started < 90, proc.stderr


def test_cancel_of_a_job_that_has_ended_says_so_and_its_record_stays_true(cluster, tmp_path):
    """`hpcdist cancel` of a job that completed (not followed by --wait: no end recorded): scancel
    says nothing and exits 0, and the record said cancelled, so `status` read the job's exit 0
    as CANCELLED. Now hpcdist asks first: "has already ended", exit 1 (as for a local job), and
    it stays COMPLETED."""
    env = testcluster.client_env(cluster)
    (tmp_path / "ok.py").write_text("print('done')\n")
    hpcdist = [sys.executable, "-m", "hpcdist"]
    done = subprocess.run([*hpcdist, "submit", "--scheduler", "slurm", "--launcher", "none", "--json",
                           "ok.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    wait_for(lambda: os.path.exists(os.path.join(answer["folder"], "exit_code")), 120, "job's end")
    proc = subprocess.run([*hpcdist, "cancel", answer["job_id"]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    status = subprocess.run([*hpcdist, "status", "--json", answer["job_id"]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert f"job {answer['job_id']} has already ended (completed, exit 0): nothing to cancel" in \
        proc.stderr, proc.stderr
    assert json.loads(status.stdout)[0]["state"] == "COMPLETED", status.stdout
