"""hpcdist: distributed PyTorch on PBS and Slurm clusters.

Inside a job, :mod:`hpcdist.env` answers "which rank am I?" under every
launcher, :mod:`hpcdist.hostlist` reads Slurm node lists and
:mod:`hpcdist.allocation` turns a PBS or Slurm allocation into a hostfile.

Importing this package is cheap: it never imports torch, mpi4py, deepspeed
or jinja2 (the modules that need them import them inside functions).
"""

__version__ = "0.1.0"
#: The folder of hpcdist's files in the folder jobs are submitted from: the job folders
#: (hpcdist.jobs), a laptop's records (hpcdist.remote), the staged environments' archives.
STATE_DIR = ".hpcdist"


def __getattr__(name):
    # hpcdist.submit and hpcdist.job load the submission code on first use only.
    if name in ("submit", "submit_function", "job", "JobHandle"):
        from hpcdist import api

        return getattr(api, name)
    raise AttributeError(f"module 'hpcdist' has no attribute {name!r}")
