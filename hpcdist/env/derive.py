"""What the environment implies where the launcher's own variables do not say a field (the
resolver's step 4). Each rule fills one field still unknown, and its source says how:

- any field: another launcher's variable for it that is set (:data:`~.model.ALIASES`:
  ``LOCAL_SIZE`` from DeepSpeed's MPI runners under Open MPI, say);
- node rank: ``NODE_RANK``, ``GROUP_RANK`` (torchrun's), ``PALS_NODEID``; else this host's
  position among the allocation's hosts (Slurm's node list, ``$PBS_NODEFILE``, the LSF rank
  file), once the run is known to span nodes;
- local world size: Slurm's tasks per node (``SLURM_NTASKS_PER_NODE``, or this node's entry of
  ``SLURM_TASKS_PER_NODE``) when the run has the job's tasks; the world size on a one-node job;
  this host's lines in ``$PBS_NODEFILE`` or the LSF rank file when they are the run's ranks;
- local rank: 0 when this node runs one process;
- world size: the local world size when the allocation has one host (PALS's PMIx mode says no
  world size);
- master address: the first host of the allocation (where rank 0 runs unless srun placed the
  tasks by a host file, or mpiexec was given other hosts: MASTER_ADDR then), for a run across
  nodes; and, as the resolver's last step, where neither the variables nor MPI say it
  (:func:`first_host_master`).

Never a rank computed as node rank x local size: cyclic placement would make it wrong. Nor a
local size from the task count over the node count: Slurm places tasks by free CPUs.

A field still unknown gets its reason here too (:func:`unknown_reason`): the module is imported
only when something is missing, so the common lookup loads none of this.
"""

from hpcdist.env import detectors as D
from hpcdist.env.model import ALIASES, DistEnvError, EnvReader

class Allocation:
    """The allocation's hosts (:func:`hpcdist.allocation.read`, the one reader): ``where`` (the
    variables, for sources), ``hosts`` in order, ``rank0_first`` (rank 0 runs on the first host),
    ``slots`` (host -> its slots) where they count the run's ranks (a node file's lines), else None.
    (Not a namedtuple: making one costs a rank's lookup ~1% of Python's start.)"""

    __slots__ = ("where", "hosts", "rank0_first", "slots")

    def __init__(self, where: str, hosts: "list[str]", rank0_first: bool, slots: "dict | None"):
        self.where, self.hosts, self.rank0_first, self.slots = where, hosts, rank0_first, slots

#: The variables that say a node rank where the launcher's own do not.
NODE_RANK_VARIABLES = ("NODE_RANK", "GROUP_RANK", "PALS_NODEID")


def fill(env: EnvReader, reading: "D.Reading") -> None:
    """Fill what the environment implies into ``reading``'s unknown fields."""
    for field, names in ALIASES.items():
        if field not in reading.values:
            found = env.first(names, D.MEANING[field])
            if found is not None:
                reading.put(field, *found)
    if "node_rank" not in reading.values:
        found = env.first(NODE_RANK_VARIABLES, "node rank")
        if found is not None:
            reading.put("node_rank", *found)
    hosts = _allocation(env, reading.launcher)
    world = reading.get("world_size")
    if "local_world_size" not in reading.values and world is not None:
        _local_world_size(env, reading, world, hosts)
    if "local_rank" not in reading.values and reading.get("local_world_size") == 1:
        reading.put("local_rank", 0, "the only process on this node")
    local_world = reading.get("local_world_size")
    if world is None and local_world is not None and hosts is not None and len(hosts.hosts) == 1:
        # A run cannot span more hosts than its job has (PALS in PMIx mode says no world size).
        source = reading.values["local_world_size"][1]
        reading.put("world_size", local_world, f"{source}: the only host of {hosts.where}")
        world = local_world
    if world is None or local_world is None or world == local_world:
        return  # one node (the resolver says so), or not known to span nodes (see first_host_master)
    if "node_rank" not in reading.values and hosts is not None:
        index = D.host_position(hosts.hosts)
        if index is not None:
            reading.put("node_rank", index, f"position of {hosts.hosts[index]} among the hosts of {hosts.where}")
    _first_host_master(reading, hosts)


def first_host_master(env: EnvReader, reading: "D.Reading") -> None:
    """The master where nothing else says it (no MASTER_ADDR, no MPI to ask): the allocation's first
    host, as mpiexec places rank 0 there (PALS in PMIx mode, whose run may span nodes or not)."""
    _first_host_master(reading, _allocation(env, reading.launcher))


