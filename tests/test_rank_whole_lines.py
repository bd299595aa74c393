"""Each rank's printed lines reach a torchrun job's log whole (issue 50 §5): the ranks of a node
share one log, and under PYTHONUNBUFFERED (python -u) print writes a line's text and its newline
in two writes, so two ranks' lines ran into one ("rank 1 line 7rank 3 line 7\\n\\n")."""

from __future__ import annotations

import re
import subprocess
import sys

from launch import clean_env

LINES = 3000
#: Each rank waits for the others (a file each), then prints: all four write at once.
SCRIPT = f"""import os, time
rank = os.environ["RANK"]
open(f"started-{{rank}}", "w").close()
while sum(os.path.exists(f"started-{{r}}") for r in range(4)) < 4:
    time.sleep(0.01)
for i in range({LINES}):
    print(f"rank {{rank}} line {{i}} " + "x" * 40)
"""


def test_a_torchrun_job_s_log_holds_every_rank_s_lines_whole(tmp_path):
    """A real local job, 2 nodes x 2 ranks under torchrun, each rank printing {LINES} lines with
    print(), PYTHONUNBUFFERED set as on many login nodes: every line of the log that a rank wrote
    is one of its lines, whole, and every line is there."""
    (tmp_path / "train.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--nodes", "2",
                           "--procs-per-node", "2", "--wait", "train.py"], cwd=tmp_path, capture_output=True,
                          text=True, env=clean_env(PYTHONUNBUFFERED="1"), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    (log,) = (tmp_path / ".hpcdist" / "jobs").glob("*/*.log")
    text = log.read_text()
    written = [line for line in text.splitlines() if "rank " in line and " line " in line and "x" * 10 in line]
    whole = re.compile(r"rank [0-3] line \d+ x{40}")
    assert [line for line in written if not whole.fullmatch(line)] == [], "lines run together"
    assert len(written) == 4 * LINES
