"""Many jobs on one node, shared files: own ports, own folders, private files written whole.

- 16 real local torch jobs (gloo, 2 processes, an all_reduce) submitted at
  once: every one finishes, and each rendezvous on its own port;
- the same on the real test cluster (the ``cluster`` fixture): 16 Slurm jobs
  of 2 tasks submitted at once to node1, which runs 4 of them at a time
  (``--oversubscribe``; its 2 CPUs alone would take one at a time): all
  finish, each rendezvoused on node1 on its own port;
- 20 `hpcdist submit` started in the same instant with the same job name:
  20 job folders, each holding exactly one job; on the cluster, 8 such
  `hpcdist submit --scheduler slurm`: 8 folders, 8 Slurm jobs, each record
  and log that of its own job;
- job folders are 0700 and their records 0600, hostfiles 0600, whatever
  the umask; a hostfile is replaced whole (a reader never sees half of
  one), a write that fails leaves the old one, and no fixed name is used
  beside it; nothing with a predictable name is left in $TMPDIR, and a
  name taken there first by someone else does not stop hpcdist.

Every job here runs for real, under the local backend or on the cluster. Where a job needs no
training, its MPI launcher is a small script (``--launcher mpirun --mpiexec
...``): the job script, hostfile and environment are the real ones.
"""

from __future__ import annotations

import json
import os
import re
import resource
import stat
import subprocess
import sys
import threading
import time

import pytest

import testcluster
from launch import clean_env

from hpcdist.allocation import Allocation
from hpcdist.ports import PORT_BASE, PORT_SPAN, port_for_job

HPCDIST = [sys.executable, "-m", "hpcdist"]

TINY_TORCH_JOB = """\
import os
import torch
import torch.distributed as dist
import hpcdist.env

env = hpcdist.env.init_distributed()
t = torch.tensor([float(env.rank + 1)])
dist.all_reduce(t)
# The rendezvous endpoint: the torchrun agent that started this worker was given it.
with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
    agent = f.read().decode().split("\\0")
endpoint = next(a.split("=", 1)[1] for a in agent if a.startswith("--rdzv-endpoint="))
# One write per line: print() writes the text and its newline apart, and the other rank's
# line could come between them (both ranks write into the one log).
os.write(1, f"job={os.environ['HPCDIST_JOB_ID']} rank={env.rank} rendezvous={endpoint} sum={t.item()}\\n".encode())
dist.barrier()  # gloo can abort a rank whose peer tore the group down first
dist.destroy_process_group()
"""


def env_for(tmp_path, **extra):
    return clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"),
                     OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)


def wait_for_jobs(folders, timeout):
    """Until every job folder holds the exit code its job script writes at the end."""
    deadline = time.monotonic() + timeout
    for folder in folders:
        path = os.path.join(folder, "exit_code")
        while not os.path.exists(path):
            assert time.monotonic() < deadline, f"job in {folder} did not finish in {timeout} s"
            time.sleep(0.5)
    codes = {}
    for folder in folders:
        with open(os.path.join(folder, "exit_code")) as f:
            codes[folder] = f.read().strip()
    return codes


