"""Slurm from inside a job: its id, its allocation, and the words of its commands' errors.

Cheap to import (nothing but :mod:`hpcdist.hostlist` when a node list is read): the rank resolver
(:mod:`hpcdist.env`), the job's set-up and :mod:`hpcdist.allocation` import it. The login side
(:mod:`hpcdist.schedulers.slurm.submit`: sbatch, squeue, sacct ...) builds on it.
"""

#: Where a Slurm job finds its id (the second is the old name, still set).
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOBID")
#: Where a process finds its step's id (srun's task marker too: hpcdist.env.detectors names it as well,
#: tested before anything of Slurm's is loaded), and the step ids that are not srun tasks (the batch
#: script, the extern step, and their numbers).
STEP_ID = "SLURM_STEP_ID"
NON_TASK_STEP_IDS = ("batch", "extern", "4294967291", "4294967292")
# The allocation's variables, named here alone: the rank resolver (hpcdist.env) reads them from
# here once it has loaded this module, never before.
#: The tasks per node of the job, and of the step (srun rewrites the task counts to the step's).
TASKS_PER_NODE, STEP_TASKS_PER_NODE = "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"
#: The job's node list (the older name second) with its tasks per node, in the order they are looked for.
NODELISTS = (("SLURM_JOB_NODELIST", TASKS_PER_NODE), ("SLURM_NODELIST", TASKS_PER_NODE))
#: The step's node list with its tasks per node: an srun task of the run reads it first.
STEP_NODELIST = ("SLURM_STEP_NODELIST", STEP_TASKS_PER_NODE)
#: The job's number of nodes (the older name second).
NODE_COUNTS = ("SLURM_JOB_NUM_NODES", "SLURM_NNODES")


def allocation(environ, step: bool = False, slots: bool = True):
    """The job's hosts and tasks per host, or None outside a Slurm allocation.

    ``SLURM_JOB_NODELIST`` (or the older ``SLURM_NODELIST``) paired with
    ``SLURM_TASKS_PER_NODE``; with ``step`` (an srun task of the run; None: whenever this
    process is an srun task), the step's
    ``SLURM_STEP_NODELIST`` and ``SLURM_STEP_TASKS_PER_NODE`` (srun rewrites the task counts to
    the step's but keeps the job's node list). A process that another launcher started inside
    Slurm (Open MPI's daemons on the other nodes are a one-node step each) reads the job's.
    Rank 0 runs on the first host unless srun placed the tasks by a host file
    (``SLURM_DISTRIBUTION=arbitrary``). Without ``slots``, the tasks per host are not read.
    """
    from hpcdist.schedulers.job_hosts import Allocation, AllocationError

    pairs = NODELISTS
    if step is None:
        step = in_task(environ)
    if step and environ.get(STEP_NODELIST[0]):
        pairs = (STEP_NODELIST, *pairs)
    found = next((p for p in pairs if environ.get(p[0])), None)
    if found is None:
        return None
    nodelist_var, counts_var = found
    nodelist, counts = environ.get(nodelist_var), environ.get(counts_var) if slots else None
    hosts = parse("expand", nodelist_var, nodelist)
    source = f"{nodelist_var}={nodelist}"
    if counts is None:
        if slots:  # an salloc shell of an old Slurm, say: the hosts are known, their tasks are not
            raise AllocationError(f"{nodelist_var}={nodelist} is set but {counts_var} is not, so the slots per "
                                  f"host are unknown; pass --slots-per-node N")
        pairs = tuple(dict.fromkeys(hosts, 1).items())
    else:
        numbers = parse("expand_counts", counts_var, counts)
        if len(hosts) != len(numbers):
            raise AllocationError(
                f"{nodelist_var}={nodelist} expands to {len(hosts)} hosts but {counts_var}={counts} gives "
                f"{len(numbers)} counts; the two must describe the same nodes (are they from the same job and step?)")
        merged: dict = {}
        for host, count in zip(hosts, numbers):
            merged[host] = merged.get(host, 0) + count
        pairs, source = tuple(merged.items()), f"{source} {counts_var}={counts}"
    return Allocation(pairs, source, rank0_first=not arbitrary_placement(environ))


def in_task(environ) -> bool:
    """This process is an srun task (its step is not the batch script's, nor the extern one)."""
    return (environ.get(STEP_ID) or "").strip() not in ("", *NON_TASK_STEP_IDS)


