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

# The nodes and a hostfile for deepspeed; the master is the first node, its port a free one drawn at
# random.
python -m hpcdist job-setup --scheduler slurm --nodes 2 --dir "$run_dir" --hostfile deepspeed:4 \
  || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start DeepSpeed on every node with srun (--no_ssh: each is told its node's index).
srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=4 --kill-on-bad-exit=1 \
  bash -c '
    export NODE_RANK="$SLURM_NODEID"
    exec deepspeed --hostfile "$HPCDIST_HOSTFILE" --master_addr "$MASTER_ADDR" \
      --master_port "$MASTER_PORT" --no_ssh --node_rank="$NODE_RANK" --module hpcdist.rank \
      train.py --lr 0.1'
