"""Python functions on PBS: hpcdist's submitit plugin (``submitit.AutoExecutor(folder, cluster="pbs")``).

Where its code runs: the login node (executor.py: ``submit``, ``map_array``, ``batch()``, states,
``cancel``), and inside the job (environment.py: ``submitit.JobEnvironment()``, each task's ranks
from :mod:`hpcdist.env`; task.py: the program every task runs, on every node).

parameters.py  submitit's parameters -> hpcdist's job options (pure: the one table of both), job ids
executor.py    PbsExecutor, PbsJob, PbsInfoWatcher: the script rendered and submitted through hpcdist
               (hpcdist.submission), states from hpcdist's PBS status, map_array split under the
               site's array cap (hpcdist.sweeps.limits)
environment.py PbsJobEnvironment: the job id submitit knows, the ranks hpcdist.env resolves, the
               walltime warning turned into submitit's checkpoint and requeue
task.py        what each task runs: its own log files, then submitit's process_job

Registered under the ``submitit`` entry point group (pyproject.toml), installed with
``pip install 'hpcdist[submitit]'``.
"""
