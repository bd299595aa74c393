#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# A plain script: read it, edit it, submit it by hand:
#   sbatch <this file>

#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --time=01:30:00
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
module load cuda/12.1
eval "$(conda shell.bash hook)"
conda activate myenv
export NCCL_DEBUG=INFO
set -u

# The nodes and a hostfile for mpirun; the master is the first node, its port a free one drawn at
# random.
python -m hpcdist job-setup --scheduler slurm --nodes 2 --dir "$run_dir" --hostfile openmpi:4 \
  --mpi-env --pass NCCL_DEBUG || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start the 8 ranks with Open MPI's launcher, each through hpcdist.rank (which gives every framework
# its rank).
mpirun --hostfile "$HPCDIST_HOSTFILE" -np 8 --map-by slot --bind-to none "${mpi_env[@]}" \
  python -m hpcdist.rank \
  train.py --lr 0.1
