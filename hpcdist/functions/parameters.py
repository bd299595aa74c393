"""submitit's parameters for PBS, and how each becomes one of hpcdist's job options.

Pure: no scheduler is asked, nothing is imported beyond the standard library. The executor
(:mod:`hpcdist.functions.executor`) builds the job spec from :func:`job_options`; the job
environment (:mod:`hpcdist.functions.environment`) reads the ids with :func:`id_in_job`.

The parameters (``update_parameters``; with ``AutoExecutor``, the PBS ones take the prefix
``pbs_``: ``pbs_queue="debug"``, ``pbs_profile="polaris"``):

- submitit's own: ``name``, ``timeout_min``, ``nodes``, ``tasks_per_node``, ``cpus_per_task``,
  ``gpus_per_node``, ``mem_gb``, ``stderr_to_stdout``;
- PBS's: ``queue``, ``account``, ``project``, ``dialect`` (``pro`` or ``torque``), ``profile`` (a
  profile or site preset, as ``hpcdist submit --profile``), ``launcher`` (what starts several tasks:
  ``torchrun``, the default, or ``mpirun``), ``signal_delay_s`` (the walltime warning's margin),
  ``setup`` (shell lines before the tasks), ``python``, ``max_array_size`` (the array cap, where the
  server does not say it), ``array_parallelism`` (at most that many subjobs of a map at once, as
  on Slurm: ``--array 0-24%N``), and ``options``: any other hpcdist job option, by the name
  ``hpcdist.submit()`` takes (``{"exclusive": True, "modules": ["cuda"]}``).

Job ids: submitit names a job by the PBS sequence number (``123``), a subjob of an array by the
array's and its index (``123_4``), on the login node and in the job alike (PBS prints ``123.server``
and ``123[].server``, and the job sees ``PBS_JOBID=123[4].server``); the full ids stay in hpcdist's
job folder, from which qstat and qdel are asked.
"""

from __future__ import annotations

import re

#: submitit's generic parameters -> this executor's (AutoExecutor renames them with it).
EQUIVALENCE = {
    "name": "job_name",
    "timeout_min": "timeout_min",
    "mem_gb": "mem_gb",
    "nodes": "nodes",
    "cpus_per_task": "cpus_per_task",
    "gpus_per_node": "gpus_per_node",
    "tasks_per_node": "tasks_per_node",
}

#: Every parameter and its default (None: hpcdist's, or the profile's).
DEFAULTS = {
    "job_name": "submitit",
    "timeout_min": None,
    "nodes": 1,
    "tasks_per_node": 1,
    "cpus_per_task": None,
    "gpus_per_node": None,
    "mem_gb": None,
    "stderr_to_stdout": False,
    "queue": None,
    "account": None,
    "project": None,
    "dialect": None,
    "profile": None,
    "launcher": None,
    "signal_delay_s": None,
    "setup": None,
    "python": None,
    "max_array_size": None,
    "array_parallelism": None,
    "options": None,
}

#: What the job runs when no timeout_min is given and the profile sets no walltime: submitit's
#: Slurm executor's default.
DEFAULT_TIMEOUT_MIN = 5
#: The walltime warning's margin, as submitit's Slurm executor's signal_delay_s.
DEFAULT_SIGNAL_DELAY_S = 90
#: The launchers that start every task on every node (one task alone runs with none).
TASK_LAUNCHERS = ("torchrun", "mpirun")
#: Options the executor itself sets: given in ``options`` they would be overridden.
OWN_OPTIONS = ("scheduler", "script", "script_args", "array", "requeue", "launcher", "python", "job_name")

#: The variables the job script exports for the tasks (environment.py reads them).
EXECUTOR_VARIABLE = "SUBMITIT_EXECUTOR"
#: The first run's PBS_JOBID: a job that resubmitted itself after the walltime warning goes on
#: under a new PBS id, and its tasks must find the pickles of the id submitit knows.
FIRST_ID_VARIABLE = "SUBMITIT_PBS_JOB_ID"
STDERR_VARIABLE = "SUBMITIT_PBS_STDERR_TO_STDOUT"


class ParameterError(ValueError):
    """A parameter submitit's PBS executor cannot take: its name, its value and the fix."""


