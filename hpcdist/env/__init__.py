"""One answer to "which rank am I?" under every launcher.

Where it runs: in every rank, the training's own process, on every node.

::

    import hpcdist.env as henv

    env = henv.init_distributed()          # gloo on CPU, nccl on GPUs
    if henv.get_rank() == 0:
        print(f"rank 0 of {env.world_size}, started by {env.launcher}")

torchrun, DeepSpeed, Open MPI, MPICH/Intel MPI, MVAPICH, srun, pbsdsh, LSF
jsrun, Flux, Cray PALS, Horovod and submitit each set different variables;
:func:`resolve` reads whichever launcher started this process (the innermost
one wins) and says where every value came from. The getters resolve once
per process, then return the cached answer; each raises only when its own
field is unknown (:meth:`DistEnv.value`).

This module never imports torch, mpi4py, deepspeed or jinja2;
:func:`init_distributed` imports torch when called, and mpi4py is imported
only for an MPI launch that needs it.

Resolution, from an environment to a :class:`DistEnv` (:func:`explain`; here, not in a module
of its own: every rank lookup needs it, and each module costs the lookup ~1% of Python's start-up):

1. Pick the launcher: ``HPCDIST_LAUNCHER`` if set, else the first in
   :data:`~hpcdist.env.detectors.DETECTION_ORDER` that detects itself.
2. Read its variables; one it lacks leaves its field unknown, with why.
3. Refuse contradictions: every other variable that claims the same value
   (``RANK`` vs ``PMI_RANK``, ``LOCAL_RANK`` vs ``OMPI_COMM_WORLD_LOCAL_RANK``)
   must agree, unless the launcher is a process manager that sets them anew
   for the processes it starts (torchrun, DeepSpeed).
4. Fill what is still unknown: ``MASTER_ADDR`` if set, then what the
   environment implies (:mod:`.derive`: other launchers' variables, Slurm's
   tasks per node, the allocation's hosts), then node 0 and ``127.0.0.1``
   when all ranks share this node, then mpi4py discovery for an MPI launch,
   then, for the master alone, the allocation's first host (``$PBS_NODEFILE``).
   Ranks are never computed from node and local ranks.
5. ``MASTER_PORT`` if set, else derived from the job id (:mod:`.ports`).
6. Check the numbers against each other.

A field still unknown is None in the result, its source saying why and how
to supply it: only what needs that field fails (:meth:`DistEnv.value`).

``resolve(mapping)`` is a pure function of the mapping (plus the node files
the mapping names). mpi4py discovery runs only for the real process
environment, where it can ask MPI.
"""

# No `from __future__ import annotations` here, nor in the modules below: it imports
# __future__, ~2% of the rank lookup; annotations naming what is not imported are strings.
import os

from hpcdist.env import detectors as D
from hpcdist.env.model import (ALIASES, DEFAULT_PORT, LAUNCHERS, UNKNOWN, DistEnv, DistEnvError, EnvReader,
                               UndistributedWarning, in_a_job)

__all__ = [
    "LAUNCHERS",
    "DistEnv",
    "DistEnvError",
    "UndistributedWarning",
    "resolve",
    "explain",
    "current",
    "get_rank",
    "get_local_rank",
    "get_world_size",
    "get_local_world_size",
    "get_node_rank",
    "get_master_addr",
    "get_master_port",
    "detect_launcher",
    "export_torch_env",
    "init_distributed",
    "step",
    "phase",
    "restart_count",
    "NO_RESTART",
]

_current: DistEnv | None = None
#: The exit status with which the training says "do not restart me" (``sys.exit(NO_RESTART)``)
#: under ``--max-restarts``: a restart cannot mend what it found (a diverged loss, a corrupt data
#: set). sysexits' EX_CONFIG.
NO_RESTART = 78


