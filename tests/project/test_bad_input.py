"""Absurd input, as a careless job script or an odd site tool gives it: one clear line and exit 1,
or an answer, never a traceback (issue 12, items 10-12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from launch import clean_env

FAKES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fakes")


def hpcdist(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], env=env or clean_env(),
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def one_error_line(proc, command: str) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"hpcdist {command}: error: ")
    return line


# -- hpcdist env on garbage variables ---------------------------------------------------------

@pytest.mark.parametrize("variable,meaning", [("RANK", "global rank"), ("MASTER_PORT", "master port")])
def test_env_refuses_a_number_of_5000_digits_in_one_trimmed_line(variable, meaning):
    extra = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
             "TORCHELASTIC_RUN_ID": "x"} if variable == "RANK" else {}
    proc = hpcdist("env", env=clean_env(**{**extra, variable: "7" * 5000}))
    line = one_error_line(proc, "env")
    assert f"{variable}='{'7' * 40}...' (5000 characters) is too large for a {meaning}" in line
    assert "unset it or fix the job script that sets it" in line
    assert len(line) < 300


@pytest.mark.parametrize("variable,field", [("SLURM_JOB_ID", "master_port"), ("MASTER_ADDR", "master_addr")])
def test_env_refuses_bytes_that_are_not_utf8_naming_the_variable(variable, field):
    # subprocess passes the surrogate on as the byte 0xff, as a shell's $'\xff' does.
    proc = hpcdist("env", "--field", field, env=clean_env(**{variable: "\udcff"}))
    line = one_error_line(proc, "env")
    assert f"{variable}='\\xff' is not" in line and "UTF-8" in line
    assert "unset it or fix the job script that sets it" in line
    assert proc.stdout == ""


def test_a_job_id_of_5000_digits_still_gives_a_port():
    proc = hpcdist("env", "--field", "master_port", env=clean_env(SLURM_JOB_ID="1" * 4999 + "2"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "21112\n", "")


# -- qstat's odd numbers, and an exit_code no shell writes ----------------------------------------

def qstat_json(**attributes: str) -> str:
    """qstat -F json of one finished job; each value is JSON text, as qstat would print it."""
    entry = {"job_state": '"F"', "Exit_status": "0", "substate": "92", **attributes}
    body = ", ".join(f'"{k}": {v}' for k, v in entry.items())
    return '{"Jobs": {"1.server": {' + body + "}}}"


@pytest.mark.parametrize("attributes,state", [
    ({"substate": "1e999"}, "COMPLETED"),             # only a hint: ignored
    ({"substate": "-Infinity", "Exit_status": "null"}, "FAILED"),
    ({"substate": "NaN"}, "COMPLETED"),
    ({"Exit_status": "1e999"}, None),                 # None: a SchedulerOutputError
    ({"Exit_status": "1" * 30}, None),
    ({"Exit_status": "-" + "1" * 30}, None),
    ({"Exit_status": "2.5"}, None),
    ({"Exit_status": "[]"}, None),
])
def test_qstat_json_with_odd_numbers_is_an_answer_or_an_output_error(attributes, state):
    from hpcdist.schedulers.base import JobId, SchedulerOutputError
    from hpcdist.schedulers.pbs.qstat import parse_qstat_pro_json

    text = qstat_json(**attributes)
    if state is None:
        with pytest.raises(SchedulerOutputError, match="Exit_status in qstat -F json output is not an integer"):
            parse_qstat_pro_json(text, JobId("1.server", scheduler="pbs"))
    else:
        assert parse_qstat_pro_json(text, JobId("1.server", scheduler="pbs")).state == state


def test_status_behind_a_qstat_printing_infinity(tmp_path):
    """A STAND-IN qstat printing ``"substate": 1e999`` (no PBS server exists here, and a real one
    prints no such thing on demand); qsub is the fake of tests/fakes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qstat = bin_dir / "qstat"
    qstat.write_text("#!/bin/sh\ncat <<'EOF'\n" + qstat_json(substate="1e999").replace("1.server", "12345.server")
                     + "\nEOF\n")
    qstat.chmod(0o755)
    (tmp_path / "train.py").write_text("")
    env = clean_env(HPCDIST_FAKE_LOG=str(tmp_path / "fake.log"), HPCDIST_FAKE_PBS_SERVER="server")
    env["PATH"] = os.pathsep.join([str(bin_dir), FAKES, env["PATH"]])
    proc = hpcdist("submit", "--scheduler", "pbs", "--json", "train.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0)


def status_once_the_runner_is_gone(cwd) -> dict:
    """--wait returns once the exit_code file is there; the runner's shell ends a moment later."""
    deadline = time.monotonic() + 20
    while True:
        (row,) = json.loads(hpcdist("status", "--json", cwd=cwd).stdout)
        if row["state"] != "RUNNING" or time.monotonic() > deadline:
            return row
        time.sleep(0.1)


def test_an_exit_code_of_256_is_no_record_and_status_and_logs_follow_agree(tmp_path):
    """A shell's exit status is 0-255: 256 in the file is not one hpcdist's trap wrote. Before,
    status said failed (exit 256) while `logs -f` exited 256 % 256 = 0."""
    (tmp_path / "s.py").write_text("print('hello')\n")
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--wait", "s.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (folder,) = (tmp_path / ".hpcdist" / "jobs").iterdir()
    (folder / "exit_code").write_text("256\n")
    row = status_once_the_runner_is_gone(tmp_path)
    assert row["state"] == "FAILED" and row["exit_code"] is None
    follow = hpcdist("logs", "-f", row["job_id"], cwd=tmp_path)
    assert follow.returncode == 1, follow.stderr
    assert "hello" in follow.stdout


# -- accepted but absurd: numbers, directories, a dash, a carriage return ---------------------------

@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "s.py").write_text("print('hello')\n")
    (tmp_path / "folder.py").mkdir()
    return tmp_path


