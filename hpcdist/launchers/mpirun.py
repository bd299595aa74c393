"""mpirun: every rank an MPI process, started once from the first node over the hostfile.

Each MPI implementation (``--mpi``) is data in :mod:`hpcdist.launchers.mpi`:
its command syntax, hostfile format and log lines.
"""

from __future__ import annotations

from hpcdist.launchers import Launcher, rank_program
from hpcdist.launchers.mpi import FLAVOURS, MPI_FLAVOURS

__all__ = ["MPI_FLAVOURS", "Mpirun", "LAUNCHER"]


class Mpirun(Launcher):
    name = "mpirun"
    starts_ranks = ranks_through_hpcdist = True

    def words(self, spec):
        return FLAVOURS[spec.mpi].words(spec, rank_program(spec))

    def setup(self, spec):
        return FLAVOURS[spec.mpi].setup(spec)

    def describe(self, spec, spread: str = ""):
        ranks = "the one rank" if spec.total_procs == 1 else f"the {spec.total_procs} ranks"
        each = "" if spec.total_procs == 1 else "each "
        return (f"Start {ranks} with {FLAVOURS[spec.mpi].title}'s launcher, {each}through "
                f"hpcdist.rank (which gives every framework its rank).")

    def hostfile_format(self, spec):
        return FLAVOURS[spec.mpi].hostfile_format

    def failures(self, text, agents, nodes):
        # Every implementation's lines: a log does not say which one ran. Intel MPI's are Hydra's:
        # each reader once.
        readers = {type(flavour).failures: flavour for flavour in FLAVOURS.values()}.values()
        return [pair for flavour in readers for pair in flavour.failures(text, agents, nodes)]


LAUNCHER = Mpirun()
