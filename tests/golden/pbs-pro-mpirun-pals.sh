#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist submit ...
# Submit it by hand with:  qsub job.sh
# It is a plain script: read it, edit it, submit it again.

#PBS -N train
#PBS -l select=2:ncpus=8:mpiprocs=4:ngpus=4
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
hpcdist hostfile --format nodes --slots-per-node 4 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-$(head -n 1 "$HPCDIST_NODEFILE")}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); master: $MASTER_ADDR:$MASTER_PORT" >&2

# Start the training on every node.
python -c 'import hpcdist.rank' 2>/dev/null || { echo "hpcdist: "python" cannot import hpcdist, and every rank starts as "python" -m hpcdist.rank: install hpcdist into the training's environment (pip install hpcdist)." >&2; exit 2; }
mpiexec --hostfile "$HPCDIST_HOSTFILE" -n 8 --ppn 4 --depth 2 --cpu-bind depth --envall python -m hpcdist.rank train.py --lr 0.1
