#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# Submit it by hand with:  qsub job.sh
# It is a plain script: read it, edit it, submit it again.

#PBS -N train
#PBS -l nodes=2:ppn=4:gpus=4
#PBS -l walltime=01:30:00
#PBS -j oe

set -euo pipefail
# PBS starts jobs in $HOME.
cd "$PBS_O_WORKDIR"
export HPCDIST_JOB_ID="$PBS_JOBID"
# The job's own files (host files, the stop request), in the submit folder, which every node sees:
# agents on the other nodes read them (DeepSpeed --no-ssh: the host file), and TMPDIR is the node's own.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# Every value below that came from the job spec is shell-quoted.
# Environment (module and conda scripts read unset variables: -u is off here).
set +u
# Batch shells are not login shells: the module command may need /etc/profile.
command -v module >/dev/null || source /etc/profile
module load cuda/12.1
eval "$(conda shell.bash hook)"
conda activate myenv
set -u
export NCCL_DEBUG=INFO
if ! command -v hpcdist >/dev/null; then
  echo "hpcdist is not installed in this job's environment (PATH=$PATH): install it there (pip install hpcdist) or add --conda/--venv/--module." >&2
  exit 2
fi

# The allocation: a hostfile for the launcher, the first host as the master.
export HPCDIST_HOSTFILE="$run_dir/hostfile" HPCDIST_NODEFILE="$run_dir/nodes"
hpcdist hostfile --format deepspeed --slots-per-node 4 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-$(head -n 1 "$HPCDIST_NODEFILE")}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); master: $MASTER_ADDR:$MASTER_PORT" >&2

# Start the training on every node.
# pbsdsh tasks get the job's environment from PBS, not this script's: what the agents need goes with them.
hpcdist_agent_env=(); for name in PATH LD_LIBRARY_PATH PYTHONPATH VIRTUAL_ENV CONDA_PREFIX MASTER_ADDR MASTER_PORT HPCDIST_STOP_FILE NCCL_DEBUG HPCDIST_JOB_ID HPCDIST_HOSTFILE HPCDIST_NODEFILE; do if [ -n "${!name+set}" ]; then hpcdist_agent_env+=("$name=${!name}"); fi; done
# Each agent leaves its exit status here (pbsdsh itself may exit 0 when its task failed).
hpcdist_agents="$run_dir/agents"; mkdir "$hpcdist_agents"
hpcdist_agent_pids=(); hpcdist_node_rank=0
# One pbsdsh per host, at the index of the host's first line in $PBS_NODEFILE.
for hpcdist_index in $(awk '!seen[$0]++ { print NR - 1 }' "$PBS_NODEFILE"); do
  pbsdsh -n "$hpcdist_index" -- env "${hpcdist_agent_env[@]}" "NODE_RANK=$hpcdist_node_rank" bash -c 'cd "$1" || exit 2; deepspeed --hostfile "$HPCDIST_HOSTFILE" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --no_ssh --node_rank="$NODE_RANK" --module hpcdist.rank train.py --lr 0.1 & child=$!; trap '"'"'kill -TERM "$child" 2>/dev/null'"'"' TERM INT HUP; status=0; wait "$child" || status=$?; while kill -0 "$child" 2>/dev/null; do status=0; wait "$child" || status=$?; done; echo "$status" > "$2.part" && mv -f "$2.part" "$2"; exit "$status"' hpcdist-agent "$PWD" "$hpcdist_agents/$hpcdist_node_rank" &
  hpcdist_agent_pids+=($!); hpcdist_node_rank=$((hpcdist_node_rank + 1))
done
hpcdist_status=0
# Until every agent has ended, or one failed: then the others are ended.
while [ "${#hpcdist_agent_pids[@]}" -gt 0 ] && [ "$hpcdist_status" = 0 ]; do
  sleep 1
  for hpcdist_node_rank in "${!hpcdist_agent_pids[@]}"; do
    ! kill -0 "${hpcdist_agent_pids[$hpcdist_node_rank]}" 2>/dev/null || continue
    hpcdist_code=0; wait "${hpcdist_agent_pids[$hpcdist_node_rank]}" || hpcdist_code=$?
    unset 'hpcdist_agent_pids[$hpcdist_node_rank]'
    hpcdist_file="$hpcdist_agents/$hpcdist_node_rank"
    for _ in $(seq 10); do ls "$hpcdist_agents" >/dev/null; [ ! -s "$hpcdist_file" ] || break; sleep 1; done
    hpcdist_agent_status=$(cat "$hpcdist_file" 2>/dev/null || echo "unknown (it left none)")
    if [ "$hpcdist_agent_status" != 0 ] || [ "$hpcdist_code" != 0 ]; then
      echo "hpcdist: the agent on node $hpcdist_node_rank ($(sed -n "$((hpcdist_node_rank + 1))p" "$HPCDIST_NODEFILE")) ended with status $hpcdist_agent_status (pbsdsh: $hpcdist_code); ending the other agents" >&2
      hpcdist_status=$hpcdist_agent_status
      case $hpcdist_status in ""|0|*[!0-9]*) hpcdist_status=1 ;; esac
      break
    fi
  done
done
if [ "${#hpcdist_agent_pids[@]}" -gt 0 ]; then kill "${hpcdist_agent_pids[@]}" 2>/dev/null || true; wait "${hpcdist_agent_pids[@]}" || true; fi
exit "$hpcdist_status"
