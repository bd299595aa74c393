#!/usr/bin/env python3
"""The client's cost of ``executor.submit()``: hpcdist's PBS executor beside submitit's own
SlurmExecutor, up to the submission command (issue 50, section 2).

Instructions by callgrind (Ir of the Python process alone: the submission command is a child it
does not trace), each case run twice, the mean. The cost of a submit is the same script with the
call less the script without it: the imports, the executor and its parameters are in both, so the
figure is what ``submit()`` itself costs a user, its lazy imports included (the first submit of a
process), and then what one more submit costs in the same process.

The submission commands are stand-ins (this is a client-cost bench, not a test): a ``qsub`` and an
``sbatch`` on PATH that print a job id and do nothing else, as the real ones would answer, minus
their round trip to the server; an ``srun`` that is never run (SlurmExecutor refuses to start
without one). The job: one task, ``timeout_min=5``, the function ``abs(1)``.

Usage: ``.venv/bin/python bench/bench_submitit_client.py [--python PYTHON] [--reps 2]``; prints a
markdown section on stdout. Not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"

STUBS = {
    "qsub": "#!/bin/sh\necho 1234.pbshead\n",
    "sbatch": "#!/bin/sh\necho 'Submitted batch job 1234'\n",
    "srun": "#!/bin/sh\necho 'the stand-in srun was run' >&2; exit 1\n",
}

#: A user's script: the executor of ``cluster``, its parameters, then ``submits`` submits.
SCRIPT = """\
import sys, submitit
cluster, submits = sys.argv[1], int(sys.argv[2])
executor = submitit.AutoExecutor(folder="logs_" + cluster, cluster=cluster)
executor.update_parameters(timeout_min=5)
jobs = [executor.submit(abs, 1) for _ in range(submits)]
assert all(job.job_id == "1234" for job in jobs), [job.job_id for job in jobs]
"""


def instructions(python: str, cwd: Path, env: dict, *args: str) -> int:
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           python, "main.py", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=str(PROJECT_PYTHON))
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        (where / "bin").mkdir()
        for name, text in STUBS.items():
            (where / "bin" / name).write_text(text)
            (where / "bin" / name).chmod(0o755)
        (where / "main.py").write_text(SCRIPT)
        env = dict(os.environ, PATH=f"{where / 'bin'}{os.pathsep}{os.environ['PATH']}",
                   HPCDIST_NO_DEFAULT_PROFILE="1", PYTHONPYCACHEPREFIX=str(where / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for cluster in ("slurm", "pbs"):  # warm the bytecode cache
            subprocess.run([args.python, "main.py", cluster, "2"], cwd=where, env=env, check=True)
        rows = {}
        for cluster in ("slurm", "pbs"):
            runs = {n: [instructions(args.python, where, env, cluster, str(n)) for _ in range(args.reps)]
                    for n in (0, 1, 2)}
            mean = {n: sum(v) / len(v) for n, v in runs.items()}
            spread = max((max(v) - min(v)) / min(v) for v in runs.values())
            rows[cluster] = (mean[0], mean[1] - mean[0], mean[2] - mean[1], spread)
    names = {"slurm": "submitit's SlurmExecutor (sbatch)", "pbs": "hpcdist's PBS executor (qsub)"}
    print("| executor | the script without submit() | first submit() | one more submit() |")
    print("|---|---|---|---|")
    for cluster, (base, first, more, _) in rows.items():
        print(f"| {names[cluster]} | {base / 1e6:.1f}M | {first / 1e6:.1f}M | {more / 1e6:.1f}M |")
    first = rows["pbs"][1] / rows["slurm"][1]
    more = rows["pbs"][2] / rows["slurm"][2]
    spread = max(r[3] for r in rows.values())
    print(f"\nPBS / Slurm: first submit() {first:.1f}x, one more {more:.1f}x. The {args.reps} "
          f"callgrind runs of a case differ by at most {spread:.2%}. Python: {args.python}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
