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


def _submit(tmp_path, body: str, *flags: str, exit_code: int = 0) -> str:
    """A local job of the script ``body``: its id (``--wait`` among ``flags``: ``exit_code``, its end)."""
    script = tmp_path / "s.py"
    script.write_text(body)
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", *flags, str(script), cwd=tmp_path)
    assert proc.returncode == exit_code, proc.stderr
    return proc.stdout.split("\n")[0]


def _status(cwd, ref: str) -> dict:
    proc = hpcdist("status", "--json", ref, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)[0]


def _record(folder) -> dict:
    with open(os.path.join(folder, jobs.RECORD)) as f:
        return json.load(f)


def _quietly(predicate):
    """``predicate()``, False while a file it reads is not there yet or half written."""
    try:
        return predicate()
    except (OSError, ValueError):
        return False


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


def test_a_cancel_that_lands_while_the_follower_asks_the_scheduler_is_still_a_cancel(tmp_path):
    """Seen in CI on the real OpenPBS (history off): `logs -f` read the record, then asked qstat;
    meanwhile `hpcdist cancel` recorded its word and qdel ended the job (143). The follower's old
    copy had no `cancelled`: it recorded FAILED, and `status` said so from then on. Here the two
    shells' steps in that order (a stand-in: the real race cannot be timed)."""
    from hpcdist.schedulers.batch import recorded_exit

    (tmp_path / "record.json").write_text(json.dumps({"job_id": "7.server", "scheduler": "pbs",
                                                      "dialect": "pro"}))
    follower = jobs.Job(str(tmp_path))  # its copy, read before the cancel
    jobs.Job(str(tmp_path)).update(cancelled=True)  # the other shell's cancel, then its qdel
    (tmp_path / "exit_code").write_text("143\n")  # the job's script, stopped by that qdel
    ended = recorded_exit(follower)
    assert (ended.state, ended.exit_code) == ("CANCELLED", 143), ended


# -- item 16: running the job's script again by hand records into nothing of the job -------------

def test_running_the_job_script_again_by_hand_keeps_the_jobs_recorded_failure(tmp_path):
    """As the script's header invites ("edit it, submit it by hand"), `bash job.sh` after the job
    failed with 3: the run by hand used to overwrite the job's exit_code, and the failed job then
    read `completed 0`."""
    job_id = _submit(tmp_path, "import sys\nsys.exit(3)\n", "--wait", exit_code=3)
    (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
    folder = tmp_path / ".hpcdist" / "jobs" / name
    assert _status(tmp_path, job_id)["exit_code"] == 3
    (tmp_path / "s.py").write_text("print('fixed')\n")  # edited, then run again by hand
    by_hand = subprocess.run(["bash", str(folder / "job.sh")], cwd=tmp_path, env=clean_env(), capture_output=True,
                             text=True, timeout=120)
    assert by_hand.returncode == 0 and "fixed" in by_hand.stdout, by_hand.stderr
    row = _status(tmp_path, job_id)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3)
    assert (folder / "exit_code").read_text() == "3\n"
    assert (f"hpcdist: this run is not the job recorded in {folder} (its script run again by hand?): its end is "
            f"not recorded there") in by_hand.stderr


def _check_run(folder, recorded_id: str, environ: dict) -> bool:
    """Whether job-setup's check (``--job-dir``, ``--run-id``: hpcdist.injob.job_setup) takes a run
    with ``environ`` for the job recorded in ``folder``: the scheduler's word for the id, as the
    script passes it, expanded by bash with the scheduler's variables set by hand, as no scheduler
    runs here."""
    from hpcdist.injob.job_setup import is_recorded_run

    word = subprocess.run(["bash", "-euc", f'printf %s "{recorded_id}"'], env={"PATH": os.environ["PATH"], **environ},
                          capture_output=True, text=True, timeout=30, check=True).stdout
    return is_recorded_run(str(folder), word)


