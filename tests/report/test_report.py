"""Issue 49: ``hpcdist report JOB``, a picture of a run in one offline page.

Real jobs on the local backend (2 "nodes" of 2 ranks, gloo, mpirun: tests/job_scripts/watch_training.py,
as tests/progress/test_watch.py runs it): one with a straggler, one ended by a hang. A 1,024-rank job made
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
from report_page import Cells, colours, opened, same_numbers, screenshot

HERE = Path(__file__).resolve().parents[1]
TRAIN = HERE / "job_scripts" / "watch_training.py"
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
    # The rank that stopped, as watch --json names it (and status --json's reason), is marked in
    # the ranks' table and in the heat map (its row outlined, named, its last step marked), not
    # only in the cause.
    assert snapshot["stopped"] == [1], snapshot["stopped"]
    assert re.search(r"; rank 1 on \S+ not answering", row["reason"]), row["reason"]
    marks = dict(zip(map(int, cells["rank"]), cells["mark"]))
    assert {r: m for r, m in marks.items() if m.startswith("stopped")} == {
        1: "stopped answering (hpcdist ended the job)"}, marks
    assert re.search(r"Outlined in magenta: rank\(s\) 1 stopped answering, not answering when "
                     r"hpcdist ended the job; its last step: rank 1 at step \d+ \(the arrow\)\.",
                     text), text[-3000:]
    steps = text[text.index("<h2>Steps over the run</h2>"):]
    named = re.findall(r"<!-- (rank \d \([^)]*\)(?:: stopped)?) -->", steps)  # the rows' names
    assert len(named) == 4 and [n for n in named if n.endswith(": stopped")] == [
        n for n in named if n.startswith("rank 1 ")], named
    assert "<!-- stopped answering -->" in steps and "<!-- its last step -->" in steps  # the legend
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


def sweep_job(tmp_path):
    """A PBS sweep of 5 sets as its folders are left (its Job): set 1 fails with a traceback, set 3
    exits 3 with no error line, set 4 exits 2 and left no log."""
    from hpcdist.jobs import Draft
    from hpcdist.jobs.params import write_sweep

    root = tmp_path / ".hpcdist" / "jobs"
    draft = Draft(str(root), "train")
    sets = [{"lr": lr} for lr in ("0.1", "0.01", "0.001", "0.0001", "0.00001")]
    # As hpcdist.sweeps.arrays writes a PBS array's folder (Part.record), and its subjobs their files.
    write_sweep(draft, {"sweep": os.path.basename(draft.path), "keys": ["lr"],
                        "sets": list(range(len(sets))), "params": sets, "all": sets, "part": 0,
                        "parts": 1, "array": True})
    log = os.path.join(draft.path, "job.")
    job = draft.commit({"job_id": "7[].server", "cluster": None, "scheduler": "pbs", "dialect": None,
                        "job_name": "train", "workdir": str(tmp_path), "log": log + "log", "submitted_at": 1.0,
                        "command_line": "hpcdist submit --sweep lr=0.1,0.01,0.001,0.0001,0.00001 "
                                        "train.py",
                        "subjob_logs": [log, ".log"]})
    said = ("done\n", "Traceback (most recent call last):\nValueError: lr 0.01 diverged\n",
            "done\n", "loading data\nstep 10 of 20\n\n", None)
    for index, (code, text) in enumerate(zip((0, 1, 0, 3, 2), said)):
        Path(job.path, f"exit_code.{index}").write_text(f"{code}\n")
        if text is not None:
            Path(f"{log}{index}.log").write_text(text)
    return job


def test_a_sweep_s_page_shows_its_sets_by_state_and_the_failed_one_s_error(tmp_path):
    job = sweep_job(tmp_path)
    env = clean_env(PATH=str(tmp_path / "nothing") + os.pathsep + clean_env()["PATH"])
    status = json.loads(hpcdist("status", "--json", job.job_id, cwd=tmp_path, env=env).stdout)
    text, cells = checked_page(tmp_path, job.job_id, env)
    assert [c.upper() for c in cells["state"]] == [s["state"] for s in status] == [
        "COMPLETED", "FAILED", "COMPLETED", "FAILED", "FAILED"]
    assert cells["exit_code"] == [str(s["exit_code"]) for s in status]
    assert text.count("<svg") == 1 and "ValueError: lr 0.01 diverged" in text
    # A failed set's "last error line" is never blank: what its log says where it has no error line.
    assert cells["error_line"] == ["", "ValueError: lr 0.01 diverged", "",
                                   "no error line; exit 3; the log's last line: step 10 of 20",
                                   "no log; exit 2"], cells["error_line"]


#: Python without matplotlib nor numpy, as an install of hpcdist without the ``report`` extra has
#: it (this suite installs the extra): a None in sys.modules makes their import fail.
WITHOUT_THE_EXTRA = ("import sys; sys.modules['matplotlib'] = sys.modules['numpy'] = None; "
                     "from hpcdist.cli import main; raise SystemExit(main())")


def without_the_extra(*args, cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_THE_EXTRA, *map(str, args)], cwd=cwd,
                          env=env or clean_env(), capture_output=True, text=True, timeout=300)


def test_without_matplotlib_the_page_has_its_tables_and_says_what_is_left_out(tmp_path):
    from bench_report import STRAGGLER, make_job

    folder = make_job(tmp_path, 1024, 20)
    out = tmp_path / "bare.html"
    png = without_the_extra("report", folder, "-o", tmp_path / "bare-png.html", "--format", "png",
                            cwd=tmp_path)
    assert (png.returncode, png.stderr) == (
        1, "hpcdist report: error: --format png: the figures need matplotlib (matplotlib is not "
           "installed): pip install 'hpcdist[report]' here, where the page is drawn (without "
           "--format png the page is written with its tables)\n"), png.stderr
    assert not [p for p in os.listdir(tmp_path) if p.startswith("bare-png")]
    done = without_the_extra("report", folder, "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(out)]
    assert done.stderr.splitlines() == [
        "hpcdist report: matplotlib is not installed here: the page has its tables but not its "
        "figures (the start-up per node; each rank's steps over the run); pip install "
        "'hpcdist[report]' draws them",
        f"hpcdist report: open {out} in a browser (it needs no network)"], done.stderr
    text = out.read_text()
    cells = Cells(text).found
    assert "<svg" not in text and len(cells["rank"]) == 1024 and len(cells["startup.total"]) == 128
    for name in ("the start-up per node", "each rank&#x27;s steps over the run"):
        assert (f"The figure of {name} is left out: matplotlib is not installed where this page "
                "was written; <code>pip install &#x27;hpcdist[report]&#x27;</code> there draws "
                "it.") in text
    # The marks are said in words (no "Marked x": there is no figure to mark).
    assert f"The monitor's looks named rank(s) {STRAGGLER} a straggler" in text
    assert "Marked x" not in text
    assert "slowest node: node0100" in text
    screenshot(out, tmp_path / "bare.png")
    assert colours(tmp_path / "bare.png") > 20  # the tables drawn, not a blank page
    # A sweep's page too: its table, its failed sets' lines, the grid left out.
    job = sweep_job(tmp_path)
    sweep = without_the_extra("report", job.job_id, "-o", tmp_path / "sweep.html", cwd=tmp_path)
    assert sweep.returncode == 0 and "(the sweep's sets by state)" in sweep.stderr, sweep.stderr
    text = (tmp_path / "sweep.html").read_text()
    assert "<svg" not in text and "The figure of the sweep" in text
    assert "ValueError: lr 0.01 diverged" in text and "no error line; exit 3" in text


SHORT = """import os, time
os.environ.setdefault("RANK", "0")
import hpcdist.env as h
for i in range(40):
    h.step()
    time.sleep(0.1)
