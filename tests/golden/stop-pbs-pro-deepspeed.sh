#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# A plain script: read it, edit it, submit it by hand:
#   cd /home/alice/project && qsub .hpcdist/jobs/train-20261122-120000/job.sh

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
# How the job ends, for `hpcdist status`: its status, or 128+N when signal N stops it.
job_dir=/home/alice/project/.hpcdist/jobs/train-20261122-120000
exit_file="$job_dir/exit_code"
record_exit() { echo "$status" > "$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; }
# Why hpcdist ended the job (a hang), if it did: the log's last lines, after the launcher's.
log_end() { local lines="$job_dir/progress"/last_lines; [ ! -s "$lines" ] || cat "$lines" >&2; }
trap 'status=$?; set +e; rm -rf "$run_dir"; log_end; [ -z "$exit_file" ] || record_exit' EXIT
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
# Each rank's progress, for `hpcdist watch`, in the job folder, which the login node sees too.
export HPCDIST_PROGRESS_DIR="$job_dir/progress"

# The training's environment (-u is off: module and conda scripts read unset variables).
set +u
command -v module >/dev/null || source /etc/profile  # a batch shell is not a login shell
module load cuda/12.1
eval "$(conda shell.bash hook)"
conda activate myenv
export NCCL_DEBUG=INFO
set -u

# Walltime and preemption: the warning (USR2, 600 s before the walltime) or a TERM
# asks the training to checkpoint and stop.
export HPCDIST_STOP_FILE="$run_dir/stop"
requeue_wanted=0 killed_by=""
stop_training() {
  echo "hpcdist: $1 at $(date +%T): asking the training to checkpoint and stop" >&2
  echo "$1" > "$HPCDIST_STOP_FILE"
}
trap 'requeue_wanted=1; stop_training "walltime warning (SIGUSR2)"' USR2
trap 'killed_by=143; stop_training "SIGTERM"' TERM
# PBS sends no warning before the walltime: this script sends itself one; by hand,
# `qsig -s WINCH <job>` asks for it (a USR2 from qsig would end the job).
( trap '' USR2; sleep 4800 && kill -USR2 $$ ) >/dev/null 2>&1 &
deadline_pid=$!
trap 'requeue_wanted=1; stop_training "walltime warning by hand (SIGWINCH)"' WINCH

# The nodes and a hostfile for deepspeed; the master is the first node, its port a free one drawn at
# random.
python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hostfile deepspeed:4 \
  --deepspeed-env --pass NCCL_DEBUG --job-dir "$job_dir" --run-id "${PBS_JOBID:-}" \
  --record-start || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Watch the ranks' progress: stragglers and hangs, with every rank's stack, into this log.
python -m hpcdist monitor --dir "$job_dir/progress" --pid $$ &

# Start DeepSpeed; it reaches the other nodes by pdsh (`hpcdist supervise`: one fails, all end).
launch() {
  trap '' USR2  # the warning is the batch shell's alone (a `qsig -s USR2` reaches every process)
  python -m hpcdist supervise -- \
    deepspeed --hostfile "$HPCDIST_HOSTFILE" --master_addr "$MASTER_ADDR" \
    --master_port "$MASTER_PORT" --module hpcdist.rank \
    train.py --lr 0.1
}
launch &
launch_pid=$!
while status=0; wait "$launch_pid" || status=$?; kill -0 "$launch_pid" 2>/dev/null; do :; done
pkill -P "$deadline_pid" sleep 2>/dev/null || true  # the warning is not needed any more
if [ "$requeue_wanted" = 1 ] && [ "$status" = 0 ]; then
  if [ -e "$HPCDIST_STOP_FILE.stopped" ]; then
    # The training stopped on the warning: back to the queue (3 times at most).
    python -m hpcdist requeue --scheduler pbs --max 3 \
      --script /home/alice/project/.hpcdist/jobs/train-20261122-120000/job.sh --job-dir "$job_dir" \
      && exit_file="" || status=$?
  else
    echo "hpcdist: the training ended on its own after the walltime warning: not requeued." >&2
  fi
fi
exit "${killed_by:-$status}"
