"""`hpcdist requeue` refuses past its limit, and a job folder's `runs` file gives restarts and the id that goes on.

The requeue and the resubmission themselves run on the test cluster (tests/injob/test_preemption.py).
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
    from hpcdist.schedulers import base as sio
    from hpcdist.submission import submit as submission

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

    monkeypatch.setattr(submission, "get_scheduler", lambda *a: Racing())
    assert submission.status(Job(str(tmp_path))).state == "PENDING"
    assert asked == ["7", "8"]


def _resubmitted_job(tmp_path):
    """A PBS job folder as `hpcdist requeue` leaves it after one resubmission (see jobs.restart_log)."""
    first, second = tmp_path / "job.log", tmp_path / "job.restart1.log"
    (tmp_path / "record.json").write_text(json.dumps({"job_id": "7.server", "job_name": "train", "scheduler": "pbs",
                                                      "dialect": "pro", "log": str(first)}))
    (tmp_path / "runs").write_text(f"start 1 7.server node1\nresubmitted 2 8.server {second}\n")
    return Job(str(tmp_path)), first, second


def test_a_resubmitted_job_writes_its_own_log_and_hpcdist_logs_shows_every_run(tmp_path):
    from hpcdist.jobs import restart_log

    assert restart_log("/a b/job.log", 2) == "/a b/job.restart2.log"
    assert restart_log("/a/out", 1) == "/a/out.restart1"
    job, first, second = _resubmitted_job(tmp_path)
    assert job.log == str(second)  # the log being written now
    first.write_text("step 1\nstopped at step 9\n")
    second.write_text("resumed from ckpt at step 9\n")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "logs", str(tmp_path)], env=clean_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (f"==> hpcdist: job 7.server, log {first} <==\nstep 1\nstopped at step 9\n"
                           f"==> hpcdist: job 8.server, log {second} <==\nresumed from ckpt at step 9\n")


def test_wait_follows_the_first_log_to_its_end_then_the_resubmitted_jobs(tmp_path):
    import io

    from hpcdist.submission import submit as submission

    job, first, second = _resubmitted_job(tmp_path)
    out = io.StringIO()
    follow = submission._LogFollower(job, out)
    first.write_text("step 1\n")
    follow()
    with open(first, "a") as f:
        f.write("stopped at step 9\n")  # the first job's last lines, after it resubmitted itself
    follow()
    assert out.getvalue() == "step 1\nstopped at step 9\n"  # the next job has not started yet
    with open(first, "a") as f:
        f.write("resubmitted\n")
    second.write_text("resumed at step 9\n")
    follow()
    with open(second, "a") as f:
        f.write("step 10\n")
    follow()
    assert out.getvalue() == "step 1\nstopped at step 9\nresubmitted\nresumed at step 9\nstep 10\n"


def test_a_pbs_job_resubmits_with_its_own_pbs_qsub_not_the_first_on_path(tmp_path):
    """A node with two schedulers' clients (Slurm's qsub wrapper first on PATH, as on the machine
    that ran the real OpenPBS): the job's own qsub is $PBS_EXEC/bin/qsub of the node's pbs.conf
    ($PBS_CONF_FILE); with no pbs.conf (Torque), the first on PATH."""
    from hpcdist.schedulers.pbs.job import own_command

    (tmp_path / "bin").mkdir()
    qsub = tmp_path / "bin" / "qsub"
    qsub.write_text("#!/bin/sh\n")
    qsub.chmod(0o755)
    conf = tmp_path / "pbs.conf"
    conf.write_text(f"PBS_EXEC={tmp_path}\nPBS_HOME=/var/spool/pbs\nPBS_SERVER=head\n")
    assert own_command("qsub", {"PBS_CONF_FILE": str(conf)}) == str(qsub)
    assert own_command("qsub", {"PBS_CONF_FILE": str(tmp_path / "none.conf")}) == "qsub"
    conf.write_text(f"PBS_EXEC={tmp_path / 'elsewhere'}\n")  # no qsub there: PATH's
    assert own_command("qsub", {"PBS_CONF_FILE": str(conf)}) == "qsub"


def test_slurms_requeue_ending_this_job_does_not_cut_the_line_that_says_so(tmp_path):
    """`scontrol requeue` ends the running job: slurmd sends SIGTERM to all of its processes,
    `hpcdist requeue` among them, before it could say the job was requeued (CI of 1f76284: the
    log had no such line). A stand-in scontrol sends that SIGTERM at once, so the race is lost
    every time instead of now and then."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\nkill -TERM $PPID\nsleep 1\n")
    (fake / "scontrol").chmod(0o755)
    env = clean_env(SLURM_JOB_ID="812", SLURM_RESTART_COUNT="0", PATH=f"{fake}:/usr/bin:/bin")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "requeue", "--scheduler", "slurm", "--max", "2",
                           "--script", "job.sh"], env=env, capture_output=True, text=True, timeout=60)
    assert "the job was requeued (restart 1 of at most 2)" in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.returncode == 0
