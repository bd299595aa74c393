"""Issue 49: ``hpcdist report JOB``, a picture of a run in one offline page.

Real jobs on the local backend (2 "nodes" of 2 ranks, gloo, mpirun: tests/jobs/watch_training.py,
as tests/test_watch.py runs it): one with a straggler, one ended by a hang. A 1,024-rank job made
of the files its writers leave (bench/bench_report.py's make_job), and a sweep with a failed set
(its folders as a cluster's submission leaves them: the local backend runs no sweep). Each page
is opened in headless Chromium, its screenshot read back: not blank, the figures there, and the
page's numbers those of ``status --json`` and ``watch --json``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from launch import clean_env
from report_page import colours, opened, same_numbers

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "jobs" / "watch_training.py"
sys.path.insert(0, str(HERE.parent / "bench"))


def hpcdist(*args, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *map(str, args)], cwd=cwd, env=env or clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def job_env(**fault) -> dict:
    return clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HPCDIST_PROGRESS_INTERVAL="1",
                     **fault)


def run_job(tmp_path, env, *flags) -> dict:
    """A 2-node job of 2 ranks each, submitted and waited for; its ``status --json`` row."""
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2", "--procs-per-node", "2", "--launcher", "mpirun",
                   *flags, "--wait", TRAIN, cwd=tmp_path, env=env, timeout=400)
    done = hpcdist("status", "--json", cwd=tmp_path, env=env)
    (row,) = json.loads(done.stdout)
    assert row["state"] in ("COMPLETED", "FAILED"), (row, proc.stderr)
    return row


def checked_page(tmp_path, job: str, env=None, name: str = "report") -> tuple[str, dict]:
    """``hpcdist report JOB -o FILE`` run, the page opened in Chromium: its text and its keyed cells."""
    out = tmp_path / f"{name}.html"
    done = hpcdist("report", job, "-o", out, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(out)], done.stdout
    return opened(out)


def test_a_straggler_s_page_shows_it_with_the_numbers_of_status_and_watch(tmp_path):
    env = job_env(FAULT="slow", FAULT_RANK="3", STEPS="100")
    row = run_job(tmp_path, env)
    assert row["state"] == "COMPLETED", row
    text, cells = checked_page(tmp_path, row["job_id"], env)
    snapshot = json.loads(hpcdist("watch", "--json", row["job_id"], cwd=tmp_path, env=env).stdout)
    # After the end, watch --json still gives the ranks' last figures (no rank runs any more).
    assert snapshot["median_rate"] > 0 and snapshot["slowest"] == [3], snapshot
    same_numbers(cells, row, snapshot)
    assert text.count("<svg") == 2 and "Start-up per node, slowest first" in text
    assert "Rank(s) 3 trailed the median at the job's last look" in text, text[-3000:]
    assert "own work per step (ms)" in text  # the collectives are timed: the straggler's own work shows
    assert re.search(r"Marked x: the monitor's looks named rank\(s\) 3 a straggler", text), text[-3000:]
    assert "rank 3 on " in text and "slowest: rank 3 on " in text


def test_a_hung_job_s_page_says_hpcdist_ended_it_and_why(tmp_path):
    env = job_env(FAULT="stop", FAULT_RANK="1")
    row = run_job(tmp_path, env, "--hang-floor", "5s", "--hang-timeout", "15s")
    assert row["state"] == "FAILED" and row["reason"].startswith("ended by --hang-timeout"), row
    text, cells = checked_page(tmp_path, row["job_id"], env)
    snapshot = json.loads(hpcdist("watch", "--json", row["job_id"], cwd=tmp_path, env=env).stdout)
    same_numbers(cells, row, snapshot)
    from html import escape

    assert f"hpcdist ended this job: {escape(row['reason'])}" in text
    assert "Shaded: the job looked hung" in text and f"The dashed line: {escape(row['reason'])}" in text
    # --format png: a PNG of each figure beside the page.
    done = hpcdist("report", row["job_id"], "-o", tmp_path / "hang.html", "--format", "png", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / n) for n in ("hang.html", "hang-startup.png", "hang-steps.png")]
    assert all(colours(tmp_path / n) > 50 for n in ("hang-startup.png", "hang-steps.png"))


def test_a_1024_rank_job_s_page_is_under_5_mb_and_names_its_straggler(tmp_path):
    from bench_report import STRAGGLER, make_job

    folder = make_job(tmp_path, 1024, 400)
    text, cells = checked_page(tmp_path, folder)
    assert len(text.encode()) < 5 << 20
    assert text.count("<svg") == 2 and len(cells["rank"]) == 1024
    assert f"Marked x: the monitor's looks named rank(s) {STRAGGLER} a straggler" in text
    assert "slowest node: node0100" in text


def test_a_sweep_s_page_shows_its_sets_by_state_and_the_failed_one_s_error(tmp_path):
    from hpcdist.jobs import Draft
    from hpcdist.jobs.params import write_sweep

    root = tmp_path / ".hpcdist" / "jobs"
    draft = Draft(str(root), "train")
    sets = [{"lr": "0.1"}, {"lr": "0.01"}, {"lr": "0.001"}]
    # As hpcdist.sweeps.arrays writes a PBS array's folder (Part.record), and its subjobs their files.
    write_sweep(draft, {"sweep": os.path.basename(draft.path), "keys": ["lr"], "sets": [0, 1, 2],
                        "params": sets, "all": sets, "part": 0, "parts": 1, "array": True})
    log = os.path.join(draft.path, "job.")
    job = draft.commit({"job_id": "7[].server", "cluster": None, "scheduler": "pbs", "dialect": None,
                        "job_name": "train", "workdir": str(tmp_path), "log": log + "log", "submitted_at": 1.0,
                        "command_line": "hpcdist submit --sweep lr=0.1,0.01,0.001 train.py",
                        "subjob_logs": [log, ".log"]})
    for index, code in enumerate((0, 1, 0)):
        Path(job.path, f"exit_code.{index}").write_text(f"{code}\n")
        said = "Traceback (most recent call last):\nValueError: lr 0.01 diverged\n" if code else "done\n"
        Path(f"{log}{index}.log").write_text(said)
    env = clean_env(PATH=str(tmp_path / "nothing") + os.pathsep + clean_env()["PATH"])
    status = json.loads(hpcdist("status", "--json", job.job_id, cwd=tmp_path, env=env).stdout)
    text, cells = checked_page(tmp_path, job.job_id, env)
    assert [c.upper() for c in cells["state"]] == [s["state"] for s in status] == ["COMPLETED", "FAILED", "COMPLETED"]
    assert cells["exit_code"] == [str(s["exit_code"]) for s in status]
    assert text.count("<svg") == 1 and "ValueError: lr 0.01 diverged" in text
