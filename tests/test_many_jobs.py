"""Many jobs on one node, shared files: own ports, own folders, private files written whole.

- 16 real local torch jobs (gloo, 2 processes, an all_reduce) submitted at
  once: every one finishes, and each rendezvous on its own port;
- 20 `hpcdist submit` started in the same instant with the same job name:
  20 job folders, each holding exactly one job;
- job folders are 0700 and their records 0600, hostfiles 0600, whatever
  the umask; a hostfile is replaced whole (a reader never sees half of
  one), a write that fails leaves the old one, and no fixed name is used
  beside it; nothing with a predictable name is left in $TMPDIR, and a
  name taken there first by someone else does not stop hpcdist.

Every job here runs for real under the local backend. Where a job needs no
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

from launch import clean_env

from hpcdist.allocation import Allocation
from hpcdist.env.ports import port_for_job

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
print(f"job={os.environ['HPCDIST_JOB_ID']} rank={env.rank} rendezvous={endpoint} sum={t.item()}", flush=True)
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
    failed = {job["job_id"]: logs[job["job_id"]][-2000:] for job in jobs if codes[job["folder"]] != "0"}
    assert not failed, f"jobs that failed: {failed}"
    ports = {}
    for job_id, log in logs.items():
        lines = re.findall(r"^job=(\d+) rank=(\d) rendezvous=([^ ]+):(\d+) sum=([0-9.]+)$", log, re.M)
        assert sorted(rank for _, rank, _, _, _ in lines) == ["0", "1"], log[-2000:]
        assert {(j, total) for j, _, _, _, total in lines} == {(job_id, "3.0")}  # both ranks, one all_reduce
        (port,) = {int(p) for _, _, _, p, _ in lines}  # every agent of a job: one port
        # The documented rule: 20000 + job number % 10000 (the local job id is its runner's pid).
        assert port == 20000 + int(job_id) % 10000 == port_for_job(job_id)
        ports[job_id] = port
    assert len(set(ports.values())) == 16, f"rendezvous ports shared: {ports}"
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
from hpcdist import backends, cli, jobs, profiles, render, spec, submission  # noqa: F401 (warm imports)
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
    # In the job: its private run folder (mktemp -d: 0700, a random name) and the hostfile in it (0600).
    report = re.search(r"run_dir=(\S+) mode=(\d+)\nhostfile_mode=(\d+)", open(job["log"]).read())
    assert report, open(job["log"]).read()
    run_dir, dir_mode, hostfile_mode = report.groups()
    assert re.fullmatch(re.escape(str(tmp_path / "shared-tmp")) + r"/hpcdist\.[A-Za-z0-9]{6}", run_dir)
    assert (dir_mode, hostfile_mode) == ("700", "600")
    # Nothing is left in the shared temporary folder once the job is over.
    assert os.listdir(tmp_path / "shared-tmp") == []


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
    cache = tmp_path / "cache" / "hpcdist" / "jinja2"
    assert _mode(cache) == "0o700" and os.listdir(cache)
