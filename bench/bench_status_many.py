#!/usr/bin/env python3
"""``hpcdist status`` over 2,000 recorded Slurm jobs (``--jobs``) against over 20: wall time and scheduler calls.

The jobs' folders are built with hpcdist's own :mod:`hpcdist.jobs` (what ``hpcdist submit``
writes), without submitting. ``squeue`` and ``sacct`` are STAND-INS (bash scripts that print what
the real ones print and count their calls into a file): half the jobs (even ids) are in the
queue, RUNNING; the other half have left it, and sacct says COMPLETED. They answer at once, so
the time measured is hpcdist's own plus one short process per call; and again after
``--delay`` seconds each (default 0.05: the issue's "a real controller at 50-100 ms"), which is
what a user on a cluster waits.

Beside hpcdist, its floor (:file:`floor_status.py`): a script that reads the same files with
the fewest system calls (the folder's owner, the record, the ``runs`` file), asks the same two
commands and prints a line per job, and does nothing else. What the floor adds from 20 to
2,000 jobs is what reading the folders costs on this machine, whoever reads them.

Target: 2,000 jobs within 2x of 20 jobs. With ``--base REV`` the same runs for that commit too
(its ``hpcdist`` and ``templates`` exported as bench_floor.py does), side by side. Wall: the
median of ``--reps`` interleaved runs of ``python -m hpcdist status`` (the table users read) after
a warm-up run of ``status --json`` whose rows are checked (the floor's lines too).
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

SIZES = (20, 2000)  # the larger one: --jobs
TARGET = 2.0


def stand_in(name: str, answer: str) -> str:
    """A bash stand-in for ``name`` that counts its call, waits ``$BENCH_DELAY`` seconds when set
    (a controller's answer time), and answers each id of ``-j a,b,...`` with the awk program
    ``answer`` (``fmt``: the ``-o`` it was given)."""
    return f"""#!/bin/bash
echo {name} >> "$BENCH_CALLS"
[ -n "$BENCH_DELAY" ] && sleep "$BENCH_DELAY"
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
        # Each job has run (RUNNING or COMPLETED): its script wrote its start line (job_folder.sh.j2's record_start).
        with open(os.path.join(draft.path, jobs.RUNS), "w") as f:
            f.write(f"{jobs.START} {int(time.time())} {job_id} node{k % 16}\n")


def status(tree: Path | None, folder: Path, cache: Path, bin_dir: Path, calls: Path, delay: float,
           *flags: str) -> tuple[float, dict, str]:
    """One ``hpcdist status`` of ``tree`` (None: the floor): (seconds, {command: calls}, what it printed)."""
    calls.write_text("")
    env = tree_env(tree or REPO, cache, BENCH_CALLS=str(calls), BENCH_DELAY=str(delay) if delay else "")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    argv = ["-m", "hpcdist", "status", *flags] if tree else [str(HERE / "floor_status.py")]
    start = time.perf_counter()
    proc = subprocess.run([str(PROJECT_PYTHON), *argv], cwd=folder, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tree or 'the floor'}: status failed:\n{proc.stderr}")
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


def floor_rows(text: str) -> list:
    """The floor's ``<id> <state>`` lines as rows :func:`check` reads (a finished job's code 0)."""
    rows = [dict(zip(("job_id", "state"), line.split())) for line in text.splitlines()]
    return [{**row, "exit_code": 0 if row["state"] == "COMPLETED" else None} for row in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a commit to compare with (e.g. main before the change)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds each stand-in call takes in the second set")
    parser.add_argument("--jobs", type=int, default=SIZES[1],
                        help=f"jobs in the larger set (default {SIZES[1]:,}; more than {SIZES[0]})")
    args = parser.parse_args()
    if args.jobs <= SIZES[0]:
        parser.error(f"--jobs must be more than {SIZES[0]}")
    sizes = (SIZES[0], args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp) if args.base else {"this": REPO}
        runners = {**trees, "floor": None}
        bin_dir, cache, calls = tmp / "bin", tmp / "cache", tmp / "calls"
        bin_dir.mkdir()
        for name, text in (("squeue", SQUEUE), ("sacct", SACCT)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        folders = {}
        for size in sizes:
            folders[size] = tmp / f"jobs{size}"
            folders[size].mkdir()
            record(folders[size], size)
        delays = (0.0, args.delay)
        times = {(name, delay, size): [] for name in runners for delay in delays for size in sizes}
        counts = {}
        for name, tree in runners.items():  # warm-up (bytecode), and the output checked
            for size in sizes:
                flags = ("--json",) if tree else ()
                _, counts[name, size], out = status(tree, folders[size], cache, bin_dir, calls, 0.0, *flags)
                check(json.loads(out) if tree else floor_rows(out), size)
        for rep in range(args.reps):
            for name in (list(runners) if rep % 2 == 0 else list(runners)[::-1]):
                for delay in delays:
                    for size in sizes:
                        elapsed = status(runners[name], folders[size], cache, bin_dir, calls, delay)[0]
                        times[name, delay, size].append(elapsed)
    median = {key: statistics.median(value) for key, value in times.items()}
    small, large = sizes
    print(f"`bench/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}`: `python -m hpcdist status` over {large:,} and "
          f"{small} recorded Slurm jobs (half in the queue, RUNNING; half left it, sacct COMPLETED), beside its floor "
          f"(`bench/floor_status.py`: the same files read, the same two commands, nothing else); stand-ins (bash, "
          f"answering with awk) for squeue and sacct counting their calls, answering at once and after "
          f"{args.delay * 1000:g} ms; median of {args.reps} interleaved runs after a warm-up; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}. Each job's state checked (`status --json` and the floor's "
          f"lines, in the warm-up).\n")
    print(f"| run | each call | {small} jobs | {large:,} jobs | added by {large - small:,} jobs "
          f"| {large:,} / {small} | target {TARGET:g}x met "
          f"| calls for {small} jobs (squeue + sacct) | calls for {large:,} jobs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in runners:
        label = f"base {args.base}" if name == "base" else "floor" if name == "floor" else "this"
        few, many = counts[name, small], counts[name, large]
        for delay in delays:
            a, b = median[name, delay, small], median[name, delay, large]
            print(f"| {label} | {'at once' if not delay else f'{delay * 1000:g} ms'} | {a * 1000:.0f} ms | "
                  f"{b * 1000:.0f} ms | {(b - a) * 1000:.0f} ms | **{b / a:.2f}x** | "
                  f"{'yes' if b / a <= TARGET else '**no**'} | {few.get('squeue', 0)} + {few.get('sacct', 0)} | "
                  f"{many.get('squeue', 0)} + {many.get('sacct', 0)} |")
    this, floor = median["this", 0.0, small], median["floor", 0.0, large] - median["floor", 0.0, small]
    print(f"\nAt once, under {TARGET:g}x the {large - small:,} jobs may add what hpcdist's "
          f"{small}-job run costs in all, {this * 1000:.0f} ms; reading their folders and the two "
          f"answers, with nothing else, adds {floor * 1000:.0f} ms (the floor).")
    if "base" in trees:
        ratio = median["this", 0.0, large] / median["base", 0.0, large]
        print(f"\n{large:,} jobs at once: this / base = {ratio:.3f}x.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
