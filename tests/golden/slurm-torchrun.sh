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

# The nodes; this node is the master and holds torchrun's store on a free port drawn at random.
python -m hpcdist job-setup --scheduler slurm --nodes 2 --dir "$run_dir" --hold-store || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start torchrun on every node with srun: 4 processes each, meeting at this node.
srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=4 --kill-on-bad-exit=1 \
  torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d \
  --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-conf=is_host=0 --rdzv-id="$HPCDIST_JOB_ID" \
  -m hpcdist.rank \
  train.py --lr 0.1
