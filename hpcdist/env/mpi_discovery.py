"""Ranks, node ranks and the master address from MPI itself, through mpi4py.

Used only when an MPI launch left no usable rank variables, or a multi-node
run gives no node rank or master address. It is collective: every rank of
the job must get here, which is the case when every rank resolves its
environment at start-up. mpi4py is imported only then, never to "detect"
MPI (importing it initialises MPI, which can hang outside a launcher).

When hpcdist is the one that initialised MPI, it finalizes MPI right after
(see :func:`discover`); code that wants mpi4py itself imports it first, and
then MPI stays open for it.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass

from hpcdist.env.model import DistEnvError


@dataclass(frozen=True)
class Discovery:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str


_cached: Discovery | None = None


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
        raise NoMpi4py(
            f"{reason}, so hpcdist asks MPI through mpi4py, which cannot be imported ({e}). "
            f"Install it in the job's environment (pip install 'hpcdist[mpi]'), or set "
            f"MASTER_ADDR and NODE_RANK for every rank (mpirun -x MASTER_ADDR ...)."
        ) from None
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
        # hpcdist needed MPI only for this. A rank that has finalized and then
        # dies makes Open MPI wait for its peers instead of ending the job, so
        # finalize now, all ranks together, while everyone is here.
        MPI.Finalize()
    return _cached
