#!/usr/bin/env bash
# The main job: a real distributed training run (gloo on the CPU) submitted
# through hpcdist's local backend, the same way a cluster job is submitted:
# hpcdist renders the job script, runs it, follows it and reports its end.
# The jobs are submitted from the repository's folder (their records go into
# its .hpcdist/), or from HPCDIST_DEMO_DIR when that is set (the tests do so).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
repo=$PWD
export PATH="$repo/.venv/bin:$PATH"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI refuses root otherwise
fi
quickstart=examples/quickstart.py
if [ -n "${HPCDIST_DEMO_DIR:-}" ]; then
  quickstart=$repo/$quickstart
  cd "$HPCDIST_DEMO_DIR"
fi

echo "== hpcdist submit --scheduler local --nodes 2 --wait $quickstart"
hpcdist submit --scheduler local --nodes 2 --wait "$quickstart"

echo "== hpcdist submit --scheduler local --procs-per-node 2 --launcher mpirun --wait $quickstart"
hpcdist submit --scheduler local --procs-per-node 2 --launcher mpirun --wait "$quickstart"

echo "== hpcdist status"
hpcdist status

echo
echo "hpcdist is installed in $repo/.venv, which is not on your PATH. For the README's commands:"
echo "  source $repo/.venv/bin/activate"
if [ "$(id -u)" = 0 ]; then
  echo "and, as root, for Open MPI's mpirun (it refuses root otherwise):"
  echo "  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
fi