def test_job_setup_names_the_job_folders_files_as_the_folder_does():
    """job-setup reads the record without importing hpcdist.jobs (a fifth of its cost): its names
    are the folder's."""
    from hpcdist.injob import job_setup

    assert (job_setup.RECORD, job_setup.RUNS, job_setup.SUBMITTING, job_setup.RESUBMITTED, job_setup.START) == (
        jobs.RECORD, jobs.RUNS, jobs.SUBMITTING, jobs.RESUBMITTED, jobs.START)


def test_the_run_check_knows_the_schedulers_ids_of_the_recorded_job(tmp_path):
    """A stand-in for each scheduler's variables (none runs in this test): the recorded job, its
    array's subjobs, its PBS resubmissions and a job still being recorded run as the job; a new
    id (`sbatch job.sh` again) or none (`bash job.sh`) does not."""
    from hpcdist.schedulers.registry import get

    slurm, pbs = get("slurm").recorded_id_shell, get("pbs").recorded_id_shell

    def record(job_id, **more):
        (tmp_path / jobs.RECORD).write_text(json.dumps({"job_id": job_id, "scheduler": "slurm", **more}))

    record("4242")
    assert _check_run(tmp_path, slurm, {"SLURM_JOB_ID": "4242"})
    assert _check_run(tmp_path, slurm, {"SLURM_JOB_ID": "4250", "SLURM_ARRAY_JOB_ID": "4242"})  # a subjob
    assert not _check_run(tmp_path, slurm, {"SLURM_JOB_ID": "4243"})  # sbatch job.sh again
    assert not _check_run(tmp_path, slurm, {"SLURM_JOB_ID": "42420"})
    assert not _check_run(tmp_path, slurm, {})  # bash job.sh
    record("", submitting={"pid": 1, "started": "1"})
    assert _check_run(tmp_path, slurm, {"SLURM_JOB_ID": "4242"})  # started before its id was recorded
    record("123[].pbs-server")
    assert _check_run(tmp_path, pbs, {"PBS_JOBID": "123[7].pbs-server"})
    assert _check_run(tmp_path, pbs, {"PBS_JOBID": "123.pbs"})  # the server named otherwise
    assert not _check_run(tmp_path, pbs, {"PBS_JOBID": "124.pbs-server"})
    (tmp_path / jobs.RUNS).write_text("start 1 123.pbs-server n1\nresubmitted 2 124.pbs-server /x/job.restart1.log\n")
    assert _check_run(tmp_path, pbs, {"PBS_JOBID": "124.pbs-server"})  # its resubmission


# -- item 6: two folders with one id ---------------------------------------------------------------

