"""Job folders that cannot be used: a broken record is one row of ``hpcdist status`` and the other
jobs still work; a jobs folder that is a dangling link, a file, or cannot be made is one line;
job folders another user could have written are refused, and the pid they name is never signalled.

Everything runs for real: local jobs, the CLI in a subprocess. The tests run as root, so "another
user" is uid 65534 (nobody): files are handed to it with os.chown, and the unwritable working
folder is one that nobody may not write, with hpcdist run as nobody.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from test_submit import hpcdist

from hpcdist import jobs

NOBODY = 65534


def _local_job(tmp_path) -> tuple[str, str]:
    """A real local job run to its end: its id and folder."""
    (tmp_path / "s.py").write_text("print('done')\n")
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--wait", "s.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
    return proc.stdout.split("\n")[0], str(tmp_path / ".hpcdist" / "jobs" / name)


def _one_line_error(proc, command: str) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"hpcdist {command}: error: "), proc.stderr
    return proc.stderr.strip()


#: Broken records, each in a copy of a real job's folder: what `hpcdist status` says of each.
BROKEN_RECORDS = {
    "empty": (b"", "is empty"),
    "truncated": (b'{"job_id": "12", "sched', "is not JSON (Unterminated string"),
    "latin1": (b'{"job_id": "12", "job_name": "\xe9t\xe9"}', "is not UTF-8 text (byte 0xe9 at offset 30)"),
    "array": (b"[]", "holds a JSON list, not the object hpcdist writes"),
    "object": (b"{}", "has no 'job_id'"),
    "null-name": (b'{"job_id": "12", "scheduler": "local", "job_name": null}',
                  "holds null as 'job_name', not a string"),
    "option-id": (b'{"job_id": "--me", "scheduler": "slurm"}', "holds the job id '--me', which is not a slurm job id"),
}


def test_a_broken_job_folder_is_one_row_of_status_and_the_other_jobs_still_work(tmp_path):
    job_id, good = _local_job(tmp_path)
    jobs_dir = os.path.dirname(good)
    for name, (content, _) in BROKEN_RECORDS.items():
        shutil.copytree(good, os.path.join(jobs_dir, f"broken-{name}"))
        with open(os.path.join(jobs_dir, f"broken-{name}", jobs.RECORD), "wb") as f:
            f.write(content)
    # An exit_code that holds no number is no record of how the job ended (never a traceback).
    shutil.copytree(good, os.path.join(jobs_dir, "odd-exit"))
    record = json.load(open(os.path.join(good, jobs.RECORD)))
    with open(os.path.join(jobs_dir, "odd-exit", jobs.RECORD), "w") as f:
        json.dump({**record, "job_id": "1"}, f)  # pid 1: never the runner
    with open(os.path.join(jobs_dir, "odd-exit", jobs.EXIT_CODE), "w") as f:
        f.write("abc\n")

    proc = hpcdist("status", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    table = proc.stdout.splitlines()
    assert len(table) == 1 + len(BROKEN_RECORDS) + 2  # the header, a row per folder
    proc = hpcdist("status", "--json", cwd=tmp_path)
    rows = {os.path.basename(row["folder"]): row for row in json.loads(proc.stdout)}
    for name, (_, problem) in BROKEN_RECORDS.items():
        folder = f".hpcdist/jobs/broken-{name}"
        row = rows[f"broken-{name}"]
        assert (row["job_id"], row["state"], row["name"]) == ("-", "BROKEN", f"broken-{name}")
        assert row["reason"].startswith(f"the job record {folder}/record.json {problem}")
        assert row["reason"].endswith(f": hpcdist cannot follow this job; remove the folder (rm -r {folder}) "
                                      "if the job is not needed")
        assert f"-            broken-{name} " in table[1 + sorted(rows).index(f"broken-{name}")]
    good_row = rows[os.path.basename(good)]
    assert (good_row["job_id"], good_row["state"], good_row["exit_code"]) == (job_id, "COMPLETED", 0)
    assert (rows["odd-exit"]["state"], rows["odd-exit"]["reason"]) == (
        "FAILED", "the runner ended without an exit code")

    # The broken job itself: one line, exit 1; the good one as before.
    for command in ("logs", "cancel", "status"):
        line = _one_line_error(hpcdist(command, "broken-empty", cwd=tmp_path), command) if command != "status" \
            else hpcdist(command, "broken-empty", cwd=tmp_path).stdout.splitlines()[1]
        assert "the job record .hpcdist/jobs/broken-empty/record.json is empty" in line
    assert hpcdist("logs", job_id, cwd=tmp_path).stdout.endswith("\ndone\n")
    assert _one_line_error(hpcdist("cancel", job_id, cwd=tmp_path), "cancel").endswith(
        f"job {job_id} has already ended (completed, exit 0): nothing to cancel")
    assert _one_line_error(hpcdist("logs", "4242", cwd=tmp_path), "logs") == (
        f"hpcdist logs: error: no job '4242' in .hpcdist/jobs ({len(BROKEN_RECORDS)} job folder(s) there cannot "
        "be read: `hpcdist status` says why): `hpcdist status` lists the jobs submitted from here")


FOLDER_FAULTS = {
    # the fault, set up in the working folder; what every command says
    "dangling-jobs-link": (lambda cwd: (os.mkdir(cwd / ".hpcdist"),
                                        os.symlink("/nonexistent/jobs", cwd / ".hpcdist" / "jobs")),
                           ".hpcdist/jobs is a link to /nonexistent/jobs, which does not exist: create that folder "
                           "(mkdir -m 700 -p /nonexistent/jobs), or remove the link (rm .hpcdist/jobs) and hpcdist "
                           "makes a folder of its own there"),
    "hpcdist-is-a-file": (lambda cwd: (cwd / ".hpcdist").write_text(""),
                          ".hpcdist is a file, not a folder: hpcdist keeps its jobs in .hpcdist/jobs; move the file "
                          "away (mv .hpcdist .hpcdist.old)"),
    "jobs-is-a-file": (lambda cwd: (os.mkdir(cwd / ".hpcdist"), (cwd / ".hpcdist" / "jobs").write_text("")),
                       ".hpcdist/jobs is a file, not a folder: hpcdist keeps its job folders there; move the file "
                       "away (mv .hpcdist/jobs .hpcdist/jobs.old)"),
}


@pytest.mark.parametrize("fault", FOLDER_FAULTS)
def test_a_jobs_folder_that_cannot_be_used_is_one_line_for_every_command(tmp_path, fault):
    make, message = FOLDER_FAULTS[fault]
    make(tmp_path)
    (tmp_path / "s.py").write_text("print('done')\n")
    for command, args in (("submit", ("--scheduler", "local", "--launcher", "none", "s.py")), ("status", ()),
                          ("logs", ("12",)), ("cancel", ("12",))):
        assert _one_line_error(hpcdist(command, *args, cwd=tmp_path), command) == f"hpcdist {command}: error: {message}"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="runs hpcdist as root without the right to override permissions: root and setpriv")
def test_submit_from_a_folder_the_user_cannot_write_is_one_line():
    # As root every folder is writable: here root runs without CAP_DAC_OVERRIDE, in a folder that
    # nobody owns. Not as nobody: this interpreter's venv may lie under a folder only root can enter
    # (a clone in `mktemp -d`), where nobody's python would not find hpcdist.
    cwd = tempfile.mkdtemp(prefix="hpcdist-unwritable-")
    try:
        os.chmod(cwd, 0o755)
        with open(os.path.join(cwd, "s.py"), "w") as f:
            f.write("print('done')\n")
        os.chown(cwd, NOBODY, NOBODY)
        env = {"PATH": os.environ["PATH"], "HOME": cwd, "LANG": "C.UTF-8"}
        proc = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                               sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local",
                               "--launcher", "none", "s.py"],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert _one_line_error(proc, "submit") == (
            "hpcdist submit: error: cannot create .hpcdist: Permission denied; submit from a folder you can write "
            f"to, or make {cwd} writable for you")
        assert os.listdir(cwd) == ["s.py"]
    finally:
        shutil.rmtree(cwd)


def _planted_job(folder: str, pid: int, owner: int = NOBODY) -> None:
    """A local job's folder naming ``pid``, as another user would plant it (no runner file: the
    record's id is then all there is to go by)."""
    os.makedirs(folder)
    with open(os.path.join(folder, jobs.RECORD), "w") as f:
        json.dump({"job_id": str(pid), "scheduler": "local", "job_name": "planted", "log": "/etc/hostname"}, f)
    for path in (folder, os.path.join(folder, jobs.RECORD)):
        os.chown(path, owner, owner)


