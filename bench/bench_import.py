#!/usr/bin/env python3
"""Benchmark the start-up cost of hpcdist: interpreter + import + get_rank().

Runs ``python -c STATEMENT`` as subprocesses, interleaved (bare, A, B, bare,
A, B, ...), and compares the median wall time with ``python -c pass``.
Target: ``import hpcdist.env; hpcdist.env.get_rank()`` within 1.2x of the
bare interpreter.  With ``--hyperfine``, hyperfine does the timing instead
(when it is installed; otherwise the Python timer is used).

Prints a markdown section on stdout.  Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.2
TARGET_LABEL = "import hpcdist.env; get_rank()"

STATEMENTS = [
    ("bare interpreter", "pass"),
    ("import hpcdist.hostlist", "import hpcdist.hostlist"),
    (TARGET_LABEL, "import hpcdist.env; hpcdist.env.get_rank()"),
]


def child_env(pycache: str) -> dict[str, str]:
    env = dict(os.environ)
    # Time imports from bytecode, as for an installed package: allow writing
    # it (the warm-up runs do), into a temporary folder outside the repo.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + old if old else "")
    # no launcher variables: get_rank() takes its default path
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "PMI_RANK",
                 "OMPI_COMM_WORLD_RANK", "PBS_JOBID", "SLURM_JOB_ID"):
        env.pop(name, None)
    env.pop("PYTHONSTARTUP", None)
    return env


def check(python: str, statement: str, env: dict) -> str:
    """'' when the statement runs, else the reason it does not."""
    proc = subprocess.run([python, "-c", statement], capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        return ""
    last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return last[:120]


def time_python(python: str, statements: list[tuple[str, str]], env: dict, reps: int, warmup: int):
    times: dict[str, list[float]] = {label: [] for label, _ in statements}
    for rep in range(warmup + reps):
        for label, statement in statements:
            start = time.perf_counter()
            subprocess.run([python, "-c", statement], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elapsed = time.perf_counter() - start
            if rep >= warmup:
                times[label].append(elapsed)
    return {label: statistics.median(ts) for label, ts in times.items()}


def time_hyperfine(hyperfine: str, python: str, statements, env: dict, reps: int, warmup: int):
    with tempfile.TemporaryDirectory(prefix="hpcdist-bench-") as tmp:
        out = Path(tmp) / "hyperfine.json"
        command = [hyperfine, "-N", "--style", "none", "--warmup", str(warmup),
                   "--runs", str(reps), "--export-json", str(out)]
        for label, statement in statements:
            command += ["-n", label, shlex.join([python, "-c", statement])]
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text())
    return {r["command"]: r["median"] for r in data["results"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="repetitions per statement (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    parser.add_argument("--hyperfine", action="store_true",
                        help="time with hyperfine when it is installed")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run")
    parser.add_argument("--statement", action="append", metavar="LABEL=CODE",
                        help="add a statement to time (repeatable)")
    args = parser.parse_args(argv)

    statements = list(STATEMENTS)
    for extra in args.statement or []:
        label, _, code = extra.partition("=")
        statements.append((label, code or label))

    pycache = tempfile.TemporaryDirectory(prefix="hpcdist-pycache-")
    env = child_env(pycache.name)
    failed = {}
    runnable = []
    for label, statement in statements:
        reason = check(args.python, statement, env)
        if reason:
            failed[label] = reason
        else:
            runnable.append((label, statement))

    timer = "Python timer (subprocess.run, perf_counter)"
    hyperfine = shutil.which("hyperfine") if args.hyperfine else None
    if args.hyperfine and hyperfine is None:
        timer += "; hyperfine was asked for but is not installed"
    if hyperfine:
        medians = time_hyperfine(hyperfine, args.python, runnable, env, args.reps, args.warmup)
        timer = "hyperfine -N"
    else:
        medians = time_python(args.python, runnable, env, args.reps, args.warmup)

    pycache.cleanup()
    bare = medians.get("bare interpreter")
    lines = ["## Start-up: import and get_rank()", ""]
    lines.append(
        f"`python -c STATEMENT` as a subprocess, median of {args.reps} interleaved runs "
        f"after {args.warmup} warm-up runs; {timer}; Python {platform.python_version()} "
        f"(`{args.python}`), the repository on PYTHONPATH, bytecode cached "
        "(PYTHONPYCACHEPREFIX in a temporary folder)."
    )
    lines.append("")
    lines.append("| statement | median | vs `python -c pass` | target |")
    lines.append("|---|---|---|---|")
    for label, statement in statements:
        code = f"`{statement}`"
        if label in failed:
            lines.append(f"| {code} | fails: {failed[label]} | | |")
            continue
        value = medians[label]
        ratio = f"{value / bare:.2f}x" if bare else ""
        target = ""
        if label == TARGET_LABEL and bare:
            met = value / bare <= TARGET
            target = f"within {TARGET}x: " + ("yes" if met else "**no**")
        lines.append(f"| {code} | {value * 1e3:.1f} ms | {ratio} | {target} |")
    lines.append("")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