def test_sixteen_local_jobs_at_once_finish_each_on_its_own_port(tmp_path):
    (tmp_path / "job.py").write_text(TINY_TORCH_JOB)
    env = env_for(tmp_path)
    submits = [subprocess.Popen([*HPCDIST, "submit", "--scheduler", "local", "--procs-per-node", "2", "--json",
                                 "job.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(16)]
    jobs = []
    for proc in submits:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        jobs.append(json.loads(out))
    codes = wait_for_jobs([job["folder"] for job in jobs], timeout=1200)
    logs = {job["job_id"]: open(job["log"]).read() for job in jobs}
    failed = {job["job_id"]: (codes[job["folder"]], testcluster.log_excerpt(logs[job["job_id"]])) for job in jobs
              if codes[job["folder"]] != "0"}
    assert not failed, f"jobs that failed: {failed}"
    ports = {}
    for job_id, log in logs.items():
        lines = re.findall(r"^job=(\d+) rank=(\d) rendezvous=([^ ]+):(\d+) sum=([0-9.]+)$", log, re.M)
        assert sorted(rank for _, rank, _, _, _ in lines) == ["0", "1"], testcluster.log_excerpt(log)
        assert {(j, total) for j, _, _, _, total in lines} == {(job_id, "3.0")}  # both ranks, one all_reduce
        (port,) = {int(p) for _, _, _, p, _ in lines}  # every agent of a job: one port
        # The one job-setup drew (and checked free) and logged, in the documented range.
        assert f"; master: 127.0.0.1:{port}\n" in log and PORT_BASE <= port < PORT_BASE + PORT_SPAN
        ports[job_id] = port
    # Drawn, not derived from the pid (two may be equal by chance: one job's port, free again, can
    # be drawn by another; each job met its own ranks above all the same).
    assert [p for j, p in ports.items() if p != port_for_job(j)], f"every port is the job id's: {ports}"
    status = json.loads(subprocess.run([*HPCDIST, "status", "--json"], cwd=tmp_path, env=env, capture_output=True,
                                       text=True, timeout=120).stdout)
    assert sorted((s["state"], s["exit_code"]) for s in status) == [("COMPLETED", 0)] * 16


#: A stand-in MPI launcher for jobs that need no training: reports what the job gave it.
REPORT_LAUNCHER = """\
#!/bin/bash
# argv: --hostfile FILE -np N ... ; report the hostfile and its folder (the job's run_dir)
hostfile=$2
echo "run_dir=$(dirname "$hostfile") mode=$(stat -c %a "$(dirname "$hostfile")")"
echo "hostfile_mode=$(stat -c %a "$hostfile") hostfile=$(tr '\\n' ' ' < "$hostfile")"
echo "who=$WHO"
"""

#: Each submitter: imports first, says it is ready, waits for the common instant, then submits.
SUBMITTER = """\
import os, sys, time
from hpcdist import cli, jobs, schedulers  # noqa: F401 (warm imports)
from hpcdist.submission import profiles
from hpcdist.submission import render
from hpcdist.submission import spec
from hpcdist.submission import submit as submission
import jinja2  # noqa: F401
barrier = sys.argv[1]
open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
go = os.path.join(barrier, "go")
while not os.path.exists(go):
    time.sleep(0.005)
start = float(open(go).read())
time.sleep(max(0.0, start - time.time() - 0.02))
while time.time() < start:
    pass
sys.exit(cli.main(sys.argv[2:]))
"""


def _barrier(folder, count, timeout=300):
    """Wait until ``count`` submitters are ready, then give them one instant, 0.3 s into a second."""
    deadline = time.monotonic() + timeout
    while len([n for n in os.listdir(folder) if n.startswith("ready-")]) < count:
        assert time.monotonic() < deadline, "the submitters did not start"
        time.sleep(0.05)
    start = int(time.time()) + 1.3
    with open(os.path.join(folder, "go.tmp"), "w") as f:
        f.write(repr(start))
    os.replace(os.path.join(folder, "go.tmp"), os.path.join(folder, "go"))


def _launcher(tmp_path):
    path = tmp_path / "report_launcher.sh"
    path.write_text(REPORT_LAUNCHER)
    path.chmod(0o755)
    (tmp_path / "t.py").write_text("")
    return str(path)


def test_twenty_submits_in_the_same_instant_never_share_a_job_folder(tmp_path):
    launcher = _launcher(tmp_path)
    env = env_for(tmp_path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", SUBMITTER, str(barrier), "submit", "--scheduler", "local",
                               "--launcher", "mpirun", "--mpiexec", launcher, "--job-name", "same",
                               "--env", f"WHO={i}", "--json", "t.py"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(20)]
    _barrier(barrier, 20)  # all 20 reach the mkdir of the same job folder name in the same second
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    folders = [r["folder"] for r in results]
    assert len(set(folders)) == 20
    assert sorted(os.listdir(tmp_path / ".hpcdist" / "jobs")) == sorted(os.path.basename(f) for f in folders)
    # Reserved by one mkdir each: same name, same second, then -2, -3, ...
    stamps = {re.fullmatch(r"same-(\d{8}-\d{6})(-\d+)?", os.path.basename(f)).group(1) for f in folders}
    assert len(stamps) <= 2, stamps
    assert sum(1 for f in folders if re.search(r"-\d{6}-\d+$", f)) >= 10  # the race did happen
    codes = wait_for_jobs(folders, timeout=600)
    assert set(codes.values()) == {"0"}
    # Each folder holds one job: its own spec, record, script and log.
    who = set()
    for r in results:
        with open(os.path.join(r["folder"], "spec.json")) as f:
            spec_env = dict(json.load(f)["env"])
        with open(os.path.join(r["folder"], "record.json")) as f:
            assert json.load(f)["job_id"] == r["job_id"]
        with open(r["log"]) as f:
            assert f"who={spec_env['WHO']}" in f.read()
        who.add(spec_env["WHO"])
    assert who == {str(i) for i in range(20)}


def _mode(path) -> str:
    return oct(stat.S_IMODE(os.stat(path).st_mode))


def test_job_folders_and_hostfiles_are_private_whatever_the_umask(tmp_path):
    launcher = _launcher(tmp_path)
    env = env_for(tmp_path, TMPDIR=str(tmp_path / "shared-tmp"))
    (tmp_path / "shared-tmp").mkdir()
    proc = subprocess.run([*HPCDIST, "submit", "--scheduler", "local", "--launcher", "mpirun", "--mpiexec",
                           launcher, "--wait", "--json", "t.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=lambda: os.umask(0))
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout.splitlines()[0])
    folder = job["folder"]
    assert _mode(tmp_path / ".hpcdist") == _mode(tmp_path / ".hpcdist" / "jobs") == "0o700"
    assert _mode(folder) == "0o700"
    assert _mode(os.path.join(folder, "job.sh")) == "0o700"
    for name in ("spec.json", "record.json"):
        assert _mode(os.path.join(folder, name)) == "0o600", name
    # In the job: its private run folder (mktemp -d: 0700, a random name) in the submit folder, which
    # every node sees (TMPDIR is node-local on clusters), and the hostfile in it (0600).
    report = re.search(r"run_dir=(\S+) mode=(\d+)\nhostfile_mode=(\d+)", open(job["log"]).read())
    assert report, open(job["log"]).read()
    run_dir, dir_mode, hostfile_mode = report.groups()
    assert re.fullmatch(re.escape(str(tmp_path)) + r"/\.hpcdist-run\.[A-Za-z0-9]{6}", run_dir)
    assert (dir_mode, hostfile_mode) == ("700", "600")
    # Nothing is left in the temporary folder, or in the submit folder, once the job is over.
    assert os.listdir(tmp_path / "shared-tmp") == []
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".hpcdist-run")]


def _hostfile(tmp_path, out, *, hosts=3, umask=None, fsize=None, check=True):
    env = env_for(tmp_path, SLURM_JOB_NODELIST=f"n[1-{hosts}]", SLURM_TASKS_PER_NODE=f"2(x{hosts})")

    def limits():
        if umask is not None:
            os.umask(umask)
        if fsize is not None:  # the file system says "File too large" past this size (EFBIG), even to root
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    proc = subprocess.run([*HPCDIST, "hostfile", "-o", str(out)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=limits)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_hostfile_is_0600_even_over_a_0644_file_and_with_umask_0(tmp_path):
    out = tmp_path / "hostfile"
    _hostfile(tmp_path, out, umask=0)
    assert _mode(out) == "0o600" and out.read_text() == "n1 slots=2\nn2 slots=2\nn3 slots=2\n"
    out.chmod(0o644)
    _hostfile(tmp_path, out, hosts=4, umask=0)
    assert _mode(out) == "0o600" and out.read_text().count("\n") == 4


def test_a_hostfile_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path):
    out = tmp_path / "hostfile"
    out.write_text("old contents\n")
    proc = _hostfile(tmp_path, out, hosts=5000, fsize=4096, check=False)
    assert proc.returncode == 1 and "cannot write" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert out.read_text() == "old contents\n"
    assert set(os.listdir(tmp_path)) - {"cache"} == {"hostfile"}


def test_a_hostfile_is_replaced_whole_and_never_through_a_planted_name(tmp_path):
    out = tmp_path / "hostfile"
    victim = tmp_path / "victim"
    victim.write_text("do not touch\n")
    for name in ("hostfile.tmp", ".hostfile.tmp", "hostfile~", ".hostfile.swp"):
        (tmp_path / name).symlink_to(victim)
    whole = {Allocation.from_slurm(f"{p}[1-20000]", "2(x20000)").to_hostfile("deepspeed") for p in "abn"}
    _hostfile(tmp_path, out, hosts=20000)  # n1..n20000; then a1.. and b1.. in turn, below
    seen, torn, stop = [], [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                text = out.read_text()
            except FileNotFoundError:
                torn.append("missing")
                continue
            seen.append(len(text))
            if text not in whole:
                torn.append(len(text))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(8):
            prefix = "ab"[i % 2]
            env = env_for(tmp_path, SLURM_JOB_NODELIST=f"{prefix}[1-20000]", SLURM_TASKS_PER_NODE="2(x20000)")
            proc = subprocess.run([*HPCDIST, "hostfile", "-o", str(out)], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr
    finally:
        stop.set()
        thread.join(timeout=60)
    assert len(seen) > 20 and not torn, f"a reader saw a partial or missing hostfile: {torn[:5]}"
    assert victim.read_text() == "do not touch\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.is_symlink()) in (
        ["hostfile", "victim"], ["cache", "hostfile", "victim"])


def test_render_uses_no_predictable_name_in_tmp_and_survives_one_taken(tmp_path):
    """jinja2's default cache is /tmp/_jinja2-cache-<uid>: taken first by someone else, rendering failed."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    (shared / f"_jinja2-cache-{os.getuid()}").write_text("someone else's\n")
    (tmp_path / "t.py").write_text("")
    env = env_for(tmp_path, TMPDIR=str(shared))
    for _ in range(2):  # the second time from the cache
        proc = subprocess.run([*HPCDIST, "render", "--scheduler", "slurm", "t.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "#SBATCH --job-name=t" in proc.stdout, proc.stderr
    assert os.listdir(shared) == [f"_jinja2-cache-{os.getuid()}"]
    cache = tmp_path / "cache" / "hpcdist" / "jinja2-sandboxed"
    assert _mode(cache) == "0o700" and os.listdir(cache)


# ---------------------------------------------------------------- the same on the real test cluster
# tests/cluster/cluster.sh: node1 and node2, 2 CPUs each (CR_Core), partition OverSubscribe=YES. A job
# of 2 tasks takes both CPUs of a node, so without --oversubscribe node1 runs these jobs one at a
# time; with it (OverSubscribe=YES means "on request", at most 4 jobs per core by default) node1
# runs 4 of them at once, which is as many as the cluster admits.


def _cluster_env(cluster, tmp_path, **extra):
    return testcluster.client_env(cluster, XDG_CACHE_HOME=str(tmp_path / "cache"),
                                  XDG_CONFIG_HOME=str(tmp_path / "config"), **extra)


def _squeue(env, job_ids) -> list[tuple[str, str, str]]:
    """(job id, state, nodes) of those jobs that Slurm still lists."""
    proc = subprocess.run(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i %T %N"], env=env,
                          capture_output=True, text=True, timeout=30)
    return [tuple((line.split() + ["", ""])[:3]) for line in proc.stdout.splitlines() if line.strip()]


def _wait_on_cluster(env, jobs, timeout):
    """Until every job wrote its exit code; the most of them Slurm ran at once, and where."""
    folders = [job["folder"] for job in jobs]
    ids = [job["job_id"] for job in jobs]
    most, nodes = 0, {}
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(os.path.join(f, "exit_code")) for f in folders):
        if time.monotonic() > deadline:
            pytest.fail(f"jobs not finished after {timeout} s:\n{_squeue(env, ids)}\n"
                        f"{testcluster.daemon_logs(testcluster.state_dir(), 10)}")
        running = [(i, n) for i, state, n in _squeue(env, ids) if state == "RUNNING"]
        most = max(most, len(running))
        nodes.update(running)
        time.sleep(0.3)
    return wait_for_jobs(folders, timeout=60), most, nodes


def _status(env, cwd) -> dict[str, tuple[str, int | None]]:
    proc = subprocess.run([*HPCDIST, "status", "--json"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {row["job_id"]: (row["state"], row["exit_code"]) for row in json.loads(proc.stdout)}


def test_sixteen_slurm_jobs_at_once_on_one_node_each_rendezvous_on_its_own_port(cluster, tmp_path):
    (tmp_path / "job.py").write_text(TINY_TORCH_JOB)
    env = _cluster_env(cluster, tmp_path)
    submits = [subprocess.Popen([*HPCDIST, "submit", "--scheduler", "slurm", "--nodes", "1", "--procs-per-node", "2",
                                 "--directive=--nodelist=node1", "--directive=--oversubscribe", "--json", "job.py"],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(16)]
    jobs = []
    for proc in submits:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        jobs.append(json.loads(out))
    assert len({job["job_id"] for job in jobs}) == len({job["folder"] for job in jobs}) == 16
    codes, most, nodes = _wait_on_cluster(env, jobs, timeout=600)
    logs = {job["job_id"]: open(job["log"], errors="replace").read() for job in jobs}
    failed = {job["job_id"]: (codes[job["folder"]], testcluster.log_excerpt(logs[job["job_id"]])) for job in jobs
              if codes[job["folder"]] != "0"}
    assert not failed, f"jobs that failed: {failed}"
    # They shared the node: every one ran on node1, and Slurm ran several of them at a time.
    assert set(nodes.values()) == {"node1"}, nodes
    assert most >= 2, f"never two of these jobs on node1 at once (at most {most})"  # 4 when all goes well
    ports = {}
    for job_id, log in logs.items():
        # Both ranks write through srun into one log: their lines may run into each other.
        lines = re.findall(r"job=(\d+) rank=(\d) rendezvous=([^ :]+):(\d+) sum=(\d+\.\d+)", log)
        assert sorted(rank for _, rank, _, _, _ in lines) == ["0", "1"], testcluster.log_excerpt(log)
        assert {(j, host, total) for j, _, host, _, total in lines} == {(job_id, "node1", "3.0")}, \
            testcluster.log_excerpt(log)
        (port,) = {int(p) for _, _, _, p, _ in lines}
        assert PORT_BASE <= port < PORT_BASE + PORT_SPAN  # drawn by job-setup on node1
        assert f"hpcdist: nodes: node1; master: node1:{port}\n" in log, testcluster.log_excerpt(log)
        ports[job_id] = port
    assert [p for j, p in ports.items() if p != port_for_job(j)], f"every port is the job id's: {ports}"
    assert _status(env, tmp_path) == {job["job_id"]: ("COMPLETED", 0) for job in jobs}


#: The job of each concurrent submission: says which submission it is and which Slurm job runs it.
WHO_AM_I = """\
import os
print(f"who={os.environ['WHO']} slurm_job={os.environ['SLURM_JOB_ID']} name={os.environ['SLURM_JOB_NAME']}")
"""


def test_eight_sbatch_submits_in_the_same_instant_get_their_own_folder_and_job(cluster, tmp_path):
    (tmp_path / "who.py").write_text(WHO_AM_I)
    env = _cluster_env(cluster, tmp_path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", SUBMITTER, str(barrier), "submit", "--scheduler", "slurm",
                               "--launcher", "none", "--job-name", "same", "--directive=--oversubscribe",
                               "--env", f"WHO={i}", "--json", "who.py"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    _barrier(barrier, 8)
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    folders = [r["folder"] for r in results]
    ids = [r["job_id"] for r in results]
    assert len(set(folders)) == 8 and len(set(ids)) == 8, results
    assert sorted(os.listdir(tmp_path / ".hpcdist" / "jobs")) == sorted(os.path.basename(f) for f in folders)
    stamps = {re.fullmatch(r"same-(\d{8}-\d{6})(-\d+)?", os.path.basename(f)).group(1) for f in folders}
    assert len(stamps) <= 2, stamps
    assert sum(1 for f in folders if re.search(r"-\d{6}-\d+$", f)) >= 4  # the race did happen
    codes, _, _ = _wait_on_cluster(env, results, timeout=300)
    assert set(codes.values()) == {"0"}, codes
    # Each folder holds one submission: its spec, its record, its Slurm job, and that job's log.
    who = set()
    for r in results:
        with open(os.path.join(r["folder"], "spec.json")) as f:
            spec_env = dict(json.load(f)["env"])
        with open(os.path.join(r["folder"], "record.json")) as f:
            record = json.load(f)
        assert (record["job_id"], record["scheduler"], record["job_name"]) == (r["job_id"], "slurm", "same")
        with open(r["log"], errors="replace") as f:
            log = f.read()
        assert f"who={spec_env['WHO']} slurm_job={r['job_id']} name=same\n" in log, testcluster.log_excerpt(log)
        assert log.count("who=") == 1, testcluster.log_excerpt(log)
        who.add(spec_env["WHO"])
    assert who == {str(i) for i in range(8)}
    assert _status(env, tmp_path) == {i: ("COMPLETED", 0) for i in ids}
