#!/bin/bash
# Written by hpcdist 0.1.0 from:
#   hpcdist render --profile polaris --nodes 2 --account Catalyst --walltime 30m train.py
# A plain script: read it, edit it, submit it by hand:
#   qsub <this file>

#PBS -N train
#PBS -l select=2:system=polaris
#PBS -l place=scatter
#PBS -l filesystems=home:eagle
#PBS -l walltime=00:30:00
#PBS -q debug
#PBS -A Catalyst
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
module use /soft/modulefiles
module load conda
eval "$(conda shell.bash hook)"
conda activate base
export http_proxy=http://proxy.alcf.anl.gov:3128
export https_proxy=http://proxy.alcf.anl.gov:3128
export ftp_proxy=http://proxy.alcf.anl.gov:3128
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_COLLNET_ENABLE=1
export NCCL_NET='AWS Libfabric'
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd
export FI_CXI_DEFAULT_CQ_SIZE=131072
set -u

# The nodes and a hostfile for mpirun; the master is the first node, its port a free one drawn at
# random.
python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hostfile nodes:4 || {
  status=$?; python -c 'import hpcdist' 2>/dev/null && exit "$status"
  echo >&2 "hpcdist: $(command -v python || echo python) on $HOSTNAME cannot import hpcdist;" \
    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"
  exit 127; }
source "$run_dir/job.env"

# Start the 8 ranks with Cray PALS's launcher, each through hpcdist.rank (which gives every
# framework its rank).
mpiexec --hostfile "$HPCDIST_HOSTFILE" -n 8 --ppn 4 --depth 8 --cpu-bind depth --envall \
  python -m hpcdist.rank \
  train.py
