"""MPI implementations as data: each one's launcher syntax, how it passes variables and binds CPUs,
its rank variable and its log lines.

``--mpi`` takes the keys of :data:`FLAVOURS`: Open MPI, MPICH (Hydra), Intel MPI (Hydra-based) and
HPE Cray PALS. Each is used twice: by the mpirun launcher (:meth:`Flavour.words`, every rank an MPI
process; :mod:`hpcdist.launchers.mpirun`), and by PBS to start one agent per node
(:meth:`Flavour.agents`; :meth:`hpcdist.schedulers.pbs.submit.Pbs.spread`). The sources of each
flavour's syntax are named in its class.
"""

from __future__ import annotations

import re

from hpcdist.launchers import failure
from hpcdist.shell import BREAK, Shell, var

#: Open MPI's ``-x NAME`` for each variable the other hosts need that is set: the job's set-up
#: writes the array (``hpcdist job-setup --mpi-env``), since which are set is known only in the job.
MPI_ENV = Shell('"${mpi_env[@]}"')
#: What a launcher that passes the whole environment is still told: the values the launch sets.
MASTER = ("MASTER_ADDR", "MASTER_PORT")


class Flavour:
    """One MPI implementation: its launcher's command line, its rank variable, its log lines.

    A command is ``PROGRAM HOSTFILE_FLAG "$HOSTFILE" COUNT_FLAG N`` and then this flavour's
    :meth:`placement` (processes per host), :meth:`binding` (CPUs per process) and
    :meth:`environment` (how the variables reach the other hosts). ``hostfile_format`` is the
    ``hpcdist hostfile --format`` its hostfile is written in; ``rank_variable`` the variable that
    holds a process's rank (with one process per host: its host's index) in the process.
    """

    name = title = program = hostfile_flag = count_flag = hostfile_format = rank_variable = ""
    #: How to give every rank one variable (``{0}``: its name), for the resolver's advice
    #: (:func:`hpcdist.env.derive.without_mpi`).
    pass_one = ""

    def placement(self, per_node: int, agents: bool) -> list:
        raise NotImplementedError

    def binding(self, cpus: int | None, agents: bool, bind: str | None = None) -> list:
        """Flags that bind each process to ``cpus`` CPUs (--cpus-per-proc; None: not set), or as
        ``bind`` says (--cpu-bind, in this flavour's words). An agent (``agents``) is never bound
        to a part of its node: its workers share the node."""
        return []

    def environment(self, spec) -> list:
        """The words that pass the job's variables to the processes on the other hosts."""
        return [w for name in MASTER for w in ("-genv", name, var(name))]

    def setup(self, spec) -> list[str]:
        """Launch-block lines the command needs before it."""
        return []

    def command(self, spec, hostfile: str, per_node: int, agents: bool) -> list:
        """The launcher over ``hostfile``: ``per_node`` processes on each of the launch's nodes."""
        return [spec.mpiexec or self.program, self.hostfile_flag, var(hostfile), self.count_flag,
                spec.count(per_node=per_node),
                *self.placement(per_node, agents), *self.binding(spec.cpus_per_proc, agents, spec.cpu_bind),
                *self.environment(spec)]

    def words(self, spec, program: list) -> list:
        """``mpirun`` (or the site's ``--mpiexec``) starting ``program`` on every slot of the hostfile."""
        return self.command(spec, "HPCDIST_HOSTFILE", spec.procs_per_node, False) + [BREAK] + program

    def agents(self, spec) -> list:
        """The command that starts one process on each host of ``$HPCDIST_NODEFILE`` (one line per
        host): a node's agent, which learns its node's index from :attr:`rank_variable`."""
        return self.command(spec, "HPCDIST_NODEFILE", 1, True)

    def failures(self, text: str, agents: bool, nodes: list[str]) -> list[tuple]:
        """(position, :func:`~hpcdist.launchers.failure`) for each of its log lines that names a failed rank."""
        return []


