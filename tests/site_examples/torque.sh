# === Adaptive Computing, TORQUE Administrator Guide 4.1.4, "2.1.3 Requesting resources" (the nodes resource)
# === https://docs.adaptivecomputing.com/torque/4-1-4/Content/topics/2-jobs/requestingRes.htm
nodes {<node_count> |
<hostname>} [:ppn=<ppn>][:gpus=<gpu>]
[:<property>[:<property>]...] [+ ...]

# === A university's Torque GPU job (Dartmouth Discovery; https://rc.dartmouth.edu/index.php/using-discovery/scheduling-jobs/)
#!/bin/bash -l
#PBS -N GPUTEST
#PBS -q gpuq
#PBS -l nodes=1:ppn=1:gpus=1
#PBS -l feature=gpu
#PBS -A Physics
#PBS -l walltime=00:15:00
#PBS -j oe 
cd $PBS_O_WORKDIR
