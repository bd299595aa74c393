#!/usr/bin/env python3
"""The CLI against its floor, for this checkout and an earlier commit: instructions and wall time.

Three costs, each next to what no implementation can go below:

- ``hpcdist render`` (2 nodes x 4 GPUs under Slurm, 90 minutes, torchrun)
  against its jinja2 floor, :file:`floor_render.py`: ``import jinja2``, an
  Environment built as hpcdist's, one render of the same template with the
  same values as plain data, written out from each tree's own render by
  :file:`capture_render.py` (it prints the same script, checked byte for
  byte). Target 1.2x.
- ``hpcdist status`` in a folder with no jobs against ``python -c pass``.
  Target 2x.
- ``import hpcdist.env; hpcdist.env.get_rank()`` with torchrun's variables
  set against ``python -c pass``. Target 1.15x.

``hpcdist`` is the project venv's console script (what users run: it imports
``re`` itself), run by the project's interpreter. The earlier commit
(``--base``) and this working tree are set side by side as
bench_revisions.py does (:func:`bench_revisions.checkouts`), each on its own
``PYTHONPATH`` with its bytecode cached (warm-up runs fill the caches).

Instructions: ``valgrind --tool=callgrind`` (Ir, the whole process), each
command twice, the mean shown; they hold on a loaded machine, and the targets
are judged on them. Wall: the median of ``--reps`` interleaved rounds
(the trees alternate first; within a tree, the command and its floor run
back to back). Prints a markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_revisions import PROJECT_PYTHON, REPO, checkouts, tree_env  # noqa: E402

RENDER = ["render", "--scheduler", "slurm", "--nodes", "2", "--gpus-per-node", "4", "--walltime", "90m", "train.py"]
#: What torchrun sets for each worker (one process here).
TORCHRUN = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", GROUP_RANK="0",
                MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", TORCHELASTIC_RUN_ID="bench")
#: (case, label: the case / its floor, target ratio)
CASES = (
    ("render", "`hpcdist render` (slurm, 2 x 4 GPUs) / jinja2 floor", 1.20),
    ("status", "`hpcdist status` (no jobs) / `python -c pass`", 2.00),
    ("rank", "`import hpcdist.env; get_rank()` (torchrun) / `python -c pass`", 1.15),
)


def commands(python: str, tree: Path, context: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, folder it runs in): each case and its floor (``context``: the folder of the
    tree's render written out by capture_render.py)."""
    script = str(REPO / ".venv" / "bin" / "hpcdist")
    return {
        "pass": ([python, "-c", "pass"], "empty"),
        "floor": ([python, str(HERE / "floor_render.py"), str(context)], "work"),
        "argparse": ([python, str(HERE / "floor_render.py"), str(context), "--argparse"], "work"),
        "render": ([python, script, *RENDER], "work"),
        "status": ([python, script, "status"], "empty"),
        "rank": ([python, "-c", "import hpcdist.env; hpcdist.env.get_rank()"], "empty"),
    }


def run(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr}")
    return proc