class OpenMpi(Flavour):
    """Open MPI's ``mpirun`` (mpirun(1) of Open MPI 4: ``--hostfile``, ``-np``, ``--map-by``, ``-x``).

    It passes only the variables named with ``-x`` (each that the other hosts need and is set,
    collected by the job's set-up: :data:`MPI_ENV`). Processes are not bound (``--bind-to none``) unless
    ``--cpu-bind`` says how (``--bind-to core``): Open MPI
    binds each rank to one core by default when there are at most two, which would squeeze a
    training's threads and data loader workers onto one core; ``--cpus-per-proc`` reaches the
    scheduler's request, not mpirun.
    """

    name, title, program = "openmpi", "Open MPI", "mpirun"
    hostfile_flag, count_flag, hostfile_format = "--hostfile", "-np", "openmpi"
    rank_variable = "OMPI_COMM_WORLD_RANK"
    #: A rank killed by a signal.
    SIGNAL = (r"noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) exited on "
              r"(?P<why>signal \d+[^.\n]*)")
    #: The first rank that exited with a non-zero status.
    EXIT = (r"The first process to do so was:\s*Process name: \[(?:\[\d+,\d+\],|[^\]]*?,)(?P<rank>\d+)\]\s*"
            r"(?:Exit code|Exit status):\s*(?P<code>\d+)")

    def placement(self, per_node, agents):
        # The hostfile holds each host's slots (`host slots=N`); the agents' has one line per host.
        return ["--map-by", "ppr:1:node" if agents else "slot"]

    def binding(self, cpus, agents, bind=None):
        return ["--bind-to", bind if bind and not agents else "none"]

    pass_one = "mpirun -x {0}=..."

    def environment(self, spec):
        return [MPI_ENV]

    #: mpirun started as root without the two variables that allow it (containers, cloud VMs): no rank ran.
    ROOT = r"mpirun has detected an attempt to run as root"
    #: What the failure summary says of it, and troubleshooting.md too.
    ROOT_WHY = ("it refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; "
                "set both, e.g. --env OMPI_ALLOW_RUN_AS_ROOT=1 --env OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, or submit "
                "as another user")

    def failures(self, text, agents, nodes):
        # Under spread agents (one per node) a rank is an agent's: only its host is kept.
        found = [(m.start(), failure(m["why"].strip(), rank=None if agents else int(m["rank"]), host=m["host"],
                                     source="mpirun"))
                 for m in re.finditer(self.SIGNAL, text)]
        found += [(m.start(), failure(self.ROOT_WHY, who="Open MPI's mpirun", source="mpirun"))
                  for m in re.finditer(self.ROOT, text)]
        for m in re.finditer(self.EXIT, text):
            if not agents:
                found.append((m.start(), failure(f"exit code {m['code']}", rank=int(m["rank"]), source="mpirun")))
            elif int(m["rank"]) < len(nodes):  # the agent's rank is its node's index
                found.append((m.start(), failure(f"exit code {m['code']}", host=nodes[int(m["rank"])],
                                                 source="mpirun")))
        return found


class Hydra(Flavour):
    """MPICH's Hydra ``mpiexec`` (mpiexec(1) of MPICH, mpich/src/pm/hydra/mansrc/mpiexec.txt: ``-f``
    hostfile of ``host:N`` lines, ``-n``, ``-ppn``, ``-genv NAME VALUE``, ``-bind-to core:N``).

    Hydra passes the whole environment by default, so it is told only the values the launch
    sets. ``--cpus-per-proc C`` binds each rank to C cores (``-bind-to core:C``); by default
    Hydra binds nothing.

    The program is ``mpiexec.hydra``, which every MPICH installs (``mpiexec`` and ``mpirun`` are
    its links): a plain ``mpiexec`` is whichever MPI comes first on PATH, on Debian Open MPI's
    ("unknown option -f"), and on a PBS Pro server's PATH PBS's own wrapper (/opt/pbs/bin/mpiexec).
    """

    name, title, program = "mpich", "MPICH", "mpiexec.hydra"
    pass_one = "mpiexec -genv {0} ..."
    hostfile_flag, count_flag, hostfile_format = "-f", "-n", "mpich"
    rank_variable = "PMI_RANK"
    #: MPICH's banner about the first rank that ended badly (Intel MPI's Hydra prints the same).
    BAD_TERMINATION = (
        r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\s*=\s*(?:RANK (?P<rank>\d+) )?PID \d+ "
        r"RUNNING AT (?P<host>\S+)\s*=\s*(?P<why>(?:EXIT CODE|KILLED BY SIGNAL): [^\n=]*)"
        r"(?:[\s\S]*?EXIT STRING: (?P<string>[^\n]*))?")

    def placement(self, per_node, agents):
        # The ranks' hostfile says each host's count (`host:N`); the agents' has one line per host.
        return ["-ppn", "1"] if agents else []

    def binding(self, cpus, agents, bind=None):
        binding = bind or (f"core:{cpus}" if cpus else None)
        return ["-bind-to", binding] if binding and not agents else []

    def failures(self, text, agents, nodes):
        return [(m.start(), failure((m["string"] or m["why"]).strip(),
                                    rank=int(m["rank"]) if m["rank"] and not agents else None,
                                    host=m["host"], source="mpiexec"))
                for m in re.finditer(self.BAD_TERMINATION, text)]


