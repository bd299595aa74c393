#!/usr/bin/env python3
"""``hpcdist watch --once`` over 10,000 rank files, half of them silent (issue 39, item 16).

Before the fix, ``watch`` and the monitor searched the list of silent ranks once per rank (each
search comparing whole states): 13-69 s a screen at 10,000 ranks. Target: under a second.

A running local job is recorded under a temporary folder with hpcdist's own :mod:`hpcdist.jobs`
(its runner a ``sleep``; nothing submitted) and its ``progress/`` holds ``--ranks`` rank files as
the recorder writes them, 8 ranks a node: the odd ranks silent (last written 10 minutes ago), the
even ones answering (their interval long enough that they stay so however long a run takes).
Wall: the median of ``--reps`` runs of ``python -m hpcdist watch --once`` (a fresh interpreter each,
its start included) after a warm-up run whose screen is checked (a row per rank, half of them
silent). With ``--base COMMIT`` (default e5baf9e, the last commit before the fix) that commit's
``hpcdist`` runs too (``--base-reps`` times: it is slow), and the ratio is printed.

Prints a markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
from hpcdist.schedulers.local.submit import process_start, this_host  # noqa: E402

TARGET_S = 1.0


def make_job(folder: Path, ranks: int) -> tuple[str, subprocess.Popen]:
    """A running local job with ``ranks`` rank files: its id, and its runner (to end)."""
    runner = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    draft = jobs.Draft(str(folder / ".hpcdist" / "jobs"), "train")
    draft.commit({"job_id": str(runner.pid), "cluster": None, "scheduler": "local", "dialect": None,
                  "job_name": "train", "workdir": str(folder), "log": draft.default_log, "submitted_at": time.time(),
                  "command_line": "hpcdist submit --scheduler local train.py"})
    jobs.write_runner(draft.path, runner.pid, process_start(runner.pid), *this_host())
    progress = Path(draft.path) / jobs.PROGRESS
    progress.mkdir(mode=0o700)
    now = time.time()
    for rank in range(ranks):
        silent = rank % 2 == 1
        state = {"rank": rank, "local_rank": rank % 8, "node": f"node{rank // 8:05d}", "pid": 10000 + rank,
                 "step": 400 if silent else 1200, "first_step": now - 600, "last_step": now - (600 if silent else 1),
                 "phase": "training", "rate": 2.0, "work": 0.4, "started": now - 700,
                 "written": now - 600 if silent else now, "interval": 2.0 if silent else 100000.0}
        (progress / f"rank-{rank}.json").write_text(json.dumps(state))
    return str(runner.pid), runner


def watch_once(python: str, tree: Path, job_id: str, cwd: Path, cache: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds: user and system, the screen) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([python, "-m", "hpcdist", "watch", "--once", job_id], cwd=cwd,
                          env=tree_env(tree, cache), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: hpcdist watch --once failed:\n{proc.stderr}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, proc.stdout


def check(screen: str, ranks: int) -> str:
    rows = [line for line in screen.splitlines() if line.startswith("node") and line.split()[1].isdigit()]
    silent = sum("(silent " in line for line in rows)
    if len(rows) != ranks or silent != ranks // 2:
        raise SystemExit(f"unexpected screen: {len(rows)} rank rows, {silent} silent (expected {ranks}, "
                         f"{ranks // 2}):\n{screen[:2000]}")
    return f"{len(rows)} rank rows, {silent} silent"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=10000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--base", default="e5baf9e", help="the commit before the fix ('' to skip it)")
    parser.add_argument("--base-reps", type=int, default=1)
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpcdist-bench-watch-") as tmp:
        tmp = Path(tmp)
        (tmp / "trees").mkdir()
        trees = checkouts(args.base, tmp / "trees") if args.base else {"this": REPO}
        work, cache = tmp / "work", tmp / "cache"
        work.mkdir()
        job_id, runner = make_job(work, args.ranks)
        try:
            results = {}
            for name in ("this", "base"):
                if name not in trees:
                    continue
                *_, screen = watch_once(args.python, trees[name], job_id, work, cache)  # warm-up, checked
                seen = check(screen, args.ranks)
                reps = args.reps if name == "this" else args.base_reps
                runs = [watch_once(args.python, trees[name], job_id, work, cache)[:2] for _ in range(reps)]
                results[name] = (statistics.median(wall for wall, _ in runs),
                                 statistics.median(cpu for _, cpu in runs), reps, seen)
        finally:
            runner.kill()
            runner.wait()
    print(f"## `hpcdist watch --once` over {args.ranks:,} rank files, half silent\n")
    print(f"Medians of `python -m hpcdist watch --once` (interpreter start included): wall, and CPU (user + "
          f"system: what a loaded machine does not change); {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}. Target: under {TARGET_S:.0f} s.\n")
    print("| tree | wall | CPU | runs | screen |\n|---|---|---|---|---|")
    for name, (wall, cpu, reps, seen) in results.items():
        label = "this checkout" if name == "this" else f"{args.base} (before the fix)"
        print(f"| {label} | {wall:.3f} s | {cpu:.3f} s | {reps} | {seen} |")
    wall, cpu = results["this"][:2]
    print(f"\nthis checkout: {wall:.3f} s wall, {cpu:.3f} s CPU ({'under' if wall < TARGET_S else 'OVER'} the target)"
          + (f"; {results['base'][0] / wall:.0f}x less wall and {results['base'][1] / cpu:.0f}x less CPU than "
             f"{args.base}" if "base" in results else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