"""


def test_a_short_job_s_page_has_its_last_step_and_its_start_after_its_submission(tmp_path):
    """A 40-step loop started directly (--launcher none, hpcdist.env.step()): its rank's file
    ends at step 40 (written at its exit), and the job's run starts after its submission."""
    (tmp_path / "short.py").write_text(SHORT)
    env = clean_env(HPCDIST_PROGRESS_INTERVAL="0.5")
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--wait", "short.py",
                   cwd=tmp_path, env=env)
    (row,) = json.loads(hpcdist("status", "--json", cwd=tmp_path, env=env).stdout)
    assert row["state"] == "COMPLETED", (row, proc.stderr)
    snapshot = json.loads(hpcdist("watch", "--json", row["job_id"], cwd=tmp_path, env=env).stdout)
    assert [r["step"] for r in snapshot["ranks"]] == [40], snapshot["ranks"]
    found = json.loads(hpcdist("report", "--data", row["job_id"], cwd=tmp_path, env=env).stdout)
    # /proc gives a process's start to the clock tick (10 ms): the run starts after its submission,
    # within that. (/proc/stat's btime, a whole second, put it ~0.5 s before on the machine this
    # was found on.)
    assert found["run_started"] >= found["submitted_at"] - 0.02, found
    text, cells = checked_page(tmp_path, row["job_id"], env)
    facts = dict(re.findall(r"<th>([^<]+)</th><td[^>]*>([^<]*)</td>", text))
    assert facts["submitted"] <= facts["run started"] <= facts["ended"], facts
    assert cells["step"] == ["40"]
