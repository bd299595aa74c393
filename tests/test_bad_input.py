"""Absurd input, as a careless job script or an odd site tool gives it: one clear line and exit 1,
or an answer, never a traceback (issue 12, items 10-12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from launch import clean_env

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakes")


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
