#!/usr/bin/env python3
"""``hpcdist hostfile`` over a large PBS node file, in instructions: this checkout and an earlier commit.

``python -m hpcdist hostfile --format deepspeed --slots-per-node 8 -o FILE`` with
``PBS_NODEFILE`` naming a node file as PBS writes it: ``--hosts`` hosts (default 10,000) of
``--lines`` lines each (default 8, one per slot, a host's lines together), hosts named as on an
HPE Cray EX machine (``x3000c0s0b0n0``; ``--names node`` for ``node00001``). Beside it,
``python -c pass`` (what any Python program pays) and the same command on ``--base`` (default
54bfaf3, main before issue 27's node-file fix). A third row, without a target, runs the same node
file with a space after each name, which hpcdist cannot read in one split of the whole text: it
strips each line (``map(str.strip, ...)``) first.

The base commit and this working tree are set side by side as bench_floor.py does
(:func:`bench_revisions.checkouts`: ``git archive`` of the commit, a copy of this tree), each
on its own ``PYTHONPATH`` with its bytecode cached (a warm-up run fills the cache; its output is
checked: one ``host slots=8`` line per host, in order, the same from both trees).

Instructions: ``valgrind --tool=callgrind`` (Ir, the whole process), each command twice, the
mean shown. Target (issue 27): at most 0.5G instructions. Prints a markdown section on stdout.
Not a test.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_revisions import PROJECT_PYTHON, REPO, checkouts, tree_env  # noqa: E402

TARGET = 0.5e9
DEFAULT_BASE = "54bfaf3"


def host_names(count: int, style: str) -> list[str]:
    if style == "node":
        return [f"node{i:05d}" for i in range(1, count + 1)]
    # HPE Cray EX: cabinet, chassis, slot, board, node
    return [f"x{3000 + i // 512}c{i // 64 % 8}s{i // 8 % 8}b{i // 4 % 2}n{i % 4}" for i in range(count)]


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
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"the commit to compare with (default {DEFAULT_BASE})")
    parser.add_argument("--hosts", type=int, default=10_000, help="hosts in the node file (default 10,000)")
    parser.add_argument("--lines", type=int, default=8, help="lines per host, one per slot (default 8)")
    parser.add_argument("--names", choices=("cray", "node"), default="cray",
                        help="host names: x3000c0s0b0n0 (cray, default) or node00001 (node)")
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    if not shutil.which("valgrind"):  # a section that says so, not a failed bench/run.sh
        print("## `hpcdist hostfile` over a large PBS node file\n\nNot run: valgrind is not installed "
              "(apt-get install valgrind).")
        return 0
    hosts = host_names(args.hosts, args.names)
    expected = "".join(f"{host} slots=8\n" for host in hosts)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp)
        work = tmp / "work"
        work.mkdir()
        nodefiles = {"plain": work / "nodefile", "space": work / "nodefile-space"}
        nodefiles["plain"].write_text("".join(f"{host}\n" * args.lines for host in hosts))
        nodefiles["space"].write_text("".join(f"{host} \n" * args.lines for host in hosts))
        out = work / "hostfile"
        hostfile = ["-m", "hpcdist", "hostfile", "--format", "deepspeed", "--slots-per-node", "8", "-o", str(out)]
        cache = tmp / "cache"
        # (row, tree) -> (argv, env)
        cmds = {}
        for name, tree in trees.items():
            cmds["pass", name] = ([args.python, "-c", "pass"], tree_env(tree, cache))
            for kind, path in nodefiles.items():
                cmds[kind, name] = ([args.python, *hostfile], tree_env(tree, cache, PBS_NODEFILE=str(path)))

        for (row, name), (argv, env) in cmds.items():  # warm-up (bytecode), and the output checked
            run(argv, env, work)
            if row != "pass":
                written = out.read_text()
                if written != expected:
                    raise SystemExit(f"{name}: the {row} node file gave a hostfile of {len(written.splitlines())} "
                                     f"lines, not the {args.hosts} expected")
                out.unlink()

        ir: dict = {key: [] for key in cmds}
        for _ in range(2):
            for key, (argv, env) in cmds.items():
                ir[key].append(instructions(argv, env, work, tmp / "valgrind.log"))
                if out.exists():
                    out.unlink()

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base],
                            capture_output=True, text=True).stdout.strip()
    mean = {key: statistics.mean(value) for key, value in ir.items()}
    spread = max(abs(x - y) / max(x, y) for x, y in ir.values())
    lines = args.hosts * args.lines
    example = hosts[0]
    line = "python -m hpcdist hostfile --format deepspeed --slots-per-node 8 -o FILE"
    print(f"## `hpcdist hostfile` over a PBS node file of {args.hosts:,} hosts x {args.lines} lines: "
          f"this checkout and {args.base} ({commit})\n")
    print(f"`{' '.join(['bench/bench_hostfile.py', *sys.argv[1:]])}`: `{line}` with `PBS_NODEFILE` "
          f"naming a node file of {lines:,} lines ({args.hosts:,} hosts named like `{example}`, "
          f"{args.lines} lines each, together), beside `python -c pass`. Instructions: callgrind "
          f"(Ir, whole process), each command twice, mean; each tree on its own PYTHONPATH "
          f"(`{args.base}` exported with `git archive`, this working tree copied), bytecode "
          f"cached. Each output checked in a warm-up run: {args.hosts:,} `host slots=8` lines, in "
          f"order, from both trees. Target: at most {TARGET / 1e9:g}G instructions.\n")
    print(f"| command | base {commit} | this | this / base | this / `python -c pass` | target {TARGET / 1e9:g}G met |")
    print("|---|---|---|---|---|---|")
    labels = {
        "pass": ("`python -c pass`", False),
        "plain": ("`hpcdist hostfile`, the node file as PBS writes it", True),
        "space": ("`hpcdist hostfile`, a space after each name (each line stripped)", False),
    }
    for row, (label, judged) in labels.items():
        b, t = mean[row, "base"], mean[row, "this"]
        floor = mean["pass", "this"]
        verdict = ("yes" if t <= TARGET else "**no**") if judged else "(no target)"
        if judged:
            verdict += f" (base: {'yes' if b <= TARGET else 'no'})"
        print(f"| {label} | {b / 1e6:.1f}M | {t / 1e6:.1f}M | {t / b:.3f}x | {t / floor:.2f}x | {verdict} |")
    print()
    print(f"The two callgrind runs of a command differ by at most {spread:.2%}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
