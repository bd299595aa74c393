"""In the job: one small detector per launcher that may have started this process, how to
recognise it and which variables it sets (:mod:`hpcdist.launchers` writes the launch instead).

:data:`DETECTION_ORDER` is the one place that says which launcher wins when
several left variables behind. The rule is "innermost first": a process
manager that starts this very process (torchrun, DeepSpeed's launch) comes
before MPI, which comes before Slurm's srun, because an outer launcher's
variables are inherited by everything started inside it (mpirun inside an
sbatch script still sees the batch step's ``SLURM_*``).

A launcher's :meth:`Launcher.read` returns what its variables say; values it
cannot know (a node rank under Open MPI, the master address) are left out
and filled in by :mod:`hpcdist.env` (its resolution).

Each launcher is a :class:`Launcher` instance, with a function where its
variables alone do not say enough: every rank lookup makes them all, and a
class costs over ten times an instance to make.
"""

from hpcdist.env.model import DistEnvError, EnvReader, hostname


MEANING = {
    "rank": "global rank",
    "world_size": "world size",
    "local_rank": "local rank",
    "local_world_size": "number of processes on this node",
    "node_rank": "node rank",
}

#: Variables that only an MPI launch sets: their presence allows mpi4py discovery.
MPI_MARKERS = (
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "PALS_RANKID",
    "FLUX_TASK_RANK",
)


class Reading:
    """What one launcher's variables say: field -> (value, source); ``unknown``: field -> why
    the launcher's variables do not say it (filled later if something else does)."""

    def __init__(self, launcher: str):
        self.launcher = launcher
        self.values: dict[str, tuple[object, str]] = {}
        self.unknown: dict[str, str] = {}

    def put(self, name: str, value: object, source: str) -> None:
        self.values[name] = (value, source)
        if self.unknown:
            self.unknown.pop(name, None)

    def get(self, name: str):
        """The field's value, or None when not known (yet)."""
        found = self.values.get(name)
        return None if found is None else found[0]


class Launcher:
    """One launcher: the variables that mark it and those it sets, per field.

    ``markers``: the variables detect() looks at, for ``hpcdist env --explain``;
    detect() is true when all are set (``needs``: these instead; ``any_marker``:
    one is enough), or asks ``detects(env)``. ``variables``: per field, first set
    wins; ``required``: the fields that must come from variables (the others may
    be derived). ``completes(env, reading)`` adds what takes more than a variable.
    ``innermost_process_manager``: the launcher starts this process itself and
    sets RANK anew, so an outer launcher's rank variables may differ from its own.
    """

    def __init__(self, name: str, markers: "tuple[str, ...]", variables: "dict[str, tuple[str, ...]]", *,
                 required=("rank", "world_size", "local_rank", "local_world_size"), needs=None,
                 any_marker=False, detects=None, completes=None, innermost_process_manager=False):
        self.name, self.markers, self.variables, self.required = name, markers, variables, required
        self.needs, self.any_marker, self.detects, self.completes = needs, any_marker, detects, completes
        self.innermost_process_manager = innermost_process_manager

    def detect(self, env: EnvReader) -> bool:
        if self.detects is not None:
            return self.detects(env)
        names = self.markers if self.needs is None else self.needs
        return env.has_any(*names) if self.any_marker else env.has_all(*names)

    def read(self, env: EnvReader) -> Reading:
        """What the variables say; a required one unset leaves its field unknown, with why."""
        reading = Reading(self.name)
        for name, variables in self.variables.items():
            found = env.first(variables, MEANING[name])
            if found is not None:
                reading.put(name, *found)
            elif name in self.required:
                reading.unknown[name] = (
                    f"the process looks launched by {self.name} ({self.why(env)}) but "
                    f"{' / '.join(variables)} is not set. Start it through {self.name} unchanged, or set "
                    f"HPCDIST_LAUNCHER to the launcher really used."
                )
        if self.completes is not None:
            self.completes(env, reading)
        return reading

    def why(self, env: EnvReader) -> str:
        shown = [f"{m}={env.environ[m]}" for m in self.markers if m in env.environ]
        return ", ".join(shown) + (" is set" if len(shown) == 1 else " are set")