def parse(reader: str, variable: str, value: str) -> list:
    """``hpcdist.hostlist.<reader>`` of a Slurm variable; a space after a comma (as some tools
    write node lists) is no error. AllocationError naming the variable."""
    import hpcdist.hostlist as hostlist
    from hpcdist.schedulers.job_hosts import AllocationError

    try:
        return getattr(hostlist, reader)(",".join(part.strip() for part in value.split(",")))
    except hostlist.HostlistError as e:
        raise AllocationError(f"{variable} cannot be read: {e}") from None


def arbitrary_placement(environ) -> bool:
    """srun placed the tasks by a host file (SLURM_HOSTFILE): rank 0 need not be on the first host."""
    return (environ.get("SLURM_DISTRIBUTION") or "").split(",")[0].split(":")[0] == "arbitrary"


# What Slurm's client commands print when the controller is in trouble (slurm_errno.c, sbatch.c),
# read by hpcdist.schedulers.retry: the request never reached the controller (safe to repeat) ...
NOT_SENT = (r"Unable to contact slurm controller \(connect failure\)", r"Slurm temporarily unable to accept job",
            r"Controller is in standby mode", r"Slurm backup controller in standby mode")
# ... it may have reached it (a query may be repeated, a submission may not) ...
MAYBE_SENT = (r"Socket timed out on send/recv operation",
              r"Unable to contact slurm controller \((?:send|receive|shutdown) failure\)",
              r"Zero Bytes were transmitted or received")
# ... or there is no Slurm to talk to (configless look-up; also the Perl qsub/qstat of Slurm's
# Torque wrapper, as "perl: ...").
NOT_CONFIGURED = (r"Could not establish a configuration source", r"resolve_ctls_from_dns_srv",
                  r"Unable to process configuration file")
#: Advice for the submission errors users meet most: (pattern, advice).
HINTS = (
    (r"invalid partition", "check --queue (or the profile's queue): `sinfo -s` lists the partitions you may use"),
    (r"Invalid account", "check --account (or the profile's account): "
                         "`sacctmgr show assoc user=$USER format=account,partition` lists yours"),
    (r"Invalid qos", "check --qos: `sacctmgr show assoc user=$USER format=qos` lists yours"),
    (r"Invalid generic resource", "the cluster (or this partition) has no such GPUs or other GRES: check "
                                  "--gpus-per-node; `sinfo -o '%P %G'` shows what each partition has"),
    (r"Requested node configuration is not available",
     "the request (--nodes, --gpus-per-node, --procs-per-node, --mem) fits no node: `sinfo -N -l` shows them"),
)


def start_elastic(command: list, options: dict) -> int:
    """``hpcdist agents --elastic -- srun FLAGS COMMAND``: an elastic torchrun's agents in two steps.

    The first node's agent, which holds the rendezvous store, in a step of its own whose end is
    the job's; the other nodes' in a second step, which may lose a node (``--no-kill``, as the
    job's ``#SBATCH --no-kill``: Slurm keeps the rest of the allocation) while the training goes
    on, after a restart, on the nodes left. When the first node's agent fails, the others would
    wait for a rendezvous that never comes: they are ended.
    """
    import os
    import subprocess
    import sys

    from hpcdist.injob.agents import Agent, end, exit_status, forward_signals

    if command[:1] != ["srun"]:
        raise SystemExit("hpcdist agents --elastic: the command must start with srun")
    nodes = int(os.environ.get(NODE_COUNTS[0]) or os.environ.get(NODE_COUNTS[1]) or 0)
    if nodes < 2:
        raise SystemExit(f"hpcdist agents --elastic: {NODE_COUNTS[0]} is not 2 or more: this runs inside a "
                         "Slurm job of several nodes")
    # Which agent hosts the rendezvous store: the first node's alone (torchrun reads its
    # --rdzv-conf from PET_RDZV_CONF; srun passes the environment on). Left to guess, an agent on
    # the master's host that cannot listen on the port joins whatever listens there.
    others = subprocess.Popen(["srun", f"--nodes={nodes - 1}", f"--ntasks={nodes - 1}", "--relative=1",
                               "--no-kill", *command[1:]], env={**os.environ, "PET_RDZV_CONF": "is_host=0"})
    first = subprocess.Popen(["srun", "--nodes=1", "--ntasks=1", "--relative=0", "--no-kill", *command[1:]],
                             env={**os.environ, "PET_RDZV_CONF": "is_host=1"})
    forward_signals([first, others])
    code = exit_status(first.wait())
    if code != 0:
        end([Agent(others, 1, "")])
    rest = exit_status(others.wait())
    if rest != 0:
        print(f"hpcdist: the agents on the other nodes ended with status {rest} (a node lost?); the job ends "
              f"as the first node's agent did: status {code}", file=sys.stderr, flush=True)
    return code