def _first_host_master(reading: "D.Reading", hosts: "Allocation | None") -> None:
    # Not checked against a node rank that puts this host elsewhere (mpiexec --hosts): only some
    # hosts could tell, and those alone would then ask MPI, a collective the others never join.
    if "master_addr" not in reading.values and hosts is not None and hosts.rank0_first:
        reading.put("master_addr", hosts.hosts[0], f"first host of {hosts.where}")


def _allocation(env: EnvReader, launcher: str) -> "Allocation | None":
    """The allocation's hosts, from :func:`hpcdist.allocation.read`; None outside a job that names them.

    Only an srun task of the run reads its step's node list: a process started by another
    launcher inside Slurm (mpirun, whose daemons on the other nodes are a one-node step each)
    inherited a step node list that is not its run's. Slurm's task counts are the job's tasks,
    not the run's ranks: a node file's lines are.
    """
    from hpcdist.allocation import AllocationError, read

    try:
        found = read(env, step=launcher in D.SRUN_TASKS, slots=False)
    except AllocationError as e:
        raise DistEnvError(str(e)) from None
    if found is None:
        return None
    slots = None if found.source.startswith(("SLURM_", "HPCDIST_")) else dict(found.hosts)
    return Allocation(found.source.split(" SLURM_")[0], found.host_names, found.rank0_first, slots)


def _local_world_size(env: EnvReader, reading: "D.Reading", world: int, hosts: "Allocation | None") -> None:
    # Slurm's allocation variables are named in slurm/job.py alone: under Slurm _allocation has loaded
    # it; elsewhere (a rank whose launcher says no local size) it costs ~0.3M instructions, once.
    from hpcdist.schedulers.slurm.job import NODE_COUNTS, TASKS_PER_NODE

    job_tasks = env.first(("SLURM_NTASKS", "SLURM_NPROCS"), "number of tasks")
    one_node = env.first((*NODE_COUNTS, "FLUX_JOB_NNODES"), "number of nodes")
    if one_node is not None and one_node[0] == 1:
        reading.put("local_world_size", world, f"the world size on one node ({one_node[1]})")
    elif job_tasks is not None and job_tasks[0] == world:  # the run has the job's tasks
        per_node = env.first(("SLURM_NTASKS_PER_NODE",), "number of tasks per node")
        counts = env.text(TASKS_PER_NODE)
        node = reading.get("node_rank")
        if node is None and hosts is not None and hosts.where.startswith("SLURM_"):
            node = D.host_position(hosts.hosts)
        if per_node is not None:
            reading.put("local_world_size", per_node[0], f"{per_node[1]} ({job_tasks[1]} in all)")
        elif counts is not None and node is not None:
            listed = D.slurm_parse("expand_counts", TASKS_PER_NODE, counts)
            if node < len(listed):
                reading.put("local_world_size", listed[node], f"entry {node} of {TASKS_PER_NODE}={counts}")
    elif hosts is not None and hosts.slots is not None and sum(hosts.slots.values()) == world:  # a line per rank
        index = D.host_position(hosts.hosts)
        if index is not None:
            here = hosts.hosts[index]
            reading.put("local_world_size", hosts.slots[here], f"lines for {here} in {hosts.where}")
    if "local_world_size" not in reading.values and job_tasks is not None and one_node is not None:
        reading.unknown["local_world_size"] = (
            f"{job_tasks[1]} over {one_node[1]} need not be even (Slurm places tasks by free CPUs), and no "
            f"SLURM_NTASKS_PER_NODE, {TASKS_PER_NODE} or LOCAL_WORLD_SIZE says it: submit with "
            f"--ntasks-per-node, or set LOCAL_WORLD_SIZE."
        )


def stray_node_rank(env: EnvReader, reading: "D.Reading") -> None:
    """A NODE_RANK or GROUP_RANK other than 0 beside one process: meant for processes a framework
    will start (Lightning's launcher reads it so), not for this one, which is node 0 of its own
    run. The node rank alone is then unknown, saying so."""
    stray = env.first(("NODE_RANK", "GROUP_RANK"), "node rank")
    if stray is not None and stray[0] != 0:
        del reading.values["node_rank"]
        reading.unknown["node_rank"] = (
            f"{stray[1]} says node {stray[0]}, but no launcher started this process: it runs alone (rank 0 of 1), "
            f"node 0 of its own run. A node rank meant for the processes a framework starts (Lightning reads "
            f"NODE_RANK and GROUP_RANK so) does not describe this one: unset it, or start the processes with a "
            f"launcher (torchrun, srun, mpirun)."
        )


#: The fields one variable, the same for every rank, can say.
_SAME_FOR_ALL = {"world_size": "WORLD_SIZE", "master_addr": "MASTER_ADDR (the host of rank 0)",
                 "local_world_size": "LOCAL_WORLD_SIZE (where every node runs as many ranks)"}


