# === NERSC, "Launchers", srun (Example: a distributed training job with srun, in a Shifter container)
# === https://docs.nersc.gov/machinelearning/launchers/ (read 2026-11-25 from the page; NERSC's docs repository is on GitLab, not read)
#!/bin/bash
#SBATCH -C gpu
#SBATCH --nodes= <num_nodes>
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --image=nersc/pytorch:25.02.01
#SBATCH --module=gpu,nccl-plugin
export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
export MASTER_PORT=29500
srun shifter \
bash -c "
export RANK=\$SLURM_PROCID
export LOCAL_RANK=\$SLURM_LOCALID
export WORLD_SIZE=\$SLURM_NTASKS
python train.py
"
