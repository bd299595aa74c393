"""The linter's rules (pyproject.toml's [tool.ruff]) hold over the whole tree: a name used and
never defined, an import or variable left unused, a lambda assigned, a syntax error."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_tree_passes_the_linter():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format",
                           "concise", ROOT], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
