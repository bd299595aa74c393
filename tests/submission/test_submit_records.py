"""A job the scheduler took is never lost: its folder keeps a record whatever happens after the
submit command started (output that is not UTF-8, a full disk, a SIGTERM), and ``hpcdist status``
always shows the folder: with its id, or as one "submission interrupted" row that says what to check.

The ``sbatch``/``squeue``/``qstat`` here are STAND-INS for a site's wrapper scripts (no real
Slurm or PBS can be made to print a Latin-1 banner, fill a disk or sleep on demand); the others
come from tests/fakes/. The full disk is a real small tmpfs, mounted for the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_scheduler_trouble import FAKES, calls_of, fake_env, hpcdist, job_folders

#: What a site's banner in Latin-1 looks like: "été" is not UTF-8.
LATIN1_BANNER = r"printf 'Bienvenue \351t\351\n'"


def _stand_in(folder, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def _env(tmp_path, **settings) -> dict:
    """The fakes, with tmp_path/bin (the stand-ins) before them on PATH."""
    env = fake_env(tmp_path, **settings)
    (tmp_path / "bin").mkdir(exist_ok=True)
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def _record(cwd) -> dict:
    (name,) = job_folders(cwd)
    return json.loads((cwd / ".hpcdist" / "jobs" / name / "record.json").read_text())


def _status(cwd, env) -> list[dict]:
    proc = hpcdist("status", "--json", cwd=cwd, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_a_latin1_banner_from_sbatch_still_records_the_job(tmp_path):
    """Stand-in sbatch: a site wrapper printing a Latin-1 banner before the id."""
    env = _env(tmp_path)
    _stand_in(tmp_path / "bin", "sbatch", LATIN1_BANNER + "\necho 4242")
    (tmp_path / "s.py").write_text("")
    proc = hpcdist("submit", "--scheduler", "slurm", "s.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "4242\n" and "Traceback" not in proc.stderr
    assert _record(tmp_path)["job_id"] == "4242"


@pytest.mark.parametrize("scheduler,command", [("slurm", "squeue"), ("pbs", "qstat")])
def test_latin1_from_squeue_or_qstat_does_not_break_status(scheduler, command, tmp_path):
    """Stand-in squeue/qstat: a site wrapper that prints a Latin-1 banner on stderr, then runs
    the fake (tests/fakes) that answers for a running job."""
    env = _env(tmp_path)
    (tmp_path / "s.py").write_text("")
    assert hpcdist("submit", "--scheduler", scheduler, "s.py", cwd=tmp_path, env=env).returncode == 0
    _stand_in(tmp_path / "bin", command, f'{LATIN1_BANNER} >&2\nexec {FAKES}/{command} "$@"')
    (row,) = _status(tmp_path, env)
    assert row["job_id"].startswith("12345") and row["state"] == "RUNNING", row


@pytest.fixture
def small_disk(tmp_path):
    """A real 2 MiB tmpfs, the submit folder (and so the job folder) on it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        (disk / "s.py").write_text("")
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


#: The stand-in sbatch's last step: fill the disk the job folder is on (dd stops at ENOSPC).
FILL_DISK = "dd if=/dev/zero of=filler bs=64k 2>/dev/null; true"


def test_a_disk_that_fills_up_after_sbatch_took_the_job_still_gets_the_record(small_disk, tmp_path):
    """Stand-in sbatch: it prints the id, then the disk is full (another job's output filled it)."""
    env = _env(tmp_path)
    _stand_in(tmp_path / "bin", "sbatch", f"echo 4242\n{FILL_DISK}")
    proc = hpcdist("submit", "--scheduler", "slurm", "s.py", cwd=small_disk, env=env)
    assert proc.returncode == 0 and proc.stdout == "4242\n", proc.stderr
    assert _record(small_disk)["job_id"] == "4242"
    (row,) = _status(small_disk, env)
    assert row["job_id"] == "4242" and row["state"] == "RUNNING", row


