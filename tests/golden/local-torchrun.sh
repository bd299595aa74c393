#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# A plain script: read it, edit it, submit it by hand:
#   bash <this file>

# Local backend: 2 "node(s)" on this host, 2 process(es) each.

set -euo pipefail
cd /home/alice/project
export HPCDIST_JOB_ID="${HPCDIST_JOB_ID:-$$}"  # the runner's pid, or this shell's when run by hand
# The job's own files (node list, hostfile) go in the submit folder, which every node sees.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

export NCCL_DEBUG=INFO

# The nodes; this host is the master and holds torchrun's store on a free port drawn at random.
python -m hpcdist job-setup --scheduler local --dir "$run_dir" --hold-store || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start torchrun on every node as agents on this host: 2 processes each, meeting at this node.
python -m hpcdist agents --local --nodes 2 -- \
  torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d \
  --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-conf=is_host=0 --rdzv-id="$HPCDIST_JOB_ID" \
  -m hpcdist.rank \
  train.py --lr 0.1