TORCHRUN = Launcher(
    "torchrun",
    ("TORCHELASTIC_RUN_ID",),  # set even when empty counts
    {
        "rank": ("RANK",),
        "world_size": ("WORLD_SIZE",),
        "local_rank": ("LOCAL_RANK",),
        "local_world_size": ("LOCAL_WORLD_SIZE",),
        # GROUP_RANK is the agent's rank from the rendezvous: the node rank.
        "node_rank": ("GROUP_RANK",),
    },
    innermost_process_manager=True,
)

#: ``deepspeed.launcher.launch`` (pdsh, ssh, ``--no_ssh``) and its MPICH helper.
DEEPSPEED = Launcher(
    "deepspeed",
    ("LOCAL_SIZE", "CROSS_RANK"),
    {
        "rank": ("RANK",),
        "world_size": ("WORLD_SIZE",),
        "local_rank": ("LOCAL_RANK",),
        "local_world_size": ("LOCAL_SIZE",),
        "node_rank": ("CROSS_RANK",),
    },
    # LOCAL_SIZE (not LOCAL_WORLD_SIZE) next to RANK is DeepSpeed's fingerprint.
    needs=("RANK", "LOCAL_SIZE"),
    innermost_process_manager=True,
)


def _lsf_rankfile(env: EnvReader, reading: Reading) -> None:
    from hpcdist.allocation import AllocationError
    from hpcdist.schedulers.lsf.job import RANKFILE, allocation

    try:
        found = allocation(env) if env.text(RANKFILE) is not None else None
    except AllocationError as e:
        raise DistEnvError(str(e)) from None
    hosts = found.host_names if found is not None else []
    if hosts:
        path = env.text(RANKFILE)
        reading.put("master_addr", hosts[0], f"first compute host in {RANKFILE}={path}")
        index = host_position(hosts)
        if index is not None:
            reading.put("node_rank", index, f"position of {hosts[index]} in {RANKFILE}={path}")


def host_position(hosts: "list[str]") -> "int | None":
    """This host's index among ``hosts`` (by full or short name), or None."""
    here = hostname()
    if here in hosts:
        return hosts.index(here)
    short = [h.split(".")[0] for h in hosts]
    return short.index(here.split(".")[0]) if here.split(".")[0] in short else None


#: IBM LSF ``jsrun``. Comes before Open MPI: Spectrum MPI sets OMPI_* too.
LSF = Launcher(
    "lsf",
    ("JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE"),
    {
        "rank": ("JSM_NAMESPACE_RANK",),
        "world_size": ("JSM_NAMESPACE_SIZE",),
        "local_rank": ("JSM_NAMESPACE_LOCAL_RANK",),
        "local_world_size": ("JSM_NAMESPACE_LOCAL_SIZE",),
    },
    completes=_lsf_rankfile,
)

OPENMPI = Launcher(
    "openmpi",
    ("OMPI_COMM_WORLD_SIZE",),
    # OMPI_COMM_WORLD_NODE_RANK is not a node index: Open MPI documents it as
    # the process's rank on its node across all jobs. It is never read.
    {
        "rank": ("OMPI_COMM_WORLD_RANK",),
        "world_size": ("OMPI_COMM_WORLD_SIZE",),
        "local_rank": ("OMPI_COMM_WORLD_LOCAL_RANK",),
        "local_world_size": ("OMPI_COMM_WORLD_LOCAL_SIZE",),
    },
)

MVAPICH = Launcher(
    "mvapich",
    ("MV2_COMM_WORLD_SIZE",),
    {
        "rank": ("MV2_COMM_WORLD_RANK",),
        "world_size": ("MV2_COMM_WORLD_SIZE",),
        "local_rank": ("MV2_COMM_WORLD_LOCAL_RANK",),
        "local_world_size": ("MV2_COMM_WORLD_LOCAL_SIZE",),
    },
)

#: HPE Cray PALS ``mpiexec`` (PBS Pro systems). Not proof of PBS. In PMIx mode (``--pmi=pmix``,
#: Aurora) it sets no ``PMI_*``: no world size, which the resolver derives or asks MPI for. An
#: srun task with PALS_* is Slurm's cray_shasta plugin (Slurm 22.05 sets PALS_RANKID and
#: PALS_NODEID only): srun's own variables say the rest (:func:`_pals_srun_task`).
PALS = Launcher(
    "pals",
    ("PALS_RANKID",),
    {
        "rank": ("PALS_RANKID", "PMI_RANK"),
        "world_size": ("PMI_SIZE", "PALS_SIZE"),
        "local_rank": ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"),
        "local_world_size": ("PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"),
        "node_rank": ("PALS_NODEID",),
    },
    required=("rank", "local_rank", "local_world_size"),
    completes=lambda env, reading: _pals_srun_task(env, reading),
)


