# === OLCF, "PyTorch on Frontier", Batch script
# === https://docs.olcf.ornl.gov/software/analytics/pytorch_frontier.html (olcf/olcf-user-docs software/analytics/pytorch_frontier.rst @ 02a2c25f)
#!/bin/bash
#SBATCH -A PROJECT_ID
#SBATCH -J ddp_test
#SBATCH -o logs/ddp_test-%j.o
#SBATCH -e logs/ddp_test-%j.e
#SBATCH -t 00:05:00
#SBATCH -p batch
#SBATCH -N 2
#SBATCH --network=disable_rdzv_get

# Load modules
module load PrgEnv-gnu/8.7.0
module load cpe/26.03
module load miniforge3/23.11.0-0
module load rocm/7.1.1
module load rccl-net-plugin
module load craype-accel-amd-gfx90a

# Because using a non-default CPE
export LD_LIBRARY_PATH=$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH

# Activate your environment
conda activate /path/to/my_env

# Get address of head node
export MASTER_ADDR=$(hostname -i)

# Needed to bypass MIOpen, Disk I/O Errors
export MIOPEN_USER_DB_PATH="/tmp/my-miopen-cache"
export MIOPEN_CUSTOM_CACHE_DIR=${MIOPEN_USER_DB_PATH}
rm -rf ${MIOPEN_USER_DB_PATH}
mkdir -p ${MIOPEN_USER_DB_PATH}

# Run script
#srun -N2 -n16 -c7 --gpus-per-task=1 --gpu-bind=closest python3 -W ignore -u ./multinode_olcf.py 2000 10 --master_addr=$MASTER_ADDR --master_port=3442

# === OLCF, "PyTorch on Frontier", Best Practices, Master Address and Sockets
# === (same page and commit)
export MASTER_ADDR=$(hostname -i)
export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3 # if you see hangs, try using only hsn0
