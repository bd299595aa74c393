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

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
export HPCDIST_JOB_ID="$SLURM_JOB_ID"
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
# What pdsh/ssh would lose on the other nodes, for DeepSpeed to export there
# (it quotes them with "...": values holding $ ` " or \ are left out).
export DS_ENV_FILE="$run_dir/deepspeed_env"
env | grep -E '^(PATH|LD_LIBRARY_PATH|PYTHONPATH|VIRTUAL_ENV|CONDA_PREFIX|MASTER_ADDR|MASTER_PORT|HPCDIST_STOP_FILE|NCCL_DEBUG|NCCL_[A-Z_]*|UCX_[A-Z_]*)=' | grep -v '[$`"\\]' > "$DS_ENV_FILE" || true

# Start the training on every node.
# pdsh waits for every node even after one failed: `hpcdist supervise` ends the launch then.
hpcdist supervise -- deepspeed --hostfile "$HPCDIST_HOSTFILE" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --module hpcdist.rank train.py --lr 0.1 --deepspeed_config ds_config.json
