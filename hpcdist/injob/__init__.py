"""What a job script runs, on the job's nodes: ``hpcdist job-setup`` (the allocation read once:
node list, hostfile, master and port into ``job.env``), ``hpcdist agents`` (one agent per node
where srun and mpirun cannot start them), ``hpcdist supervise`` (a pdsh launch ended on every
node when one fails), ``hpcdist requeue`` (back to the queue after the walltime warning) and
``hpcdist doctor`` (every node's readiness). The ranks' own side is :mod:`hpcdist.rank`,
:mod:`hpcdist.env` and :mod:`hpcdist.progress`."""
