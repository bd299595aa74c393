#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# Submit it by hand with:  sbatch job.sh
# It is a plain script: read it, edit it, submit it again.

#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --time=01:30:00
#SBATCH --output=%x-%j.out
#SBATCH --no-kill
#SBATCH --signal=B:USR2@300
#SBATCH --requeue
#SBATCH --open-mode=append

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
export HPCDIST_JOB_ID="$SLURM_JOB_ID"
# The job's own files (host files, the stop request), in the submit folder, which every node sees:
# agents on the other nodes read them (DeepSpeed --no-ssh: the host file), and TMPDIR is the node's own.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
# How the job ended, in its folder: `hpcdist status` reads it when the scheduler keeps no record.
# Written whole (a reader never sees the file before its number).
hpcdist_exit_file=/home/alice/project/.hpcdist/jobs/train-20261122-120000/exit_code
trap 'status=$?; rm -rf "$run_dir"; [ -z "$hpcdist_exit_file" ] || { echo "$status" > "$hpcdist_exit_file.tmp" && mv -f "$hpcdist_exit_file.tmp" "$hpcdist_exit_file"; }' EXIT
# Each start of this script (the first, and each after a requeue or resubmission): `hpcdist status` counts them.
echo "start $(date +%s) $HPCDIST_JOB_ID $(hostname)" >> /home/alice/project/.hpcdist/jobs/train-20261122-120000/runs

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

# Walltime and preemption. The warning (SIGUSR2, 300 s before the walltime) or a
# SIGTERM asks the training to checkpoint and stop: hpcdist.signals in each rank watches this
# file (a file reaches the ranks under every launcher; most launchers pass on no USR2).
export HPCDIST_STOP_FILE="$run_dir/stop"
hpcdist_requeue_wanted=0
hpcdist_stop() { echo "hpcdist: $1 at $(date +%T): asking the training to checkpoint and stop" >&2; echo "$1" > "$HPCDIST_STOP_FILE"; }
trap 'hpcdist_requeue_wanted=1; hpcdist_stop "walltime warning (SIGUSR2)"' USR2
# SIGTERM: preemption (the scheduler requeues the job itself) or a cancel: no requeue from here.
trap 'hpcdist_stop "SIGTERM"' TERM

# The allocation: a hostfile for the launcher, the first host as the master.
export HPCDIST_HOSTFILE="$run_dir/hostfile" HPCDIST_NODEFILE="$run_dir/nodes"
hpcdist hostfile --format deepspeed --slots-per-node 4 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-$(head -n 1 "$HPCDIST_NODEFILE")}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); torchrun rendezvous: $MASTER_ADDR:$MASTER_PORT (torchrun gives the ranks their own master)" >&2

# Start the training on every node.
# In the background: bash runs a trap only once the command in the foreground is done.
hpcdist_launch() {
  srun --nodes=1 --ntasks=1 --relative=1 --ntasks-per-node=1 --cpus-per-task=4 --no-kill torchrun --nnodes=1:2 --nproc-per-node=4 --max-restarts=1 --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$HPCDIST_JOB_ID" train.py --lr 0.1 &
  hpcdist_other_nodes=$!
  hpcdist_status=0
  srun --nodes=1 --ntasks=1 --relative=0 --ntasks-per-node=1 --cpus-per-task=4 --no-kill torchrun --nnodes=1:2 --nproc-per-node=4 --max-restarts=1 --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$HPCDIST_JOB_ID" train.py --lr 0.1 || hpcdist_status=$?
  [ "$hpcdist_status" = 0 ] || kill "$hpcdist_other_nodes" 2>/dev/null || true
  wait "$hpcdist_other_nodes" || echo "hpcdist: the agents on the other nodes ended with status $? (a node lost?); the job ends as the first node's agent did: status $hpcdist_status" >&2
  exit "$hpcdist_status"
}
hpcdist_launch &
hpcdist_launch_pid=$!
# wait returns early when a trap ran: wait again until the launch itself has ended.
status=0
while :; do
  wait "$hpcdist_launch_pid" && status=0 || status=$?
  kill -0 "$hpcdist_launch_pid" 2>/dev/null || break
done
if [ "$hpcdist_requeue_wanted" = 1 ] && [ "$status" = 0 ]; then
  # Its StopRequest leaves "$HPCDIST_STOP_FILE.stopped" when the training stopped on the warning
  # (hpcdist/signals.py); without it the training ended on its own: it is done, nothing to requeue.
  if [ -e "$HPCDIST_STOP_FILE.stopped" ]; then
    # Requeue or resubmit this job (it records its new start).
    hpcdist requeue --scheduler slurm --max 2 --script "$0" --job-dir /home/alice/project/.hpcdist/jobs/train-20261122-120000 || status=$?
    # Requeued: this run's end is not the job's end.
    [ "$status" != 0 ] || hpcdist_exit_file=""
  else
    echo "hpcdist: the training ended (exit 0) after the walltime warning without stopping on it: it is finished; the job is not requeued." >&2
  fi
fi
exit "$status"
