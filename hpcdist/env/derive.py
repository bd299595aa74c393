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
- master address: the first host of the allocation (where rank 0 runs unless srun placed the
  tasks by a host file).

Never a rank computed as node rank x local size: cyclic placement would make it wrong. Nor a
local size from the task count over the node count: Slurm places tasks by free CPUs.
"""

from collections import namedtuple

from hpcdist.env import detectors as D
from hpcdist.env.model import ALIASES, DistEnvError, EnvReader

#: The allocation's hosts: ``where`` (the variable, for sources), ``hosts`` in order,
#: ``rank0_first`` (rank 0 runs on the first host), ``slots`` (one line per slot, or None).
Allocation = namedtuple("Allocation", ("where", "hosts", "rank0_first", "slots"))

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
    hosts = _allocation(env)
    world = reading.get("world_size")
    if "local_world_size" not in reading.values and world is not None:
        _local_world_size(env, reading, world, hosts)
    if "local_rank" not in reading.values and reading.get("local_world_size") == 1:
        reading.put("local_rank", 0, "the only process on this node")
    local_world = reading.get("local_world_size")
    if world is None or local_world is None or world == local_world:
        return  # one node (the resolver says so), or not known to span nodes
    if "node_rank" not in reading.values and hosts is not None:
        index = D.host_position(hosts.hosts)
        if index is not None:
            reading.put("node_rank", index, f"position of {hosts.hosts[index]} among the hosts of {hosts.where}")
    if "master_addr" not in reading.values and hosts is not None and hosts.rank0_first:
        reading.put("master_addr", hosts.hosts[0], f"first host of {hosts.where}")


def _allocation(env: EnvReader) -> "Allocation | None":
    """The allocation's hosts; None outside a job that names them."""
    for var in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        value = env.text(var)
        if value is not None:
            from hpcdist.hostlist import expand

            return Allocation(f"{var}={value}", D.slurm_parse(expand, var, value), not D.arbitrary_placement(env), None)
    path = env.text("PBS_NODEFILE")
    if path is not None:
        from hpcdist.allocation import AllocationError, read_pbs_nodefile_lines

        try:
            lines = read_pbs_nodefile_lines(path)
        except AllocationError as e:
            raise DistEnvError(str(e)) from None
        return Allocation(f"PBS_NODEFILE={path}", list(dict.fromkeys(lines)), True, lines)
    lines = D.lsf_compute_lines(env)
    if lines:
        return Allocation(f"LSB_DJOB_RANKFILE={env.text('LSB_DJOB_RANKFILE')}", list(dict.fromkeys(lines)), True, lines)
    return None


def _local_world_size(env: EnvReader, reading: "D.Reading", world: int, hosts: "Allocation | None") -> None:
    job_tasks = env.first(("SLURM_NTASKS", "SLURM_NPROCS"), "number of tasks")
    one_node = env.first(("SLURM_JOB_NUM_NODES", "SLURM_NNODES", "FLUX_JOB_NNODES"), "number of nodes")
    if one_node is not None and one_node[0] == 1:
        reading.put("local_world_size", world, f"the world size on one node ({one_node[1]})")
    elif job_tasks is not None and job_tasks[0] == world:  # the run has the job's tasks
        per_node = env.first(("SLURM_NTASKS_PER_NODE",), "number of tasks per node")
        counts = env.text("SLURM_TASKS_PER_NODE")
        node = reading.get("node_rank")
        if node is None and hosts is not None and hosts.where.startswith("SLURM_"):
            node = D.host_position(hosts.hosts)
        if per_node is not None:
            reading.put("local_world_size", per_node[0], f"{per_node[1]} ({job_tasks[1]} in all)")
        elif counts is not None and node is not None:
            from hpcdist.hostlist import expand_counts

            listed = D.slurm_parse(expand_counts, "SLURM_TASKS_PER_NODE", counts)
            if node < len(listed):
                reading.put("local_world_size", listed[node], f"entry {node} of SLURM_TASKS_PER_NODE={counts}")
    elif hosts is not None and hosts.slots is not None and len(hosts.slots) == world:  # one line per rank
        index = D.host_position(hosts.hosts)
        if index is not None:
            here = hosts.hosts[index]
            reading.put("local_world_size", hosts.slots.count(here), f"lines for {here} in {hosts.where}")
    if "local_world_size" not in reading.values and job_tasks is not None and one_node is not None:
        reading.unknown["local_world_size"] = (
            f"{job_tasks[1]} over {one_node[1]} need not be even (Slurm places tasks by free CPUs), and no "
            f"SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE or LOCAL_WORLD_SIZE says it: submit with "
            f"--ntasks-per-node, or set LOCAL_WORLD_SIZE."
        )
