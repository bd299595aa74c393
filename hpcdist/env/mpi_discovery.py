"""Ranks, node ranks and the master address from MPI itself, through mpi4py.

Used only when an MPI launch left no usable rank variables, or a multi-node
run gives no node rank or master address. It is collective: every rank of
the job must get here, which is the case when every rank resolves its
environment at start-up. mpi4py is imported only then, never to "detect"
MPI (importing it initialises MPI, which can hang outside a launcher).

MPI stays running afterwards, for the code that uses it next (Lightning's
MPI environment, DeepSpeed, Horovod import mpi4py and reuse it); mpi4py
finalizes it at exit. A rank that ends with an exception aborts MPI instead
(:func:`abort_if_running`), so that its peers end too rather than wait.

``python -m hpcdist.rank`` imports this module when a script ends badly, for
:func:`abort_if_running`: importing it loads nothing more (no ``socket``, no
``dataclasses``, which cost a rank more than Python's own start).
"""

import sys

from hpcdist.env.model import DistEnvError
from hpcdist.frozen import Frozen

_FIELDS = ("rank", "world_size", "local_rank", "local_world_size", "node_rank", "master_addr")


class Discovery(Frozen):
    """What MPI says, frozen (:mod:`hpcdist.frozen`)."""

    __slots__ = _FIELDS
    _compared = _FIELDS

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str

    def __init__(self, rank, world_size, local_rank, local_world_size, node_rank, master_addr):
        for name, value in zip(_FIELDS, (rank, world_size, local_rank, local_world_size, node_rank, master_addr)):
            object.__setattr__(self, name, value)

    def __repr__(self):
        return "Discovery(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS) + ")"


_cached: "Discovery | None" = None


class NoMpi4py(DistEnvError):
    """mpi4py cannot be imported: discovery cannot run (the fields it would give stay unknown)."""


def discover(reason: str) -> Discovery:
    """``reason`` says what the environment lacked, for the error when mpi4py is missing."""
    global _cached
    if _cached is not None:
        return _cached
    # Whether MPI is ours to end: the training code may use mpi4py itself.
    ours = "mpi4py.MPI" not in sys.modules
    try:
        from mpi4py import MPI
    except ImportError as e:
        # No full stop: the resolver adds, per field, the variable that would say it instead.
        raise NoMpi4py(
            f"{reason}, so hpcdist asks MPI through mpi4py, which cannot be imported ({e}): install mpi4py "
            f"in the job's environment, working with the MPI that starts the ranks (pip install "
            f"'hpcdist[mpi]', or the site's mpi4py module)"
        ) from None
    import socket

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    # Processes that share memory are on one node: no host names involved.
    local = world.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local_rank, local_size = local.Get_rank(), local.Get_size()
    # Node rank: the order of each node's lowest rank (local rank 0 holds it,
    # since key=rank), not a sort of host names (node10 < node9).
    leaders = world.Split(0 if local_rank == 0 else MPI.UNDEFINED, key=rank)
    node_rank = None
    if leaders != MPI.COMM_NULL:
        node_rank = leaders.Get_rank()
        leaders.Free()
    node_rank = local.bcast(node_rank, root=0)
    local.Free()
    master = world.bcast(socket.gethostname() if rank == 0 else None, root=0)
    _cached = Discovery(rank, size, local_rank, local_size, node_rank, master)
    if ours:
        # Never MPI.Finalize() here: MPI cannot be started again, and the code after
        # this wants it (issue 17). But mpi4py's finalize at exit waits for every rank,
        # so an exception would hang the job: abort instead, as `python -m mpi4py` does.
        _abort_on_exception()
    return _cached


def abort_if_running(code: int) -> None:
    """End every rank of the job with ``code`` if this process has MPI running (mpi4py imported).

    For a rank that is ending badly: mpi4py's finalize at exit would wait for
    ranks that are themselves waiting for this one.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return
    try:
        running = mpi.Is_initialized() and not mpi.Is_finalized()
    except Exception:  # noqa: BLE001 - a broken MPI is not worth a second traceback
        return
    if running:
        sys.stderr.write(f"hpcdist: this rank is ending with status {code} while MPI runs: aborting MPI "
                         "so that the other ranks end too\n")
        sys.stderr.flush()
        mpi.COMM_WORLD.Abort(code)


def exit_status(exc: BaseException) -> int:
    """The status a process ends with when ``exc`` ends it, as python sets it."""
    if isinstance(exc, SystemExit):
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    return 130 if isinstance(exc, KeyboardInterrupt) else 1


def _abort_on_exception() -> None:
    """Abort MPI when this process ends badly: an uncaught exception or ``sys.exit`` with an error.

    Python runs no hook for an uncaught ``SystemExit``, so ``sys.exit`` itself
    is wrapped (argparse's errors go through it too).
    """
    previous_hook, previous_exit = sys.excepthook, sys.exit

    def hook(kind, value, tb):
        previous_hook(kind, value, tb)
        abort_if_running(exit_status(value))

    def exit_(status=None):
        code = exit_status(SystemExit(status))
        if code:
            if not isinstance(status, int):
                sys.stderr.write(f"{status}\n")
            abort_if_running(code)
        previous_exit(status)

    sys.excepthook, sys.exit = hook, exit_
