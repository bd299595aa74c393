#!/usr/bin/env python3
"""The light paths against their floors, for this checkout and an earlier commit: instructions and wall time.

Each cost next to what no implementation can go below (issue 38):

- ``hpcdist render`` (2 nodes x 4 GPUs under Slurm, 90 minutes, torchrun)
  against its jinja2 floor, :file:`floor_render.py`: ``import jinja2``, an
  Environment built as hpcdist's, one render of the same template with the
  same values as plain data, written out from each tree's own render by
  :file:`capture_render.py` (it prints the same script, checked byte for
  byte). Target 1.2x.
- ``hpcdist status`` in a folder with no jobs against ``python -c pass``.
  Target 2x.
- ``import hpcdist.env; hpcdist.env.get_rank()`` outside any launcher, and
  with torchrun's variables set, against ``python -c pass``. Target 1.15x.
- ``hpcdist --help`` and ``hpcdist --version`` against ``python -c pass``
  (shown, no target).
- ``python -m hpcdist.rank SCRIPT`` (an Open MPI rank inside a Slurm batch
  step, as bench_rank_start.py sets it, with progress recording on:
  ``$HPCDIST_PROGRESS_DIR`` set, as in a submitted job) against ``python
  SCRIPT``, on an empty script. Target 2x.
- Node lists: ``hpcdist.hostlist`` against python-hostlist on expand (100k
  names), expand of 10,000 bracket groups and compress (100k names), timed in
  one process per tree (median of interleaved rounds, the collector paused
  during a call). Target: python-hostlist's time at least 4x hpcdist's.

``hpcdist`` is the project venv's console script (what users run: it imports
``re`` itself), run by the project's interpreter. The earlier commit
(``--base``) and this working tree are set side by side as
bench_revisions.py does (:func:`bench_revisions.checkouts`), each on its own
``PYTHONPATH`` with its bytecode cached (warm-up runs fill the caches). A
command the earlier commit does not have (``hpcdist.rank``) shows ``-``.

Instructions: ``valgrind --tool=callgrind`` (Ir, the whole process), each
command twice, the mean shown; they hold on a loaded machine, and the targets
but the node lists' are judged on them. Wall: the median of ``--reps``
interleaved rounds (the trees alternate first; within a tree, the command and
its floor run back to back). Prints a markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import json
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
from bench_rank_start import CHECK, EXPECTED, RANK_ENV  # noqa: E402
from bench_revisions import PROJECT_PYTHON, REPO, checkouts, tree_env  # noqa: E402

RENDER = ["render", "--scheduler", "slurm", "--nodes", "2", "--gpus-per-node", "4", "--walltime", "90m", "train.py"]
#: What torchrun sets for each worker (one process here).
TORCHRUN = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", GROUP_RANK="0",
                MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", TORCHELASTIC_RUN_ID="bench")
GET_RANK = "import hpcdist.env; hpcdist.env.get_rank()"
#: (case, its floor, label: the case / its floor, target ratio or None)
CASES = (
    ("render", "floor", "`hpcdist render` (slurm, 2 x 4 GPUs) / jinja2 floor", 1.20),
    ("status", "pass", "`hpcdist status` (no jobs) / `python -c pass`", 2.00),
    ("rank", "pass", "`import hpcdist.env; get_rank()` (no launcher) / `python -c pass`", 1.15),
    ("rank_torchrun", "pass", "`import hpcdist.env; get_rank()` (torchrun) / `python -c pass`", 1.15),
    ("help", "pass", "`hpcdist --help` / `python -c pass`", None),
    ("version", "pass", "`hpcdist --version` / `python -c pass`", None),
    ("rank_start", "script", "`python -m hpcdist.rank SCRIPT` (Open MPI rank, recording on) / `python SCRIPT`",
     2.00),
)
#: Node lists: (case, label, the input's maker); python-hostlist's time / hpcdist's at least this.
HOSTLIST_TARGET = 4.0
HOSTLIST_CASES = (
    ("expand", "expand 100k names `n[000001-050000,050001-100000]`"),
    ("groups", "expand 10,000 bracket groups `r0n[0-9],...,r9999n[0-9]` (100k names)"),
    ("compress", "compress 100k names `n000001..n100000`, in order"),
)
#: Run by each tree's interpreter with the tree on PYTHONPATH: hpcdist.hostlist and python-hostlist
#: on the same inputs, interleaved, the collector paused during a call; prints the medians (JSON).
HOSTLIST_PROBE = """
import gc, json, statistics, sys, time
from hpcdist import hostlist as ours
import hostlist as theirs
reps = int(sys.argv[1])
names = [f"n{i:06d}" for i in range(1, 100_001)]
groups = ",".join(f"r{i}n[0-9]" for i in range(10_000))
calls = {
    "expand": (lambda: ours.expand("n[000001-050000,050001-100000]"),
               lambda: theirs.expand_hostlist("n[000001-050000,050001-100000]", allow_duplicates=True)),
    "groups": (lambda: ours.expand(groups), lambda: theirs.expand_hostlist(groups, allow_duplicates=True)),
    "compress": (lambda: ours.compress(names), lambda: theirs.collect_hostlist(names)),
}
assert ours.expand(groups) == theirs.expand_hostlist(groups, allow_duplicates=True)
assert ours.expand(ours.compress(names)) == names
times = {(case, who): [] for case in calls for who in (0, 1)}
for rep in range(reps):
    for case, pair in calls.items():
        for who in ((0, 1) if rep % 2 == 0 else (1, 0)):
            gc.collect()
            gc.disable()
            start = time.perf_counter()
            pair[who]()
            times[(case, who)].append(time.perf_counter() - start)
            gc.enable()
