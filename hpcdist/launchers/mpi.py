"""MPI implementations as data: each one's ``mpirun`` syntax, how it passes variables, its log lines.

:data:`FLAVOURS` holds Open MPI and MPICH (Hydra); another implementation
(Cray PALS) is one more :class:`Flavour`. Used by the mpirun launcher
(:mod:`hpcdist.launchers.mpirun`) and by schedulers that spread one agent per
node with Open MPI's ``mpirun`` (PBS).
"""

from __future__ import annotations

from hpcdist.launchers import failure
from hpcdist.shell import Shell, var

#: Variables an agent on another node needs, passed on by mpirun -x (Open MPI).
BASE_PROPAGATED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                   "MASTER_ADDR", "MASTER_PORT", "HPCDIST_STOP_FILE")


def propagated(spec) -> list[str]:
    names = list(BASE_PROPAGATED) + [k for k, _ in spec.env] + list(spec.propagate)
    return list(dict.fromkeys(names))


def mpi_exports(spec, flag: str = "-x") -> str:
    """A line that collects ``-x NAME`` (Open MPI's ``flag``) for each propagated variable that is set.

    Open MPI warns about every ``-x`` of an unset variable, and which ones are
    set is known only in the job; the launch line expands ``"${mpi_exports[@]}"``.
    """
    names = " ".join(propagated(spec))
    return f'mpi_exports=(); for name in {names}; do if [ -n "${{!name+set}}" ]; then mpi_exports+=({flag} "$name"); fi; done'


MPI_EXPORTS = Shell('"${mpi_exports[@]}"')


class Flavour:
    """One MPI implementation's launcher syntax and log lines.

    ``env_flag``: how a variable reaches the other ranks. Open MPI passes only
    the variables named (``-x NAME``: every propagated one that is set, collected
    in the job by :func:`mpi_exports`); Hydra passes the whole environment
    (``passes_environment``), so it is told only the values the launch itself
    sets (``-genv NAME VALUE``). :meth:`failures`: its log lines that name a failed rank.
    """

    def __init__(self, name: str, program: str, hostfile_flag: str, count_flag: str, hostfile_format: str,
                 env_flag: str, passes_environment: bool, mapping: tuple = (), one_per_node: tuple = (),
                 rank_variable: str = ""):
        self.name, self.program, self.hostfile_flag, self.count_flag = name, program, hostfile_flag, count_flag
        self.hostfile_format, self.env_flag, self.passes_environment = hostfile_format, env_flag, passes_environment
        self.mapping = mapping
        #: The mapping that puts one process on each host of a hostfile with one line per host
        #: (for schedulers that spread agents with this mpirun: PBS, with Open MPI's).
        self.one_per_node = one_per_node
        #: The variable that holds a process's rank, in the process.
        self.rank_variable = rank_variable

    def command(self, program: str, hostfile: str, count: int, mapping: tuple) -> list:
        """``program`` (mpirun, or the site's ``--mpiexec``) starting ``count`` processes over the
        hostfile in the variable ``hostfile``, mapped by ``mapping``, with the variables they need."""
        if self.passes_environment:
            env = [w for name in ("MASTER_ADDR", "MASTER_PORT") for w in (self.env_flag, name, var(name))]
        else:
            env = [MPI_EXPORTS]
        return [program, self.hostfile_flag, var(hostfile), self.count_flag, str(count), *mapping, *env]

    def words(self, spec, program: list) -> list:
        """``mpirun`` (or the site's ``--mpiexec``) starting ``program`` on every slot of the hostfile."""
        return self.command(spec.mpiexec or self.program, "HPCDIST_HOSTFILE", spec.total_procs,
                            self.mapping) + program

    def setup(self, spec) -> list[str]:
        return [] if self.passes_environment else [mpi_exports(spec, self.env_flag)]

    def failures(self, text: str, agents: bool, nodes: list[str]) -> list[tuple]:
        return []


class OpenMpi(Flavour):
    #: A rank killed by a signal.
    SIGNAL = (r"noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) exited on "
              r"(?P<why>signal \d+[^.\n]*)")
    #: The first rank that exited with a non-zero status.
    EXIT = (r"The first process to do so was:\s*Process name: \[(?:\[\d+,\d+\],|[^\]]*?,)(?P<rank>\d+)\]\s*"
            r"(?:Exit code|Exit status):\s*(?P<code>\d+)")

    def failures(self, text, agents, nodes):
        import re

        # Under spread agents (one per node) a rank is an agent's: only its host is kept.
        found = [(m.start(), failure(m["why"].strip(), rank=None if agents else int(m["rank"]), host=m["host"],
                                     source="mpirun"))
                 for m in re.finditer(self.SIGNAL, text)]
        for m in re.finditer(self.EXIT, text):
            if not agents:
                found.append((m.start(), failure(f"exit code {m['code']}", rank=int(m["rank"]), source="mpirun")))
            elif int(m["rank"]) < len(nodes):  # the agent's rank is its node's index
                found.append((m.start(), failure(f"exit code {m['code']}", host=nodes[int(m["rank"])],
                                                 source="mpirun")))
        return found


class Hydra(Flavour):
    #: MPICH's banner about the first rank that ended badly.
    BAD_TERMINATION = (
        r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\s*=\s*(?:RANK (?P<rank>\d+) )?PID \d+ "
        r"RUNNING AT (?P<host>\S+)\s*=\s*(?P<why>(?:EXIT CODE|KILLED BY SIGNAL): [^\n=]*)"
        r"(?:[\s\S]*?EXIT STRING: (?P<string>[^\n]*))?")

    def failures(self, text, agents, nodes):
        import re

        return [(m.start(), failure((m["string"] or m["why"]).strip(), rank=int(m["rank"]) if m["rank"] else None,
                                    host=m["host"], source="mpiexec"))
                for m in re.finditer(self.BAD_TERMINATION, text)]


#: ``--mpi`` values, in the order their log lines are read.
FLAVOURS = {
    "openmpi": OpenMpi("openmpi", program="mpirun", hostfile_flag="--hostfile", count_flag="-np",
                       hostfile_format="openmpi", env_flag="-x", passes_environment=False,
                       mapping=("--map-by", "slot", "--bind-to", "none"),
                       one_per_node=("--map-by", "ppr:1:node", "--bind-to", "none"),
                       rank_variable="OMPI_COMM_WORLD_RANK"),
    "mpich": Hydra("mpich", program="mpiexec", hostfile_flag="-f", count_flag="-n",
                   hostfile_format="mpich", env_flag="-genv", passes_environment=True),
}
MPI_FLAVOURS = tuple(FLAVOURS)