def test_an_id_that_cannot_be_written_is_printed_and_the_folder_shows_as_interrupted(small_disk, tmp_path):
    """Stand-in sbatch: an answer longer than the room the record kept for it (a cluster name
    of 6000 characters), then a full disk: the id can be read but not written."""
    env = _env(tmp_path)
    _stand_in(tmp_path / "bin", "sbatch",
              f"printf '4242;%s\\n' \"$(head -c 6000 /dev/zero | tr '\\0' c)\"\n{FILL_DISK}")
    proc = hpcdist("submit", "--scheduler", "slurm", "s.py", cwd=small_disk, env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "4242" in line]
    assert "slurm accepted job 4242" in line and "No space left on device" in line, line
    (row,) = _status(small_disk, env)
    assert row["state"] == "SUBMISSION INTERRUPTED" and "job name s in `squeue --me`" in row["reason"], row
    assert f"remove {row['folder']}" in row["reason"], row
    table = hpcdist("status", cwd=small_disk, env=env).stdout
    assert "submission interrupted" in table, table


@pytest.mark.parametrize("sig,ends", [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP),
                                      (signal.SIGINT, 130)])  # Ctrl-C: exit 130, no traceback
def test_a_signal_while_sbatch_runs_waits_for_the_id_records_it_then_stops(sig, ends, tmp_path):
    """Stand-in sbatch: a slow one (a busy controller) that says when it started and answers
    when the test lets it (after the signal was sent)."""
    env = _env(tmp_path)
    _stand_in(tmp_path / "bin", "sbatch", f"touch {tmp_path}/started\n"
              f"for i in $(seq 600); do [ -e {tmp_path}/go ] && break; sleep 0.05; done\necho 4242")
    (tmp_path / "s.py").write_text("")
    # As a terminal starts it: the signal not ignored (a suite run under nohup, or in the background
    # of a script, would pass on SIGHUP's or SIGINT's SIG_IGN, which hpcdist honours).
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "slurm", "s.py"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    (row,) = _status(tmp_path, env)  # meanwhile, another shell sees the submission under way
    assert row["state"] == "SUBMITTING" and f"(pid {proc.pid})" in row["reason"], row
    proc.send_signal(sig)
    time.sleep(0.3)
    (tmp_path / "go").touch()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == ends, stderr          # it still ends from the signal
    assert "Traceback" not in stderr and "job 4242 is recorded" in stderr, stderr
    assert _record(tmp_path)["job_id"] == "4242"
    (row,) = _status(tmp_path, env)
    assert row["job_id"] == "4242" and row["state"] == "RUNNING", row


def test_a_submit_command_that_hangs_keeps_the_folder_as_interrupted(tmp_path):
    """FAKE sbatch that hangs: the controller may have queued the job, so the folder stays, and
    status names the job to look for instead of showing nothing."""
    env = _env(tmp_path, HPCDIST_SUBMIT_TIMEOUT="1", HPCDIST_FAKE_SBATCH="hang")
    (tmp_path / "s.py").write_text("")
    proc = hpcdist("submit", "--scheduler", "slurm", "s.py", cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 1 and "may have been queued anyway" in proc.stderr, proc.stderr
    assert "submission interrupted" in proc.stderr and len(calls_of(tmp_path, "sbatch")) == 1
    (row,) = _status(tmp_path, env)
    assert row["state"] == "SUBMISSION INTERRUPTED" and "job name s in `squeue --me`" in row["reason"], row
    for command in ("cancel", "logs"):  # no id: nothing to cancel, no log; each says what to check
        answer = hpcdist(command, os.path.basename(row["folder"]), cwd=tmp_path, env=env)
        assert answer.returncode == 1 and "squeue --me" in answer.stderr, (command, answer.stderr)
        assert "Traceback" not in answer.stderr and "job  " not in answer.stderr, (command, answer.stderr)


def test_a_refused_submission_still_leaves_nothing(tmp_path):
    """FAKE sbatch refusing the job (invalid partition): nothing was queued, nothing is kept."""
    env = _env(tmp_path, HPCDIST_FAKE_SBATCH="fail")
    (tmp_path / "s.py").write_text("")
    proc = hpcdist("submit", "--scheduler", "slurm", "s.py", cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "invalid partition" in proc.stderr
    assert job_folders(tmp_path) == []
