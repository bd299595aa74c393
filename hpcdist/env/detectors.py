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
and filled in by :mod:`hpcdist.env.resolver`.
"""

from __future__ import annotations

from hpcdist.env.model import DistEnvError
from hpcdist.env.reader import EnvReader

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
    """What one launcher's variables say: field -> (value, source)."""

    def __init__(self, launcher: str):
        self.launcher = launcher
        self.values: dict[str, tuple[object, str]] = {}

    def put(self, name: str, value: object, source: str) -> None:
        self.values[name] = (value, source)


class Launcher:
    name: str
    #: Variables detect() looks at, for ``hpcdist env --explain``.
    markers: tuple[str, ...]
    #: Variables per field, first set wins.
    variables: dict[str, tuple[str, ...]] = {}
    #: Fields that must come from variables (the others may be derived).
    required: tuple[str, ...] = ("rank", "world_size", "local_rank", "local_world_size")
    #: True for launchers that start this process themselves and set RANK anew:
    #: an outer launcher's rank variables legitimately differ from theirs.
    innermost_process_manager: bool = False

    def detect(self, env: EnvReader) -> bool:
        raise NotImplementedError

    def read(self, env: EnvReader) -> Reading:
        reading = Reading(self.name)
        missing = []
        for name, variables in self.variables.items():
            found = env.first(variables, MEANING[name])
            if found is not None:
                reading.put(name, *found)
            elif name in self.required:
                missing.append(name)
        if missing:
            unset = [" / ".join(self.variables[name]) for name in missing]
            raise DistEnvError(
                f"the process looks launched by {self.name} ({self.why(env)}) but "
                f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set, so its "
                f"{' and '.join(MEANING[name] for name in missing)} {'is' if len(unset) == 1 else 'are'} "
                f"unknown. Start it through {self.name} unchanged, or set HPCDIST_LAUNCHER to "
                f"the launcher really used."
            )
        return reading

    def why(self, env: EnvReader) -> str:
        shown = [f"{m}={env.environ[m]}" for m in self.markers if m in env.environ]
        return ", ".join(shown) + (" is set" if len(shown) == 1 else " are set")


