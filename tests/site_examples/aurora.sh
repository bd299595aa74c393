# === ALCF, "Running Jobs on Aurora", recommended PBS options and MPI sample
# === https://docs.alcf.anl.gov/aurora/running-jobs-aurora/ (argonne-lcf/user-guides)
#!/bin/bash -l
#PBS -N AFFINITY
#PBS -l select=4
#PBS -l place=scatter
#PBS -l walltime=0:10:00
#PBS -l filesystems=<fs1:fs2>
#PBS -q debug-scaling
#PBS -A <MYPROJECT>

# === ALCF, "PyTorch on Aurora", distributed training (DDP)
# === https://docs.alcf.anl.gov/aurora/data-science/frameworks/pytorch/ (argonne-lcf/user-guides)
qsub -q debug -A <your_project_name> -l select=2,walltime=30:00 -l filesystems=home:flare -k doe -j oe -I
module load frameworks
mpiexec -n 24 -ppn 12 python pytorch_ddp.py

# === ALCF, "oneCCL" on Aurora (the environment its PyTorch recipes set)
# === https://docs.alcf.anl.gov/aurora/data-science/frameworks/oneCCL/ (argonne-lcf/user-guides)
export CCL_PROCESS_LAUNCHER=pmix
export CCL_ATL_TRANSPORT=mpi
export CCL_KVS_MODE=mpi
export CCL_CONFIGURATION_PATH=""
export CCL_CONFIGURATION=cpu_gpu_dpcpp
export CCL_KVS_CONNECTION_TIMEOUT=600
export CCL_ZE_CACHE_OPEN_IPC_HANDLES_THRESHOLD=1024
export CCL_KVS_USE_MPI_RANKS=1