def check_names(given: dict) -> None:
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        listed = "\n  - ".join(f"{name} (default: {DEFAULTS[name]!r})" for name in sorted(DEFAULTS))
        raise ParameterError(f"Unavailable parameter(s): {unknown} (the PBS executor has no such parameter). "
                             f"Valid parameters are:\n  - {listed}\nAny other hpcdist job option goes in "
                             f"options={{...}} (pbs_options with AutoExecutor).")


def _whole(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ParameterError(f"{name}={value!r}: a whole number of at least {least} is needed; give one "
                             f"(e.g. {name}={max(least, 1)}).")
    return value


def total_tasks(params: dict) -> int:
    return _whole("nodes", params.get("nodes", 1), 1) * _whole("tasks_per_node", params.get("tasks_per_node", 1), 1)


def launcher_of(params: dict, launchers: tuple = TASK_LAUNCHERS) -> str:
    """``none`` for one task (it runs in the batch shell), else the launcher that starts every
    task on every node: ``launcher``, else the first of ``launchers`` (those the job's python
    has: torchrun comes with torch, mpirun with an MPI)."""
    chosen = params.get("launcher")
    if chosen is not None and chosen not in TASK_LAUNCHERS:
        raise ParameterError(f"launcher={chosen!r}: the PBS executor starts several tasks with "
                             f"{' or '.join(TASK_LAUNCHERS)}; use one of them, or leave launcher out (torchrun).")
    if total_tasks(params) == 1:
        return "none"
    if chosen is None and not launchers:
        asked = f"nodes={params.get('nodes', 1)}, tasks_per_node={params.get('tasks_per_node', 1)}"
        raise ParameterError(f"{asked}: several tasks need a launcher, and this python has "
                             f"neither torchrun (pip install torch) nor mpirun on PATH (an MPI: "
                             f"module load openmpi); install one, or run one task (nodes=1, "
                             f"tasks_per_node=1).")
    return chosen or launchers[0]


def _memory(mem_gb) -> str:
    if isinstance(mem_gb, bool) or not isinstance(mem_gb, (int, float)) or mem_gb <= 0:
        raise ParameterError(f"mem_gb={mem_gb!r}: the memory of each node in GB, more than 0, is needed "
                             f"(e.g. mem_gb=16).")
    return f"{int(round(mem_gb * 1024))}M"


def job_options(params: dict, *, task: str, folder: str, python: str | None, count: int | None = None,
                profile: dict | None = None, max_num_timeout: int = 3, venv: str | None = None,
                launchers: tuple = TASK_LAUNCHERS) -> dict:
    """The options of ``hpcdist.submit()`` (hpcdist.submission.profiles.build) for ``params``:
    the job that runs ``task`` (the program of :mod:`hpcdist.functions.task`) with ``folder`` on
    every task, once, or as an array of ``count`` subjobs (indices 0..count-1). ``profile``: the
    profile's values, under these (its walltime, its launcher where it is one of
    :data:`TASK_LAUNCHERS`, its python or environment where it names one). The job's python:
    the ``python`` parameter, else the profile's environment, else ``venv`` (the login node's
    virtual environment, activated as ``--venv`` does: torchrun is found beside its python), else
    ``python``. ``launchers``: those that can start several tasks, the default first."""
    check_names(params)
    profile = profile or {}
    options = dict(params.get("options") or {})
    profile_walltime = bool(profile.get("walltime") or options.get("walltime"))
    if params.get("launcher") is None and profile.get("launcher") in TASK_LAUNCHERS:
        params = {**params, "launcher": profile["launcher"]}
    clash = sorted(set(options) & set(OWN_OPTIONS))
    if clash:
        raise ParameterError(f"options={{{clash[0]!r}: ...}}: the PBS executor sets {clash[0]} itself; "
                             f"remove it from options (the executor's own parameters say what they set).")
    env = options.pop("env", None) or {}
    if not isinstance(env, dict):
        raise ParameterError(f"options={{'env': {env!r}}}: give the variables as a dict, e.g. {{'env': {{'A': '1'}}}}.")
    env = {**env, EXECUTOR_VARIABLE: "pbs"}
    if params.get("stderr_to_stdout"):
        env[STDERR_VARIABLE] = "1"
    out = {**options, "scheduler": "pbs", "launcher": launcher_of(params, launchers),
           "script": task,
           "script_args": [folder], "job_name": params.get("job_name") or "submitit",
           "env": [f"{name}={value}" for name, value in env.items()],
           "env_expand": [*options.get("env_expand", ()),
                          f"{FIRST_ID_VARIABLE}=${{{FIRST_ID_VARIABLE}:-$PBS_JOBID}}"]}
    if params.get("python") is not None:
        out["python"] = params["python"]
    elif any(profile.get(key) for key in ("python", "venv", "conda")) or options.get("venv") or options.get("conda"):
        pass  # the profile's (or the options') environment gives the job its python
    elif venv is not None:
        out["venv"] = venv
    elif python is not None:
        out["python"] = python
    out["nodes"] = _whole("nodes", params.get("nodes", 1), 1)
    out["procs_per_node"] = _whole("tasks_per_node", params.get("tasks_per_node", 1), 1)
    for name, option in (("cpus_per_task", "cpus_per_proc"), ("gpus_per_node", "gpus_per_node")):
        if params.get(name) is not None:
            out[option] = _whole(name, params[name], 1 if name == "cpus_per_task" else 0)
    if params.get("mem_gb") is not None:
        out["mem"] = _memory(params["mem_gb"])
    for name in ("queue", "account", "project", "dialect", "setup"):  # as hpcdist's options of that name
        if params.get(name) is not None:
            out[name] = params[name]
    timeout = params.get("timeout_min")
    if timeout is None and not profile_walltime:
        timeout = DEFAULT_TIMEOUT_MIN
    if timeout is not None:
        out["walltime"] = f"{_whole('timeout_min', timeout, 1)}m"
    if count is not None and count > 1:
        out["array"] = f"0-{count - 1}"
        if params.get("array_parallelism") is not None:  # at most N subjobs at once: --array's 0-24%N
            out["array"] += f"%{_whole('array_parallelism', params['array_parallelism'], 1)}"
    elif "walltime" in out or profile_walltime:
        # The walltime warning, for a Checkpointable function: checkpoint, then go on as a new job
        # (an array's subjobs are not resubmitted one by one: they run to their walltime).
        out["requeue"] = _whole("max_num_timeout", max_num_timeout, 0)
        margin = params.get("signal_delay_s")
        if margin is None:  # 90 s, as submitit asks of Slurm; a quarter of a short walltime
            margin = min(DEFAULT_SIGNAL_DELAY_S, timeout * 15) if timeout is not None else DEFAULT_SIGNAL_DELAY_S
        out["signal_margin"] = f"{_whole('signal_delay_s', margin, 1)}s"
    return out


_SEQUENCE = re.compile(r"(?:[0-9]+:)?([0-9]+)(?:\[([0-9]*)\])?(?:[.-].*)?", re.S)


def sequence(pbs_id: str) -> str:
    """``123`` of ``123.server``, ``123[].server``, ``123[4].server`` or ``0:123.server``."""
    m = _SEQUENCE.fullmatch(pbs_id.strip())
    if m is None:
        raise ParameterError(f"PBS job id {pbs_id!r}: expected 123.server or 123[].server")
    return m.group(1)


def submitit_id(pbs_id: str, index: int | None = None) -> str:
    """The id submitit knows a job by: ``123``, or ``123_4`` for subjob 4 of array ``123[]``."""
    return sequence(pbs_id) if index is None else f"{sequence(pbs_id)}_{index}"


def subjob_id(array_id: str, index: int) -> str:
    """PBS's id of subjob ``index`` of ``123[].server``: ``123[4].server``."""
    if "[]" not in array_id:
        raise ParameterError(f"PBS job id {array_id!r} is not an array's (123[].server)")
    return array_id.replace("[]", f"[{index}]", 1)


def id_in_job(environ, index_variables=("PBS_ARRAY_INDEX", "PBS_ARRAYID")) -> tuple[str, str | None, str | None]:
    """Inside the job: (submitit's id, the array's sequence or None, the subjob's index or None).
    The id is the first run's (``SUBMITIT_PBS_JOB_ID``) where the job resubmitted itself."""
    first = environ.get(FIRST_ID_VARIABLE) or environ.get("PBS_JOBID", "")
    if not first:
        raise ParameterError("PBS_JOBID is not set: submitit's PBS job environment is read inside a PBS job only")
    index = next((environ[name] for name in index_variables if environ.get(name)), None)
    if index is None:  # PBS Pro's subjob id carries its index too: 123[4].server
        m = _SEQUENCE.fullmatch(first)
        index = m.group(2) if m and m.group(2) else None
    seq = sequence(first)
    if index is None:
        return seq, None, None
    return f"{seq}_{int(index)}", seq, str(int(index))
