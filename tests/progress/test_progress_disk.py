"""Issue 39 items 3, 4 and 18: the job's monitor where the ground gives way under it.

- 3: the job folder on a full disk (a 4 MB tmpfs of the test's own) while the job hangs: the
  monitor can write nothing (not the stacks request, not its summary, not the log), yet
  ``--hang-timeout`` ends the job, and ``status`` says HUNG while it hangs and then that
  --hang-timeout ended it;
- 4: ranks that write their progress every 8 s (``HPCDIST_PROGRESS_INTERVAL``, as docs/watch.md
  advises at thousands of ranks) and a ``--hang-timeout`` shorter than that: a healthy job runs to
  its end, and a hang is still ended;
- 18: ``stacks`` of a job that has ended says so at once, and how it ended, and fails.

Jobs on the local backend (mpirun, 2 ranks; no torch: the ranks count steps with hpcdist.env.step()).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from launch import need, wait_for
from test_watch import hpcdist, job_env, log

#: 10 steps/s for STEPS steps; then (HANG=1) every rank waits for ever, rank 0 having filled the
#: disk of the submit folder first where FILL=1 (and the last block of the job's log: nothing more
#: goes into it). FAULT_FILE gets the time the hang began.
TRAIN = """\
import os
import time

import hpcdist.env as henv

rank = henv.get_rank()
for _ in range(int(os.environ["STEPS"])):
    henv.step()
    time.sleep(0.1)
if os.environ.get("HANG") == "1":
    if rank == 0 and os.environ.get("FILL") == "1":
        fd = os.open("filler", os.O_WRONLY | os.O_CREAT, 0o600)
        for size in (1 << 16, 4096, 1):
            try:
                while True:
                    os.write(fd, b"x" * size)
            except OSError:
                pass
        os.close(fd)
        # The job's log too: its last block full, the monitor's lines cannot go in.
        fd = os.open(os.path.join(os.path.dirname(os.environ["HPCDIST_PROGRESS_DIR"]), "job.log"),
                     os.O_WRONLY | os.O_APPEND)
        try:
            while True:
                os.write(fd, b"\\n")
        except OSError:
            pass
        os.close(fd)
    if rank == 0:
        with open(os.environ["FAULT_FILE"], "w") as f:
            f.write(str(time.time()))
    time.sleep(600)
"""


def submit(cwd, env, script, *flags) -> dict:
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "1", "--procs-per-node", "2", "--launcher", "mpirun",
                   *flags, "--json", str(script), cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def row_of(job, cwd, env) -> dict:
    """The job's row in ``status --json`` (a status that fails says why)."""
    seen = hpcdist("status", "--json", job["job_id"], cwd=cwd, env=env)
    assert seen.returncode == 0, (seen.stdout, seen.stderr)
    (found,) = json.loads(seen.stdout)
    return found


