#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# Submit it by hand with:  qsub job.sh
# It is a plain script: read it, edit it, submit it again.

#PBS -N train
#PBS -l nodes=2:ppn=4:gpus=4
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

# Walltime and preemption. The warning (SIGUSR2, 120 s before the walltime) or a
# SIGTERM asks the training to checkpoint and stop: hpcdist.signals in each rank watches this
# file (a file reaches the ranks under every launcher; most launchers pass on no USR2).
export HPCDIST_STOP_FILE="$run_dir/stop"
hpcdist_requeue_wanted=0
hpcdist_stop() { echo "hpcdist: $1 at $(date +%T): asking the training to checkpoint and stop" >&2; echo "$1" > "$HPCDIST_STOP_FILE"; }
trap 'hpcdist_requeue_wanted=1; hpcdist_stop "walltime warning (SIGUSR2)"' USR2
# SIGTERM: preemption (the scheduler requeues the job itself) or a cancel: no requeue from here.
trap 'hpcdist_stop "SIGTERM"' TERM
# No --walltime, so no deadline to warn of: `qsig -s USR2 <job>` asks for the stop by hand.

# The allocation: a hostfile for the launcher, the first host as the master.
export HPCDIST_HOSTFILE="$run_dir/hostfile" HPCDIST_NODEFILE="$run_dir/nodes"
hpcdist hostfile --format openmpi --slots-per-node 4 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-$(head -n 1 "$HPCDIST_NODEFILE")}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); master: $MASTER_ADDR:$MASTER_PORT" >&2

# Start the training on every node.
# In the background: bash runs a trap only once the command in the foreground is done.
hpcdist_launch() {
  python -c 'import hpcdist.rank' 2>/dev/null || { echo "hpcdist: "python" cannot import hpcdist, and every rank starts as "python" -m hpcdist.rank: install hpcdist into the training's environment (pip install hpcdist)." >&2; exit 2; }
  mpi_exports=(); for name in PATH LD_LIBRARY_PATH PYTHONPATH VIRTUAL_ENV CONDA_PREFIX MASTER_ADDR MASTER_PORT HPCDIST_STOP_FILE NCCL_DEBUG; do if [ -n "${!name+set}" ]; then mpi_exports+=(-x "$name"); fi; done
  mpirun --hostfile "$HPCDIST_HOSTFILE" -np 8 --map-by slot --bind-to none "${mpi_exports[@]}" python -m hpcdist.rank train.py --lr 0.1
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
    hpcdist requeue --scheduler pbs --max 0 --script "$0" --job-dir /home/alice/project/.hpcdist/jobs/train-20261122-120000 || status=$?
    # Requeued: this run's end is not the job's end.
    [ "$status" != 0 ] || hpcdist_exit_file=""
  else
    echo "hpcdist: the training ended (exit 0) after the walltime warning without stopping on it: it is finished; the job is not requeued." >&2
  fi
fi
exit "$status"