def instructions(argv: list[str], env: dict, cwd: Path, log: Path) -> int:
    run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}", *argv], env, cwd)
    found = re.search(r"Collected : (\d+)", log.read_text())
    if not found:
        raise SystemExit(f"no instruction count from valgrind for {' '.join(argv)}:\n{log.read_text()}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--reps", type=int, default=30, help="interleaved rounds of wall timing (default 30)")
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    if not shutil.which("valgrind"):  # a section that says so, not a failed bench/run.sh
        print("## The CLI against its floor\n\nNot run: valgrind is not installed (apt-get install valgrind).")
        return 0
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp)
        for folder in ("work", "empty"):
            (tmp / folder).mkdir()
        (tmp / "work" / "train.py").write_text("")
        cache = tmp / "cache"
        envs = {name: tree_env(tree, cache, **TORCHRUN) for name, tree in trees.items()}
        contexts = {name: tmp / f"context-{name}" for name in trees}
        for name, folder in contexts.items():  # what each tree's render gives its template, as plain data
            folder.mkdir()
            run([args.python, str(HERE / "capture_render.py"), str(folder / "floor_context.py"), *RENDER[1:]],
                envs[name], tmp / "work")
        cmds = {name: commands(args.python, tree, contexts[name]) for name, tree in trees.items()}

        checks = []
        for name in trees:  # warm-up (bytecode, jinja2's caches), and the output checks
            for _ in range(3):
                out = {c: run(argv, envs[name], tmp / cwd).stdout for c, (argv, cwd) in cmds[name].items()}
            if not out["render"] == out["floor"] == out["argparse"]:
                raise SystemExit(f"{name}: the floor does not print hpcdist's script; fix floor_render.py")
            checks.append(f"{name}: floor and `hpcdist render` print the same script ({len(out['render'])} bytes); "
                          f"`hpcdist status` prints {len(out['status'].splitlines())} line(s)")

        ir = {(name, c): [] for name in trees for c in cmds[name]}
        for _ in range(2):
            for name in trees:
                for c, (argv, cwd) in cmds[name].items():
                    ir[(name, c)].append(instructions(argv, envs[name], tmp / cwd, tmp / "valgrind.log"))

        wall = {key: [] for key in ir}
        for rep in range(args.reps):
            for name in (("base", "this") if rep % 2 == 0 else ("this", "base")):
                for c, (argv, cwd) in cmds[name].items():
                    start = time.perf_counter()
                    run(argv, envs[name], tmp / cwd)
                    wall[(name, c)].append(time.perf_counter() - start)
    load_after = os.getloadavg()[0]

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base],
                            capture_output=True, text=True).stdout.strip()
    mean_ir = {key: statistics.mean(v) for key, v in ir.items()}
    med = {key: statistics.median(v) for key, v in wall.items()}
    floor_of = {"render": "floor", "status": "pass", "rank": "pass"}

    print(f"## The CLI against its floor: this checkout and {args.base} ({commit})\n")
    print(f"`bench/bench_floor.py --base {args.base} --reps {args.reps}`. Instructions: callgrind (Ir, whole "
          f"process), each command twice, mean; the targets are judged on them (they hold on a loaded machine). "
          f"Wall: median of {args.reps} interleaved rounds. `hpcdist` is the venv's console script; each tree "
          f"on its own PYTHONPATH, bytecode and jinja2's template cache warm. The jinja2 floor "
          f"(`bench/floor_render.py`): `import jinja2`, an Environment built as hpcdist's, one render of "
          f"the same template with the same values as plain data (`bench/capture_render.py` writes them out "
          f"from each tree's own render). `get_rank()` runs with torchrun's variables "
          f"(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, "
          f"TORCHELASTIC_RUN_ID). Load average (1 min) before / after: {load_before:.2f} / {load_after:.2f} "
          f"on {os.cpu_count()} CPUs.\n")
    print(f"| case | base {commit}: instructions | this: instructions | base: wall | this: wall | target | met |")
    print("|---|---|---|---|---|---|---|")
    for c, label, target in CASES:
        f = floor_of[c]
        cells = []
        for measure, unit in ((mean_ir, 1e6), (med, 1e-3)):
            for name in ("base", "this"):
                if (name, f) not in measure:  # a base whose templates predate the floor
                    cells.append((float("nan"), f"{measure[(name, c)] / (unit if unit == 1e6 else 1e-3):.1f}"
                                  f"{'M' if unit == 1e6 else ' ms'} / (no floor)"))
                    continue
                ratio = measure[(name, c)] / measure[(name, f)]
                shown = f"{measure[(name, c)] / unit:.1f}M / {measure[(name, f)] / unit:.1f}M" if unit == 1e6 else \
                    f"{measure[(name, c)] / unit:.1f} ms / {measure[(name, f)] / unit:.1f} ms"
                cells.append((ratio, f"{shown} = **{ratio:.3f}x**"))
        met_ir = cells[1][0] <= target
        met_wall = cells[3][0] <= target
        verdict = ("yes" if met_ir else "**no**") + " (wall: " + ("yes" if met_wall else "no") + ")"
        print(f"| {label} | {cells[0][1]} | {cells[1][1]} | {cells[2][1]} | {cells[3][1]} | {target:.2f}x | {verdict} |")
    print()
    print("Each command on its own (instructions, millions; wall, ms):\n")
    print("| command | base: instructions | this: instructions | this / base | base: wall | this: wall |")
    print("|---|---|---|---|---|---|")
    labels = {"pass": "`python -c pass`", "floor": "jinja2 floor (`floor_render.py`)",
              "argparse": "jinja2 floor + `import argparse` + one empty ArgumentParser (`--argparse`)",
              "render": "`hpcdist render ...`", "status": "`hpcdist status` (no jobs)",
              "rank": "`import hpcdist.env; hpcdist.env.get_rank()`"}
    for c, label in labels.items():
        if ("base", c) not in mean_ir:
            t = mean_ir[("this", c)]
            print(f"| {label} | - | {t / 1e6:.2f}M | - | - | {med[('this', c)] * 1e3:.1f} |")
            continue
        b, t = mean_ir[("base", c)], mean_ir[("this", c)]
        print(f"| {label} | {b / 1e6:.2f}M | {t / 1e6:.2f}M | {t / b:.3f}x | {med[('base', c)] * 1e3:.1f} | "
              f"{med[('this', c)] * 1e3:.1f} |")
    spread = max(abs(x - y) / max(x, y) for x, y in ir.values())
    argparse_floor = mean_ir[("this", "argparse")] / mean_ir[("this", "floor")]
    print()
    print(f"A tool that parses its flags with argparse pays {argparse_floor:.3f}x the jinja2 floor before its "
          f"first flag (argparse imports gettext and, to build a parser, locale).")
    print()
    print(f"The two callgrind runs of a command differ by at most {spread:.2%}. Checks: " + "; ".join(checks) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
