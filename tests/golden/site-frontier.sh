#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile frontier --nodes 2 --account PROJECT_ID --walltime 5m train.py
# Submit it by hand with:  sbatch job.sh
# It is a plain script: read it, edit it, submit it again.

#SBATCH --network=disable_rdzv_get
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=7
#SBATCH --time=00:05:00
#SBATCH --partition=batch
#SBATCH --account=PROJECT_ID
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
module load PrgEnv-gnu/8.7.0
module load cpe/26.03
module load miniforge3/23.11.0-0
module load rocm/7.1.1
module load rccl-net-plugin
module load craype-accel-amd-gfx90a
set -u
export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3
# -u is off here: an unset variable expands to nothing, as it does in your shell.
set +u
# Expanded in the job, as asked (--env-expand): $VAR and ${VAR} only.
export MIOPEN_USER_DB_PATH="/tmp/my-miopen-cache"
export LD_LIBRARY_PATH="$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH"
export MIOPEN_CUSTOM_CACHE_DIR="${MIOPEN_USER_DB_PATH}"
# Your setup lines (--setup), as you wrote them: hpcdist does not quote them.
mkdir -p ${MIOPEN_USER_DB_PATH}
set -u
if ! command -v hpcdist >/dev/null; then
  echo "hpcdist is not installed in this job's environment (PATH=$PATH): install it there (pip install hpcdist) or add --conda/--venv/--module." >&2
  exit 2
fi

# The allocation: a hostfile for the launcher, the first host as the master.
export HPCDIST_HOSTFILE="$run_dir/hostfile" HPCDIST_NODEFILE="$run_dir/nodes"
hpcdist hostfile --format deepspeed --slots-per-node 8 -o "$HPCDIST_HOSTFILE"
hpcdist hostfile --format nodes -o "$HPCDIST_NODEFILE"
export MASTER_ADDR="${MASTER_ADDR:-$(head -n 1 "$HPCDIST_NODEFILE")}"
export MASTER_PORT="${MASTER_PORT:-$(hpcdist env --field master_port)}"
# For the log (and `hpcdist logs`, which names the node of a failed launcher by its index).
echo "hpcdist: nodes: $(paste -sd ' ' "$HPCDIST_NODEFILE"); master: $MASTER_ADDR:$MASTER_PORT" >&2

# Start the training on every node.
python -c 'import hpcdist.rank' 2>/dev/null || { echo "hpcdist: "python" cannot import hpcdist, and every rank starts as "python" -m hpcdist.rank: install hpcdist into the training's environment (pip install hpcdist)." >&2; exit 2; }
srun --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 --cpus-per-task=7 --gpus-per-task=1 --gpu-bind=closest python -m hpcdist.rank train.py
