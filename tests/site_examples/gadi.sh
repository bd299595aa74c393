# === NCI, "Multi-Node Parallelism" (NCI's training course intro-to-pytorch: 2 nodes, each with 4 GPUs)
# === https://github.com/NCI900-Training-Organisation/intro-to-pytorch docs/source/tutorial/multi_node.rst
# === The rule ncpus = 12 x ngpus: NCI, "Job Costs", https://opus.nci.org.au/spaces/Help/pages/236880942/Job+Costs
# === -l storage= for /g/data: NCI, Gadi user guide, https://opus.nci.org.au/pages/viewpage.action?pageId=50234467
#!/bin/bash

#PBS -P vp91
#PBS -q gpuvolta

#PBS -l ncpus=96
#PBS -l ngpus=8
#PBS -l mem=10GB
#PBS -l walltime=00:20:00 

#PBS -N multinode

module load python3/3.11.0  
module load cuda/12.3.2

MASTER_ADDR=$(cat $PBS_NODEFILE | head -n 1)

for inode in $(seq 1 $PBS_NCI_NCPUS_PER_NODE $PBS_NCPUS); do
    echo $inode
    pbsdsh -n $inode ${LAUNCH_SCRIPT} ${NNODES} ${PROC_PER_NODE} ${MASTER_ADDR} &
done

wait

# the per-node script:
torchrun --nnodes=${1} --nproc_per_node=${2} --rdzv_id=100 --rdzv_backend=c10d --rdzv_endpoint=${3}:29400 ${APPLICATION_SCRIPT}
