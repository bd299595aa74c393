"""What rank resolution produces: :class:`DistEnv`, and its error and warning."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

#: The values of :attr:`DistEnv.launcher`.
LAUNCHERS = (
    "torchrun",
    "deepspeed",
    "openmpi",
    "mpich",
    "mvapich",
    "slurm",
    "pbs",
    "lsf",
    "flux",
    "pals",
    "horovod",
    "submitit",
    "mpi4py",
    "single",
)

#: The resolved fields, in the order they are shown.
FIELDS = (
    "rank",
    "local_rank",
    "world_size",
    "local_world_size",
    "node_rank",
    "master_addr",
    "master_port",
)


class DistEnvError(ValueError):
    """The environment cannot be resolved without guessing.

    The message names the variables and their values and says what to do.
    """


class UndistributedWarning(UserWarning):
    """A job allocated several tasks but this process was started without a launcher."""


@dataclass(frozen=True)
class DistEnv:
    """Where this process stands in a distributed run.

    ``sources`` maps each field (and ``launcher``) to the variable or rule
    that gave its value, e.g. ``{"rank": "OMPI_COMM_WORLD_RANK=3"}``.
    """

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    launcher: str
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        # A read-only view: a frozen dataclass should not hand out a mutable dict.
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    def torch_env(self) -> dict[str, str]:
        """The variables ``init_process_group("env://")``, DeepSpeed and accelerate read."""
        return {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "NODE_RANK": str(self.node_rank),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }

    def as_dict(self) -> dict:
        """Plain data for JSON: the fields, the launcher and the sources."""
        out: dict = {name: getattr(self, name) for name in FIELDS}
        out["launcher"] = self.launcher
        out["sources"] = dict(self.sources)
        return out
