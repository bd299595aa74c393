#!/usr/bin/env python3
"""``hpcdist status`` over 2,000 recorded Slurm jobs against over 20: wall time and scheduler calls.

The jobs' folders are built with hpcdist's own :mod:`hpcdist.jobs` (what ``hpcdist submit``
writes), without submitting. ``squeue`` and ``sacct`` are instant STAND-INS (bash scripts that
print what the real ones print and count their calls into a file): half the jobs (even ids) are
in the queue, RUNNING; the other half have left it, and sacct says COMPLETED. So the time
measured is hpcdist's own, plus one short process per scheduler call; a real controller adds
50-100 ms to each call, which the call counts show.

Target: 2,000 jobs within 2x of 20 jobs. With ``--base REV`` the same runs for that commit too
(its ``hpcdist`` and ``templates`` exported as bench_floor.py does), side by side. Wall: the
median of ``--reps`` interleaved runs of ``python -m hpcdist status`` (the table users read) after
a warm-up run of ``status --json`` whose rows are checked.
Prints a markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_revisions import PROJECT_PYTHON, REPO, checkouts, tree_env  # noqa: E402

sys.path.insert(0, str(REPO))
from hpcdist import jobs  # noqa: E402

SIZES = (20, 2000)
TARGET = 2.0


def stand_in(name: str, answer: str) -> str:
    """A bash stand-in for ``name`` that counts its call and answers each id of ``-j a,b,...``
    with the awk program ``answer`` (``fmt``: the ``-o`` it was given)."""
    return f"""#!/bin/bash
echo {name} >> "$BENCH_CALLS"
while [ $# -gt 0 ]; do
  case "$1" in -j) ids=$2; shift ;; -o) fmt=$2; shift ;; esac; shift
done
tr , '\\n' <<< "$ids" | awk -v fmt="$fmt" '{answer}'
"""


# Stand-ins: every call appends its name to $BENCH_CALLS; awk answers, so that a list of 1,000 ids
# costs about what one id does (a bash loop took 7 ms per 1,000). squeue lists the even ids given
# (-o '%i|%T|%r' for several, '%T|%r' for one, as hpcdist asks before and after batching);
# sacct answers COMPLETED for every id it is given.
SQUEUE = stand_in("squeue", '$1 % 2 == 0 { print (fmt == "%T|%r" ? "" : $1 "|") "RUNNING|None" }')
SACCT = stand_in("sacct", '{ print (fmt == "State,ExitCode" ? "" : $1 "|") "COMPLETED|0:0" }')


def record(folder: Path, count: int) -> None:
    """``count`` Slurm jobs recorded under ``folder``/.hpcdist/jobs, ids 100000 and up, each with
    the runs file its script started (one ``start`` line)."""
    for k in range(count):
        job_id = str(100000 + k)
        draft = jobs.Draft(str(folder / ".hpcdist" / "jobs"), f"train-{job_id}")
        draft.commit({"job_id": job_id, "cluster": None, "scheduler": "slurm", "dialect": None,
                      "job_name": "train", "workdir": str(folder), "log": draft.default_log,
                      "submitted_at": time.time(), "command_line": "hpcdist submit --scheduler slurm train.py"})
        # Each job has run (RUNNING or COMPLETED): its script wrote its start line (jobs.start_line_shell).
        with open(os.path.join(draft.path, jobs.RUNS), "w") as f:
            f.write(f"{jobs.START} {int(time.time())} {job_id} node{k % 16}\n")


def status(tree: Path, folder: Path, cache: Path, bin_dir: Path, calls: Path, *flags: str) -> tuple[float, dict, str]:
    """One ``hpcdist status``: (seconds, {command: calls}, what it printed)."""
    calls.write_text("")
    env = tree_env(tree, cache, BENCH_CALLS=str(calls))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    start = time.perf_counter()
    proc = subprocess.run([str(PROJECT_PYTHON), "-m", "hpcdist", "status", *flags], cwd=folder, env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: hpcdist status failed:\n{proc.stderr}")
    counted: dict = {}
    for name in calls.read_text().split():
        counted[name] = counted.get(name, 0) + 1
    return elapsed, counted, proc.stdout


def check(rows: list, count: int) -> None:
    """Each job's state is what the stand-ins say: RUNNING for even ids, COMPLETED (exit 0) for odd."""
    assert len(rows) == count, len(rows)
    for row in rows:
        expected = ("RUNNING", None) if int(row["job_id"]) % 2 == 0 else ("COMPLETED", 0)
        if (row["state"], row["exit_code"]) != expected:
            raise SystemExit(f"job {row['job_id']}: {row['state']} {row['exit_code']}, expected {expected}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a commit to compare with (e.g. main before the change)")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp) if args.base else {"this": REPO}
        bin_dir, cache, calls = tmp / "bin", tmp / "cache", tmp / "calls"
        bin_dir.mkdir()
        for name, text in (("squeue", SQUEUE), ("sacct", SACCT)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        folders = {}
        for size in SIZES:
            folders[size] = tmp / f"jobs{size}"
            folders[size].mkdir()
            record(folders[size], size)
        times = {(name, size): [] for name in trees for size in SIZES}
        counts = {}
        for name, tree in trees.items():  # warm-up (bytecode), and the output checked
            for size in SIZES:
                _, counts[name, size], rows = status(tree, folders[size], cache, bin_dir, calls, "--json")
                check(json.loads(rows), size)
        for rep in range(args.reps):
            for name in (list(trees) if rep % 2 == 0 else list(trees)[::-1]):
                for size in SIZES:
                    times[name, size].append(status(trees[name], folders[size], cache, bin_dir, calls)[0])
    median = {key: statistics.median(value) for key, value in times.items()}
    small, large = SIZES
    print(f"`bench/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}`: `python -m hpcdist status` over {large:,} and "
          f"{small} recorded Slurm jobs (half in the queue, RUNNING; half left it, sacct COMPLETED), instant "
          f"stand-ins (bash, answering with awk) for squeue and sacct counting their calls; median of {args.reps} interleaved runs after a "
          f"warm-up; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}. Each job's state checked "
          f"(`status --json`, in the warm-up).\n")
    print(f"| tree | {small} jobs | {large:,} jobs | {large:,} / {small} | target {TARGET:g}x met | "
          f"calls for {small} jobs (squeue + sacct) | calls for {large:,} jobs (squeue + sacct) |")
    print("|---|---|---|---|---|---|---|")
    for name in trees:
        ratio = median[name, large] / median[name, small]
        label = f"base {args.base}" if name == "base" else "this"
        few = counts[name, small]
        many = counts[name, large]
        print(f"| {label} | {median[name, small] * 1000:.0f} ms | {median[name, large] * 1000:.0f} ms | "
              f"**{ratio:.2f}x** | {'yes' if ratio <= TARGET else '**no**'} | "
              f"{few.get('squeue', 0)} + {few.get('sacct', 0)} | {many.get('squeue', 0)} + {many.get('sacct', 0)} |")
    if "base" in trees:
        print(f"\n{large:,} jobs: this / base = {median['this', large] / median['base', large]:.3f}x.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