def __getattr__(name: str):
    # step and phase, the rank's progress for `hpcdist watch`: imported when first asked for, so
    # that a rank's lookup alone does not load the recorder.
    if name in ("step", "phase"):
        from hpcdist import progress

        return getattr(progress, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def current() -> DistEnv:
    """This process's :class:`DistEnv`, resolved from ``os.environ`` on first use."""
    global _current
    if _current is None:
        _current = resolve()
    return _current


def get_rank() -> int:
    return current().value("rank")


def get_local_rank() -> int:
    return current().value("local_rank")


def get_world_size() -> int:
    return current().value("world_size")


def get_local_world_size() -> int:
    return current().value("local_world_size")


def get_node_rank() -> int:
    return current().value("node_rank")


def get_master_addr() -> str:
    return current().value("master_addr")


def get_master_port() -> int:
    return current().value("master_port")


def restart_count() -> int:
    """How many times the launch was restarted (``--max-restarts``: the job script's restarts, or
    the agents' own under an elastic torchrun or ``--launcher nvrx``, each agent counting its own:
    a node whose workers restarted for another node's failure may say 0): 0 on the first launch,
    and outside a job. A training that restarts goes on from its last checkpoint."""
    value = os.environ.get("HPCDIST_RESTART") or os.environ.get("TORCHELASTIC_RESTART_COUNT", "")
    return int(value) if value.isdigit() else 0


def detect_launcher() -> str:
    return current().launcher


def export_torch_env() -> DistEnv:
    """Put ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
    ``NODE_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` into ``os.environ``.

    After this, ``init_process_group("env://")``, DeepSpeed and accelerate
    work under mpirun and srun as they do under torchrun.
    """
    env = current()
    os.environ.update(env.torch_env())
    return env


def init_distributed(backend: str | None = None, timeout=None) -> DistEnv:
    """Export the torch variables and initialise the default process group.

    ``backend`` defaults to nccl when CUDA is usable, else gloo; the CUDA
    device is bound to the local rank first. ``timeout`` is a
    :class:`datetime.timedelta` or seconds. Returns the :class:`DistEnv`.
    An exception that ends this rank then also prints a one-line report
    (rank, host, time, error) that ``hpcdist logs`` uses to name the rank
    that failed first (:func:`hpcdist.failures.report_failures`).
    """
    from hpcdist.env.torch_init import init_distributed as _init
    from hpcdist.failures import report_failures
    from hpcdist.progress import phase

    with phase("rendezvous"):  # for `hpcdist watch`: a rank that waits here waits for its peers
        env = _init(export_torch_env(), backend=backend, timeout=timeout)
    report_failures(env)
    return env


def _reset() -> None:
    """Forget the cached answer (tests, and code that changed os.environ on purpose)."""
    global _current
    _current = None


# Resolution: the steps of the module docstring.

_RANK_FIELDS = ("rank", "world_size", "local_rank", "local_world_size")
#: The fields the environment may leave unknown (the port always has a default).
_KNOWABLE = _RANK_FIELDS + ("node_rank", "master_addr")


class Explanation:
    """How the answer was reached, for ``hpcdist env --explain``."""

    def __init__(self, consulted: dict[str, str | None]):
        #: (launcher, detected, markers looked at), in detection order, up to the winner.
        self.trace: list[tuple[str, bool, tuple[str, ...]]] = []
        #: Every variable read, with its value (None when unset).
        self.consulted = consulted
        self.warnings: list[str] = []


_warned: set[str] = set()


def resolve(environ: "Mapping[str, str] | None" = None) -> DistEnv:
    """Resolve ``environ`` (``os.environ`` when None). See the module docstring."""
    return explain(environ)[0]


def explain(environ: "Mapping[str, str] | None" = None) -> tuple[DistEnv, Explanation]:
    """This process's place in the job (:class:`DistEnv`) and how it was found (:class:`Explanation`:
    every variable read, the launcher chosen and why, each field's source), from ``environ`` (this
    process's environment by default). The launcher is chosen (``HPCDIST_LAUNCHER`` first, then
    each launcher's own variables), its values read and checked against the other launchers' and
    MPI's; a contradiction or a missing field is a :class:`DistEnvError` naming the variables."""
    real = environ is None or environ is os.environ
    env = EnvReader(os.environ if environ is None else environ)
    why = Explanation(consulted=env.consulted)
    launcher, launcher_source = _choose(env, why)
    reading = launcher.read(env)
    values = reading.values
    name = reading.launcher

    if not launcher.innermost_process_manager:
        _check_aliases(env, values, name)

    master = env.text("MASTER_ADDR")
    if master is not None:
        reading.put("master_addr", master, f"MASTER_ADDR={master}")
    missing = [f for f in _KNOWABLE if f not in values]
    # Here, not at the top: most launches say everything. One process is one node, whatever a
    # NODE_RANK meant for the processes it may start (Lightning's own launcher) says.
    if missing and name != "single":
        from hpcdist.env import derive

        derive.fill(env, reading)
    _validate(values)
    if missing:
        _one_node(values)
        missing = [f for f in _KNOWABLE if f not in values]
    if name == "single" and env.has_any("NODE_RANK", "GROUP_RANK"):
        from hpcdist.env import derive

        derive.stray_node_rank(env, reading)
        missing = [f for f in _KNOWABLE if f not in values]
    if missing and real and (name == "mpi4py" or env.has_any(*D.MPI_MARKERS)):
        from hpcdist.env.mpi_discovery import NoMpi4py

        try:
            name = _discover_into(values, name, _lacking(env, values, name, [f for f in missing if f in _RANK_FIELDS]))
        except NoMpi4py as e:  # the fields it would give stay unknown, with this reason
            from hpcdist.env import derive

            reading.unknown.update((f, "".join([str(e)] + [f"; or {way}" for way in derive.without_mpi(
                env, name, f)]) + ".") for f in missing)
        _one_node(values)
        _validate(values)  # again: discovery filled in more
        missing = [f for f in _KNOWABLE if f not in values]
    if "master_addr" in missing and name != "single":
        from hpcdist.env import derive

        # Neither the variables nor MPI say it: rank 0 runs on the allocation's first host.
        derive.first_host_master(env, reading)
        missing = [f for f in _KNOWABLE if f not in values]
    if missing:
        from hpcdist.env import derive

        # All reasons first: each reads the fields that are known.
        reasons = [UNKNOWN + derive.unknown_reason(env, reading, f, real) for f in missing]
        values.update((f, (None, reason)) for f, reason in zip(missing, reasons))
    values["master_port"] = _master_port(env)
    if name == "single":
        _warn_if_batch_step(env, why)
    sources = {f: src for f, (_, src) in values.items()}
    sources["launcher"] = launcher_source
    result = DistEnv(
        rank=values["rank"][0],
        local_rank=values["local_rank"][0],
        world_size=values["world_size"][0],
        local_world_size=values["local_world_size"][0],
        node_rank=values["node_rank"][0],
        master_addr=values["master_addr"][0],
        master_port=values["master_port"][0],
        launcher=name,
        sources=sources,
    )
    return result, why


def _choose(env: EnvReader, why: Explanation) -> tuple[D.Launcher, str]:
    forced = env.text("HPCDIST_LAUNCHER")
    if forced is not None:
        if forced not in D.BY_NAME:
            raise DistEnvError(
                f"HPCDIST_LAUNCHER={forced!r} is not a launcher hpcdist knows; use one of "
                f"{', '.join(LAUNCHERS)}, or unset it to detect the launcher."
            )
        why.trace.append((forced, True, ("HPCDIST_LAUNCHER",)))
        return D.BY_NAME[forced], f"HPCDIST_LAUNCHER={forced}"
    for launcher in D.DETECTION_ORDER:
        detected = launcher.detect(env)
        why.trace.append((launcher.name, detected, launcher.markers))
        if detected:
            if launcher.name == "single":
                return launcher, "no launcher variables found"
            return launcher, launcher.why(env)
    raise AssertionError("Single always detects")  # pragma: no cover


def _check_aliases(env: EnvReader, values: dict, launcher: str) -> None:
    for fld, names in ALIASES.items():
        if fld not in values:
            continue
        value, source = values[fld]
        for alias in names:
            other = env.integer(alias, D.MEANING[fld])
            if other is not None and other != value:
                raise DistEnvError(
                    f"contradictory {D.MEANING[fld]}: {source} ({launcher}) but {alias}={other}. "
                    f"One of them is stale, usually an `export {alias}=...` in the job script or "
                    f"a shell that was started inside another job; unset it, or set "
                    f"HPCDIST_LAUNCHER to the launcher that really started this process."
                )


def _lacking(env: EnvReader, values: dict, launcher: str, missing_rank: list[str]) -> str:
    from hpcdist.env.derive import PALS_PMIX_NO_WORLD, pals_pmix

    if missing_rank == ["world_size"] and pals_pmix(env, launcher):
        return PALS_PMIX_NO_WORLD
    if missing_rank:
        which = D.BARE_MPI.why(env) if launcher == D.BARE_MPI.name else launcher
        return f"this MPI launch ({which}) sets no {', '.join(D.MEANING[f] for f in missing_rank)}"
    lacking = [n for f, n in (("master_addr", "master address"), ("node_rank", "node rank")) if f not in values]
    return (
        f"this {launcher} run spans nodes ({values['world_size'][0]} ranks, "
        f"{values['local_world_size'][0]} on this node) and has no {' or '.join(lacking)}"
    )


def _discover_into(values: dict, launcher: str, reason: str) -> str:
    from hpcdist.env.mpi_discovery import discover

    found = discover(reason)
    for fld in ("rank", "world_size", "local_rank", "local_world_size", "node_rank", "master_addr"):
        value = getattr(found, fld)
        if fld in values:
            if fld in _RANK_FIELDS and values[fld][0] != value:
                raise DistEnvError(
                    f"{values[fld][1]} but MPI itself (mpi4py) says the {D.MEANING[fld]} is "
                    f"{value}: the variable belongs to another launch. Unset it."
                )
            continue
        rule = {
            "local_rank": "rank in MPI's shared-memory communicator (mpi4py)",
            "local_world_size": "size of MPI's shared-memory communicator (mpi4py)",
            "node_rank": "order of each node's lowest rank (mpi4py)",
            "master_addr": "host name of rank 0, broadcast (mpi4py)",
        }.get(fld, "MPI COMM_WORLD (mpi4py)")
        values[fld] = (value, rule)
    return launcher


def _one_node(values: dict) -> None:
    """All ranks on this node: node 0, and the master is this host."""
    if "world_size" in values and values["world_size"][0] == values.get("local_world_size", (None,))[0]:
        one_node = "one node: the local world size equals the world size"
        values.setdefault("node_rank", (0, one_node))
        values.setdefault("master_addr", ("127.0.0.1", one_node))


def _master_port(env: EnvReader) -> tuple[int, str]:
    port = env.integer("MASTER_PORT", "master port")
    if port is not None:
        # 0 is legal: torchrun passes it on (--master-port 0), and TCPStore binds any port.
        if port > 65535:
            raise DistEnvError(f"MASTER_PORT={port} is not a TCP port (0-65535).")
        return port, f"MASTER_PORT={port}"
    if in_a_job(env):
        # Here, not at the top: torchrun and most launches set MASTER_PORT.
        from hpcdist.env.job_id import job_id_from
        from hpcdist.ports import port_for_job

        job = job_id_from(env)
        if job is not None:
            return port_for_job(job[1]), f"derived from the job id {job[0]}={job[1]} (hpcdist.ports)"
    return DEFAULT_PORT, "torch's default (no MASTER_PORT, not in a job)"


def _warn_if_batch_step(env: EnvReader, why: Explanation) -> None:
    message = None
    tasks = env.first(("SLURM_NTASKS", "SLURM_NPROCS"), "number of tasks")
    # The batch step has SLURM_PROCID=0 (an salloc shell has none: left alone).
    if env.has("SLURM_PROCID") and tasks is not None and tasks[0] > 1:
        from hpcdist.schedulers.slurm.job import JOB_ID_VARIABLES

        message = (
            f"this process runs in Slurm job {env.get(JOB_ID_VARIABLES[0])}, which has {tasks[0]} "
            f"tasks ({tasks[1]}), but it is the batch step, not an srun task: it runs as one process (rank 0 of 1). "
            f"Start the training with srun (or torchrun, mpirun, deepspeed) to use all tasks."
        )
    # Tested by every lookup without a launcher, before any scheduler module is loaded: named here
    # as in pbs/job.py (tests/env/test_env_scheduler_names.py holds them equal).
    elif env.has("PBS_JOBID") and env.has("PBS_NODEFILE"):
        from hpcdist.allocation import AllocationError
        from hpcdist.schedulers.pbs.job import JOB_ID_VARIABLES, NODEFILE, nodefile_lines

        try:
            slots = len(nodefile_lines(env.text(NODEFILE)))
        except AllocationError:
            slots = 0
        if slots > 1:
            message = (
                f"this process runs in PBS job {env.get(JOB_ID_VARIABLES[0])}, whose {NODEFILE} lists "
                f"{slots} slots, but no launcher started it: it runs as one process (rank 0 of 1). "
                f"Start the training with mpirun, torchrun or deepspeed to use all slots."
            )
    if message is None:
        return
    why.warnings.append(message)
    if message not in _warned:
        import warnings

        _warned.add(message)
        warnings.warn(message, UndistributedWarning, stacklevel=4)


def _validate(values: dict) -> None:
    def v(f):
        return values[f][0]

    def s(f):
        return values[f][1]

    def has(*fields):
        return all(f in values for f in fields)

    problems = []
    if has("world_size") and v("world_size") < 1:
        problems.append(f"the world size is {v('world_size')} ({s('world_size')})")
    if has("local_world_size") and v("local_world_size") < 1:
        problems.append(f"the local world size is {v('local_world_size')} ({s('local_world_size')})")
    if has("rank", "world_size") and v("rank") >= v("world_size"):
        problems.append(
            f"rank {v('rank')} ({s('rank')}) is not below the world size "
            f"{v('world_size')} ({s('world_size')})"
        )
    if has("local_rank", "local_world_size") and v("local_rank") >= v("local_world_size"):
        problems.append(
            f"local rank {v('local_rank')} ({s('local_rank')}) is not below the number of "
            f"processes on this node {v('local_world_size')} ({s('local_world_size')})"
        )
    if has("local_world_size", "world_size") and v("local_world_size") > v("world_size"):
        problems.append(
            f"{v('local_world_size')} processes on this node ({s('local_world_size')}) but "
            f"only {v('world_size')} in all ({s('world_size')})"
        )
    if has("node_rank", "world_size") and v("node_rank") >= v("world_size"):
        problems.append(
            f"node rank {v('node_rank')} ({s('node_rank')}) is not below the world size "
            f"{v('world_size')} ({s('world_size')})"
        )
    if problems:
        raise DistEnvError(
            "the launcher variables do not fit together: " + "; ".join(problems)
            + ". They are probably left over from another launch: unset the stale ones."
        )