def _in_pid_namespace(tmp_path, name: str, script: str, then_sleep: int, *flags: str) -> subprocess.Popen:
    """`hpcdist submit` of a local job in a new pid namespace, as in a container that restarted:
    its pids start at 1 again, so two such submissions get the same job id (a real collision).
    The namespace lives while its first process (sh) does: ``then_sleep`` seconds after the submit."""
    submit = (f"{sys.executable} -m hpcdist submit --scheduler local --launcher none "
              f"--job-name {name} {' '.join(flags)} {script}; exec sleep {then_sleep}")
    return subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", submit], cwd=tmp_path,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _namespace_shell(unshare_pid: int) -> int:
    """The pid (here) of the first process in the namespace unshare started: its child."""
    children = open(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read().split()
    return int(children[0])


def test_an_id_used_again_names_both_folders_and_the_running_job_is_cancelled_by_its_folder(tmp_path):
    """A local job's id is its runner's pid, and pids start again (a container restarted; here a
    real pid namespace each). `hpcdist cancel ID` used to take the oldest folder, and answered
    "already ended" while the newer job ran on; now it names both folders, and the folder cancels."""
    (tmp_path / "done.py").write_text("print('done')\n")
    (tmp_path / "long.py").write_text("import time\nprint('training', flush=True)\ntime.sleep(300)\n")
    first = _in_pid_namespace(tmp_path, "first", "done.py", 0, "--wait")
    first.communicate(timeout=120)
    second = _in_pid_namespace(tmp_path, "second", "long.py", 300)
    try:
        root = tmp_path / ".hpcdist" / "jobs"
        folders = lambda: sorted(root.iterdir())  # noqa: E731
        _wait_for(lambda: _quietly(lambda: len(folders()) == 2 and _record(folders()[1])["job_id"]),
                  "the second job's id")
        older, newer = folders()  # first-..., second-...
        job_id = _record(older)["job_id"]
        assert _record(newer)["job_id"] == job_id, "the two namespaces gave different pids: no collision"
        # Asked from inside the second namespace, where its runner is that pid.
        inside = ["nsenter", "-t", str(_namespace_shell(second.pid)), "-p", "-m", f"--wd={tmp_path}",
                  sys.executable, "-m", "hpcdist"]
        ambiguous = subprocess.run([*inside, "cancel", job_id], cwd=tmp_path, env=clean_env(), capture_output=True,
                                   text=True, timeout=60)
        assert ambiguous.returncode == 1
        shown = [os.path.relpath(p, tmp_path) for p in (older, newer)]
        assert ambiguous.stderr == (f"hpcdist cancel: error: job id {job_id} names 2 job folders (an id used "
                                    f"again): {shown[0]}, {shown[1]}; give the folder instead of the id (e.g. "
                                    f"{shown[1]})\n")
        cancel = subprocess.run([*inside, "cancel", shown[1]], cwd=tmp_path, env=clean_env(), capture_output=True,
                                text=True, timeout=60)
        assert cancel.returncode == 0, cancel.stderr
        _wait_for(lambda: (newer / "exit_code").exists(), "the cancelled job to end")
        rows = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)
        assert [(r["name"], r["state"]) for r in rows] == [("first", "COMPLETED"), ("second", "CANCELLED")]
    finally:
        os.killpg(second.pid, 9)
        second.wait()


# -- item 8: a full disk does not stop a cancel -----------------------------------------------------

