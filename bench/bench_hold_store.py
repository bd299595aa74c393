#!/usr/bin/env python3
"""torchrun's store before the launch (issue 48), in instructions: this checkout and an earlier commit.

What a 2-node torchrun job script runs before torchrun, at 2 Slurm nodes (4 tasks each):

- this tree: one interpreter, ``python -m hpcdist job-setup ... --hold-store``, which writes
  job.env, takes the port and leaves the child that holds the store;
- ``--base`` (default b0bdc04): two, ``python -m hpcdist job-setup ...`` and then, in the launch,
  ``python -m hpcdist.launchers.torchrun --hold-store "$MASTER_PORT"``.

The parents are counted (``valgrind --tool=callgrind``, Ir, each command twice, the mean), not the
child that imports torch: it serves while torchrun starts, and is killed here once its parent has
returned. Beside them, ``python -c pass``. Each tree on its own ``PYTHONPATH`` with its bytecode
cached (a warm-up run fills it). Prints a markdown section. Not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_revisions import PROJECT_PYTHON, checkouts, tree_env  # noqa: E402

DEFAULT_BASE = "b0bdc04"
SLURM = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "4(x2)"}


def instructions(argv: list[str], env: dict, cwd: Path, logs: Path, counted: bool = True) -> int:
    """The parent's instructions (0 uncounted: a warm-up); its children (the holder) killed."""
    for left in cwd.glob("run-*/store.pid"):  # each run a job's first set-up: no holder to end
        left.unlink()
    prefix = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={logs}/%p"]
    proc = subprocess.Popen((prefix if counted else []) + argv, env=env, cwd=cwd, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the holder, if one was left (its session's)
    except ProcessLookupError:
        pass
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{err}")
    if not counted:
        return 0
    found = re.search(r"Collected : (\d+)", (logs / str(proc.pid)).read_text())
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=DEFAULT_BASE)
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        print("Not run: valgrind is not installed.")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees, cache, logs = checkouts(args.base, tmp), tmp / "cache", tmp / "logs"
        logs.mkdir()
        (tmp / "empty").mkdir()
        ir_pass = statistics.mean(instructions([args.python, "-c", "pass"], dict(os.environ), tmp / "empty", logs)
                                  for _ in range(2))
        rows = {}
        for name, tree in trees.items():
            run_dir = tmp / "empty" / f"run-{name}"
            run_dir.mkdir()
            env = tree_env(tree, cache, **SLURM)
            setup = [args.python, "-m", "hpcdist", "job-setup", "--scheduler", "slurm", "--nodes", "2",
                     "--dir", str(run_dir)]
            counts = []
            for argv in ([setup + ["--hold-store"]] if name == "this" else [setup, None]):
                if argv is None:  # the base's holder, on the port its set-up drew
                    port = re.search(r"MASTER_PORT=(\d+)", (run_dir / "job.env").read_text()).group(1)
                    argv = [args.python, "-m", "hpcdist.launchers.torchrun", "--hold-store", port]
                instructions(argv, env, tmp / "empty", logs, counted=False)
                counts.append(statistics.mean(instructions(argv, env, tmp / "empty", logs) for _ in range(2)))
            rows[name] = counts
    print(f"`bench/bench_hold_store.py --base {args.base}`: `python -c pass` {ir_pass / 1e6:.1f}M.\n")
    print("| tree | interpreters before torchrun | instructions (each) | total | total / `python -c pass` |")
    print("|---|---|---|---|---|")
    for name, counts in rows.items():
        each = " + ".join(f"{c / 1e6:.1f}M" for c in counts)
        print(f"| {name} | {len(counts)} | {each} | {sum(counts) / 1e6:.1f}M | {sum(counts) / ir_pass:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
