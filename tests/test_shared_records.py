"""Job records you can trust when others touch them too (issue 29): another shell's cancel while
this one follows the job, a run of the job's script by hand, two folders with one id, a full
disk. Everything runs for real: local jobs, the CLI in a subprocess, a real tmpfs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from launch import clean_env
from test_submit import hpcdist

from hpcdist import jobs


def _submit(tmp_path, body: str, *flags: str) -> str:
    script = tmp_path / "s.py"
    script.write_text(body)
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", *flags, str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")[0]


def _status(cwd, ref: str) -> dict:
    proc = hpcdist("status", "--json", ref, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)[0]


def _record(folder) -> dict:
    with open(os.path.join(folder, jobs.RECORD)) as f:
        return json.load(f)


def _wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# -- item 3: a cancel is not lost to a follower ---------------------------------------------------

def test_a_cancel_from_another_shell_is_what_the_waiting_shell_and_status_say(tmp_path):
    """`hpcdist submit --wait` in one shell, `hpcdist cancel` in another. The follower used to
    rewrite record.json from the copy it read at the start: `cancelled` was lost, the follower
    said the job failed (143), and so did `hpcdist status` from then on."""
    (tmp_path / "s.py").write_text("import time\nprint('training', flush=True)\ntime.sleep(300)\n")
    follower = subprocess.Popen([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--launcher",
                                 "none", "--wait", "s.py"], cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        log_has = lambda: any(  # noqa: E731
            os.path.exists(p) and "training" in open(p).read()
            for p in [os.path.join(r, jobs.LOG) for r, _, _ in os.walk(tmp_path / ".hpcdist" / "jobs")])
        _wait_for(log_has, "the job to start")
        (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
        folder = tmp_path / ".hpcdist" / "jobs" / name
        job_id = _record(folder)["job_id"]
        cancel = hpcdist("cancel", job_id, cwd=tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert f"hpcdist: job {job_id} is cancelled" in err, err
    assert follower.returncode != 0
    record = _record(folder)
    assert record["cancelled"] is True and record["state"] == "CANCELLED"
    assert _status(tmp_path, job_id)["state"] == "CANCELLED"
