#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# Submit it by hand with:  qsub job.sh
# It is a plain script: read it, edit it, submit it again.

#PBS -N train
#PBS -l select=2:ncpus=4:mpiprocs=4:ngpus=4
#PBS -l place=scatter
#PBS -l walltime=01:30:00
#PBS -j oe

set -euo pipefail
# PBS starts jobs in $HOME.
cd "$PBS_O_WORKDIR"
export HPCDIST_JOB_ID="$PBS_JOBID"
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

# Walltime and preemption. The warning (SIGUSR2, 600 s before the walltime) or a
# SIGTERM asks the training to checkpoint and stop: hpcdist.signals in each rank watches this
# file (a file reaches the ranks under every launcher; most launchers pass on no USR2).
export HPCDIST_STOP_FILE="$run_dir/stop"
hpcdist_requeue_wanted=0
hpcdist_stop() { echo "hpcdist: $1 at $(date +%T): asking the training to checkpoint and stop" >&2; echo "$1" > "$HPCDIST_STOP_FILE"; }
trap 'hpcdist_requeue_wanted=1; hpcdist_stop "walltime warning (SIGUSR2)"' USR2
# SIGTERM: preemption (the scheduler requeues the job itself) or a cancel: no requeue from here.
trap 'hpcdist_stop "SIGTERM"' TERM
# PBS sends no warning before the walltime: this script sends itself one, 600 s before it.
( sleep 4800 && kill -USR2 $$ ) >/dev/null 2>&1 &
hpcdist_deadline_pid=$!

# The allocation: a hostfile for the launcher, the first host as the master.
export HPCDIST_HOSTFILE="$run_dir/hostfile" HPCDIST_NODEFILE="$run_dir/nodes"
hpcdist hostfile --format deepspeed --slots-per-node 4 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-$(head -n 1 "$HPCDIST_NODEFILE")}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); master: $MASTER_ADDR:$MASTER_PORT" >&2
# What pdsh/ssh would lose on the other nodes, for DeepSpeed to export there
# (it quotes them with "...": values holding $ ` " or \ are left out).
export DS_ENV_FILE="$run_dir/deepspeed_env"
env | grep -E '^(PATH|LD_LIBRARY_PATH|PYTHONPATH|VIRTUAL_ENV|CONDA_PREFIX|MASTER_ADDR|MASTER_PORT|HPCDIST_STOP_FILE|NCCL_DEBUG|NCCL_[A-Z_]*|UCX_[A-Z_]*)=' | grep -v '[$`"\\]' > "$DS_ENV_FILE" || true

# Start the training on every node.
# In the background: bash runs a trap only once the command in the foreground is done.
hpcdist_launch() {
  # pdsh waits for every node even after one failed: `hpcdist supervise` ends the launch then.
  hpcdist supervise -- deepspeed --hostfile "$HPCDIST_HOSTFILE" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --module hpcdist.rank train.py --lr 0.1
}
hpcdist_launch &
hpcdist_launch_pid=$!
# wait returns early when a trap ran: wait again until the launch itself has ended.
status=0
while :; do
  wait "$hpcdist_launch_pid" && status=0 || status=$?
  kill -0 "$hpcdist_launch_pid" 2>/dev/null || break
done
pkill -P "$hpcdist_deadline_pid" sleep 2>/dev/null || true  # the warning is not needed any more
if [ "$hpcdist_requeue_wanted" = 1 ] && [ "$status" = 0 ]; then
  # Its StopRequest leaves "$HPCDIST_STOP_FILE.stopped" when the training stopped on the warning
  # (hpcdist/signals.py); without it the training ended on its own: it is done, nothing to requeue.
  if [ -e "$HPCDIST_STOP_FILE.stopped" ]; then
    # Requeue or resubmit this job (it records its new start).
    hpcdist requeue --scheduler pbs --max 3 --script "$0" --job-dir /home/alice/project/.hpcdist/jobs/train-20261122-120000 || status=$?
    # Requeued: this run's end is not the job's end.
    [ "$status" != 0 ] || hpcdist_exit_file=""
  else
    echo "hpcdist: the training ended (exit 0) after the walltime warning without stopping on it: it is finished; the job is not requeued." >&2
  fi
fi
exit "$status"
