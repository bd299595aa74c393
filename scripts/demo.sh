#!/usr/bin/env bash
# The main job: a real distributed training run (2 processes, gloo on the CPU)
# under torchrun and then under Open MPI's mpirun, with ranks from hpcdist.env.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== torchrun --nproc-per-node 2 examples/quickstart.py"
torchrun --nproc-per-node 2 --standalone examples/quickstart.py 2>&1 | grep -E '^\[|^loss|rror'

if command -v mpirun.openmpi >/dev/null; then
  root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  echo "== mpirun -np 2 python examples/quickstart.py"
  mpirun.openmpi "${root[@]}" --oversubscribe -np 2 python examples/quickstart.py 2>&1 | grep -E '^\[|^loss|rror'
fi
