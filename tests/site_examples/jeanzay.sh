# === IDRIS, "PyTorch: Multi-GPU and multi-node data parallelism", Multi-process configuration with SLURM
# === http://www.idris.fr/eng/jean-zay/gpu/jean-zay-gpu-torch-multi-eng.html (read 2026-11-25 from the page;
# === only its beginning was readable here: the example stops at "#SBATCH --h")
# For a reservation of N four-GPU V100 nodes via the default GPU partition:
#SBATCH --job-name=torch-multi-gpu
#SBATCH --nodes=N            # total number of nodes (N to be defined)
#SBATCH --ntasks-per-node=4  # number of tasks per node (here 4 tasks, or 1 task per GPU)
#SBATCH --gres=gpu:4         # number of GPUs reserved per node (here 4, or all the GPUs)
#SBATCH --cpus-per-task=10   # number of cores per task (4x10 = 40 cores, or all the cores)
#SBATCH --h
# "For multi-nodes, it is necessary to use multi-processing managed by SLURM (execution via the SLURM command srun)."

# === IDRIS, "GPU Partitions"
# === http://www.idris.fr/en/docs/jean-zay/slurm/slurm_partitions_gpu (read 2026-11-25 from the page)
# V100 Partition: gpu_p13 (default)
#SBATCH -C v100-16g
#SBATCH -C v100-32g
