#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile lumi --nodes 2 --account project_465000001 --walltime 1h train.py
# A plain script: read it, edit it, submit it by hand:
#   sbatch <this file>

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
#SBATCH --open-mode=append

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
# The image the training runs in.
export HPCDIST_IMAGE=/appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif
# The job's own files (node list, hostfile) go in the submit folder, which every node sees.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# The training's environment (-u is off: module and conda scripts read unset variables).
set +u
command -v module >/dev/null || source /etc/profile  # a batch shell is not a login shell
module purge
module use /appl/local/laifs/modules
module load lumi-aif-singularity-bindings
export MIOPEN_CUSTOM_CACHE_DIR="/tmp/miopen-cache-${USER}"
export MIOPEN_USER_DB_PATH="/tmp/miopen-config-${USER}"
# Your setup lines (--setup), as you wrote them: hpcdist does not quote them.
mkdir -p "$MIOPEN_CUSTOM_CACHE_DIR" "$MIOPEN_USER_DB_PATH"
set -u

# The nodes; the master is the first node, its port a free one drawn at random.
singularity exec --rocm "$HPCDIST_IMAGE" python -m hpcdist job-setup --scheduler slurm --nodes 2 \
  --dir "$run_dir" || {
  status=$?; singularity exec --rocm "$HPCDIST_IMAGE" python -c 'import hpcdist' 2>/dev/null \
    && exit "$status"
  echo >&2 "hpcdist: python in the image on $HOSTNAME cannot import hpcdist;" \
    "install hpcdist in the image, or give --python the image's python that has it"
  exit 127; }
source "$run_dir/job.env"

# Start the 16 ranks with srun, each through hpcdist.rank (which gives every framework its rank);
# one that fails ends the others.
srun --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 --cpus-per-task=7 \
  --cpu-bind=v,mask_cpu=0x00fe000000000000,0xfe00000000000000,0x0000000000fe0000,0x00000000fe000000,0x00000000000000fe,0x000000000000fe00,0x000000fe00000000,0x0000fe0000000000 \
  singularity exec --rocm "$HPCDIST_IMAGE" python -m hpcdist.rank \
  train.py
