#!/usr/bin/env python3
"""``hpcdist report`` of a 1,024-rank job (issue 49): the page's time and size.

The job is recorded under a temporary folder with hpcdist's own :mod:`hpcdist.jobs` (a local job
that has ended: its exit code written; nothing submitted), its ``progress/`` as the job's own
writers leave it: each rank's file as the recorder writes it (:func:`hpcdist.progress._json`,
the keys of ``Recorder._write``), the set-up's record (:func:`hpcdist.progress.startup.record_setup`'s
keys), the monitor's ``summary.json`` (its start-up breakdown) and its timeline, one line per look
(:func:`hpcdist.progress.timeline.line` over :func:`hpcdist.progress.watch.analyse` of the ranks at
that time): ``--looks`` looks (default 400, the most a run keeps), 8 ranks a node, rank 517 a
straggler (4x the others' own work per step), node 100 the slowest to start.
tests/report/test_report.py makes its 1,024-rank job with :func:`make_job` too.

Wall: the median of ``--reps`` runs of ``python -m hpcdist report JOB -o FILE`` (a fresh
interpreter each, its start and matplotlib's import included) after a warm-up run.
Target: under 2 s and 5 MB. Prints a markdown section on stdout. Not a test.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from hpcdist import jobs  # noqa: E402
from hpcdist.progress import _json  # noqa: E402 - the ranks' own writer
from hpcdist.progress import startup, timeline, watch  # noqa: E402

TARGET_S, TARGET_BYTES = 2.0, 5 << 20
PER_NODE, STRAGGLER, SLOW_NODE = 8, 517, 100
RUN = "tmp.run1"


def rank_state(rank: int, now: float, start: float, step: int, last: float, phase: str = "training") -> dict:
    """A rank's file, with the keys the recorder writes (hpcdist.progress.Recorder._write)."""
    node = rank // PER_NODE
    late = 6.0 if node == SLOW_NODE else 0.01 * (node % 7)
    return {"rank": rank, "local_rank": rank % PER_NODE, "node": f"node{node:04d}", "pid": 10000 + rank,
            "step": step, "first_step": start + 20 + late, "last_step": last, "phase": phase, "rate": 5.0,
            "work": 0.08 if rank == STRAGGLER else 0.02, "started": start + 4 + late, "written": now,
            "interval": 2.0, "world": None, "run": RUN, "proc_started": start + 3 + late,
            "rdzv_started": start + 12 + late, "rdzv_ended": start + 16 + late}


def make_job(folder: Path, ranks: int = 1024, looks: int = 400) -> str:
    """An ended local job of ``ranks`` ranks, as its writers leave its folder; its folder."""
    start = time.time() - 2 * looks - 60
    draft = jobs.Draft(str(folder / ".hpcdist" / "jobs"), "train")
    draft.write_spec({"script": "train.py", "script_args": [], "scheduler": "local", "nodes": ranks // PER_NODE,
                      "procs_per_node": PER_NODE, "launcher": "torchrun"})
    job = draft.commit({"job_id": "4242", "cluster": None, "scheduler": "local", "dialect": None,
                        "job_name": "train", "workdir": str(folder), "log": draft.default_log, "submitted_at": start,
                        "command_line": "hpcdist submit --scheduler local --nodes 128 train.py"})
    Path(job.log).write_text("training\n")
    progress = Path(job.path) / jobs.PROGRESS
    progress.mkdir(mode=0o700)
    (progress / startup.SETUP).write_text(_json({"job_started": start, "setup_ended": start + 2, "run": RUN}))
    lines = []
    for k in range(looks):
        now = start + 30 + 2 * k
        states = [rank_state(r, now, start, 5 * (10 + 2 * k), now - 0.1) for r in range(ranks)]
        lines.append(timeline.line(watch.analyse([watch.clean(s) for s in states], now), RUN))
    (progress / timeline.TIMELINE).write_text("".join(lines))
    end = start + 30 + 2 * looks
    final = [rank_state(r, end, start, 5 * (10 + 2 * looks), end - 1, "finished") for r in range(ranks)]
    for state in final:
        (progress / f"rank-{state['rank']}.json").write_text(_json(state))
    ranks_read = watch.read(str(progress), RUN)
    boot = startup.of_folder(str(progress), RUN, ranks_read, start)
    view = watch.analyse(ranks_read, end, ended=True)
    (progress / "summary.json").write_text(json.dumps({"time": end, "stale_after": 30, "run": RUN,
                                                       "run_started": start, **view.summary(), "startup": boot}))
    Path(job.path, "exit_code").write_text("0\n")
    return job.path


def report(python: str, job: str, out: Path, cwd: Path) -> float:
    begin = time.perf_counter()
    proc = subprocess.run([python, "-m", "hpcdist", "report", job, "-o", str(out)], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - begin
    if proc.returncode != 0:
        raise SystemExit(f"hpcdist report failed:\n{proc.stderr}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--looks", type=int, default=timeline.MOST_LINES)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpcdist-bench-report-") as tmp:
        work = Path(tmp)
        job = make_job(work, args.ranks, args.looks)
        page = work / "report.html"
        report(args.python, job, page, work)  # warm-up: bytecode, matplotlib's font cache
        walls = [report(args.python, job, page, work) for _ in range(args.reps)]
        size = page.stat().st_size
        timeline_size = (Path(job) / jobs.PROGRESS / timeline.TIMELINE).stat().st_size
    wall = statistics.median(walls)
    print(f"## `hpcdist report` of a {args.ranks:,}-rank job\n")
    print(f"`bench/bench_report.py --ranks {args.ranks} --looks {args.looks} --reps {args.reps}`: the median of "
          f"{args.reps} runs of `python -m hpcdist report JOB -o report.html` (interpreter start and matplotlib's "
          f"import included) after a warm-up; the timeline {timeline_size / 1e6:.1f} MB ({args.looks} looks); "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}. "
          f"Targets: under {TARGET_S:.0f} s and {TARGET_BYTES >> 20} MB.\n")
    print(f"| wall (median) | fastest | slowest | page |\n|---|---|---|---|\n"
          f"| {wall:.2f} s | {min(walls):.2f} s | {max(walls):.2f} s | {size / 1e6:.2f} MB |")
    verdict = "under" if wall < TARGET_S and size < TARGET_BYTES else "OVER"
    print(f"\n{wall:.2f} s and {size / 1e6:.2f} MB: {verdict} the targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