def ended(job, cwd, env, timeout) -> dict:
    """The job's row once it has ended."""
    return wait_for(lambda: (row := row_of(job, cwd, env))["state"] not in ("RUNNING", "PENDING") and row, timeout,
                    f"the end of job {job['job_id']}")


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs of this test's own (as root)."""
    need("mpirun")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        for _ in range(20):  # a job's processes may still hold it a moment after their end
            if subprocess.run(["umount", str(disk)], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_hung_job_on_a_full_disk_is_still_ended_by_hang_timeout_and_status_says_so(tmp_path, small_disk):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = job_env(STEPS="30", HANG="1", FILL="1", FAULT_FILE=str(tmp_path / "fault"))
    job = submit(small_disk, env, script, "--hang-floor", "5s", "--hang-timeout", "15s")
    assert job["folder"].startswith(str(small_disk)), job
    fault = wait_for(lambda: os.path.exists(tmp_path / "fault") and float((tmp_path / "fault").read_text())
                     or row_of(job, small_disk, env)["state"] not in ("RUNNING", "PENDING")
                     and pytest.fail(f"ended before its hang: {log(job)}"), 120,
                     "the full disk")
    assert os.statvfs(small_disk).f_bavail == 0
    # While it hangs: HUNG in status, not the rate of the last summary written before the disk filled.
    hung = wait_for(lambda: next((line for line in hpcdist("status", cwd=small_disk, env=env).stdout.splitlines()
                                  if line.startswith(job["job_id"] + " ") and "HUNG" in line), None), 40,
                    "HUNG in hpcdist status")
    assert re.search(r"running +HUNG \d+s$", hung), hung
    row = ended(job, small_disk, env, 60)
    took = time.time() - fault
    assert row["state"] == "FAILED", row
    assert re.fullmatch(r"ended by --hang-timeout after \d+ s without a step; .+", row["reason"] or ""), row
    assert took < 15 + 25, took
    table = hpcdist("status", job["job_id"], cwd=small_disk, env=env).stdout.splitlines()
    assert table[1].startswith(f"{job['job_id']:<12} ") and table[1].endswith(row["reason"]), table
    assert "failed" in table[1], table
    # Nothing half written left behind by the writes the full disk refused.
    progress = os.path.join(job["folder"], "progress")
    assert [n for n in os.listdir(progress) if n.endswith(".tmp") or n.startswith(".stacks.request")] == [], (
        os.listdir(progress))
    assert log(job).endswith("\n" * 100), log(job)[-300:]  # the monitor could write nothing into it
    print(f"full disk: the hang began to the job's end {took:.1f} s")


#: HPCDIST_PROGRESS_INTERVAL for item 4's job: longer than its --hang-timeout.
LONG_INTERVAL = "8"


def test_a_healthy_job_is_no_hang_when_the_ranks_write_less_often_than_the_timeout_and_a_hang_still_ends(tmp_path):
    from hpcdist.progress import watch

    # The view alone: two ranks at 10 steps/s, their files 7 s old (written every 8 s, at a step).
    now = 1000.0
    ranks = [{"rank": r, "node": "n", "step": 300, "rate": 10.0, "last_step": now - 7, "written": now - 7,
              "interval": 8.0, "phase": "training", "started": now - 60} for r in range(2)]
    view = watch.analyse(ranks, now, floor=6)
    assert view.hung is None and not view.stalled_beyond(6), view.hung
    # Their files written again 20 s after the last step: that is a hang.
    ranks = [dict(r, last_step=now - 20, written=now - 1) for r in ranks]
    view = watch.analyse(ranks, now, floor=6)
    assert view.hung is not None and view.stalled_beyond(6), view.summary()
    need("mpirun")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    # 25 s healthy (three of the ranks' intervals), then a hang.
    env = {**job_env(STEPS="250", HANG="1", FAULT_FILE=str(tmp_path / "fault")),
           "HPCDIST_PROGRESS_INTERVAL": LONG_INTERVAL}
    job = submit(tmp_path, env, script, "--hang-timeout", "6s")
    row = ended(job, tmp_path, env, 180)
    text = log(job)
    # One hang, said once (the healthy part said none), then ended.
    assert text.count("hpcdist: looks hung: ") == 1, text
    assert os.path.exists(tmp_path / "fault"), f"ended before its hang: {row}\n{text}"
    took = os.path.getmtime(os.path.join(row["folder"], "exit_code")) - float((tmp_path / "fault").read_text())
    assert re.fullmatch(r"ended by --hang-timeout after \d+ s without a step; .+", row["reason"] or ""), (row, text)
    # Ended between the timeout and the timeout plus the ranks' interval (and the monitor's checks).
    assert 6 <= took <= 6 + float(LONG_INTERVAL) + 6, (took, text)
    print(f"interval {LONG_INTERVAL} s, --hang-timeout 6s: the hang began to the job's end {took:.1f} s")


def test_stacks_of_an_ended_job_says_it_ended_and_how_at_once_and_fails(tmp_path):
    need("mpirun")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = job_env(STEPS="10", HANG="1", FAULT_FILE=str(tmp_path / "fault"))
    job = submit(tmp_path, env, script, "--hang-floor", "3s", "--hang-timeout", "5s")
    row = ended(job, tmp_path, env, 120)
    start = time.monotonic()
    seen = hpcdist("stacks", job["job_id"], cwd=tmp_path, env=env)
    took = time.monotonic() - start
    said = (f"hpcdist stacks: error: job {job['job_id']} has ended (failed, exit {row['exit_code']}: {row['reason']}): "
            f"no rank is left to answer; `hpcdist logs {job['job_id']}` shows its last lines")
    assert seen.stderr.strip() == said and seen.stdout == "", (seen.stdout, seen.stderr)
    assert row["reason"].startswith("ended by --hang-timeout after "), row
    assert seen.returncode != 0 and took < 3, (seen.returncode, took)
    # A job that is no array has no subjob to name (item 5's --index).
    seen = hpcdist("stacks", job["job_id"], "--index", "1", cwd=tmp_path, env=env)
    assert seen.stderr == f"hpcdist stacks: error: --index 1: job {job['job_id']} is no array; leave --index out\n"
