#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# A plain script: read it, edit it, submit it by hand:
#   cd /home/alice/project && sbatch .hpcdist/jobs/train-20261122-120000/job.sh

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

# Walltime and preemption: the warning (USR2, 300 s before the walltime) or a TERM
# asks the training to checkpoint and stop.
export HPCDIST_STOP_FILE="$run_dir/stop"
requeue_wanted=0 killed_by=""
stop_training() {
  echo "hpcdist: $1 at $(date +%T): asking the training to checkpoint and stop" >&2
  echo "$1" > "$HPCDIST_STOP_FILE"
}
trap 'requeue_wanted=1; stop_training "walltime warning (SIGUSR2)"' USR2
trap 'killed_by=143; stop_training "SIGTERM"' TERM

# The nodes; this node is the master and holds torchrun's store on a free port drawn at random.
python -m hpcdist job-setup --scheduler slurm --nodes 2 --min-nodes 1 --dir "$run_dir" \
  --hold-store --job-dir "$job_dir" --run-id "${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-}}" \
  --record-start || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Watch the ranks' progress: stragglers and hangs, with every rank's stack, into this log.
python -m hpcdist monitor --dir "$job_dir/progress" --pid $$ --restarts &

# Start torchrun on every node with srun: 4 processes each, meeting at this node.
launch() {
  srun --nodes="$HPCDIST_NNODES" --ntasks="$HPCDIST_NNODES" --overlap --nodelist="$HPCDIST_NODEFILE" \
    --ntasks-per-node=1 --cpus-per-task=4 --kill-on-bad-exit=1 \
    torchrun --nnodes="$HPCDIST_NNODES" --nproc-per-node=4 --rdzv-backend=c10d \
    --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-conf=is_host=0 --rdzv-id="$HPCDIST_JOB_ID" \
    -m hpcdist.rank \
    train.py --lr 0.1
}
# When the launch fails, hpcdist asks every node to answer and starts it again, at most 1 time
# (--max-restarts): a node that does not answer is left out; with no spare left, the launch goes on
# with the nodes left, if at least 1 (--min-nodes); a fault in the training's own code ends the job.
while :; do
  launch &
  launch_pid=$!
  while status=0; wait "$launch_pid" || status=$?; kill -0 "$launch_pid" 2>/dev/null; do :; done
  [ -z "$killed_by" ] && [ ! -e "$HPCDIST_STOP_FILE" ] || break
  [ "$status" != 0 ] && python -m hpcdist restart --dir "$run_dir" --status "$status" --max 1 --job-dir "$job_dir" || break
  source "$run_dir/job.env"
done
if [ "$requeue_wanted" = 1 ] && [ "$status" = 0 ]; then
  if [ -e "$HPCDIST_STOP_FILE.stopped" ]; then
    # The training stopped on the warning: back to the queue (2 times at most).
    python -m hpcdist requeue --scheduler slurm --max 2 \
      --script /home/alice/project/.hpcdist/jobs/train-20261122-120000/job.sh --job-dir "$job_dir" \
      && exit_file="" || status=$?
  else
    echo "hpcdist: the training ended on its own after the walltime warning: not requeued." >&2
  fi
fi
exit "${killed_by:-$status}"
