"""The launcher's config, registered in Hydra's ConfigStore as ``hydra/launcher=submitit_pbs``:
submitit's shared parameters (hydra-submitit-launcher's ``BaseQueueConf``) and PBS's, named as
hpcdist's submitit executor takes them (:mod:`hpcdist.functions.parameters`; the launcher gives
each the prefix ``pbs_``). None: hpcdist's default, or the profile's."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf


@dataclass
class PbsQueueConf(BaseQueueConf):
    _target_: str = "hydra_plugins.hpcdist_pbs_launcher.pbs_launcher.PbsLauncher"

    queue: Optional[str] = None  # -q
    account: Optional[str] = None  # -A
    project: Optional[str] = None  # -P
    # an hpcdist profile or site preset ("polaris", "derecho", ...): its resources, modules, environment
    profile: Optional[str] = None
    dialect: Optional[str] = None  # "pro" (PBS Pro, OpenPBS; the default) or "torque"
    launcher: Optional[str] = None  # what starts several tasks on every node: torchrun (default) or mpirun
    signal_delay_s: Optional[int] = None  # the walltime warning's margin (90 s; a quarter of a short walltime)
    setup: Optional[List[str]] = None  # shell lines the job runs before the tasks
    max_array_size: Optional[int] = None  # the array cap where the server does not say it
    # at most that many subjobs of the sweep at once (-J 0-N%K); None: no limit (Slurm's launcher says 256)
    array_parallelism: Optional[int] = None
    # any other hpcdist job option, by its hpcdist.submit() name: {exclusive: true, modules: [cuda/12.1]}
    options: Dict[str, Any] = field(default_factory=dict)
    # how many times a Checkpointable task goes on as a new job after the walltime warning
    max_num_timeout: int = 0


ConfigStore.instance().store(group="hydra/launcher", name="submitit_pbs", node=PbsQueueConf(), provider="hpcdist")
