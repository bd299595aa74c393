#!/usr/bin/env python3
"""What starting a rank through ``python -m hpcdist.rank`` costs, against plain ``python`` and ``python -m mpi4py``.

srun, mpirun and DeepSpeed's launcher start every rank as ``python -m
hpcdist.rank SCRIPT`` (issue 17): it resolves the rank, exports torchrun's
variables and runs the script in process. ``python -m mpi4py SCRIPT`` is the
tool users would otherwise reach for to get a failing rank to abort MPI (it
runs the script the same way, and starts MPI). Each is timed on an empty
script and on one that imports torch (what every training script does), with
an Open MPI rank's variables set by hand (rank 1 of 4 on 2 nodes, this host
the first of the job's, in a Slurm batch step), so no MPI launcher runs. Wall time: the median of ``--reps``
interleaved rounds; ratios to plain python. Prints a markdown section. Not a test.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
RANK_ENV = dict(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_RANK="1",
                OMPI_COMM_WORLD_LOCAL_SIZE="2", SLURM_JOB_ID="4242",
                # This host first: the node rank comes from its place in the list, as in a real job
                # (a host missing from the list would send hpcdist.env to mpi4py discovery).
                SLURM_JOB_NODELIST=f"{socket.gethostname()},node2",
                SLURM_PROCID="0", SLURM_NTASKS="4", SLURM_STEP_ID="4294967291", MASTER_ADDR="node1",
                MASTER_PORT="24242")
STARTS = {
    "python SCRIPT": [],
    "python -m hpcdist.rank SCRIPT": ["-m", "hpcdist.rank"],
    "python -m mpi4py SCRIPT": ["-m", "mpi4py"],
}


def wall(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO), **RANK_ENV)
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {"empty script": Path(tmp, "empty.py"), "import torch": Path(tmp, "torch_script.py")}
        scripts["empty script"].write_text("")
        scripts["import torch"].write_text("import torch\n")
        for script in scripts.values():  # warm the caches
            subprocess.run([PYTHON, "-m", "hpcdist.rank", str(script)], env=env, check=True)
        times = {(s, k): [] for s in scripts for k in STARTS}
        for _ in range(args.reps):  # interleaved rounds: the machine's noise hits all alike
            for s, path in scripts.items():
                for k, words in STARTS.items():
                    times[(s, k)].append(wall([PYTHON, *words, str(path)], env))
    print("## Starting a rank: `python -m hpcdist.rank` (bench/bench_rank_start.py)\n")
    print(f"Median wall time of {args.reps} interleaved rounds, an Open MPI rank's variables set by hand; "
          "ratio to plain `python SCRIPT` on the same script.\n")
    print("| script | start | median ms | ratio |")
    print("| --- | --- | --- | --- |")
    for s in scripts:
        floor = statistics.median(times[(s, "python SCRIPT")])
        for k in STARTS:
            m = statistics.median(times[(s, k)])
            print(f"| {s} | `{k}` | {m * 1000:.1f} | {m / floor:.2f}x |")


if __name__ == "__main__":
    main()