class IntelMpi(Hydra):
    """Intel MPI's ``mpiexec`` (Hydra-based; Intel MPI Library Developer Reference, "mpiexec.hydra"
    and "Global Options": ``-f`` hostfile of host names, ``-n``, ``-ppn``, ``-genv NAME VALUE``).

    It passes the whole environment by default (``-genvall``), and pins each rank to a domain of
    its own by default (I_MPI_PIN_DOMAIN=auto: the node's CPUs shared out among its ranks);
    ``--cpus-per-proc C`` sets the domain to C CPUs (``-genv I_MPI_PIN_DOMAIN C``). Its log lines
    about a failed rank are Hydra's.
    """

    name, title, program = "intel", "Intel MPI", "mpiexec"  # Intel's own documented name
    hostfile_format = "nodes"

    def placement(self, per_node, agents):
        return ["-ppn", str(per_node)]

    def binding(self, cpus, agents, bind=None):
        # --cpu-bind is a pin domain (core, socket, omp, a size, [mask,mask]).
        domain = bind or cpus
        return ["-genv", "I_MPI_PIN_DOMAIN", str(domain)] if domain and not agents else []


class Pals(Flavour):
    """HPE Cray PALS ``mpiexec`` (PBS Pro systems: ALCF Polaris and Aurora, NCAR Derecho; their
    user guides: ``mpiexec -n N --ppn P --depth D --cpu-bind depth --env NAME=VALUE --hostfile FILE``).

    The hostfile has one host per line (as ``$PBS_NODEFILE`` on those systems); ``--envall``
    passes the whole environment. ``--cpus-per-proc C`` gives each rank C CPUs (``--depth C
    --cpu-bind depth``); an agent is left unbound (``--cpu-bind none``) for its workers to share
    the node. Each rank gets ``PALS_RANKID``, ``PALS_LOCAL_RANKID``, ``PALS_NODEID`` and the
    ``PMI_*`` variables; a rank that fails is reported as ``<host>: rank N exited with code C``
    or ``<host>: rank N died from signal S`` (seen on Aurora, pmodels/mpich#7605).
    """

    name, title, program = "pals", "Cray PALS", "mpiexec"
    pass_one = "mpiexec --env {0}=..."
    hostfile_flag, count_flag, hostfile_format = "--hostfile", "-n", "nodes"
    # One agent per host: its rank is its host's index, which PALS_NODEID says outright.
    rank_variable = "PALS_NODEID"
    RANK_FAILED = (r"^(?P<host>[^\s:]+): rank (?P<rank>\d+) "
                   r"(?:exited with code (?P<code>\d+)|died from (?P<sig>signal \d+))")

    def placement(self, per_node, agents):
        return ["--ppn", str(per_node)]

    def binding(self, cpus, agents, bind=None):
        if agents:
            return ["--cpu-bind", "none"]
        if bind:  # list:0:16:32:48 (NCAR Derecho), core, numa, depth (with --depth when CPUs are given)
            return (["--depth", str(cpus)] if cpus and bind == "depth" else []) + ["--cpu-bind", bind]
        return ["--depth", str(cpus), "--cpu-bind", "depth"] if cpus else []

    def environment(self, spec):
        return ["--envall"]

    def failures(self, text, agents, nodes):
        return [(m.start(), failure(f"exit code {m['code']}" if m["code"] else m["sig"],
                                    rank=None if agents else int(m["rank"]), host=m["host"], source="mpiexec (PALS)"))
                for m in re.finditer(self.RANK_FAILED, text, re.M)]


#: ``--mpi`` values, in the order their log lines are read.
FLAVOURS = {f.name: f for f in (OpenMpi(), Hydra(), IntelMpi(), Pals())}
MPI_FLAVOURS = tuple(FLAVOURS)
