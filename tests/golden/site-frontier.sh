#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile frontier --nodes 2 --account PROJECT_ID --walltime 5m train.py
# A plain script: read it, edit it, submit it by hand:
#   sbatch <this file>

#SBATCH --network=disable_rdzv_get
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=7
#SBATCH --time=00:05:00
#SBATCH --partition=batch
#SBATCH --account=PROJECT_ID
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
# The job's own files (node list, hostfile) go in the submit folder, which every node sees.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# The training's environment (-u is off: module and conda scripts read unset variables).
set +u
command -v module >/dev/null || source /etc/profile  # a batch shell is not a login shell
module load PrgEnv-gnu/8.7.0
module load cpe/26.03
module load miniforge3/23.11.0-0
module load rocm/7.1.1
module load rccl-net-plugin
module load craype-accel-amd-gfx90a
export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3
export MIOPEN_USER_DB_PATH="/tmp/my-miopen-cache"
export LD_LIBRARY_PATH="$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH"
export MIOPEN_CUSTOM_CACHE_DIR="${MIOPEN_USER_DB_PATH}"
# Your setup lines (--setup), as you wrote them: hpcdist does not quote them.
mkdir -p ${MIOPEN_USER_DB_PATH}
set -u

# The nodes; the master is the first node, its port a free one drawn at random.
python -m hpcdist job-setup --scheduler slurm --nodes 2 --dir "$run_dir" || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start the 16 ranks with srun, each through hpcdist.rank (which gives every framework its rank);
# one that fails ends the others.
srun --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 --cpus-per-task=7 --gpus-per-task=1 \
  --gpu-bind=closest python -m hpcdist.rank \
  train.py
