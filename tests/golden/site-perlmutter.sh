#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile perlmutter --nodes 2 --account m0000 --walltime 30m train.py
# A plain script: read it, edit it, submit it by hand:
#   sbatch <this file>

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
#SBATCH --open-mode=append

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
# The job's own files (node list, hostfile) go in the submit folder, which every node sees.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# The nodes; the master is the first node, its port a free one drawn at random.
shifter python -m hpcdist job-setup --scheduler slurm --nodes 2 --dir "$run_dir" || {
  status=$?; shifter python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: python in the image on $HOSTNAME cannot import hpcdist;" \
    "install hpcdist in the image, or give --python the image's python that has it"
  exit 127; }
source "$run_dir/job.env"

# Start the 8 ranks with srun, each through hpcdist.rank (which gives every framework its rank); one
# that fails ends the others.
srun --nodes=2 --ntasks-per-node=4 --kill-on-bad-exit=1 --cpus-per-task=32 shifter python \
  -m hpcdist.rank \
  train.py