def _flux_one_node(env: EnvReader, reading: Reading) -> None:
    # Flux gives no per-node count; on one node it is the job size.
    nodes = env.integer("FLUX_JOB_NNODES", "number of nodes")
    if nodes == 1 and "world_size" in reading.values:
        size, source = reading.values["world_size"]
        reading.put("local_world_size", size, f"{source} on FLUX_JOB_NNODES=1")


FLUX = Launcher(
    "flux",
    ("FLUX_TASK_RANK",),
    {
        "rank": ("FLUX_TASK_RANK",),
        "world_size": ("FLUX_JOB_SIZE",),
        "local_rank": ("FLUX_TASK_LOCAL_ID",),
    },
    required=("rank", "world_size", "local_rank"),
    completes=_flux_one_node,
)

#: MPICH's Hydra and Intel MPI (``PMI_*``, ``MPI_LOCAL*``).
MPICH = Launcher(
    "mpich",
    ("PMI_RANK", "PMI_SIZE"),
    {
        "rank": ("PMI_RANK",),
        "world_size": ("PMI_SIZE",),
        "local_rank": ("MPI_LOCALRANKID",),
        "local_world_size": ("MPI_LOCALNRANKS",),
    },
    required=("rank", "world_size"),
)


def _horovod_cross_rank(env: EnvReader, reading: Reading) -> None:
    # HOROVOD_CROSS_RANK ranks this process among those of its local rank on other hosts: the
    # node's index only when every host runs as many processes (on hosts of 4 and 2, local
    # rank 2 exists on one host only, and is cross rank 0 there whatever its host).
    cross = env.integer("HOROVOD_CROSS_RANK", "node rank")
    hosts = env.integer("HOROVOD_CROSS_SIZE", "number of hosts")
    world, local = reading.get("world_size"), reading.get("local_world_size")
    if None not in (cross, hosts, world, local) and world == local * hosts:
        reading.put("node_rank", cross, f"HOROVOD_CROSS_RANK={cross} ({hosts} hosts of {local} processes each)")


#: ``horovodrun --gloo``. Its rendezvous address is the driver, not rank 0.
HOROVOD = Launcher(
    "horovod",
    ("HOROVOD_RANK", "HOROVOD_SIZE"),
    {
        "rank": ("HOROVOD_RANK",),
        "world_size": ("HOROVOD_SIZE",),
        "local_rank": ("HOROVOD_LOCAL_RANK",),
        "local_world_size": ("HOROVOD_LOCAL_SIZE",),
    },
    completes=_horovod_cross_rank,
)


def in_srun_task(env: EnvReader) -> bool:
    """A task started by srun, as opposed to the batch step or an salloc shell.

    The batch step carries ``SLURM_PROCID=0`` too, but no ``SLURM_STEP_ID``.
    """
    if not env.has("SLURM_PROCID"):
        return False
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    if step is not None:
        # Here, not at the top: a rank lookup outside Slurm imports nothing of Slurm's.
        from hpcdist.schedulers.slurm.job import NON_TASK_STEP_IDS

        return step.strip() not in NON_TASK_STEP_IDS
    return env.get("SLURM_PROCID").strip() not in ("0", "")