class Torchrun(Launcher):
    name = "torchrun"
    markers = ("TORCHELASTIC_RUN_ID",)
    innermost_process_manager = True
    variables = {
        "rank": ("RANK",),
        "world_size": ("WORLD_SIZE",),
        "local_rank": ("LOCAL_RANK",),
        "local_world_size": ("LOCAL_WORLD_SIZE",),
        # GROUP_RANK is the agent's rank from the rendezvous: the node rank.
        "node_rank": ("GROUP_RANK",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has("TORCHELASTIC_RUN_ID")  # set even when empty counts


class DeepSpeed(Launcher):
    """``deepspeed.launcher.launch`` (pdsh, ssh, ``--no_ssh``) and its MPICH helper."""

    name = "deepspeed"
    markers = ("LOCAL_SIZE", "CROSS_RANK")
    innermost_process_manager = True
    variables = {
        "rank": ("RANK",),
        "world_size": ("WORLD_SIZE",),
        "local_rank": ("LOCAL_RANK",),
        "local_world_size": ("LOCAL_SIZE",),
        "node_rank": ("CROSS_RANK",),
    }

    def detect(self, env: EnvReader) -> bool:
        # LOCAL_SIZE (not LOCAL_WORLD_SIZE) next to RANK is DeepSpeed's fingerprint.
        return env.has_all("RANK", "LOCAL_SIZE")


class Lsf(Launcher):
    """IBM LSF ``jsrun``. Comes before Open MPI: Spectrum MPI sets OMPI_* too."""

    name = "lsf"
    markers = ("JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE")
    variables = {
        "rank": ("JSM_NAMESPACE_RANK",),
        "world_size": ("JSM_NAMESPACE_SIZE",),
        "local_rank": ("JSM_NAMESPACE_LOCAL_RANK",),
        "local_world_size": ("JSM_NAMESPACE_LOCAL_SIZE",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has_all(*self.markers)

    def read(self, env: EnvReader) -> Reading:
        reading = super().read(env)
        path = env.text("LSB_DJOB_RANKFILE")
        if path is None:
            return reading
        try:
            with open(path, encoding="utf-8") as f:
                lines = [line.strip() for line in f if line.strip()]
        except (OSError, ValueError) as e:  # ValueError: a NUL in the path
            raise DistEnvError(f"LSB_DJOB_RANKFILE={path!r} cannot be read: {e}") from None
        # Line 1 is the launch node, not a compute node.
        hosts = list(dict.fromkeys(lines[1:]))
        if hosts:
            reading.put("master_addr", hosts[0], f"first compute host in LSB_DJOB_RANKFILE={path}")
            import socket

            here = socket.gethostname()
            short = [h.split(".")[0] for h in hosts]
            if here in hosts or here.split(".")[0] in short:
                index = hosts.index(here) if here in hosts else short.index(here.split(".")[0])
                reading.put("node_rank", index, f"position of {here} in LSB_DJOB_RANKFILE={path}")
        return reading


class OpenMpi(Launcher):
    name = "openmpi"
    markers = ("OMPI_COMM_WORLD_SIZE",)
    # OMPI_COMM_WORLD_NODE_RANK is not a node index: Open MPI documents it as
    # the process's rank on its node across all jobs. It is never read.
    variables = {
        "rank": ("OMPI_COMM_WORLD_RANK",),
        "world_size": ("OMPI_COMM_WORLD_SIZE",),
        "local_rank": ("OMPI_COMM_WORLD_LOCAL_RANK",),
        "local_world_size": ("OMPI_COMM_WORLD_LOCAL_SIZE",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has("OMPI_COMM_WORLD_SIZE")


class Mvapich(Launcher):
    name = "mvapich"
    markers = ("MV2_COMM_WORLD_SIZE",)
    variables = {
        "rank": ("MV2_COMM_WORLD_RANK",),
        "world_size": ("MV2_COMM_WORLD_SIZE",),
        "local_rank": ("MV2_COMM_WORLD_LOCAL_RANK",),
        "local_world_size": ("MV2_COMM_WORLD_LOCAL_SIZE",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has("MV2_COMM_WORLD_SIZE")


class Pals(Launcher):
    """HPE Cray PALS (``mpiexec`` on PBS Pro systems, Slurm's cray_shasta). Not proof of PBS."""

    name = "pals"
    markers = ("PALS_RANKID",)
    variables = {
        "rank": ("PALS_RANKID", "PMI_RANK"),
        "world_size": ("PMI_SIZE", "PALS_SIZE"),
        "local_rank": ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"),
        "local_world_size": ("PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"),
        "node_rank": ("PALS_NODEID",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has("PALS_RANKID")


class Flux(Launcher):
    name = "flux"
    markers = ("FLUX_TASK_RANK",)
    required = ("rank", "world_size", "local_rank")
    variables = {
        "rank": ("FLUX_TASK_RANK",),
        "world_size": ("FLUX_JOB_SIZE",),
        "local_rank": ("FLUX_TASK_LOCAL_ID",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has("FLUX_TASK_RANK")

    def read(self, env: EnvReader) -> Reading:
        reading = super().read(env)
        # Flux gives no per-node count; on one node it is the job size.
        if env.integer("FLUX_JOB_NNODES", "number of nodes") == 1:
            size, source = reading.values["world_size"]
            reading.put("local_world_size", size, f"{source} on FLUX_JOB_NNODES=1")
        return reading


class Mpich(Launcher):
    """MPICH's Hydra and Intel MPI (``PMI_*``, ``MPI_LOCAL*``)."""

    name = "mpich"
    markers = ("PMI_RANK", "PMI_SIZE")
    variables = {
        "rank": ("PMI_RANK",),
        "world_size": ("PMI_SIZE",),
        "local_rank": ("MPI_LOCALRANKID",),
        "local_world_size": ("MPI_LOCALNRANKS",),
    }
    required = ("rank", "world_size")

    def detect(self, env: EnvReader) -> bool:
        return env.has_all("PMI_RANK", "PMI_SIZE")


class Horovod(Launcher):
    """``horovodrun --gloo``. Its rendezvous address is the driver, not rank 0."""

    name = "horovod"
    markers = ("HOROVOD_RANK", "HOROVOD_SIZE")
    variables = {
        "rank": ("HOROVOD_RANK",),
        "world_size": ("HOROVOD_SIZE",),
        "local_rank": ("HOROVOD_LOCAL_RANK",),
        "local_world_size": ("HOROVOD_LOCAL_SIZE",),
        "node_rank": ("HOROVOD_CROSS_RANK",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.has_all(*self.markers)


def in_srun_task(env: EnvReader) -> bool:
    """A task started by srun, as opposed to the batch step or an salloc shell.

    The batch step carries ``SLURM_PROCID=0`` too, but no ``SLURM_STEP_ID``.
    """
    if not env.has("SLURM_PROCID"):
        return False
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    if step is not None:
        # Here, not at the top: a rank lookup outside Slurm imports no allocation code.
        from hpcdist.allocation import SLURM_NON_TASK_STEP_IDS

        return step.strip() not in SLURM_NON_TASK_STEP_IDS
    return env.get("SLURM_PROCID").strip() not in ("0", "")


class Slurm(Launcher):
    """An ``srun`` task. Step-level variables, never the job-level ones."""

    name = "slurm"
    markers = ("SLURM_PROCID", "SLURM_STEP_ID")
    variables = {
        "rank": ("SLURM_PROCID",),
        # srun rewrites SLURM_NTASKS to the step's count; STEP_NUM_TASKS is explicit.
        "world_size": ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"),
        "local_rank": ("SLURM_LOCALID",),
        "node_rank": ("SLURM_NODEID",),
    }
    required = ("rank", "world_size", "local_rank", "node_rank")

    def detect(self, env: EnvReader) -> bool:
        return in_srun_task(env)

    def read(self, env: EnvReader) -> Reading:
        from hpcdist.hostlist import expand, expand_counts

        reading = super().read(env)
        node = reading.values["node_rank"][0]
        gtids = env.text("SLURM_GTIDS")
        per_node = env.text("SLURM_STEP_TASKS_PER_NODE")
        if gtids is not None:
            count = len([t for t in gtids.split(",") if t.strip()])
            reading.put("local_world_size", count, f"{count} task ids in SLURM_GTIDS={gtids}")
        elif per_node is not None:
            counts = _slurm_parse(expand_counts, "SLURM_STEP_TASKS_PER_NODE", per_node)
            if node >= len(counts):
                raise DistEnvError(
                    f"SLURM_NODEID={node} but SLURM_STEP_TASKS_PER_NODE={per_node} lists "
                    f"{len(counts)} nodes: the variables come from different steps."
                )
            reading.put(
                "local_world_size",
                counts[node],
                f"entry {node} (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE={per_node}",
            )
        else:
            raise DistEnvError(
                "an srun task without SLURM_GTIDS or SLURM_STEP_TASKS_PER_NODE: the number "
                "of tasks on this node is unknown. Start the task with srun itself, or set "
                "LOCAL_WORLD_SIZE and HPCDIST_LAUNCHER=torchrun with the torch variables."
            )
        # The step's own node list: a sub-step may run on other nodes than the job.
        for var in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
            nodelist = env.text(var)
            if nodelist is None:
                continue
            distribution = (env.get("SLURM_DISTRIBUTION") or "").split(",")[0].split(":")[0]
            # With arbitrary placement (SLURM_HOSTFILE) rank 0 need not be on the
            # first host: leave the master to MASTER_ADDR or to the resolver's error.
            if distribution != "arbitrary":
                first = _slurm_parse(expand, var, nodelist)[0]
                reading.put("master_addr", first, f"first host of {var}={nodelist}")
            break
        return reading


def _slurm_parse(parse, variable: str, value: str):
    from hpcdist.hostlist import HostlistError

    try:
        return parse(value)
    except HostlistError as e:
        raise DistEnvError(f"{variable} cannot be read: {e}") from None


class Submitit(Slurm):
    """An srun task started by submitit's generated sbatch script."""

    name = "submitit"
    markers = ("SUBMITIT_EXECUTOR", "SLURM_PROCID", "SLURM_STEP_ID")

    def detect(self, env: EnvReader) -> bool:
        return env.get("SUBMITIT_EXECUTOR") == "slurm" and in_srun_task(env)


class SubmititLocal(Launcher):
    """A task of submitit's LocalExecutor: several tasks on this host."""

    name = "submitit"
    markers = ("SUBMITIT_EXECUTOR", "SUBMITIT_LOCAL_GLOBALID")
    variables = {
        "rank": ("SUBMITIT_LOCAL_GLOBALID",),
        "world_size": ("SUBMITIT_LOCAL_NTASKS",),
        "local_rank": ("SUBMITIT_LOCAL_LOCALID",),
        # One node: every task of the job runs here.
        "local_world_size": ("SUBMITIT_LOCAL_NTASKS",),
        "node_rank": ("SUBMITIT_LOCAL_NODEID",),
    }

    def detect(self, env: EnvReader) -> bool:
        return env.get("SUBMITIT_EXECUTOR") == "local" and env.has("SUBMITIT_LOCAL_GLOBALID")


class PbsDsh(Launcher):
    """A task started by ``pbsdsh``: its slot index into ``$PBS_NODEFILE``.

    ``PBS_TASKNUM`` is the TM task id, not a rank, and is never read.
    """

    name = "pbs"
    markers = ("PBS_VNODENUM", "PBS_NODEFILE")
    variables = {"rank": ("PBS_VNODENUM",)}
    required = ("rank",)

    def detect(self, env: EnvReader) -> bool:
        return env.has_all(*self.markers)

    def read(self, env: EnvReader) -> Reading:
        from hpcdist.allocation import AllocationError, read_pbs_nodefile_lines

        reading = super().read(env)
        path = env.text("PBS_NODEFILE")
        try:
            lines = read_pbs_nodefile_lines(path)
        except AllocationError as e:
            raise DistEnvError(str(e)) from None
        rank = reading.values["rank"][0]
        if rank >= len(lines):
            raise DistEnvError(
                f"PBS_VNODENUM={rank} but PBS_NODEFILE={path} has {len(lines)} lines: the "
                f"task's slot is not in the node file."
            )
        host = lines[rank]
        hosts = list(dict.fromkeys(lines))
        where = f"PBS_NODEFILE={path}"
        reading.put("world_size", len(lines), f"{len(lines)} lines in {where}")
        reading.put("local_rank", lines[:rank].count(host), f"earlier lines for {host} in {where}")
        reading.put("local_world_size", lines.count(host), f"lines for {host} in {where}")
        reading.put("node_rank", hosts.index(host), f"position of {host} among the hosts of {where}")
        reading.put("master_addr", lines[0], f"first line of {where}")
        return reading


class BareMpi(Launcher):
    """An MPI launch whose variables give no usable rank (PMIx only, say): ask mpi4py."""

    name = "mpi4py"
    markers = ("PMIX_RANK", "PMI_RANK", "PMI_SIZE")
    variables = {}
    required = ()

    def detect(self, env: EnvReader) -> bool:
        return env.has_any(*self.markers)


class GenericTorchEnv(Launcher):
    """torch's env:// variables without a torchrun marker.

    torch.distributed.launch, Kubeflow, accelerate, or a hand-written
    ``export RANK=...``: reported as ``torchrun``, whose protocol this is.
    """

    name = "torchrun"
    markers = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    variables = {
        "rank": ("RANK",),
        "world_size": ("WORLD_SIZE",),
        "local_rank": ("LOCAL_RANK",),
        "local_world_size": ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"),
        "node_rank": ("NODE_RANK", "GROUP_RANK"),
    }
    required = ("rank", "world_size")

    def detect(self, env: EnvReader) -> bool:
        return env.has_any(*self.markers)

    def read(self, env: EnvReader) -> Reading:
        reading = super().read(env)
        world = reading.values["world_size"][0]
        for name, default in (("local_rank", 0), ("local_world_size", 1)):
            if name in reading.values:
                continue
            if world == 1:
                reading.put(name, default, "WORLD_SIZE=1")
                continue
            raise DistEnvError(
                f"RANK={env.get('RANK')} and WORLD_SIZE={world} are set but "
                f"{' / '.join(self.variables[name])} not, and no launcher that sets them was "
                f"found: the {MEANING[name]} would be a guess. Set LOCAL_RANK and "
                f"LOCAL_WORLD_SIZE as well (one process per node: LOCAL_RANK=0 "
                f"LOCAL_WORLD_SIZE=1), or start the processes with torchrun, srun or mpirun."
            )
        return reading


class Single(Launcher):
    name = "single"
    markers = ()
    variables = {}
    required = ()

    def detect(self, env: EnvReader) -> bool:
        return True

    def read(self, env: EnvReader) -> Reading:
        reading = Reading(self.name)
        reading.put("rank", 0, "no launcher found: one process")
        reading.put("world_size", 1, "no launcher found: one process")
        reading.put("local_rank", 0, "no launcher found: one process")
        reading.put("local_world_size", 1, "no launcher found: one process")
        return reading


#: Innermost first. The first launcher whose detect() is true wins.
DETECTION_ORDER: tuple[Launcher, ...] = (
    Torchrun(),
    DeepSpeed(),
    Lsf(),
    OpenMpi(),
    Mvapich(),
    Pals(),
    Flux(),
    Mpich(),
    Horovod(),
    Submitit(),
    SubmititLocal(),
    Slurm(),
    PbsDsh(),
    GenericTorchEnv(),
    BareMpi(),
    Single(),
)

#: ``HPCDIST_LAUNCHER=<name>`` picks the first launcher of that name.
BY_NAME: dict[str, Launcher] = {}
for _launcher in DETECTION_ORDER:
    BY_NAME.setdefault(_launcher.name, _launcher)
del _launcher