def without_mpi(env: EnvReader, launcher: str, field: str) -> "list[str]":
    """The ways to say ``field`` that need no mpi4py."""
    ways = []
    if field in _SAME_FOR_ALL:
        variable = _SAME_FOR_ALL[field].split()[0]
        from hpcdist.launchers.mpi import FLAVOURS  # the one table of the MPIs: how each passes a variable

        how = FLAVOURS[launcher].pass_one if launcher in FLAVOURS else None
        ways.append(f"set {_SAME_FOR_ALL[field]} for every rank" + (f" ({how.format(variable)})" if how else ""))
    if field == "world_size" and pals_pmix(env, launcher):
        ways.append("start the ranks with mpiexec's default PMI (no --pmi=pmix), which sets PMI_SIZE")
    return ways


#: Why PALS's PMIx mode leaves the world size unknown (the reasons here, and the resolver's for mpi4py).
PALS_PMIX_NO_WORLD = "PALS's mpiexec in PMIx mode (--pmi=pmix) sets no PMI_SIZE, and nothing else says the world size"


def pals_pmix(env: EnvReader, launcher: str) -> bool:
    """PALS's mpiexec in PMIx mode (``--pmi=pmix``): PMIX_RANK, no PMI_SIZE."""
    return launcher == "pals" and env.has("PMIX_RANK") and not env.has("PMI_SIZE")


def unknown_reason(env: EnvReader, reading: "D.Reading", field: str, real: bool) -> str:
    """Why ``field`` is unknown, and how to supply it."""
    if field in reading.unknown:
        return reading.unknown[field]
    values, launcher = reading.values, reading.launcher
    if field == "local_world_size" and launcher in D.SRUN_TASKS:
        from hpcdist.schedulers.slurm.job import STEP_TASKS_PER_NODE, TASKS_PER_NODE  # loaded: an srun task's

        return (f"an srun task without SLURM_GTIDS, {STEP_TASKS_PER_NODE} or {TASKS_PER_NODE}: the number "
                "of tasks on this node is not said. Start the task with srun itself, or set LOCAL_WORLD_SIZE.")
    if field == "local_world_size" and launcher == "flux":
        return (f"Flux says no number of tasks per node, and FLUX_JOB_SIZE={env.get('FLUX_JOB_SIZE')} tasks on "
                f"FLUX_JOB_NNODES={env.get('FLUX_JOB_NNODES')} nodes need not be even (nor is a local size of 1 "
                f"right: tools that read no Flux variable assume it): set LOCAL_WORLD_SIZE for the tasks (flux run "
                f"--tasks-per-node=N --env=LOCAL_WORLD_SIZE=N).")
    if field in ("local_rank", "local_world_size") and launcher == "torchrun" and not env.has("TORCHELASTIC_RUN_ID"):
        return (f"{' / '.join(D.GENERIC_TORCH_ENV.variables[field])} is not set, and no launcher that sets it was "
                f"found: the {D.MEANING[field]} would be a guess. Set LOCAL_RANK and LOCAL_WORLD_SIZE as well (one "
                f"process per node: LOCAL_RANK=0 LOCAL_WORLD_SIZE=1), or start the processes with torchrun, srun or "
                f"mpirun.")
    mpi = launcher == "mpi4py" or env.has_any(*D.MPI_MARKERS)
    note = " (mpi4py discovery runs only for the process's own environment)" if mpi and not real else ""
    install = (", or install mpi4py in the job's environment (pip install 'hpcdist[mpi]') so "
               "hpcdist can ask MPI") if mpi else ""
    if field in ("node_rank", "master_addr") and "local_world_size" in values and "world_size" in values:
        variable = {"master_addr": "MASTER_ADDR (the host of rank 0)", "node_rank": "NODE_RANK"}[field]
        return (f"this {launcher} run spans nodes ({values['world_size'][0]} ranks, "
                f"{values['local_world_size'][0]} on this node) and nothing says its "
                f"{D.MEANING.get(field, 'master address')}{note}: set {variable} for every "
                f"rank (mpirun -x, srun --export=ALL){install}.")
    if field in ("node_rank", "master_addr"):
        return (f"the world size or the number of processes on this node is unknown, so whether this {launcher} "
                f"run spans nodes is unknown too{note}: set WORLD_SIZE and LOCAL_WORLD_SIZE{install}.")
    if field == "world_size" and pals_pmix(env, launcher):
        return f"{PALS_PMIX_NO_WORLD}{note}: {', or '.join(without_mpi(env, launcher, field))}{install}."
    return (f"no variable of this {launcher} launch says the {D.MEANING[field]}{note}: start the processes with a "
            f"launcher hpcdist reads (torchrun, srun, mpirun){install}.")
