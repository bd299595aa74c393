#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# A plain script: read it, edit it, submit it by hand:
#   qsub <this file>

#PBS -N train
#PBS -l nodes=2:ppn=4:gpus=4
#PBS -l walltime=01:30:00
#PBS -j oe

set -euo pipefail
cd "$PBS_O_WORKDIR"  # PBS starts a job in $HOME
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
python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hostfile deepspeed:4 \
  --deepspeed-env --pass NCCL_DEBUG || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start DeepSpeed; it reaches the other nodes by pdsh (`hpcdist supervise`: one fails, all end).
python -m hpcdist supervise -- \
  deepspeed --hostfile "$HPCDIST_HOSTFILE" --master_addr "$MASTER_ADDR" \
  --master_port "$MASTER_PORT" --module hpcdist.rank \
  train.py --lr 0.1 --deepspeed_config ds_config.json