def _srun_task(env: EnvReader, reading: Reading) -> None:
    # Slurm's allocation variables are named in slurm/job.py alone; read below, it is loaded here anyway.
    from hpcdist.schedulers.slurm.job import STEP_TASKS_PER_NODE, TASKS_PER_NODE

    node = reading.get("node_rank")
    gtids = env.text("SLURM_GTIDS")
    if gtids is not None:
        count = len([t for t in gtids.split(",") if t.strip()])
        reading.put("local_world_size", count, f"{count} task ids in SLURM_GTIDS={gtids}")
    elif node is not None:
        # The step's own counts first; the job's (SLURM_TASKS_PER_NODE) are the step's when
        # the step has the job's tasks, which srun without options gives.
        world = reading.get("world_size")
        job_tasks = env.integer("SLURM_NTASKS", "number of tasks") if env.has("SLURM_STEP_NUM_TASKS") else world
        for var in (STEP_TASKS_PER_NODE, TASKS_PER_NODE):
            per_node = env.text(var)
            if per_node is None or (var == TASKS_PER_NODE and job_tasks != world):
                continue
            counts = slurm_parse("expand_counts", var, per_node)
            if node >= len(counts):
                raise DistEnvError(
                    f"SLURM_NODEID={node} but {var}={per_node} lists "
                    f"{len(counts)} nodes: the variables come from different steps."
                )
            reading.put("local_world_size", counts[node], f"entry {node} (SLURM_NODEID) of {var}={per_node}")
            break
    # The step's own node list (a sub-step may run on other nodes than the job), from the one
    # reader of an allocation.
    from hpcdist.allocation import AllocationError, read

    try:
        found = read(env, scheduler="slurm", step=True, slots=False)
    except AllocationError as e:
        raise DistEnvError(str(e)) from None
    if found is None:
        return
    hosts, where = found.host_names, found.source.split(" SLURM_")[0]
    if node is not None and node >= len(hosts):
        raise DistEnvError(f"SLURM_NODEID={node} but {where} lists {len(hosts)} hosts: the variables come from "
                           f"different steps or jobs; unset the stale ones.")
    # With arbitrary placement (SLURM_HOSTFILE) rank 0 need not be on the first host: leave the
    # master to MASTER_ADDR or to the resolver's error.
    if found.rank0_first:
        reading.put("master_addr", hosts[0], f"first host of {where}")


def slurm_parse(reader: str, variable: str, value: str):
    """``hpcdist.hostlist.<reader>`` of a Slurm variable (:func:`hpcdist.schedulers.slurm.job.parse`)."""
    from hpcdist.allocation import AllocationError
    from hpcdist.schedulers.slurm.job import parse

    try:
        return parse(reader, variable, value)
    except AllocationError as e:
        raise DistEnvError(str(e)) from None


_SLURM_VARIABLES = {
    "rank": ("SLURM_PROCID",),
    # srun rewrites SLURM_NTASKS to the step's count; STEP_NUM_TASKS is explicit.
    "world_size": ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"),
    "local_rank": ("SLURM_LOCALID",),
    "node_rank": ("SLURM_NODEID",),
}

def _pals_srun_task(env: EnvReader, reading: Reading) -> None:
    if in_srun_task(env):
        for name, variables in _SLURM_VARIABLES.items():
            found = None if name in reading.values else env.first(variables, MEANING[name])
            if found is not None:
                reading.put(name, *found)
        _srun_task(env, reading)


#: An ``srun`` task. Step-level variables, never the job-level ones.
SLURM = Launcher("slurm", ("SLURM_PROCID", "SLURM_STEP_ID"), _SLURM_VARIABLES,
                 required=("rank", "world_size", "local_rank", "node_rank"), detects=in_srun_task,
                 completes=_srun_task)

#: An srun task started by submitit's generated sbatch script.
SUBMITIT = Launcher("submitit", ("SUBMITIT_EXECUTOR", "SLURM_PROCID", "SLURM_STEP_ID"), _SLURM_VARIABLES,
                    required=SLURM.required, completes=_srun_task,
                    detects=lambda env: env.get("SUBMITIT_EXECUTOR") == "slurm" and in_srun_task(env))
#: The launchers (by name) whose processes are the tasks of a Slurm step: the step's variables are theirs.
SRUN_TASKS = (SLURM.name, SUBMITIT.name)

#: A task of submitit's LocalExecutor: several tasks on this host.
SUBMITIT_LOCAL = Launcher(
    "submitit",
    ("SUBMITIT_EXECUTOR", "SUBMITIT_LOCAL_GLOBALID"),
    {
        "rank": ("SUBMITIT_LOCAL_GLOBALID",),
        "world_size": ("SUBMITIT_LOCAL_NTASKS",),
        "local_rank": ("SUBMITIT_LOCAL_LOCALID",),
        # One node: every task of the job runs here.
        "local_world_size": ("SUBMITIT_LOCAL_NTASKS",),
        "node_rank": ("SUBMITIT_LOCAL_NODEID",),
    },
    detects=lambda env: env.get("SUBMITIT_EXECUTOR") == "local" and env.has("SUBMITIT_LOCAL_GLOBALID"),
)


