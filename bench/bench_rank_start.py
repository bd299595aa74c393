#!/usr/bin/env python3
"""What starting a rank through ``python -m hpcdist.rank`` costs, in instructions and wall time,
against plain ``python``, ``python -m mpi4py`` and an earlier commit.

srun, mpirun and DeepSpeed's launcher start every rank as ``python -m
hpcdist.rank SCRIPT`` (issue 17): it resolves the rank, exports torchrun's
variables and runs the script in process. ``python -m mpi4py SCRIPT`` is the
tool users would otherwise reach for to get a failing rank to abort MPI (it
runs the script the same way, and starts MPI). Every start runs with an Open
MPI rank's variables set by hand (rank 1 of 4 on 2 nodes, this host the
first of the job's, in a Slurm batch step, so the node rank comes from the
node list), so no MPI launcher runs.

Beside them, what no ``python -m hpcdist.rank`` can go below:
``python -m hpcdist.nothing``, an empty module of ours (a copy of
``hpcdist/__init__.py`` and an empty ``nothing.py``: what ``python -m``
itself costs, runpy and its imports), and ``python -m hpcdist.floor SCRIPT``
(:file:`floor_rank.py`: the script run in process as hpcdist.rank runs it,
with nothing resolved). The earlier commit (``--base``, default 54bfaf3,
before the rank's start was made light) runs from its own checkout (``git
worktree add`` into a temporary folder, removed at the end), this working
tree in place, each on its own ``PYTHONPATH`` with its bytecode cached in a
private folder that warm-up runs fill; every command runs in an empty
folder.

Instructions: ``valgrind --tool=callgrind`` (Ir, the whole process), on the
empty script, each command twice, the mean; they hold on a loaded machine,
and the target (``python -m hpcdist.rank`` at most 2x ``python SCRIPT``) is
judged on them. Wall: the median of ``--reps`` interleaved rounds, on the
empty script and on one that imports torch (what every training script
does). Prints a markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_revisions import REPO, tree_env  # noqa: E402

PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
RANK_ENV = dict(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_RANK="1",
                OMPI_COMM_WORLD_LOCAL_SIZE="2", SLURM_JOB_ID="4242",
                # This host first: the node rank comes from its place in the list, as in a real job
                # (a host missing from the list would send hpcdist.env to mpi4py discovery).
                SLURM_JOB_NODELIST=f"{socket.gethostname()},node2",
                SLURM_PROCID="0", SLURM_NTASKS="4", SLURM_STEP_ID="4294967291", MASTER_ADDR="node1",
                MASTER_PORT="24242")
#: What the rank exports, checked in the warm-up for both trees.
EXPECTED = "RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 NODE_RANK=0 GROUP_RANK=0 MASTER_ADDR=node1 " \
           "MASTER_PORT=24242 SLURM_PROCID=None"
CHECK = ("import os\nprint(' '.join(f'{k}={os.environ.get(k)}' for k in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', "
         "'LOCAL_WORLD_SIZE', 'NODE_RANK', 'GROUP_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'SLURM_PROCID')))\n")
#: name -> (label, tree, words before the script; None: the command takes no script)
STARTS = {
    "python": ("`python SCRIPT`", "this", []),
    "empty": ("`python -m hpcdist.nothing`: an empty module of ours, no script", "pkg", ["-m", "hpcdist.nothing"]),
    "floor": ("`python -m hpcdist.floor SCRIPT`: the floor (bench/floor_rank.py)", "pkg", ["-m", "hpcdist.floor"]),
    "base": ("`python -m hpcdist.rank SCRIPT`, base {commit}", "base", ["-m", "hpcdist.rank"]),
    "this": ("`python -m hpcdist.rank SCRIPT`, this tree", "this", ["-m", "hpcdist.rank"]),
    "mpi4py": ("`python -m mpi4py SCRIPT`", "this", ["-m", "mpi4py"]),
}
TARGET = 2.0


def run(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def instructions(argv: list[str], env: dict, cwd: Path, log: Path) -> int:
    run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}", *argv], env, cwd)
    found = re.search(r"Collected : (\d+)", log.read_text())
    if not found:
        raise SystemExit(f"no instruction count from valgrind for {' '.join(argv)}:\n{log.read_text()}")
    return int(found.group(1))


def argv_of(python: str, start: str, script: Path) -> list[str]:
    words = STARTS[start][2]
    return [python, *words] if start == "empty" else [python, *words, str(script)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="54bfaf3", help="the commit to compare with (default 54bfaf3)")
    parser.add_argument("--reps", type=int, default=15, help="interleaved rounds of wall timing (default 15)")
    parser.add_argument("--python", default=PYTHON)
    parser.add_argument("--no-torch", action="store_true", help="leave out the script that imports torch")
    args = parser.parse_args()
    valgrind = shutil.which("valgrind") is not None
    torch = not args.no_torch and run([args.python, "-c", "import importlib.util as u; "
                                       "print(u.find_spec('torch') is not None)"], dict(os.environ),
                                      Path.cwd()).stdout.strip() == "True"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base],
                            capture_output=True, text=True, check=True).stdout.strip()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = tmp / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(base), args.base],
                       check=True)
        try:
            result = measure(args, tmp, base, valgrind, torch)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
    load_after = os.getloadavg()[0]
    report(args, commit, result, valgrind, load_before, load_after)
    return 0


def measure(args, tmp: Path, base: Path, valgrind: bool, torch: bool) -> dict:
    # An empty module of ours, and the floor, in a package beside a copy of hpcdist/__init__.py.
    pkg = tmp / "pkg"
    (pkg / "hpcdist").mkdir(parents=True)
    shutil.copy(REPO / "hpcdist" / "__init__.py", pkg / "hpcdist" / "__init__.py")
    (pkg / "hpcdist" / "nothing.py").write_text("")
    shutil.copy(HERE / "floor_rank.py", pkg / "hpcdist" / "floor.py")
    shutil.copy(REPO / "hpcdist" / "rank.py", pkg / "hpcdist" / "rank.py")  # the floor compiles as the rank does
    work = tmp / "work"  # every command runs here: nothing of either tree on sys.path but its PYTHONPATH
    work.mkdir()
    scripts = {"empty script": work / "empty.py"}
    scripts["empty script"].write_text("")
    if torch:
        scripts["import torch"] = work / "torch_script.py"
        scripts["import torch"].write_text("import torch\n")
    (work / "check.py").write_text(CHECK)
    cache = tmp / "cache"
    envs = {name: tree_env(tree, cache, **RANK_ENV) for name, tree in (("this", REPO), ("base", base), ("pkg", pkg))}
    trees = {name: STARTS[name][1] for name in STARTS}

    checks = []
    for name in ("base", "this"):  # the rank's exports, the same from both trees
        out = run([args.python, "-m", "hpcdist.rank", str(work / "check.py")], envs[name], work)
        if out.stdout.strip() != EXPECTED or out.stderr:
            raise SystemExit(f"{name}: hpcdist.rank exported {out.stdout.strip()!r} (stderr {out.stderr!r}), "
                             f"not {EXPECTED!r}")
        checks.append(f"{name}: {out.stdout.strip()}")
    for _ in range(3):  # warm-up: fill the bytecode caches
        for path in scripts.values():
            for name in STARTS:
                run(argv_of(args.python, name, path), envs[trees[name]], work)

    ir = {name: [] for name in STARTS}
    if valgrind:
        for _ in range(2):
            for name in STARTS:
                ir[name].append(instructions(argv_of(args.python, name, scripts["empty script"]),
                                             envs[trees[name]], work, tmp / "valgrind.log"))

    wall = {(s, name): [] for s in scripts for name in STARTS}
    for rep in range(args.reps):  # interleaved rounds: the machine's noise hits all alike
        order = list(STARTS) if rep % 2 == 0 else list(reversed(STARTS))
        for s, path in scripts.items():
            for name in order:
                start = time.perf_counter()
                run(argv_of(args.python, name, path), envs[trees[name]], work)
                wall[(s, name)].append(time.perf_counter() - start)
    return dict(ir=ir, wall=wall, scripts=list(scripts), checks=checks)


def report(args, commit: str, result: dict, valgrind: bool, load_before: float, load_after: float) -> None:
    ir, wall, scripts = result["ir"], result["wall"], result["scripts"]
    label = {name: text.format(commit=commit) for name, (text, _, _) in STARTS.items()}
    print("## Starting a rank: `python -m hpcdist.rank` (bench/bench_rank_start.py)\n")
    print(f"`bench/bench_rank_start.py --base {args.base} --reps {args.reps}`: an Open MPI rank's variables set by "
          f"hand (rank 1 of 4 on 2 nodes, this host first in `SLURM_JOB_NODELIST`, a Slurm batch step's "
          f"`SLURM_PROCID`/`SLURM_NTASKS`); each tree on its own PYTHONPATH, bytecode cached, every command run "
          f"in an empty folder; base {commit} from its own `git worktree`. Instructions: callgrind (Ir, whole "
          f"process), each command twice, mean; the target is judged on them. Wall: median of {args.reps} "
          f"interleaved rounds. Load average (1 min) before / after: {load_before:.2f} / {load_after:.2f} on "
          f"{os.cpu_count()} CPUs.\n")
    mean = {name: statistics.mean(v) for name, v in ir.items() if v}
    for s in scripts:
        floor_wall = statistics.median(wall[(s, "python")])
        with_ir = valgrind and s == "empty script"
        print(f"{s[0].upper() + s[1:]}:\n")
        if with_ir:
            print("| start | instructions | / `python SCRIPT` | wall ms | / `python SCRIPT` |")
            print("|---|---|---|---|---|")
        else:
            print("| start | wall ms | / `python SCRIPT` |")
            print("|---|---|---|")
        for name in STARTS:
            if name == "empty" and s != "empty script":
                continue
            m = statistics.median(wall[(s, name)])
            cells = f"{m * 1000:.1f} | {m / floor_wall:.2f}x"
            if with_ir:
                cells = f"{mean[name] / 1e6:.2f}M | **{mean[name] / mean['python']:.3f}x** | " + cells
            print(f"| {label[name]} | {cells} |")
        print()
    if valgrind:
        bare = mean["python"]
        this, base_ir = mean["this"] / bare, mean["base"] / bare
        budget = (TARGET - 1) * bare
        share = {name: (mean[name] - bare) / budget for name in ("empty", "floor", "this")}
        print(f"**Target: `python -m hpcdist.rank SCRIPT` at most {TARGET:.0f}x `python SCRIPT` in instructions: "
              f"{this:.3f}x, {'met' if this <= TARGET else 'not met'}** (base {commit}: {base_ir:.3f}x; this / "
              f"base = {mean['this'] / mean['base']:.3f}x). The budget above `python SCRIPT` is one more "
              f"`python SCRIPT`, {budget / 1e6:.1f}M instructions: `python -m` of an empty module of ours takes "
              f"{share['empty']:.0%} of it, the floor (that, plus compiling the script and the full collection "
              f"at exit) {share['floor']:.0%}, leaving {1 - share['floor']:.0%} "
              f"({(budget - mean['floor'] + bare) / 1e6:.1f}M) for resolving the rank; hpcdist.rank takes "
              f"{share['this']:.0%} in all, {(mean['this'] - mean['floor']) / 1e6:.1f}M above the floor.\n")
        spread = max(abs(x - y) / max(x, y) for x, y in ir.values())
        print(f"The two callgrind runs of a command differ by at most {spread:.2%}.", end=" ")
    print("Checks (the variables the script sees): " + "; ".join(result["checks"]) + ".")


if __name__ == "__main__":
    sys.exit(main())
