#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile gadi --nodes 2 --project vp91 --walltime 20m --mem 5G train.py
# A plain script: read it, edit it, submit it by hand:
#   qsub <this file>

#PBS -N train
#PBS -l ncpus=96
#PBS -l ngpus=8
#PBS -l mem=10gb
#PBS -l walltime=00:20:00
#PBS -q gpuvolta
#PBS -P vp91
#PBS -j oe
#PBS -k oed

set -euo pipefail
cd "$PBS_O_WORKDIR"  # PBS starts a job in $HOME
# The job's own files (node list, hostfile) go in the submit folder, which every node sees.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# The nodes; this node is the master and holds torchrun's store on a free port drawn at random.
python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hold-store || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start torchrun on every node with pbsdsh: 4 processes each, meeting at this node.
python -m hpcdist agents --pbsdsh --dir "$run_dir" -- \
  "${HPCDIST_PYTHON:-python}" -m hpcdist agents --reap -- torchrun --nnodes=2 --nproc-per-node=4 \
  --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-conf=is_host=0 \
  --rdzv-id="$HPCDIST_JOB_ID" -m hpcdist.rank \
  train.py