def _pbsdsh_slot(env: EnvReader, reading: Reading) -> None:
    from hpcdist.allocation import AllocationError
    from hpcdist.schedulers.pbs.job import NODEFILE, nodefile_lines

    path = env.text(NODEFILE)
    try:
        lines = nodefile_lines(path)
    except AllocationError as e:
        raise DistEnvError(str(e)) from None
    rank = reading.get("rank")
    if rank is None:
        return
    where = f"{NODEFILE}={path}"
    if rank >= len(lines):
        raise DistEnvError(
            f"{PBSDSH.variables['rank'][0]}={rank} but {where} has {len(lines)} lines: the "
            f"task's slot is not in the node file."
        )
    host = lines[rank]
    hosts = list(dict.fromkeys(lines))
    reading.put("world_size", len(lines), f"{len(lines)} lines in {where}")
    reading.put("local_rank", lines[:rank].count(host), f"earlier lines for {host} in {where}")
    reading.put("local_world_size", lines.count(host), f"lines for {host} in {where}")
    reading.put("node_rank", hosts.index(host), f"position of {host} among the hosts of {where}")
    reading.put("master_addr", lines[0], f"first line of {where}")


#: A task started by ``pbsdsh``: its slot index into ``$PBS_NODEFILE``. ``PBS_TASKNUM`` is the
#: TM task id, not a rank, and is never read. Its markers are tested by every lookup that no
#: launcher before it claimed, before any scheduler module is loaded: named here as in pbs/job.py
#: (tests/env/test_env_scheduler_names.py holds them equal).
PBSDSH = Launcher("pbs", ("PBS_VNODENUM", "PBS_NODEFILE"), {"rank": ("PBS_VNODENUM",)}, required=("rank",),
                  completes=_pbsdsh_slot)

#: An MPI launch whose variables give no usable rank (PMIx only, say): ask mpi4py.
BARE_MPI = Launcher("mpi4py", ("PMIX_RANK", "PMI_RANK", "PMI_SIZE"), {}, required=(), any_marker=True)


def _torch_env_defaults(env: EnvReader, reading: Reading) -> None:
    # One process in all: its local rank and size follow. Else they stay unknown (a guess:
    # derive.unknown_reason says so).
    if reading.get("world_size") == 1:
        for name, default in (("local_rank", 0), ("local_world_size", 1)):
            if name not in reading.values:
                reading.put(name, default, "WORLD_SIZE=1")


#: torch's env:// variables without a torchrun marker: torch.distributed.launch, Kubeflow,
#: accelerate, or a hand-written ``export RANK=...``; reported as ``torchrun``, whose protocol
#: this is.
GENERIC_TORCH_ENV = Launcher(
    "torchrun",
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    {
        "rank": ("RANK",),
        "world_size": ("WORLD_SIZE",),
        "local_rank": ("LOCAL_RANK",),
        "local_world_size": ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"),
        "node_rank": ("NODE_RANK", "GROUP_RANK"),
    },
    required=("rank", "world_size"),
    any_marker=True,
    completes=_torch_env_defaults,
)


def _one_process(env: EnvReader, reading: Reading) -> None:
    for name, value in (("rank", 0), ("world_size", 1), ("local_rank", 0), ("local_world_size", 1)):
        reading.put(name, value, "no launcher found: one process")


SINGLE = Launcher("single", (), {}, required=(), detects=lambda env: True, completes=_one_process)


#: Innermost first. The first launcher whose detect() is true wins.
DETECTION_ORDER: "tuple[Launcher, ...]" = (
    TORCHRUN,
    DEEPSPEED,
    LSF,
    OPENMPI,
    MVAPICH,
    PALS,
    FLUX,
    MPICH,
    HOROVOD,
    SUBMITIT,
    SUBMITIT_LOCAL,
    SLURM,
    PBSDSH,
    GENERIC_TORCH_ENV,
    BARE_MPI,
    SINGLE,
)

#: ``HPCDIST_LAUNCHER=<name>`` picks the first launcher of that name.
BY_NAME: "dict[str, Launcher]" = {}
for _launcher in DETECTION_ORDER:
    BY_NAME.setdefault(_launcher.name, _launcher)
del _launcher
