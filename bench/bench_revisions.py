#!/usr/bin/env python3
"""This checkout against an earlier commit: ``hpcdist render`` and ``import hpcdist.env; get_rank()``.

A change that only moves code (issue 11's layout) must not slow the two
things users feel: rendering a job script (the CLI's dry run) and the rank
lookup every training process makes. The earlier commit (``--base``, default
``HEAD~1``) is exported with ``git archive`` into a temporary folder, this
checkout's working tree is copied beside it; both trees run with the project's
interpreter (its jinja2), each on its own ``PYTHONPATH``, interleaved round
by round (the starting tree alternates), with bytecode caching on in a
private ``PYTHONPYCACHEPREFIX`` that warm-up runs fill. The table shows
medians and the ratio this/base (below 1 is faster).

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
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"
#: The same job as bench_submit.py's: 2 nodes x 4 GPUs under Slurm, printed, nothing submitted.
RENDER = ["-m", "hpcdist", "render", "--scheduler", "slurm", "--nodes", "2", "--gpus-per-node", "4",
          "--walltime", "90m", "train.py"]
RANK = ["-c", "import hpcdist.env; hpcdist.env.get_rank()"]
#: Slower than this is worth a look (the noise of one run on a loaded 2-core machine is ~5%).
SLOWER = 1.10


#: What a tree needs to run: the package, and the top-level templates of commits before issue 27
#: (they lie beside their schedulers since).
PARTS = ("hpcdist", "templates")


def export(commit: str, into: Path) -> Path:
    tree = into / "base"
    tree.mkdir()
    listed = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", commit], check=True,
                            capture_output=True, text=True).stdout.split()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *(p for p in PARTS if p in listed)],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def checkouts(base: str, into: Path) -> dict[str, Path]:
    """``{"base": the commit exported, "this": this checkout's working tree copied}``: the
    ``hpcdist`` (and ``templates``, where there is one) folders of each, under ``into``
    (bench_floor.py uses this too)."""
    trees = {"base": export(base, into), "this": into / "this"}
    trees["this"].mkdir()
    for part in PARTS:
        if (REPO / part).exists():
            subprocess.run(["cp", "-r", str(REPO / part), str(trees["this"] / part)], check=True)
    return trees


def templates_of(tree: Path) -> Path:
    """Where a tree keeps its job templates: beside the schedulers since issue 27, else ``templates/``."""
    beside = tree / "hpcdist" / "schedulers"
    return beside if (beside / "job.sh.j2").exists() else tree / "templates"


def tree_env(tree: Path, cache: Path, **extra: str) -> dict[str, str]:
    """The environment a command runs in: ``tree`` on PYTHONPATH, bytecode cached in a private
    folder (warm-up runs fill it), jinja2's cache in ``cache``, no scheduler or MPI variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_", "OMPI_", "PMI"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(cache / tree.name), XDG_CACHE_HOME=str(cache))
    env.update(extra)
    return env


def timed(python: str, argv: list[str], tree: Path, cwd: Path, cache: Path) -> float:
    env = tree_env(tree, cache)
    start = time.perf_counter()
    proc = subprocess.run([python, *argv], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(argv)} failed:\n{proc.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp)
        work = tmp / "work"
        work.mkdir()
        (work / "train.py").write_text("")
        cache = tmp / "cache"
        cases = {"render": RENDER, "rank": RANK}
        times = {(c, t): [] for c in cases for t in ("base", "this")}
        for _ in range(3):  # warm-up: fill the bytecode and template caches
            for case, argv in cases.items():
                for name, tree in trees.items():
                    timed(args.python, argv, tree, work, cache)
        for rep in range(args.reps):
            order = ("base", "this") if rep % 2 == 0 else ("this", "base")
            for case, argv in cases.items():
                for name in order:
                    times[(case, name)].append(timed(args.python, argv, trees[name], work, cache))
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base],
                            capture_output=True, text=True).stdout.strip()
    print(f"## This checkout against {args.base} ({commit})\n")
    print(f"{args.reps} interleaved runs each, medians; ratio = this / base (below 1: faster).\n")
    print("| case | base | this | ratio |")
    print("|---|---|---|---|")
    worst = 0.0
    for case in cases:
        b, t = statistics.median(times[(case, "base")]), statistics.median(times[(case, "this")])
        worst = max(worst, t / b)
        label = {"render": "`hpcdist render` (slurm, 2 x 4 GPUs)", "rank": "`import hpcdist.env; get_rank()`"}[case]
        print(f"| {label} | {b * 1000:.1f} ms | {t * 1000:.1f} ms | {t / b:.2f}x |")
    verdict = "no slower" if worst <= SLOWER else f"SLOWER than {SLOWER:.2f}x: look at it"
    print(f"\nWorst ratio {worst:.2f}x: {verdict} (noise on this machine is about 5%).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