def test_a_cancel_on_a_full_disk_stops_the_job_and_the_follower_ends_in_one_line(tmp_path):
    """The project folder on a real 2 MiB tmpfs, filled up while the job runs and `--wait` follows
    it. `hpcdist cancel` used to fail with a `No space left on device` traceback before it signalled
    (the job ran on), and `--wait` with a traceback when it recorded the end."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    follower = None
    try:
        (disk / "s.py").write_text("import time\nprint('training', flush=True)\ntime.sleep(300)\n")
        follower = subprocess.Popen([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--launcher",
                                     "none", "--wait", "s.py"], cwd=disk, env=clean_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        root = disk / ".hpcdist" / "jobs"
        _wait_for(lambda: _quietly(lambda: "training" in (next(root.iterdir()) / jobs.LOG).read_text()),
                  "the job to start")
        folder = next(root.iterdir())
        job_id = _record(folder)["job_id"]
        with open(disk / "filler", "wb") as f:  # the disk is full from here on
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        cancel = hpcdist("cancel", job_id, cwd=disk)
        assert cancel.returncode == 0, cancel.stderr
        # The one line about the record; the cancel may also say it is waiting for the job's processes
        # to end (issue 29 item 5), never a traceback.
        said = cancel.stderr.splitlines()
        assert said[0] == (f"hpcdist: job {job_id} is cancelled, but its record could not say so "
                           f"(No space left on device)"), cancel.stderr
        assert all(line.startswith(f"hpcdist cancel: cancelling job {job_id}:") for line in said[1:]), cancel.stderr
        _, err = follower.communicate(timeout=60)  # the job ended: the follower too (its end recorded once
        assert "Traceback" not in err and follower.returncode != 0, err  # the job's run folder freed room, or not)
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.wait()
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_wait_on_a_job_whose_folder_was_removed_ends_in_one_line(tmp_path):
    """The job folder removed while `--wait` follows the job: the end it cannot record is one
    line (it was a traceback), and the follower ends."""
    import shutil
    import signal

    (tmp_path / "s.py").write_text("import time\nprint('training', flush=True)\ntime.sleep(300)\n")
    follower = subprocess.Popen([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--launcher",
                                 "none", "--wait", "s.py"], cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    root = tmp_path / ".hpcdist" / "jobs"
    job_id = None
    try:
        _wait_for(lambda: _quietly(lambda: "training" in (next(root.iterdir()) / jobs.LOG).read_text()),
                  "the job to start")
        folder = next(root.iterdir())
        job_id = _record(folder)["job_id"]
        shutil.rmtree(folder)
        _, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        if job_id:
            try:
                os.killpg(int(job_id), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert "Traceback" not in err and follower.returncode == 1, err
    assert (f"hpcdist: job {job_id} ended (failed), but its record in {folder} could not say so: "
            f"No such file or directory") in err


# -- items 14 and 22: logs in constant memory, and a log that starts again ---------------------------

def test_hpcdist_logs_of_a_huge_log_stays_in_constant_memory(tmp_path):
    """A 512 MiB log (sparse: the disk holds none of it; the reader reads every byte), its
    failure report at the end. `hpcdist logs` read it whole into memory (a 1 GiB log took
    3.9 GB); now it is written a chunk at a time, and the first failure is looked for at its end."""
    job_id = _submit(tmp_path, "import sys\nsys.exit(3)\n", "--wait", exit_code=3)
    (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
    log = tmp_path / ".hpcdist" / "jobs" / name / jobs.LOG
    with open(log, "r+b") as f:
        f.truncate(512 << 20)
        f.seek(0, os.SEEK_END)
        f.write(b"\nthe end of the training\n")
    measure = ("import resource, subprocess, sys\n"  # the log's end kept, the rest read and dropped
               "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
               "tail = b''\n"
               "for chunk in iter(lambda: proc.stdout.read(1 << 20), b''):\n"
               "    tail = (tail + chunk)[-64:]\n"
               "proc.wait()\n"
               "print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, repr(tail))\n")
    measured = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "hpcdist", "logs", job_id],
                              cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300)
    code, peak_kib, tail = measured.stdout.split(" ", 2)
    assert code == "0" and "the end of the training" in tail, measured.stdout + measured.stderr
    assert int(peak_kib) < 150 * 1024, f"hpcdist logs peaked at {int(peak_kib) // 1024} MiB for a 512 MiB log"


def test_following_a_log_that_starts_again_shows_the_new_run(tmp_path):
    """The job's log truncated and written again from its start (as Slurm does when it requeues a
    job by itself without --open-mode=append; logrotate's copytruncate): `--wait` kept waiting
    for the log to grow past where it was, and never showed the new run."""
    import threading

    flag = tmp_path / "go"
    (tmp_path / "s.py").write_text(
        "import os, sys, time\n"
        "print('first run ' + 'x' * 4000, flush=True)\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.1)\n"
        "os.ftruncate(1, 0); os.lseek(1, 0, os.SEEK_SET)  # the log starts again\n"
        "print('second run', flush=True)\ntime.sleep(3)\n")
    follower = subprocess.Popen([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--launcher",
                                 "none", "--wait", "s.py"], cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    seen, err = [], []
    reader = threading.Thread(target=lambda: seen.extend(iter(follower.stdout.readline, "")))
    errors = threading.Thread(target=lambda: err.append(follower.stderr.read()))
    reader.start()
    errors.start()
    try:
        _wait_for(lambda: any("first run" in line for line in seen), "the follower to show the first run")
        flag.touch()
        follower.wait(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        reader.join(timeout=10)
        errors.join(timeout=10)
    assert "second run\n" in seen, (seen[-3:], err)
    assert "started again (cut short: a requeue, or logrotate); showing it from its start" in err[0]
    assert follower.returncode == 0


# -- item 19: status while a submission finishes ---------------------------------------------------

def test_status_read_while_the_submission_records_its_id_is_never_interrupted(tmp_path):
    """`hpcdist status` read a record still marked "submitting", and by the time it looked for the
    submit process, that process had recorded the id and ended: the job was called "submission
    interrupted ... remove <folder>" (3 of 90 snapshots while 32 jobs were submitted). The same
    order of events, made to happen: the record read while marked, then the final record written
    and the submitter gone."""
    from hpcdist.submission import submit as submission

    _submit(tmp_path, "print('done')\n", "--wait")
    (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
    folder = str(tmp_path / ".hpcdist" / "jobs" / name)
    final = open(os.path.join(folder, jobs.RECORD)).read()
    gone = subprocess.Popen(["true"])
    gone.wait()  # a real submitter that has ended: its pid names no process now
    marked = {**json.loads(final), "job_id": "", jobs.SUBMITTING: {"pid": gone.pid, "started": "1"}}
    for ask in (lambda job: submission.status(job), lambda job: submission.statuses([job])[0]):
        with open(os.path.join(folder, jobs.RECORD), "w") as f:
            json.dump(marked, f)
        job = jobs.Job(folder)  # read while the submission had not recorded the id
        with open(os.path.join(folder, jobs.RECORD), "w") as f:
            f.write(final)  # ... which it then did, and ended
        state = ask(job)
        assert (state.state, state.exit_code) == ("COMPLETED", 0), state


# -- item 18: a shared project folder ----------------------------------------------------------------

def _as(user: str, *argv: str, cwd) -> subprocess.CompletedProcess:
    """``hpcdist ARGV`` run by ``user`` (runuser), with this checkout and the test environment's
    packages: this interpreter lives under root's home, which another user cannot enter, so the
    system's python3 runs it (the same minor version)."""
    import sysconfig

    import hpcdist

    here = os.path.dirname(os.path.dirname(os.path.abspath(hpcdist.__file__)))
    path = f"{here}:{sysconfig.get_paths()['purelib']}"
    return subprocess.run(["runuser", "-u", user, "--", "env", f"PYTHONPATH={path}", "/usr/bin/python3", "-m",
                           "hpcdist", *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_second_user_of_a_shared_project_folder_is_told_whose_jobs_folder_it_is(colleague, shared_folder):
    """Two real users, one sticky project folder. The first to submit makes .hpcdist, private to
    them; the second was told "Permission denied; submit from a folder you can write to" (they
    can), or as root "move it away" (the other user's jobs). Now the line names the owner and
    the way out, and nothing is written."""
    name, uid = colleague
    with open(os.path.join(shared_folder, "t.py"), "w") as f:
        f.write("print('hello')\n")
    os.chmod(os.path.join(shared_folder, "t.py"), 0o644)
    first = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--wait", "t.py", cwd=shared_folder)
    assert first.returncode == 0, first.stderr
    second = _as(name, "submit", "--scheduler", "local", "--launcher", "none", "t.py", cwd=shared_folder)
    assert (second.returncode, second.stdout) == (1, "")
    assert second.stderr == (f"hpcdist submit: error: cannot create .hpcdist/jobs: .hpcdist belongs to root (uid 0) "
                             f"and is private to them (Permission denied): hpcdist keeps each user's jobs where "
                             f"only they can write. Submit from a folder of your own (the script may stay here: "
                             f"hpcdist submit {shared_folder}/SCRIPT), or ask them to remove .hpcdist if they no "
                             f"longer need it\n")
    # The other way round: the colleague's jobs folder, and root submitting.
    import shutil

    shutil.rmtree(os.path.join(shared_folder, ".hpcdist"))
    theirs = _as(name, "submit", "--scheduler", "local", "--launcher", "none", "--python", "python3", "t.py",
                 cwd=shared_folder)
    assert theirs.returncode == 0, theirs.stderr
    mine = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "t.py", cwd=shared_folder)
    assert mine.returncode == 1
    assert mine.stderr.startswith(f"hpcdist submit: error: the jobs folder .hpcdist/jobs is owned by {name} "
                                  f"(uid {uid}), not by you, mode 700; ")
    assert mine.stderr.endswith(": submit from a folder of your own (the jobs there are that user's), or, once "
                                "they no longer need them, move it away (mv .hpcdist/jobs .hpcdist/jobs.old) and "
                                "hpcdist makes its own\n")
    assert len(os.listdir(os.path.join(shared_folder, ".hpcdist", "jobs"))) == 1  # the colleague's alone
