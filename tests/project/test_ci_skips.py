"""Under ``CI=true`` a skip fails unless it is opt-in (tests/ci_skips.py), run by pytest itself on
a file of its own: the laptop tests once skipped whole on every fresh machine, and a skip passes."""

import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ROWS = """
import pytest

def test_needs_a_program():
    pytest.skip("needs sshd")

@pytest.mark.skipif(True, reason="the comparison is opt-in: HPCDIST_X=1")
def test_on_request():
    pass

def test_plain():
    pass
"""


def run(tmp_path, ci: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_rows.py").write_text(ROWS)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(CI=ci, PYTHONPATH=TESTS)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "ci_skips",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
            "test_rows.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_under_ci_a_skip_that_could_be_installed_fails_saying_why(tmp_path):
    proc = run(tmp_path, "true")
    assert proc.returncode == 1, proc.stdout
    assert "1 failed, 1 passed, 1 skipped" in proc.stdout
    assert "skipped under CI=true, which counts as a failure: needs sshd" in proc.stdout
    assert "SKIPPED [1] test_rows.py:7: the comparison is opt-in" in proc.stdout


def test_outside_ci_a_skip_is_a_skip(tmp_path):
    proc = run(tmp_path, "")
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 2 skipped" in proc.stdout
