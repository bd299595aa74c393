"""hydra-submitit-launcher's launcher with submitit's executor for PBS (hpcdist's plugin): the
sweep's jobs are one ``map_array``, one PBS array (``-J``; several under the server's
``max_array_size``), each job rendered by hpcdist's PBS template."""

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher


class PbsLauncher(BaseSubmititLauncher):
    # submitit.AutoExecutor(cluster="pbs"): the executor hpcdist registers under submitit's entry points.
    _EXECUTOR = "pbs"
