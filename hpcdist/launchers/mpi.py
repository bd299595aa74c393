"""MPI implementations as data: how each one passes variables to the other nodes.

Used by the mpirun launcher and by schedulers that spread one agent per node
with Open MPI's ``mpirun`` (PBS).
"""

from __future__ import annotations

from hpcdist.shell import Shell

#: Variables an agent on another node needs, passed on by mpirun -x (Open MPI).
BASE_PROPAGATED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                   "MASTER_ADDR", "MASTER_PORT", "HPCDIST_STOP_FILE")


def propagated(spec) -> list[str]:
    names = list(BASE_PROPAGATED) + [k for k, _ in spec.env] + list(spec.propagate)
    return list(dict.fromkeys(names))


def mpi_exports(spec) -> str:
    """A line that collects ``-x NAME`` for each propagated variable that is set.

    Open MPI warns about every ``-x`` of an unset variable, and which ones are
    set is known only in the job; the launch line expands ``"${mpi_exports[@]}"``.
    """
    names = " ".join(propagated(spec))
    return f'mpi_exports=(); for name in {names}; do if [ -n "${{!name+set}}" ]; then mpi_exports+=(-x "$name"); fi; done'


MPI_EXPORTS = Shell('"${mpi_exports[@]}"')
