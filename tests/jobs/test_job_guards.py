"""What hpcdist must never do to what is not the job's: signal a reused pid, overwrite the
training script with the log, run Python from a template, or leave a traceback when Ctrl-C
stops ``--wait``. Everything runs for real: local jobs, the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_submit import hpcdist

from hpcdist import jobs


def _local_job(tmp_path, body: str, *flags: str) -> str:
    script = tmp_path / "s.py"
    script.write_text(body)
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", *flags, str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")[0]  # the id; --wait then prints the log


def _status(tmp_path, job_id: str) -> dict:
    return json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)[0]


def _folder(tmp_path) -> str:
    (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
    return str(tmp_path / ".hpcdist" / "jobs" / name)


def test_cancel_of_a_local_job_whose_pid_now_belongs_to_another_process_signals_nothing(tmp_path):
    job_id = _local_job(tmp_path, "print('done')\n", "--wait")
    folder = _folder(tmp_path)
    # The kernel cannot be made to hand the runner's pid to a new process on demand, so the
    # reuse is set up the other way round: the record is pointed at a live process that is
    # not the runner (another start time), as it would be after the pid came round again.
    # The job also lost its exit code (a killed runner writes none): only the pid is left.
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        _, started = jobs.read_runner(folder)
        record = json.loads(open(os.path.join(folder, jobs.RECORD)).read())
        with open(os.path.join(folder, jobs.RECORD), "w") as f:
            json.dump({**record, "job_id": str(other.pid)}, f)
        jobs.write_runner(folder, other.pid, started)
        os.remove(jobs.exit_code_file(folder))
        proc = hpcdist("cancel", str(other.pid), cwd=tmp_path)
        time.sleep(0.3)
        assert other.poll() is None, "hpcdist cancel signalled a process that is not the job's"
        assert proc.returncode == 1
        assert proc.stderr.strip() == (f"hpcdist cancel: error: job {other.pid} has already ended "
                                       "(failed): nothing to cancel")
    finally:
        other.kill()
        other.wait()
    assert job_id != str(other.pid)


def test_cancel_of_a_finished_local_job_says_so_and_status_still_says_completed(tmp_path):
    job_id = _local_job(tmp_path, "print('done')\n", "--wait")
    proc = hpcdist("cancel", job_id, cwd=tmp_path)
    assert proc.returncode == 1
    assert f"job {job_id} has already ended (completed, exit 0): nothing to cancel" in proc.stderr
    assert _status(tmp_path, job_id)["state"] == "COMPLETED"


def test_output_naming_the_training_script_is_refused_and_the_script_is_kept(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('training')\n")
    (tmp_path / "link.py").symlink_to("s.py")
    for output in ("s.py", "./s.py", "link.py", str(script)):
        proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--output", output, "--wait",
                       "s.py", cwd=tmp_path)
        assert proc.returncode == 1
        assert proc.stderr.startswith(f"hpcdist submit: error: --output {output!r}: is SCRIPT 's.py': "
                                      "the job's log would overwrite it.")
    assert script.read_text() == "print('training')\n"
    assert not (tmp_path / ".hpcdist").exists()


def test_output_in_a_missing_folder_or_naming_a_folder_is_refused(tmp_path):
    (tmp_path / "s.py").write_text("print(1)\n")
    missing = hpcdist("render", "--scheduler", "slurm", "--output", "my logs/x.log", "s.py", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stdout == ""
    assert ("is in 'my logs', which does not exist: the scheduler would not create it, and the job would "
            "have no log. Create it first (mkdir -p 'my logs').") in missing.stderr
    folder = hpcdist("render", "--scheduler", "slurm", "--output", ".", "s.py", cwd=tmp_path)
    assert folder.returncode == 1 and "--output '.': is a folder; the log is a file." in folder.stderr
    # The scheduler's own patterns name a file of its own: not checked here.
    assert hpcdist("render", "--scheduler", "slurm", "--output", "%x-%j.log", "s.py", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("dialect", ["pro", "torque"])
def test_slurms_patterns_in_a_pbs_output_are_refused_before_the_queue(tmp_path, dialect):
    """PBS writes `-o train-%j.log` as it reads: hpcdist used to record train-7.server.log, a file
    that never came, and `logs` found no log."""
    (tmp_path / "s.py").write_text("print(1)\n")
    proc = hpcdist("render", "--scheduler", "pbs", "--dialect", dialect, "--output", "train-%j.log",
                   "s.py", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert ("--output 'train-%j.log': PBS writes the log where the path says, as written: %j and %x "
            "(Slurm's job id and name) would stay in the file's name. Give a name without them, or "
            "leave --output out") in proc.stderr, proc.stderr


def _site_template(tmp_path, body: str) -> None:
    """A ./hpcdist.toml, read without being asked for, whose template folder holds ``body``."""
    (tmp_path / "site").mkdir(parents=True)
    (tmp_path / "site" / "local.sh.j2").write_text(body)
    (tmp_path / "hpcdist.toml").write_text('default = "here"\n[profiles.here]\ntemplate_dir = "site"\n')
    (tmp_path / "s.py").write_text("print(1)\n")


def test_a_template_cannot_run_python(tmp_path):
    _site_template(tmp_path, '{% set _ = lipsum.__globals__["os"].system("touch PWNED") %}\n')
    proc = hpcdist("render", "--scheduler", "local", "s.py", cwd=tmp_path)
    assert not (tmp_path / "PWNED").exists()
    assert proc.returncode == 1 and proc.stdout == ""
    where = tmp_path / "site" / "local.sh.j2"
    assert proc.stderr == ("hpcdist render: using profile here (the default in hpcdist.toml); --profile NAME "
                           "chooses another, --profile none uses none\n"
                           f"hpcdist render: error: template '{where}:1': access to attribute '__globals__' of "
                           "'function' object is unsafe: a template may read the values it is given and use "
                           "filters and macros, not reach Python or call hpcdist's methods. Fix the template "
                           "(hpcdist/schedulers/TEMPLATES.md says what it gets), or use hpcdist's own.\n")


def test_a_template_cannot_call_the_schedulers_methods_and_a_broken_one_is_one_line(tmp_path):
    _site_template(tmp_path, '{{ scheduler.cancel(none) }}\n')
    proc = hpcdist("render", "--scheduler", "local", "s.py", cwd=tmp_path)
    assert proc.returncode == 1 and "Local.cancel of <local scheduler>> is not safely callable" in proc.stderr
    (tmp_path / "site" / "local.sh.j2").write_text('line one\n{{ no_such_value }}\n')
    proc = hpcdist("render", "--scheduler", "local", "s.py", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "local.sh.j2:2': UndefinedError: 'no_such_value' is undefined." in proc.stderr
    # What a template is for still works: extending ours, reading values, filters.
    (tmp_path / "site" / "local.sh.j2").write_text(
        '{% extends "hpcdist/local.sh.j2" %}\n{% block launch %}echo {{ spec.nodes }} '
        '{{ "a b" | upper }}\n{{ super() | raw }}{% endblock %}\n')
    proc = hpcdist("render", "--scheduler", "local", "s.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "echo 1 'A B'\n" in proc.stdout


def test_ctrl_c_during_wait_leaves_the_job_running_and_says_how_to_follow_it(tmp_path):
    (tmp_path / "s.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--launcher",
                             "none", "--wait", "s.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not os.path.isfile(os.path.join(
                tmp_path, ".hpcdist", "jobs", *(os.listdir(tmp_path / ".hpcdist" / "jobs")
                                                if (tmp_path / ".hpcdist" / "jobs").is_dir() else ["-"]), "job.log")):
            time.sleep(0.1)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    job_id = out.split("\n")[0]
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.rstrip().endswith(f"hpcdist: stopped following job {job_id}; the job goes on. Follow it again with "
                                 f"`hpcdist logs -f {job_id}`, or stop it with `hpcdist cancel {job_id}`.")
    assert _status(tmp_path, job_id)["state"] == "RUNNING"
    assert hpcdist("cancel", job_id, cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("body,message", [
    ("{{ 1/0 }}", "ZeroDivisionError: division by zero."),
    ("{{ 'a' + 1 }}", 'TypeError: can only concatenate str (not "int") to str.'),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError: a macro calls itself without end."),
    ("{% for i in range(10**9) %}{% endfor %}", "OverflowError: Range too big."),
    ("{{ 'x' * 10**9 }}", "1 item(s) times 1000000000 is more than a job script holds (1,000,000)."),
    ("{{ [1, 2] * 10**8 }}", "2 item(s) times 100000000 is more than a job script holds (1,000,000)."),
    ("{{ 7 ** 10000000 }}", "7 ** 10000000 is a larger number than a job script holds."),
])
def test_a_template_that_python_cannot_evaluate_is_one_line_and_bounded(tmp_path, body, message):
    """Errors that are Python's, not Jinja's, printed a traceback; `'x' * 10**9` ran 20 s and took
    1.7 GB first. Each is one line naming the template's file and line, at once."""
    _site_template(tmp_path, "line one\n" + body + "\n")
    started = time.monotonic()
    proc = hpcdist("render", "--scheduler", "local", "s.py", cwd=tmp_path)
    assert time.monotonic() - started < 30
    where = tmp_path / "site" / "local.sh.j2"
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and len(lines) == 2, proc.stderr
    assert lines[1].startswith(f"hpcdist render: error: template '{where}:2': {message}")
    assert lines[1].endswith(" Fix the template (hpcdist/schedulers/TEMPLATES.md says what it gets), or use "
                             "hpcdist's own.")


def test_a_number_too_long_to_read_in_a_template_names_the_template(tmp_path):
    _site_template(tmp_path, "{{ 1" + "0" * 5000 + " }}\n")
    proc = hpcdist("render", "--scheduler", "local", "s.py", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"hpcdist render: error: template '{tmp_path / 'site' / 'local.sh.j2'}': ValueError: Exceeds the limit" \
        in proc.stderr
