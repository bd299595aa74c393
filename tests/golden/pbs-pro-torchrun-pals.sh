#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# A plain script: read it, edit it, submit it by hand:
#   qsub <this file>

#PBS -N train
#PBS -l select=2:ncpus=4:mpiprocs=4:ngpus=4
#PBS -l place=scatter
#PBS -l walltime=01:30:00
#PBS -j oe
#PBS -k oed

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

# The nodes; this node is the master and holds torchrun's store on a free port drawn at random.
python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hold-store || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start torchrun on every node with Cray PALS's launcher: 4 processes each, meeting at this node.
mpiexec --hostfile "$HPCDIST_NODEFILE" -n 2 --ppn 1 --cpu-bind none --envall \
  "${HPCDIST_PYTHON:-python}" -m hpcdist agents --reap -- torchrun --nnodes=2 --nproc-per-node=4 \
  --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-conf=is_host=0 \
  --rdzv-id="$HPCDIST_JOB_ID" -m hpcdist.rank \
  train.py --lr 0.1
