#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# Submit it by hand with:  bash job.sh
# It is a plain script: read it, edit it, submit it again.

# Local backend: 2 "node(s)" on this host, 2 process(es) each.

set -euo pipefail
cd /home/alice/project
export HPCDIST_JOB_ID="${HPCDIST_JOB_ID:-$$}"

# Wait for every background agent; when one fails, stop the others and fail.
hpcdist_wait_all() {
  local status=0 pid alive
  while [ "$#" -gt 0 ]; do
    wait -n "$@" || { status=$?; kill "$@" 2>/dev/null || true; wait; return "$status"; }
    alive=()
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    set -- "${alive[@]+"${alive[@]}"}"
  done
}
# The job's own files (host files, the stop request), in the submit folder, which every node sees:
# agents on the other nodes read them (DeepSpeed --no-ssh: the host file), and TMPDIR is the node's own.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# Every value below that came from the job spec is shell-quoted.
export NCCL_DEBUG=INFO
if ! command -v hpcdist >/dev/null; then
  echo "hpcdist is not installed in this job's environment (PATH=$PATH): install it there (pip install hpcdist) or add --conda/--venv/--module." >&2
  exit 2
fi

# The allocation: a hostfile for the launcher, the first host as the master.
export HPCDIST_HOSTFILE="$run_dir/hostfile" HPCDIST_NODEFILE="$run_dir/nodes"
hpcdist hostfile --format deepspeed --slots-per-node 4 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); master: $MASTER_ADDR:$MASTER_PORT" >&2

# Start the training on every node.
pids=()
for node_rank in $(seq 0 1); do
  (export NODE_RANK=$node_rank; exec accelerate launch --num_machines=2 --num_processes=4 --machine_rank="$NODE_RANK" --main_process_ip="$MASTER_ADDR" --main_process_port="$MASTER_PORT" --multi_gpu train.py --lr 0.1 ) &
  pids+=($!)
done
hpcdist_wait_all "${pids[@]}"
