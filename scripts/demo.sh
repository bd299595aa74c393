#!/usr/bin/env bash
# The main job: a real distributed training run (gloo on the CPU) submitted
# through hpcdist's local backend, the same way a cluster job is submitted:
# hpcdist renders the job script, runs it, follows it and reports its end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI refuses root otherwise
fi

echo "== hpcdist submit --scheduler local --nodes 2 --wait examples/quickstart.py"
hpcdist submit --scheduler local --nodes 2 --wait examples/quickstart.py

echo "== hpcdist submit --scheduler local --procs-per-node 2 --launcher mpirun --wait examples/quickstart.py"
hpcdist submit --scheduler local --procs-per-node 2 --launcher mpirun --wait examples/quickstart.py

echo "== hpcdist status"
hpcdist status
