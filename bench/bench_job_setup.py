#!/usr/bin/env python3
"""The job's set-up before the launcher, in instructions: this checkout and an earlier commit.

What a job script runs between its environment block and its launcher, at 2 Slurm nodes (4 tasks
each) and at 10,000 PBS nodes (8 slots each, ``$PBS_NODEFILE`` of 80,000 lines, host names as on
an HPE Cray EX machine), for a launcher that reads no hostfile (torchrun, spread by srun or by
Open MPI's mpirun) and one that does (DeepSpeed):

- this tree (issue 27): one interpreter, ``python -m hpcdist job-setup --scheduler ... --nodes N
  --dir RUN_DIR [--hostfile deepspeed:K] [--mpi-env]``, which writes the node list, the
  hostfile the launcher reads and job.env;
- ``--base`` (default 54bfaf3, before issue 27): the lines its scripts ran, three interpreters:
  ``hpcdist hostfile --format deepspeed --slots-per-node K -o FILE``, ``hpcdist hostfile --format
  nodes -o FILE``, ``hpcdist env --field master_port`` (and ``head``/``paste`` and bash's own
  builtins, not counted).

Beside them, ``python -c pass``: target (issue 27) at most 2x that at 2 nodes. Instructions:
``valgrind --tool=callgrind`` (Ir, the whole process), each command twice, the mean; a case's
count is the sum over its interpreters. Each tree on its own ``PYTHONPATH`` with its bytecode
cached (a warm-up run fills it; its files are checked: the same node list and hostfile from both
trees; this tree's port is drawn at random, the base's was the job id's: only its range is
checked). Prints a markdown section. Not a test.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_revisions import PROJECT_PYTHON, REPO, checkouts, tree_env  # noqa: E402

DEFAULT_BASE = "54bfaf3"
TARGET = 2.0


def cray_names(count: int) -> list[str]:
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


def cases(tmp: Path) -> dict:
    """name -> (label, scheduler, nodes, slots, job variables, hostfile wanted, mpi env wanted)."""
    nodefile = tmp / "pbs_nodefile"
    nodefile.write_text("".join(f"{host}\n" * 8 for host in cray_names(10_000)))
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "4(x2)"}
    pbs = {"PBS_JOBID": "4242.pbs01", "PBS_NODEFILE": str(nodefile)}
    return {
        "slurm-torchrun": ("2 Slurm nodes x 4, torchrun (srun spreads it)", "slurm", 2, 4, slurm, False, False),
        "slurm-deepspeed": ("2 Slurm nodes x 4, DeepSpeed (its hostfile)", "slurm", 2, 4, slurm, True, False),
        "pbs-torchrun": ("10,000 PBS nodes x 8, torchrun (Open MPI's mpirun spreads it)", "pbs", 10_000, 8, pbs,
                         False, True),
        "pbs-deepspeed": ("10,000 PBS nodes x 8, DeepSpeed (its hostfile)", "pbs", 10_000, 8, pbs, True, False),
    }


def this_commands(python: str, scheduler: str, nodes: int, slots: int, hostfile: bool, mpi: bool,
                  run_dir: Path) -> list[list[str]]:
    argv = [python, "-m", "hpcdist", "job-setup", "--scheduler", scheduler, "--nodes", str(nodes),
            "--dir", str(run_dir)]
    return [argv + (["--hostfile", f"deepspeed:{slots}"] if hostfile else []) + (["--mpi-env"] if mpi else [])]


def base_commands(python: str, slots: int, run_dir: Path) -> list[list[str]]:
    hpcdist = [python, "-m", "hpcdist"]
    return [hpcdist + ["hostfile", "--format", "deepspeed", "--slots-per-node", str(slots), "-o",
                       str(run_dir / "hostfile")],
            hpcdist + ["hostfile", "--format", "nodes", "-o", str(run_dir / "nodes")],
            hpcdist + ["env", "--field", "master_port"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"the commit to compare with (default {DEFAULT_BASE})")
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        print("## The job's set-up before the launcher\n\nNot run: valgrind is not installed.")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = checkouts(args.base, tmp)
        cache = tmp / "cache"
        log = tmp / "valgrind.log"
        (tmp / "empty").mkdir()
        bare = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_", "OMPI_", "PMI"))}
        ir_pass = statistics.mean(instructions([args.python, "-c", "pass"], bare, tmp / "empty", log) for _ in range(2))
        rows, checks = [], []
        for name, (label, scheduler, nodes, slots, variables, hostfile, mpi) in cases(tmp).items():
            counts, files = {}, {}
            for tree_name, tree in trees.items():
                run_dir = tmp / f"run-{tree_name}-{name}"
                run_dir.mkdir()
                env = tree_env(tree, cache, **variables)
                argvs = (this_commands(args.python, scheduler, nodes, slots, hostfile, mpi, run_dir)
                         if tree_name == "this" else base_commands(args.python, slots, run_dir))
                outputs = [run(argv, env, tmp / "empty").stdout for argv in argvs]  # warm-up, and the check
                files[tree_name] = ((run_dir / "nodes").read_text(),
                                    (run_dir / "hostfile").read_text() if hostfile else None,
                                    (re.search(r"MASTER_PORT=(\d+)", (run_dir / "job.env").read_text()).group(1)
                                     if tree_name == "this" else outputs[2].strip()))
                counts[tree_name] = (len(argvs), sum(statistics.mean(instructions(argv, env, tmp / "empty", log)
                                                                     for _ in range(2)) for argv in argvs))
            base_files, this_files = files["base"], files["this"]
            same = (base_files[0] == this_files[0] and 20000 <= int(this_files[2]) < 30000
                    and (not hostfile or base_files[1] == this_files[1]))
            if not same:
                raise SystemExit(f"{name}: the trees disagree on the node list, the hostfile or the port")
            checks.append(f"{name}: the same node list{', hostfile' if hostfile else ''} from both trees; "
                          f"port {this_files[2]} drawn (the base's: {base_files[2]})")
            rows.append((label, nodes, counts))
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base],
                            capture_output=True, text=True).stdout.strip()
    print("## The job's set-up before the launcher (bench/bench_job_setup.py)\n")
    print(f"`bench/bench_job_setup.py --base {args.base}`. Instructions: callgrind (Ir, whole process), each "
          f"command twice, mean; a case's count sums its interpreters. `python -c pass`: {ir_pass / 1e6:.1f}M. "
          f"Target (issue 27): at most {TARGET:.0f}x `python -c pass` at 2 nodes.\n")
    print(f"| case | base {commit}: interpreters, instructions | this: interpreters, instructions | "
          f"this / base | this / `python -c pass` | target met |")
    print("|---|---|---|---|---|---|")
    for label, nodes, counts in rows:
        (bn, bi), (tn, ti) = counts["base"], counts["this"]
        ratio = ti / ir_pass
        met = ("yes" if ratio <= TARGET else "**no**") if nodes == 2 else "(no target)"
        print(f"| {label} | {bn}, {bi / 1e6:.1f}M | {tn}, {ti / 1e6:.1f}M | {ti / bi:.3f}x | {ratio:.2f}x | {met} |")
    print()
    print("Checks: " + "; ".join(checks) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
