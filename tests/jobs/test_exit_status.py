"""A killed job is never "completed": what `hpcdist status` and `--wait` say after a SIGTERM, a
cancel and a scheduler's own kill, on each backend.

bash runs a script's EXIT trap after SIGTERM with ``$?`` of the last command that finished (0
while a launcher ran in the foreground): the job script records 128+N for TERM, INT and HUP
(hpcdist/schedulers/job.sh.j2), and ``hpcdist cancel`` records that it cancelled the job. The
test cluster's Slurm keeps no accounting (AccountingStorageType=accounting_storage/none), as
many small clusters: there the exit_code file is all that is left of a job, as with OpenPBS's
default (job history off). Its PBS is Slurm's PBS personality (tests/testcluster.py); a real
PBS server's own kill and job history are issue 28's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

from launch import clean_env, wait_for

#: A training that only waits, so that only a signal can end it.
SLEEPER = "import time\nprint('waiting', flush=True)\ntime.sleep(600)\n"


def hpcdist(*args, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def submit(tmp_path, env, *flags, args=()) -> dict:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    proc = hpcdist("submit", *flags, "--launcher", "none", "--json", "sleeper.py", *args, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def row(job: dict, tmp_path, env) -> dict:
    (found,) = json.loads(hpcdist("status", "--json", job["job_id"], cwd=tmp_path, env=env).stdout)
    return found


def log_says(job: dict, text: str) -> bool:
    return os.path.exists(job["log"]) and text in open(job["log"], errors="replace").read()


def ended(job: dict, tmp_path, env, timeout: float = 90) -> dict:
    return wait_for(lambda: (r := row(job, tmp_path, env))["state"] not in ("RUNNING", "PENDING") and r,
                    timeout, f"end of job {job['job_id']}")


# --------------------------------------------------------------------------------------- the script


def test_a_term_to_the_job_is_recorded_as_143_in_plain_bash(tmp_path):
    """The script alone, run by bash as a scheduler runs it: SIGTERM to the job's processes while
    the launcher runs, as scancel, qdel and a walltime kill send it (bash runs the trap once the
    launcher in the foreground has ended)."""
    from hpcdist.submission.render import render
    from hpcdist.submission.spec import build_spec

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    folder = tmp_path / "job"
    folder.mkdir()
    # The job's record, as `hpcdist submit` leaves it: a run of the script that is not job 5 (by
    # hand) records nothing (tests/jobs/test_shared_records.py).
    (folder / "record.json").write_text(json.dumps({"job_id": "5", "job_name": "sleeper"}, indent=2) + "\n")
    spec = build_spec(dict(scheduler="local", launcher="none", script="sleeper.py", python=sys.executable),
                      check_files=False)
    (tmp_path / "job.sh").write_text(render(spec, workdir=str(tmp_path), job_dir=str(folder)))
    proc = subprocess.Popen(["bash", str(tmp_path / "job.sh")], cwd=tmp_path, env=clean_env(HPCDIST_JOB_ID="5"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    wait_for(lambda: "waiting" in (proc.stdout.readline() or ""), 60, "start of the training")
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert (folder / "exit_code").read_text().strip() == "143"


# --------------------------------------------------------------------------------------- local


def test_local_cancel_is_cancelled_and_a_term_is_not_completed(tmp_path):
    env = clean_env()
    job = submit(tmp_path, env)
    wait_for(lambda: log_says(job, "waiting"), 60, "start of the training")
    proc = hpcdist("cancel", job["job_id"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    found = ended(job, tmp_path, env)
    assert (found["state"], found["reason"]) == ("CANCELLED", "hpcdist cancel"), found

    # Someone else's SIGTERM to the job's processes (a kill, a shutdown): no cancel of ours.
    (tmp_path / "again").mkdir()
    job = submit(tmp_path / "again", env)
    wait_for(lambda: log_says(job, "waiting"), 60, "start of the training")
    runner = open(os.path.join(job["folder"], "runner")).read().split()[0]
    shells = subprocess.run(["pgrep", "-P", runner], capture_output=True, text=True).stdout.split()
    assert len(shells) == 1, shells
    training = subprocess.run(["pgrep", "-P", shells[0]], capture_output=True, text=True).stdout.split()
    for pid in shells + training:
        os.kill(int(pid), signal.SIGTERM)
    found = ended(job, tmp_path / "again", env)
    assert (found["state"], found["exit_code"]) == ("FAILED", 143), found
    assert found["reason"].startswith("killed by SIGTERM"), found
    waited = hpcdist("logs", "-f", job["job_id"], cwd=tmp_path / "again", env=env)
    assert waited.returncode == 143, waited.stdout + waited.stderr


#: A training that leaves its job's run folder busy (a tmpfs mounted in it, as a mount or an NFS
#: file held open would on a cluster), then ends.
BUSY = """import glob, os, subprocess
(run_dir,) = glob.glob(".hpcdist-run.*")
os.mkdir(run_dir + "/busy")
subprocess.run(["mount", "-t", "tmpfs", "tmpfs", run_dir + "/busy"], check=True)
print("done", flush=True)
"""


def _unmount_below(folder) -> None:
    for line in open("/proc/self/mounts").read().splitlines():
        point = line.split()[1]
        if point.startswith(str(folder)):
            subprocess.run(["umount", point], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: root only (CI runs as root)")
def test_a_clean_up_that_fails_does_not_lose_the_jobs_end(tmp_path):
    """The job script's EXIT trap removes its run folder first; `set -e` holds in traps, so a
    folder that cannot be removed (here a mount in it: EBUSY, for real; on a cluster, NFS keeping
    a file open) ended the trap before the exit code was written, and the script left with rm's
    status: a training that ended well read FAILED 1."""
    env = clean_env()
    (tmp_path / "busy.py").write_text(BUSY)
    try:
        done = hpcdist("submit", "--launcher", "none", "--json", "--wait", "busy.py", cwd=tmp_path, env=env)
        job = json.loads(done.stdout.splitlines()[0])
        found = row(job, tmp_path, env)
        assert (found["state"], found["exit_code"]) == ("COMPLETED", 0), (found, done.stderr)
        assert "Device or resource busy" in open(job["log"]).read()  # the clean-up did fail
    finally:
        _unmount_below(tmp_path)


# --------------------------------------------------------------------------------------- the cluster

#: The cluster's schedulers: Slurm (no accounting), and PBS's personality.
BACKENDS = {"slurm": ["--scheduler", "slurm"], "pbs": ["--scheduler", "pbs", "--dialect", "pro"]}
#: The scheduler's own cancel (not hpcdist's): scancel, qdel.
THEIR_CANCEL = {"slurm": "scancel", "pbs": "qdel"}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_cancel_on_the_cluster_is_never_completed(backend, cluster, tmp_path):
    import testcluster

    env = testcluster.client_env(cluster)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    run_id = f"run-{uuid.uuid4().hex}"  # an argument the script ignores: its processes, found after
    jobs = {name: submit(folder, env, *BACKENDS[backend], args=[run_id])
            for name, folder in (("ours", ours), ("theirs", theirs))}
    for job in jobs.values():
        wait_for(lambda: log_says(job, "waiting"), 120, f"start of job {job['job_id']}")
    proc = hpcdist("cancel", jobs["ours"]["job_id"], cwd=ours, env=env)
    assert proc.returncode == 0, proc.stderr
    subprocess.run([THEIR_CANCEL[backend], jobs["theirs"]["job_id"]], env=env, check=True, timeout=60)

    found = ended(jobs["ours"], ours, env)
    assert found["state"] == "CANCELLED" and "hpcdist cancel" in found["reason"], found
    found = ended(jobs["theirs"], theirs, env)
    # Slurm's TERM reaches the batch shell (its trap records 143) unless the KILL that follows
    # comes first: either way the job is not completed, and says why where it knows.
    assert found["state"] in ("FAILED", "UNKNOWN") and found["exit_code"] in (143, None), found
    if found["exit_code"] == 143:
        assert found["reason"].startswith("killed by SIGTERM"), found
    # Nothing of either job is left on any node (issue 37 item 2: a cancel too).
    assert not testcluster.leftover_processes(run_id)
    testcluster.wait_idle(cluster)
