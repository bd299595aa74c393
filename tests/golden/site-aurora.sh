#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile aurora --nodes 2 --account MYPROJECT --walltime 30m train.py
# A plain script: read it, edit it, submit it by hand:
#   qsub <this file>

#PBS -N train
#PBS -l select=2
#PBS -l place=scatter
#PBS -l filesystems=home:flare
#PBS -l walltime=00:30:00
#PBS -q debug
#PBS -A MYPROJECT
#PBS -j oe
#PBS -k oed

set -euo pipefail
cd "$PBS_O_WORKDIR"  # PBS starts a job in $HOME
# The job's own files (node list, hostfile) go in the submit folder, which every node sees.
run_dir=$(mktemp -d "$PWD/.hpcdist-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT

# The training's environment (-u is off: module and conda scripts read unset variables).
set +u
command -v module >/dev/null || source /etc/profile  # a batch shell is not a login shell
module load frameworks
export CCL_PROCESS_LAUNCHER=pmix
export CCL_ATL_TRANSPORT=mpi
export CCL_KVS_MODE=mpi
export CCL_CONFIGURATION_PATH=''
export CCL_CONFIGURATION=cpu_gpu_dpcpp
export CCL_KVS_CONNECTION_TIMEOUT=600
export CCL_ZE_CACHE_OPEN_IPC_HANDLES_THRESHOLD=1024
export CCL_KVS_USE_MPI_RANKS=1
set -u

# The nodes and a hostfile for mpirun; the master is the first node, its port a free one drawn at
# random.
python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hostfile nodes:12 || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start the 24 ranks with Cray PALS's launcher, each through hpcdist.rank (which gives every
# framework its rank).
mpiexec --hostfile "$HPCDIST_HOSTFILE" -n 24 --ppn 12 --envall \
  python -m hpcdist.rank \
  train.py
