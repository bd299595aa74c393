"""`hpcdist requeue` refuses past its limit, and a job folder's `runs` file gives restarts and the id that goes on.

The requeue and the resubmission themselves run on the test cluster (tests/test_preemption.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

from launch import clean_env

from hpcdist.jobs import Job


def test_past_its_limit_the_job_ends_unfinished_and_says_how_to_go_on(tmp_path):
    env = clean_env(SLURM_JOB_ID="812", SLURM_RESTART_COUNT="2", PATH="/nonexistent")  # no scontrol is run
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "requeue", "--scheduler", "slurm", "--max", "2",
                           "--script", "job.sh"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert "requeued 2 time(s) already (--requeue 2)" in proc.stderr and "Submit it again" in proc.stderr


def test_a_requeue_that_fails_says_which_command_and_why(tmp_path):
    env = clean_env(PBS_JOBID="7.server", PATH="/nonexistent")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "requeue", "--scheduler", "pbs", "--max", "1",
                           "--script", "job.sh", "--job-dir", str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3 and "qsub is not installed or not on PATH" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing recorded


def test_runs_file_counts_restarts_and_follows_resubmissions(tmp_path):
    (tmp_path / "record.json").write_text(json.dumps({"job_id": "7.server", "scheduler": "pbs"}))
    job = Job(str(tmp_path))
    assert (job.restarts, job.current_id) == (0, "7.server")
    (tmp_path / "runs").write_text("start 1 7.server node1\nresubmitted 2 8.server\nstart 3 8.server node2\n"
                                   "resubmitted 4 9.server\n")
    assert (job.restarts, job.current_id) == (1, "9.server")


def test_status_asks_again_when_the_job_resubmitted_itself_while_it_was_asked(tmp_path, monkeypatch):
    """The race seen on the test cluster: `qstat 7` answered "finished" because job 7 ended just
    after it resubmitted itself as job 8. (A stand-in backend: the real race cannot be timed.)"""
    from hpcdist import scheduler_io as sio
    from hpcdist import submission

    (tmp_path / "record.json").write_text(json.dumps({"job_id": "7", "scheduler": "pbs", "dialect": "torque"}))
    (tmp_path / "runs").write_text("start 1 7 node1\n")
    asked = []

    class Racing:
        def status(self, job):
            asked.append(job.current_id)
            if len(asked) == 1:  # job 7 resubmits itself and ends while qstat runs
                with open(tmp_path / "runs", "a") as f:
                    f.write("resubmitted 2 8\n")
                return sio.JobStatus(state="FAILED", exit_code=None, raw="C", reason="finished without an exit status")
            return sio.JobStatus(state="PENDING", exit_code=None, raw="Q", reason=None)

    monkeypatch.setattr(submission, "backend_for", lambda *a: Racing())
    assert submission.status(Job(str(tmp_path))).state == "PENDING"
    assert asked == ["7", "8"]
