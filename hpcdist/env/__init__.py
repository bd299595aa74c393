"""One answer to "which rank am I?" under every launcher.

Where it runs: in every rank, the training's own process, on every node.

::

    import hpcdist.env as henv

    env = henv.init_distributed()          # gloo on CPU, nccl on GPUs
    if henv.get_rank() == 0:
        print(f"rank 0 of {env.world_size}, started by {env.launcher}")

torchrun, DeepSpeed, Open MPI, MPICH/Intel MPI, MVAPICH, srun, pbsdsh, LSF
jsrun, Flux, Cray PALS, Horovod and submitit each set different variables;
:func:`resolve` reads whichever launcher started this process (the innermost
one wins) and says where every value came from. The getters resolve once
per process, then return the cached answer; each raises only when its own
field is unknown (:meth:`DistEnv.value`).

This module never imports torch, mpi4py, deepspeed or jinja2;
:func:`init_distributed` imports torch when called, and mpi4py is imported
only for an MPI launch that needs it.
"""

# No `from __future__ import annotations` here, nor in the modules below: it imports
# __future__, ~2% of the rank lookup; annotations naming what is not imported are strings.
import os

from hpcdist.env.model import LAUNCHERS, DistEnv, DistEnvError, UndistributedWarning
from hpcdist.env.resolver import explain, resolve

__all__ = [
    "LAUNCHERS",
    "DistEnv",
    "DistEnvError",
    "UndistributedWarning",
    "resolve",
    "explain",
    "current",
    "get_rank",
    "get_local_rank",
    "get_world_size",
    "get_local_world_size",
    "get_node_rank",
    "get_master_addr",
    "get_master_port",
    "detect_launcher",
    "export_torch_env",
    "init_distributed",
    "step",
    "phase",
]

_current: DistEnv | None = None


def __getattr__(name: str):
    # step and phase, the rank's progress for `hpcdist watch`: imported when first asked for, so
    # that a rank's lookup alone does not load the recorder.
    if name in ("step", "phase"):
        from hpcdist import progress

        return getattr(progress, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def current() -> DistEnv:
    """This process's :class:`DistEnv`, resolved from ``os.environ`` on first use."""
    global _current
    if _current is None:
        _current = resolve()
    return _current


def get_rank() -> int:
    return current().value("rank")


def get_local_rank() -> int:
    return current().value("local_rank")


def get_world_size() -> int:
    return current().value("world_size")


def get_local_world_size() -> int:
    return current().value("local_world_size")


def get_node_rank() -> int:
    return current().value("node_rank")


def get_master_addr() -> str:
    return current().value("master_addr")


def get_master_port() -> int:
    return current().value("master_port")


def detect_launcher() -> str:
    return current().launcher


def export_torch_env() -> DistEnv:
    """Put ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
    ``NODE_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` into ``os.environ``.

    After this, ``init_process_group("env://")``, DeepSpeed and accelerate
    work under mpirun and srun as they do under torchrun.
    """
    env = current()
    os.environ.update(env.torch_env())
    return env


def init_distributed(backend: str | None = None, timeout=None) -> DistEnv:
    """Export the torch variables and initialise the default process group.

    ``backend`` defaults to nccl when CUDA is usable, else gloo; the CUDA
    device is bound to the local rank first. ``timeout`` is a
    :class:`datetime.timedelta` or seconds. Returns the :class:`DistEnv`.
    An exception that ends this rank then also prints a one-line report
    (rank, host, time, error) that ``hpcdist logs`` uses to name the rank
    that failed first (:func:`hpcdist.failures.report_failures`).
    """
    from hpcdist.env.torch_init import init_distributed as _init
    from hpcdist.failures import report_failures
    from hpcdist.progress import phase

    with phase("rendezvous"):  # for `hpcdist watch`: a rank that waits here waits for its peers
        env = _init(export_torch_env(), backend=backend, timeout=timeout)
    report_failures(env)
    return env


def _reset() -> None:
    """Forget the cached answer (tests, and code that changed os.environ on purpose)."""
    global _current
    _current = None
