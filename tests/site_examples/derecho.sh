# === NCAR, Derecho job script examples, "Running an MPI-enabled GPU application on Derecho"
# === https://ncar-hpc-docs.readthedocs.io/en/latest/compute-systems/derecho/starting-derecho-jobs/derecho-job-script-examples/
# === (NCAR/HPC-Docs docs/compute-systems/derecho/starting-derecho-jobs/derecho-job-script-examples-content.md @ 52531188)
#!/bin/bash
#PBS -A <project_code>
#PBS -N gpu_job
#PBS -q main
#PBS -l walltime=01:00:00
#PBS -l select=2:ncpus=64:mpiprocs=4:ngpus=4

# Use scratch for temporary files to avoid space limits in /tmp
export TMPDIR=${SCRATCH}/temp
mkdir -p ${TMPDIR}

# Load modules to match compile-time environment
module purge
module load nvhpc cuda cray-mpich

mpiexec -n 8 -ppn 4 get_local_rank ./executable_name
