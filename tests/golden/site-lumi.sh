#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile lumi --nodes 2 --account project_465000001 --walltime 1h train.py
# Submit it by hand with:  sbatch job.sh
# It is a plain script: read it, edit it, submit it again.

#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=7
#SBATCH --mem-per-gpu=60G
#SBATCH --time=01:00:00
#SBATCH --partition=standard-g
#SBATCH --account=project_465000001
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
module purge
module use /appl/local/laifs/modules
module load lumi-aif-singularity-bindings
set -u
# -u is off here: an unset variable expands to nothing, as it does in your shell.
set +u
# Expanded in the job, as asked (--env-expand): $VAR and ${VAR} only.
export MIOPEN_CUSTOM_CACHE_DIR="/tmp/miopen-cache-${USER}"
export MIOPEN_USER_DB_PATH="/tmp/miopen-config-${USER}"
# Your setup lines (--setup), as you wrote them: hpcdist does not quote them.
mkdir -p "$MIOPEN_CUSTOM_CACHE_DIR" "$MIOPEN_USER_DB_PATH"
set -u
# The allocation's node file, where the image sees it (the run folder, in the submit folder).
[ -z "${PBS_NODEFILE:-}" ] || { cp "$PBS_NODEFILE" "$run_dir/pbs_nodefile"; export PBS_NODEFILE="$run_dir/pbs_nodefile"; }
if ! command -v hpcdist >/dev/null; then
  # hpcdist is not installed here: its steps in this script run inside the image.
  hpcdist() { singularity exec --rocm /appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif python -m hpcdist "$@"; }
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
singularity exec --rocm /appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif python -c 'import hpcdist.rank' 2>/dev/null || { echo "hpcdist: "python" in the image /appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif cannot import hpcdist, and every rank starts as "python" -m hpcdist.rank: install hpcdist into the training's environment (pip install hpcdist)." >&2; exit 2; }
srun --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 --cpus-per-task=7 --cpu-bind=v,mask_cpu=0x00fe000000000000,0xfe00000000000000,0x0000000000fe0000,0x00000000fe000000,0x00000000000000fe,0x000000000000fe00,0x000000fe00000000,0x0000fe0000000000 singularity exec --rocm /appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif python -m hpcdist.rank train.py
