"""The test command itself: its closing summary says what it installed on this machine, and a
run that leaves files in the clone (jobs in its .hpcdist/, say) fails, naming them (tests/conftest.py).

Each test runs pytest in a subprocess with this folder's conftest on a small test file of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from launch import clean_env

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)


def pytest_run(tmp_path, test_text: str, **env) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(test_text)
    environ = clean_env(PYTHONPATH=HERE, **env)
    environ.pop("HPCDIST_INSTALL_RECORD", None)
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300)


def test_the_summary_says_what_was_installed(tmp_path):
    record = tmp_path / "installed"
    record.write_text("scripts/bootstrap.sh: apt-get install openmpi-bin libopenmpi-dev (system-wide)\n"
                      "tests/cluster/cluster.sh (the test cluster): apt-get install slurm-wlm munge (system-wide)\n")
    proc = pytest_run(tmp_path, "def test_nothing():\n    pass\n", HPCDIST_INSTALL_RECORD=str(record))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.split("installed on this machine during this run")[1]
    assert "scripts/bootstrap.sh: apt-get install openmpi-bin libopenmpi-dev (system-wide)" in summary
    assert "tests/cluster/cluster.sh (the test cluster): apt-get install slurm-wlm munge (system-wide)" in summary
    assert "no configuration and no controller outside the tests" in summary and "use --scheduler local" in summary


def test_the_summary_says_when_nothing_was_installed(tmp_path):
    proc = pytest_run(tmp_path, "def test_nothing():\n    pass\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "installed on this machine during this run" in proc.stdout
    assert "nothing (what the tests need was there already" in proc.stdout


def test_a_job_left_in_the_clones_hpcdist_fails_the_run(tmp_path):
    """The probe writes a job folder into the clone's .hpcdist/ (as a test that submits from the
    repository would); the run fails and names it. The folder is removed afterwards."""
    name = f"probe-{os.getpid()}"
    hpcdist_dir = os.path.join(ROOT, ".hpcdist")
    existed = os.path.exists(hpcdist_dir)
    probe = (f"import os\n\ndef test_leaves_a_job():\n"
             f"    os.makedirs({os.path.join(hpcdist_dir, 'jobs', name)!r})\n")
    try:
        proc = pytest_run(tmp_path, probe)
    finally:
        shutil.rmtree(os.path.join(hpcdist_dir, "jobs", name), ignore_errors=True)
        if not existed:
            shutil.rmtree(hpcdist_dir, ignore_errors=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout and "files the tests left in the clone" in proc.stdout
    assert f"  .hpcdist/jobs/{name}" in proc.stdout
