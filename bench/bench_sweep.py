#!/usr/bin/env python3
"""Benchmark: submitting a 10,000-set sweep (``hpcdist submit --sweep``), the scheduler stubbed.

What is timed is hpcdist's own work: reading the sets, the site's limits, splitting them under
Slurm's default array cap (MaxArraySize 1001: 10 arrays of 1,000), and for each array the job
folder, the rendered script (a ``case`` line per set), ``sweep.json`` and the record. The
scheduler's commands are stand-ins on PATH (``scontrol``, ``sacctmgr``, ``squeue``, ``sbatch``)
that answer at once as a cluster would and count their calls; a real controller adds its own
round trip to each. Run in-process (``hpcdist.sweeps.arrays.submit_sweep``, as ``hpcdist
submit`` calls it) and as the command (``hpcdist submit --sweep-file``), median of ``--reps``.

Targets (issue 41): under one second, and at most a handful of scheduler calls per array.
Prints a markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SETS = 10_000
TARGET_S = 1.0
CALLS_PER_ARRAY = 5

STUBS = {
    "scontrol": 'echo scontrol >> "$BENCH_CALLS"; echo "MaxArraySize            = 1001"',
    "sacctmgr": 'echo sacctmgr >> "$BENCH_CALLS"; echo 20000',
    "squeue": 'echo squeue >> "$BENCH_CALLS"',
    "sbatch": 'echo sbatch >> "$BENCH_CALLS"; n=$(wc -l < "$BENCH_CALLS"); echo "Submitted batch job $((1000 + n))"',
}


def stubs(folder: Path) -> None:
    for name, body in STUBS.items():
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def once(work: Path) -> tuple[float, dict, int]:
    """One in-process submission: (seconds, calls by command, arrays)."""
    sys.path.insert(0, str(REPO))
    from hpcdist.submission.spec import build_spec
    from hpcdist.sweeps import arrays
    from hpcdist.sweeps.sets import read_file

    calls = work / "calls"
    calls.write_text("")
    os.environ["BENCH_CALLS"] = str(calls)
    os.chdir(work)
    start = time.perf_counter()
    spec = build_spec({"scheduler": "slurm", "script": "train.py", "launcher": "none", "sweep_file": "sets.txt"})
    sets = read_file("sets.txt")
    done = arrays.submit_sweep(spec, sets, command_line="hpcdist submit --sweep-file sets.txt train.py",
                               root=str(work / "jobs"), out=open(os.devnull, "w"))
    took = time.perf_counter() - start
    counted: dict = {}
    for line in calls.read_text().split():
        counted[line] = counted.get(line, 0) + 1
    return took, counted, len(done)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    times, command_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        stubs(bin_dir)
        os.environ["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
        (tmp / "train.py").write_text("")
        (tmp / "sets.txt").write_text("".join(f"lr={i * 1e-5:.5g} seed={i}\n" for i in range(SETS)))
        counted, parts = {}, 0
        for rep in range(args.reps):
            took, counted, parts = once(tmp)
            times.append(took)
        env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_CALLS=str(tmp / "calls"))
        for rep in range(args.reps):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "slurm", "--launcher", "none",
                            "--sweep-file", "sets.txt", "train.py"], cwd=tmp, env=env, check=True,
                           capture_output=True)
            command_times.append(time.perf_counter() - start)
        script = max((tmp / "jobs").glob("*/job.sh"), key=lambda p: p.stat().st_size)
        size = script.stat().st_size
    median, command = statistics.median(times), statistics.median(command_times)
    total = sum(counted.values())
    print("## A 10,000-set sweep submitted (bench/bench_sweep.py)\n")
    print(f"{SETS:,} parameter sets from a file, Slurm's default MaxArraySize (1001), the scheduler's commands "
          f"stubbed (they answer at once and count their calls); median of {args.reps}.\n")
    print("| what | figure | target |")
    print("|---|---|---|")
    print(f"| arrays submitted | {parts} | 10 |")
    print(f"| in-process (`submit_sweep`): sets read, limits, split, {parts} folders, scripts, records | "
          f"{median * 1000:.0f} ms | < {TARGET_S * 1000:.0f} ms |")
    print(f"| the command (`hpcdist submit --sweep-file`), with Python's start-up | {command * 1000:.0f} ms | |")
    print(f"| scheduler calls | {total} ({', '.join(f'{k} {v}' for k, v in sorted(counted.items()))}) | "
          f"<= {CALLS_PER_ARRAY} per array |")
    print(f"| scheduler calls per array | {total / parts:.1f} | <= {CALLS_PER_ARRAY} |")
    print(f"| largest job script | {size / 1024:.0f} KiB | |")
    ok = median < TARGET_S and total / parts <= CALLS_PER_ARRAY
    print(f"\n{'Both targets met.' if ok else 'A target missed.'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