@pytest.fixture
def victim():
    """A live process that is no job of ours, leading its own process group as a runner does."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_a_fifo_in_a_job_folder_does_not_hang_status(tmp_path):
    """A record.json or runs file that is a FIFO (planted, or left by a tool): opening one for
    reading waits for a writer, so status would hang. The record is no job; the runs file none."""
    job_id, good = _local_job(tmp_path)
    jobs_dir = os.path.dirname(good)
    fifo_record = os.path.join(jobs_dir, "fifo-record")
    os.mkdir(fifo_record, 0o700)
    os.mkfifo(os.path.join(fifo_record, jobs.RECORD), 0o600)
    os.mkfifo(os.path.join(good, jobs.RUNS + ".new"), 0o600)
    os.replace(os.path.join(good, jobs.RUNS + ".new"), os.path.join(good, jobs.RUNS))
    proc = hpcdist("status", "--json", cwd=tmp_path, timeout=30)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (row,) = json.loads(proc.stdout)
    assert (row["job_id"], row["state"], row["restarts"]) == (job_id, "COMPLETED", 0)


def test_a_jobs_link_into_a_world_writable_folder_is_refused_and_nothing_there_is_signalled(tmp_path, victim):
    shared = tempfile.mkdtemp(prefix="hpcdist-shared-")  # as /tmp: sticky, anyone may add a folder
    try:
        os.chmod(shared, 0o1777)
        _planted_job(os.path.join(shared, "planted-20250101-000000"), victim.pid)
        os.mkdir(tmp_path / ".hpcdist")
        os.symlink(shared, tmp_path / ".hpcdist" / "jobs")
        message = (f"the jobs folder .hpcdist/jobs (a link to {shared}) is owned by root (uid 0), mode 1777 (sticky: "
                   "others cannot remove what is yours, but can add their own); hpcdist follows no job another user "
                   "could have planted there: keep jobs in a folder only you can write to: remove the link "
                   "(rm .hpcdist/jobs) and hpcdist makes its own")
        for command, args in (("status", ()), ("logs", (str(victim.pid),)), ("cancel", (str(victim.pid),))):
            proc = hpcdist(command, *args, cwd=tmp_path)
            assert _one_line_error(proc, command) == f"hpcdist {command}: error: {message}"
        # Handed to another user it is refused for its owner too.
        os.chown(shared, NOBODY, NOBODY)
        assert "is owned by nobody (uid 65534), not by you, mode 1777" in hpcdist("status", cwd=tmp_path).stderr
        time.sleep(0.2)
        assert victim.poll() is None, "hpcdist cancel signalled a pid another user's record named"
    finally:
        shutil.rmtree(shared)


def test_a_job_folder_another_user_owns_is_a_broken_row_and_is_never_cancelled(tmp_path, victim):
    job_id, good = _local_job(tmp_path)
    planted = str(tmp_path / ".hpcdist" / "jobs" / "planted-20250101-000000")
    _planted_job(planted, victim.pid)
    proc = hpcdist("status", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if "planted" in line]
    assert row.split(None, 4)[:4] == ["-", "planted-20250101-000000", "-", "broken"]
    assert row.endswith("the job folder .hpcdist/jobs/planted-20250101-000000 is owned by nobody (uid 65534), not "
                        "by you, mode 755; hpcdist follows no job another user could have written: remove the job "
                        "folder if the job is not yours or not needed")
    assert _one_line_error(hpcdist("cancel", "planted-20250101-000000", cwd=tmp_path), "cancel").endswith(
        "remove the job folder if the job is not yours or not needed")
    assert "no job" in _one_line_error(hpcdist("cancel", str(victim.pid), cwd=tmp_path), "cancel")
    # Ours, but writable by others: refused too (anyone could have rewritten the pid), the fix is ours to make.
    for path in (planted, os.path.join(planted, jobs.RECORD)):
        os.chown(path, 0, 0)
    os.chmod(os.path.join(planted, jobs.RECORD), 0o666)
    assert _one_line_error(hpcdist("cancel", "planted-20250101-000000", cwd=tmp_path), "cancel").endswith(
        "the job record .hpcdist/jobs/planted-20250101-000000/record.json is owned by root (uid 0), mode 666 (others "
        "can write it); hpcdist follows no job another user could have written: check that no one changed it, then "
        "chmod go-w .hpcdist/jobs/planted-20250101-000000/record.json")
    time.sleep(0.2)
    assert victim.poll() is None, "hpcdist cancel signalled a pid another user's record named"
    assert hpcdist("logs", job_id, cwd=tmp_path).stdout.endswith("\ndone\n")


def test_a_record_naming_a_live_process_without_its_runner_file_is_never_cancelled(tmp_path, victim):
    # Our own folder, but its runner file is gone: the record's id alone does not prove the process is the job.
    _planted_job(str(tmp_path / ".hpcdist" / "jobs" / "lost-20250101-000000"), victim.pid, owner=0)
    os.chmod(tmp_path / ".hpcdist" / "jobs" / "lost-20250101-000000", 0o700)
    assert _one_line_error(hpcdist("cancel", str(victim.pid), cwd=tmp_path), "cancel") == (
        f"hpcdist cancel: error: job {victim.pid} has already ended (failed): nothing to cancel")
    time.sleep(0.2)
    assert victim.poll() is None, "hpcdist cancel signalled a process that is not the job's runner"


def test_a_log_the_record_names_that_is_a_folder_is_one_line_for_logs_and_logs_f(tmp_path):
    """A record edited by hand (or damaged) so that its log is a folder: reading the log, at once
    or following it, says so in one line (IsADirectoryError was a traceback)."""
    job_id, folder = _local_job(tmp_path)
    record = json.loads((tmp_path / folder / "record.json").read_text())
    record["log"] = str(tmp_path)
    (tmp_path / folder / "record.json").write_text(json.dumps(record))
    for flags in ((), ("-f",)):
        line = _one_line_error(hpcdist("logs", *flags, job_id, cwd=tmp_path), "logs")
        assert "Is a directory" in line and str(tmp_path) in line, (flags, line)