print(json.dumps({case: [statistics.median(times[(case, 0)]), statistics.median(times[(case, 1)])]
                  for case in calls}))
"""


def commands(python: str, tree: Path, context: Path, work: Path) -> dict[str, tuple[list[str], str, dict]]:
    """name -> (argv, folder it runs in, variables added): each case and its floor (``context``: the
    folder of the tree's render written out by capture_render.py; ``work``: the tree's own folder
    for the rank's start, its script and progress folder). A tree without hpcdist.rank has no
    ``rank_start``."""
    script = str(REPO / ".venv" / "bin" / "hpcdist")
    rank_env = dict(RANK_ENV, HPCDIST_PROGRESS_DIR=str(work / "progress"))
    out = {
        "pass": ([python, "-c", "pass"], "empty", {}),
        "floor": ([python, str(HERE / "floor_render.py"), str(context)], "work", {}),
        "argparse": ([python, str(HERE / "floor_render.py"), str(context), "--argparse"], "work", {}),
        "render": ([python, script, *RENDER], "work", {}),
        "status": ([python, script, "status"], "empty", {}),
        "rank": ([python, "-c", GET_RANK], "empty", {}),
        "rank_torchrun": ([python, "-c", GET_RANK], "empty", TORCHRUN),
        "help": ([python, script, "--help"], "empty", {}),
        "version": ([python, script, "--version"], "empty", {}),
        "script": ([python, str(work / "empty.py")], str(work), rank_env),
    }
    if (tree / "hpcdist" / "rank.py").exists():
        out["rank_start"] = ([python, "-m", "hpcdist.rank", str(work / "empty.py")], str(work), rank_env)
    return out


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


def hostlist_python(candidates: list[str]) -> str | None:
    """The first interpreter that has python-hostlist (the project's, else bench/.venv's)."""
    for python in candidates:
        if Path(python).exists() and subprocess.run([python, "-c", "import hostlist"],
                                                    capture_output=True).returncode == 0:
            return python
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--reps", type=int, default=30, help="interleaved rounds of wall timing (default 30)")
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    if not shutil.which("valgrind"):  # a section that says so, not a failed bench/run.sh
        print("## The light paths against their floors\n\nNot run: valgrind is not installed "
              "(apt-get install valgrind).")
        return 0
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp)
        for folder in ("work", "empty"):
            (tmp / folder).mkdir()
        (tmp / "work" / "train.py").write_text("")
        cache = tmp / "cache"
        envs = {name: tree_env(tree, cache) for name, tree in trees.items()}
        contexts = {name: tmp / f"context-{name}" for name in trees}
        works = {name: tmp / f"rank-{name}" for name in trees}
        for name, folder in contexts.items():  # what each tree's render gives its template, as plain data
            folder.mkdir()
            run([args.python, str(HERE / "capture_render.py"), str(folder / "floor_context.py"), *RENDER[1:]],
                envs[name], tmp / "work")
            works[name].mkdir()
            (works[name] / "empty.py").write_text("")
            (works[name] / "check.py").write_text(CHECK)
        cmds = {name: commands(args.python, tree, contexts[name], works[name]) for name, tree in trees.items()}

        def env_of(name, extra):
            return dict(envs[name], **extra)

        checks = []
        for name in trees:  # warm-up (bytecode, jinja2's caches), and the output checks
            for _ in range(3):
                out = {c: run(argv, env_of(name, extra), tmp / cwd).stdout
                       for c, (argv, cwd, extra) in cmds[name].items()}
            if not out["render"] == out["floor"] == out["argparse"]:
                raise SystemExit(f"{name}: the floor does not print hpcdist's script; fix floor_render.py")
            checks.append(f"{name}: floor and `hpcdist render` print the same script ({len(out['render'])} bytes); "
                          f"`hpcdist status` prints {len(out['status'].splitlines())} line(s)")
            if "rank_start" in cmds[name]:
                argv, cwd, extra = cmds[name]["rank_start"]
                seen = run(argv[:-1] + [str(works[name] / "check.py")], env_of(name, extra), tmp / cwd)
                recorded = works[name] / "progress" / "rank-1.json"
                if seen.stdout.strip() != EXPECTED or not recorded.exists():
                    raise SystemExit(f"{name}: hpcdist.rank exported {seen.stdout.strip()!r}, not {EXPECTED!r}, "
                                     f"or recorded nothing in {recorded}")
                checks.append(f"{name}: `python -m hpcdist.rank` exports {EXPECTED} and records rank-1.json")

        ir = {(name, c): [] for name in trees for c in cmds[name]}
        for _ in range(2):
            for name in trees:
                for c, (argv, cwd, extra) in cmds[name].items():
                    ir[(name, c)].append(instructions(argv, env_of(name, extra), tmp / cwd, tmp / "valgrind.log"))

        wall = {key: [] for key in ir}
        for rep in range(args.reps):
            for name in (("base", "this") if rep % 2 == 0 else ("this", "base")):
                for c, (argv, cwd, extra) in cmds[name].items():
                    start = time.perf_counter()
                    run(argv, env_of(name, extra), tmp / cwd)
                    wall[(name, c)].append(time.perf_counter() - start)

        lists_python = hostlist_python([args.python, str(HERE / ".venv" / "bin" / "python")])
        lists = {}
        if lists_python:
            for name in trees:
                probe = run([lists_python, "-c", HOSTLIST_PROBE, str(max(args.reps, 5))], envs[name], tmp / "empty")
                lists[name] = json.loads(probe.stdout)
    load_after = os.getloadavg()[0]
    report(args, ir, wall, lists, lists_python, checks, load_before, load_after)
    return 0


def report(args, ir, wall, lists, lists_python, checks, load_before, load_after) -> None:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base],
                            capture_output=True, text=True).stdout.strip()
    mean_ir = {key: statistics.mean(v) for key, v in ir.items()}
    med = {key: statistics.median(v) for key, v in wall.items()}

    print(f"## The light paths against their floors: this checkout and {args.base} ({commit})\n")
    print(f"`bench/bench_floor.py --base {args.base} --reps {args.reps}`. Instructions: callgrind (Ir, whole "
          f"process), each command twice, mean; the targets are judged on them (they hold on a loaded machine). "
          f"Wall: median of {args.reps} interleaved rounds. `hpcdist` is the venv's console script; each tree "
          f"on its own PYTHONPATH, bytecode and jinja2's template cache warm. The jinja2 floor "
          f"(`bench/floor_render.py`): `import jinja2`, an Environment built as hpcdist's, one render of "
          f"the same template with the same values as plain data (`bench/capture_render.py` writes them out "
          f"from each tree's own render). torchrun's variables: {', '.join(TORCHRUN)}. The rank's start: "
          f"Open MPI's variables for rank 1 of 4 on 2 nodes inside a Slurm batch step (bench_rank_start.py's), "
          f"`$HPCDIST_PROGRESS_DIR` set (progress recorded), an empty script; `python SCRIPT` runs with the same "
          f"variables. Load average (1 min) before / after: {load_before:.2f} / {load_after:.2f} "
          f"on {os.cpu_count()} CPUs.\n")
    print(f"| case | base {commit}: instructions | this: instructions | base: wall | this: wall | target | met |")
    print("|---|---|---|---|---|---|---|")
    for c, f, label, target in CASES:
        cells = []
        for measure, unit, suffix in ((mean_ir, 1e6, "M"), (med, 1e-3, " ms")):
            for name in ("base", "this"):
                if (name, c) not in measure:  # a base without this command
                    cells.append((float("nan"), "-"))
                    continue
                ratio = measure[(name, c)] / measure[(name, f)]
                cells.append((ratio, f"{measure[(name, c)] / unit:.1f}{suffix} / {measure[(name, f)] / unit:.1f}"
                                     f"{suffix} = **{ratio:.3f}x**"))
        if target is None:
            verdict, shown = "-", "-"
        else:
            verdict = ("yes" if cells[1][0] <= target else "**no**") + \
                " (wall: " + ("yes" if cells[3][0] <= target else "no") + ")"
            shown = f"{target:.2f}x"
        print(f"| {label} | {cells[0][1]} | {cells[1][1]} | {cells[2][1]} | {cells[3][1]} | {shown} | {verdict} |")
    print()
    print("Each command on its own (instructions, millions; wall, ms):\n")
    print("| command | base: instructions | this: instructions | this / base | base: wall | this: wall |")
    print("|---|---|---|---|---|---|")
    labels = {"pass": "`python -c pass`", "floor": "jinja2 floor (`floor_render.py`)",
              "argparse": "jinja2 floor + `import argparse` + one empty ArgumentParser (`--argparse`)",
              "render": "`hpcdist render ...`", "status": "`hpcdist status` (no jobs)",
              "rank": "`import hpcdist.env; hpcdist.env.get_rank()` (no launcher)",
              "rank_torchrun": "`import hpcdist.env; hpcdist.env.get_rank()` (torchrun)",
              "help": "`hpcdist --help`", "version": "`hpcdist --version`",
              "script": "`python SCRIPT` (empty script, the rank's variables)",
              "rank_start": "`python -m hpcdist.rank SCRIPT` (recording on)"}
    for c, label in labels.items():
        t = mean_ir[("this", c)]
        if ("base", c) not in mean_ir:
            print(f"| {label} | - | {t / 1e6:.2f}M | - | - | {med[('this', c)] * 1e3:.1f} |")
            continue
        b = mean_ir[("base", c)]
        print(f"| {label} | {b / 1e6:.2f}M | {t / 1e6:.2f}M | {t / b:.3f}x | {med[('base', c)] * 1e3:.1f} | "
              f"{med[('this', c)] * 1e3:.1f} |")
    print()
    print(f"Node lists: `hpcdist.hostlist` against python-hostlist, in one process per tree (median of "
          f"{max(args.reps, 5)} interleaved calls each, the collector paused during a call; wall time only). "
          f"Target: python-hostlist's time at least {HOSTLIST_TARGET:.0f}x hpcdist's.\n")
    if not lists:
        print("Not run: python-hostlist is not installed (`pip install python-hostlist` into .venv, or "
              "`bash bench/run.sh`, which puts it into bench/.venv).\n")
    else:
        print(f"| case | base {commit}: hpcdist / python-hostlist | this: hpcdist / python-hostlist | target | met |")
        print("|---|---|---|---|---|")
        for c, label in HOSTLIST_CASES:
            cells = []
            for name in ("base", "this"):
                ours, theirs = lists[name][c]
                cells.append((theirs / ours, f"{ours * 1e3:.1f} ms / {theirs * 1e3:.1f} ms = **{theirs / ours:.2f}x**"))
            met = "yes" if cells[1][0] >= HOSTLIST_TARGET else "**no**"
            print(f"| {label} | {cells[0][1]} | {cells[1][1]} | {HOSTLIST_TARGET:.0f}x | {met} |")
        print()
    spread = max(abs(x - y) / max(x, y) for x, y in ir.values())
    argparse_floor = mean_ir[("this", "argparse")] / mean_ir[("this", "floor")]
    print(f"A tool that parses its flags with argparse pays {argparse_floor:.3f}x the jinja2 floor before its "
          f"first flag (argparse imports gettext and, to build a parser, locale).")
    print()
    print(f"The two callgrind runs of a command differ by at most {spread:.2%}. Checks: " + "; ".join(checks) + ".")


if __name__ == "__main__":
    sys.exit(main())
