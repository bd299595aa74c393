"""The job folder's files (hpcdist/jobs/__init__.py): one rule to read each, and the lines the script writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hpcdist import jobs
from hpcdist.jobs import job_files


@pytest.mark.parametrize("text,code", [(None, None), ("3\n", 3), ("0", 0), ("", None), ("x\n", None),
                                       ("255", 255), ("256\n", None), ("-1", None), ("+3", None)])
def test_an_exit_code_file_without_a_number_is_no_record(tmp_path, text, code):
    if text is not None:
        (tmp_path / jobs.EXIT_CODE).write_text(text)
    assert jobs.read_exit_code(str(tmp_path)) == code


def test_the_exit_code_is_written_whole_by_the_shell_line_jobs_gives(tmp_path):
    target = tmp_path / "a b" / jobs.EXIT_CODE
    target.parent.mkdir()
    subprocess.run(["bash", "-c", "status=7; " + jobs.write_exit_code_shell("$1"), "x", str(target)], check=True)
    assert jobs.read_exit_code(str(target.parent)) == 7 and os.listdir(target.parent) == [jobs.EXIT_CODE]


def test_the_runner_file_round_trips_and_a_broken_one_is_none(tmp_path):
    assert jobs.read_runner(str(tmp_path)) is None
    jobs.write_runner(str(tmp_path), 123, None)
    assert jobs.read_runner(str(tmp_path)) == ("123", "None")
    (tmp_path / jobs.RUNNER).write_text("123\n")
    assert jobs.read_runner(str(tmp_path)) is None


def folder_lines(folder: str, index_variable: str | None = None, recorded_id: str = "${HPCDIST_JOB_ID:-}"):
    """The job folder's macros of the script (hpcdist/schedulers/job_folder.sh.j2), as the template gets them."""
    from hpcdist.submission.render import environment

    values = job_files.script_context(folder, index_variable, recorded_id=recorded_id)
    return environment().get_template("hpcdist/job_folder.sh.j2").make_module({"job_files": values})


def test_the_runs_file_lines_written_here_and_by_the_script_are_read_back(tmp_path):
    (tmp_path / jobs.RECORD).write_text(json.dumps({"job_id": "7", "scheduler": "pbs", "log": "/l/job.log"}))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # A run's start, as job-setup appends it (--record-start: a job that may be requeued).
    subprocess.run([sys.executable, "-m", "hpcdist", "job-setup", "--scheduler", "local", "--dir", str(run_dir),
                    "--job-dir", str(tmp_path), "--run-id", "7", "--record-start"], check=True,
                   capture_output=True, env={**os.environ, "HPCDIST_JOB_ID": "7"})
    assert (tmp_path / jobs.RUNS).read_text().startswith("start ")
    second = jobs.restart_log("/l b/job.log", 1)
    jobs.record_resubmission(str(tmp_path), "8", second)
    history = jobs.Job(str(tmp_path)).history()
    assert history == jobs.History(restarts=0, current_id="8",
                                   logs=[("7", "/l/job.log"), ("8", "/l b/job.restart1.log")])
    assert jobs.recorded_log(str(tmp_path)) == "/l/job.log" and jobs.recorded_log(str(tmp_path / "no")) is None


def test_no_job_folder_gives_the_template_nothing():
    assert job_files.script_context(None) is None
    assert folder_lines("/j").exit_code_file() == '"$job_dir/exit_code"'
    assert job_files.script_context("/j")["folder"] == "/j"


@pytest.mark.parametrize("index", [None, "3"])
def test_a_subjob_writes_its_own_exit_code_and_progress(tmp_path, index):
    """The script's words for the exit code file and the progress folder, run by bash: an array's
    subjob's carry its index (hpcdist.jobs.subjobs reads them); the array's script run without it
    (submitted by hand as one job) writes the job's own."""
    lines = folder_lines(str(tmp_path), "SLURM_ARRAY_TASK_ID")
    script = (f'job_dir=$1; exit_file={lines.exit_code_file()}; status=5; {lines.write_exit_code()}; '
              f'mkdir {lines.progress_dir()}')
    env = {"PATH": os.environ["PATH"], **({"SLURM_ARRAY_TASK_ID": index} if index else {})}
    subprocess.run(["bash", "-euc", script, "x", str(tmp_path)], check=True, env=env)
    suffix = f".{index}" if index else ""
    assert sorted(os.listdir(tmp_path)) == [jobs.EXIT_CODE + suffix, jobs.PROGRESS + suffix]
    assert (jobs.read_subjob_exit_codes(str(tmp_path)) if index else {None: jobs.read_exit_code(str(tmp_path))}) \
        == {(int(index) if index else None): 5}
