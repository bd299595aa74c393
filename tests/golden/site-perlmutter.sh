#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile perlmutter --nodes 2 --account m0000 --walltime 30m train.py
# Submit it by hand with:  sbatch job.sh
# It is a plain script: read it, edit it, submit it again.

#SBATCH --module=gpu,nccl-plugin
#SBATCH --job-name=train
#SBATCH --image=nersc/pytorch:25.02.01
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --time=00:30:00
#SBATCH --account=m0000
#SBATCH --constraint=gpu
#SBATCH --output=%x-%j.out

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
export HPCDIST_JOB_ID="$SLURM_JOB_ID"
# The job's own files (host files, the stop request), in the submit folder, which every node sees:
# agents on the other nodes read them (DeepSpeed --no-ssh: the host file), and TMPDIR is the node's own.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# Every value below that came from the job spec is shell-quoted.
# The allocation's node file, where the image sees it (the run folder, in the submit folder).
[ -z "${PBS_NODEFILE:-}" ] || { cp "$PBS_NODEFILE" "$run_dir/pbs_nodefile"; export PBS_NODEFILE="$run_dir/pbs_nodefile"; }
if ! command -v hpcdist >/dev/null; then
  # hpcdist is not installed here: its steps in this script run inside the image.
  hpcdist() { shifter python -m hpcdist "$@"; }
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
shifter python -c 'import hpcdist.rank' 2>/dev/null || { echo "hpcdist: "python" in the image nersc/pytorch:25.02.01 cannot import hpcdist, and every rank starts as "python" -m hpcdist.rank: install hpcdist into the training's environment (pip install hpcdist)." >&2; exit 2; }
srun --nodes=2 --ntasks-per-node=4 --kill-on-bad-exit=1 --cpus-per-task=32 shifter python -m hpcdist.rank train.py