@pytest.mark.parametrize("flags,message", [
    (["--launcher", "deepspeed", "--ssh-port", "99999999999999999"],
     "--ssh-port '99999999999999999': is more than 65535, the highest TCP port. Give the port sshd listens on"),
    (["--ssh-port", "65536"], "--ssh-port '65536': is more than 65535"),
    (["--nodes", "99999999999999999"],
     "--nodes '99999999999999999': is more than 2147483647, the most a scheduler or launcher reads"),
    (["--nodes", "1" * 5000], "is more than 2147483647"),
    (["--scheduler", "slurm", "--nodes", "99999999999999999"], "--nodes '99999999999999999': is more than 2147483647"),
    (["--scheduler", "pbs", "--nodes", "100000", "--procs-per-node", "100000"],
     "--nodes '100000': times --procs-per-node 100000 is 10000000000 processes, more than 2147483647"),
    (["--nodes", "2000"], "--nodes '2000': the local backend would start 2000 processes on this host "
                          "(2000 node(s) x 1); it starts at most 1024. Ask for fewer, or submit with --scheduler"),
    (["--nodes", "64", "--procs-per-node", "64"], "--nodes '64': the local backend would start 4096 processes"),
])
def test_absurd_numbers_are_refused_in_one_line(workdir, flags, message):
    proc = hpcdist("render", *flags, "s.py", cwd=workdir)
    assert message in one_error_line(proc, "render")


def test_a_port_and_a_local_size_in_range_are_taken(workdir):
    proc = hpcdist("render", "--launcher", "deepspeed", "--ssh-port", "65535", "s.py", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "--ssh_port 65535" in proc.stdout
    proc = hpcdist("render", "--nodes", "4", "--procs-per-node", "256", "s.py", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "agents --local --nodes 4 --" in proc.stdout and "--nproc-per-node=256" in proc.stdout


@pytest.mark.parametrize("flags,message", [
    ([], "SCRIPT 'folder.py': is a directory; it must name a file."),
    (["--launcher", "deepspeed", "--deepspeed-config", "folder.py"],
     "--deepspeed-config 'folder.py': is a directory; it must name a file."),
    (["--template", "folder.py"], "--template 'folder.py': is a directory; it must name a file."),
])
def test_a_directory_given_as_a_file_is_called_a_directory(workdir, flags, message):
    script = "folder.py" if not flags else "s.py"
    line = one_error_line(hpcdist("render", *flags, script, cwd=workdir), "render")
    assert message in line and "does not exist" not in line


@pytest.mark.parametrize("scheduler", ["local", "slurm", "pbs"])
def test_a_script_whose_name_starts_with_a_dash_works_after_double_dash(workdir, scheduler):
    (workdir / "-dash.py").write_text("print('dash ran')\n")
    proc = hpcdist("render", "--scheduler", scheduler, "--", "-dash.py", "--lr", "1", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert " ./-dash.py --lr 1" in proc.stdout
    assert "-N -dash" not in proc.stdout and "--job-name=-dash" not in proc.stdout  # named dash.py's way


def test_a_script_whose_name_starts_with_a_dash_runs(workdir):
    (workdir / "-dash.py").write_text("print('dash ran')\n")
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--wait", "--", "-dash.py", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "dash ran" in proc.stdout
    (folder,) = (workdir / ".hpcdist" / "jobs").iterdir()
    assert folder.name.startswith("dash-")


def test_a_carriage_return_in_an_argument_is_shown_escaped_in_the_header(workdir):
    proc = hpcdist("render", "s.py", "a\rb", "x\ny", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stdout
    assert "#   hpcdist render s.py $'a\\rb' $'x\\ny'\n" in proc.stdout


@pytest.mark.parametrize("folder", ["my runs", "run;1", "it's"])
def test_deepspeed_over_pdsh_refuses_a_submit_folder_it_would_break_in(tmp_path, folder):
    """DeepSpeed's pdsh runner starts the other nodes with `cd PATH;` unquoted: on the real OpenPBS a
    folder with a space gave "cd: too many arguments" on every node, then "can't open file". Caught
    before the queue; --no-ssh and one node (no pdsh) are fine there."""
    here = tmp_path / folder
    here.mkdir()
    (here / "s.py").write_text("print('hello')\n")
    line = one_error_line(hpcdist("render", "--scheduler", "pbs", "--nodes", "2", "--launcher", "deepspeed", "s.py",
                                  cwd=here), "render")
    assert f"the submit folder {str(here)!r}: DeepSpeed's pdsh runner starts the other nodes with `cd {here};`" in line
    assert "or use --no-ssh" in line
    for fine in (["--nodes", "2", "--no-ssh"], ["--nodes", "1"]):
        proc = hpcdist("render", "--scheduler", "pbs", "--launcher", "deepspeed", *fine, "s.py", cwd=here)
        assert proc.returncode == 0, proc.stderr
