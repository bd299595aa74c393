"""The job spec: one validated description of a job, before any script exists.

Values come, lowest to highest, from built-in defaults, a profile file and
command-line flags (:func:`build_spec` takes them already merged). Every
check that can fail before the queue fails here, with a
:class:`~hpcdist.validate.ValidationError` naming the flag, the value, the
rule and the fix; nothing is written before the spec is whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

from hpcdist import launchers, schedulers
from hpcdist import validate as v
from hpcdist.launchers import NAMES as LAUNCHERS
from hpcdist.launchers.deepspeed import DEEPSPEED_RUNNERS
from hpcdist.launchers.mpi import MPI_FLAVOURS

#: Time between the walltime warning and the walltime: enough to write a checkpoint of a
#: few GB to a parallel file system (Slurm may send its warning up to a minute early).
DEFAULT_SIGNAL_MARGIN_S = 300
#: Slurm's --signal takes at most 65535 seconds.
MAX_SIGNAL_MARGIN_S = 65535


@dataclass(frozen=True)
class JobSpec:
    script: str
    script_args: tuple[str, ...] = ()
    scheduler: str = "local"
    dialect: str | None = None  # pbs: "pro" or "torque"
    nodes: int = 1
    gpus_per_node: int = 0
    procs_per_node: int = 1  # one per GPU when GPUs are asked for
    cpus_per_proc: int | None = None
    mem_mb: int | None = None
    walltime_s: int | None = None
    queue: str | None = None
    account: str | None = None
    qos: str | None = None
    job_name: str = "job"
    output: str | None = None
    array: str | None = None
    dependency: str | None = None
    mail_user: str | None = None
    exclusive: bool = False
    directives: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    conda: str | None = None
    venv: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    propagate: tuple[str, ...] = ()
    launcher: str = "torchrun"
    #: torchrun: restarts of all workers after one fails; elastic: the fewest nodes to go on with.
    max_restarts: int = 0
    min_nodes: int | None = None
    #: Walltime and preemption: requeue (Slurm) or resubmit (PBS) at most this many times, after
    #: the training stopped on the warning sent ``signal_margin_s`` before the walltime.
    requeue: int = 0
    signal_margin_s: int | None = None
    deepspeed_config: str | None = None
    deepspeed_runner: str = "pdsh"
    no_ssh: bool = False
    ssh_port: int | None = None
    mpi: str = "openmpi"
    mpiexec: str | None = None  # the MPI launcher program; default mpirun (Open MPI) or mpiexec (MPICH)
    python: str = "python"
    template: str | None = None
    template_dir: str | None = None  # a folder whose <scheduler>/job.sh.j2 replaces ours
    #: What was understood from values that are easy to misread (walltime, memory).
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def total_procs(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def elastic(self) -> bool:
        """torchrun may go on with fewer nodes (down to ``min_nodes``) when one is lost."""
        return self.min_nodes is not None and self.min_nodes < self.nodes

    @property
    def stops_on_warning(self) -> bool:
        """The script asks the training to checkpoint and stop on the walltime warning."""
        return self.requeue > 0 or self.signal_margin_s is not None

    @property
    def signal_margin(self) -> int:
        return DEFAULT_SIGNAL_MARGIN_S if self.signal_margin_s is None else self.signal_margin_s

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: Flags as users type them, for error messages.
FLAG = {f: "--" + f.replace("_", "-") for f in (f.name for f in fields(JobSpec))}
FLAG.update(script="SCRIPT", script_args="ARGS", mem_mb="--mem", walltime_s="--walltime",
            env="--env", modules="--module", sources="--source", directives="--directive",
            mail_user="--mail", signal_margin_s="--signal-margin")


def value_checks(scheduler: str | None) -> dict:
    """The check of each value that needs no other value, by its key as given (``walltime``,
    not ``walltime_s``); each returns the value as the spec holds it. :func:`build_spec` runs
    them, and so do profiles (:mod:`hpcdist.profiles`) when a file is read, so that a mistake
    there names the key and the file. ``scheduler`` None: not known yet."""
    # The scheduler's own rules for job names and directives; a name that is not known yet: Slurm's.
    sched = schedulers.get(scheduler or "slurm")
    checks = {
        "scheduler": lambda x: v.check_choice(x, "--scheduler", schedulers.NAMES),
        "launcher": lambda x: v.check_choice(x, "--launcher", LAUNCHERS),
        "deepspeed_runner": lambda x: v.check_choice(x, "--deepspeed-runner", DEEPSPEED_RUNNERS),
        "mpi": lambda x: v.check_choice(x, "--mpi", MPI_FLAVOURS),
        "gpus_per_node": lambda x: v.check_positive(x, "--gpus-per-node", allow_zero=True),
        "walltime": lambda x: v.parse_walltime(str(x)),
        "mem": lambda x: v.parse_memory(str(x)),
        "signal_margin": lambda x: v.parse_walltime(str(x), "--signal-margin"),
        "job_name": lambda x: sched.check_job_name(str(x)),
        "array": lambda x: v.check_array(str(x), "--array"),
        "dependency": lambda x: v.check_dependency(str(x), "--dependency"),
        "mail_user": lambda x: v.check_mail(str(x), "--mail"),
        "output": lambda x: v.check_text(str(x), "--output"),
        "template": lambda x: v.check_word(str(x), "--template"),
        "template_dir": lambda x: v.check_word(str(x), "--template-dir"),
        # Each item of a list.
        "modules": lambda x: v.check_word(str(x), "--module"),
        "sources": lambda x: v.check_word(str(x), "--source"),
        "propagate": lambda x: v.check_env_name(str(x), "--propagate"),
        # (the local backend refuses any in build_spec, where the scheduler's rules run)
        "directives": (lambda x: sched.check_directive(str(x))) if scheduler and sched.queued
        else (lambda x: v.check_text(str(x), "--directive")),
    }
    for name in ("nodes", "procs_per_node", "cpus_per_proc", "ssh_port", "min_nodes"):
        checks[name] = lambda x, f=FLAG[name]: v.check_positive(x, f)
    for name in ("max_restarts", "requeue"):
        checks[name] = lambda x, f=FLAG[name]: v.check_positive(x, f, allow_zero=True)
    for name in ("queue", "account", "qos"):
        checks[name] = lambda x, f=FLAG[name]: v.check_name(str(x), f)
    # Values that become one word of a command: not empty, no leading '-'; programs also run by bash.
    for name in ("conda", "venv", "deepspeed_config"):
        checks[name] = lambda x, f=FLAG[name]: v.check_word(str(x), f)
    for name in ("python", "mpiexec"):
        checks[name] = lambda x, f=FLAG[name]: v.check_program(str(x), f)
    return checks


def build_spec(values: dict, *, check_files: bool = True) -> JobSpec:
    """A :class:`JobSpec` from merged values (strings as typed, or already typed).

    ``values`` keys are JobSpec field names, except ``mem``, ``walltime`` and
    ``signal_margin`` (as typed) instead of ``mem_mb``, ``walltime_s`` and
    ``signal_margin_s``; None means unset.
    """
    given = {k: val for k, val in values.items() if val is not None}
    unknown = set(given) - {f.name for f in fields(JobSpec)} - {"mem", "walltime", "signal_margin"}
    if unknown:
        raise TypeError(f"unknown job spec fields: {', '.join(sorted(unknown))}")
    out: dict = {}
    notes: list[str] = []

    out["scheduler"] = v.check_choice(given.get("scheduler", "local"), "--scheduler", schedulers.NAMES)
    scheduler = schedulers.get(out["scheduler"])
    check = value_checks(out["scheduler"])
    out["launcher"] = check["launcher"](given.get("launcher", "torchrun"))

    script = v.check_text(str(given.get("script", "")), "SCRIPT")
    if not script:
        raise v.ValidationError("SCRIPT", script, "no training script was given.", "Add the script path: hpcdist submit ... train.py")
    v.check_word(script, "SCRIPT")  # a script named -x would be read as the launcher's option
    if check_files and not os.path.isfile(script):
        raise v.ValidationError("SCRIPT", script, "does not exist (relative to the current directory).",
                                "Check the path; the job runs from the directory you submit from.")
    out["script"] = script
    out["script_args"] = tuple(v.check_text(str(a), "ARGS", allow_newline=True) for a in given.get("script_args", ()))

    for name in ("nodes", "procs_per_node", "cpus_per_proc", "ssh_port", "gpus_per_node"):
        if name in given:
            out[name] = check[name](given[name])
    gpus = out.get("gpus_per_node", 0)
    out.setdefault("procs_per_node", gpus or 1)
    if gpus and out["procs_per_node"] > gpus:
        raise v.ValidationError(
            "--procs-per-node", str(out["procs_per_node"]),
            f"is more than --gpus-per-node {gpus}: several processes would share a GPU.",
            "Use one process per GPU (leave --procs-per-node out), or ask for more GPUs.")

    if "walltime" in given:
        out["walltime_s"] = check["walltime"](given["walltime"])
        notes.append(f"walltime {given['walltime']!r} understood as {v.describe_walltime(out['walltime_s'])}")
    if "mem" in given:
        out["mem_mb"] = check["mem"](given["mem"])
        notes.append(f"memory {given['mem']!r} understood as {out['mem_mb']} MB per node")

    for name in ("queue", "account", "qos"):
        if name in given:
            out[name] = check[name](given[name])

    default_name = scheduler.suggest_job_name(os.path.basename(script))
    out["job_name"] = check["job_name"](given.get("job_name", default_name))
    # Values placed in directives: the scheduler's own grammar (no quoting needed), or quoted text;
    # values that become one word of a command.
    for name in ("array", "dependency", "mail_user", "output", "template",
                 "conda", "venv", "deepspeed_config", "python", "mpiexec"):
        if name in given:
            out[name] = check[name](given[name])
    for name in ("exclusive", "no_ssh"):
        if name in given:
            out[name] = bool(given[name])
    if "conda" in out and "venv" in out:
        raise v.ValidationError("--venv", out["venv"], "cannot be used together with --conda.", "Pick one environment.")
    if check_files and "deepspeed_config" in out and not os.path.isfile(out["deepspeed_config"]):
        raise v.ValidationError("--deepspeed-config", out["deepspeed_config"], "does not exist.", "Check the path.")
    if check_files and "template" in out and not os.path.isfile(out["template"]):
        raise v.ValidationError("--template", out["template"], "does not exist.", "Check the path.")
    if "template_dir" in given:
        out["template_dir"] = check["template_dir"](given["template_dir"])
        if check_files and not os.path.isdir(out["template_dir"]):
            raise v.ValidationError("--template-dir", out["template_dir"], "is not a folder.", "Check the path.")

    out["modules"] = tuple(check["modules"](m) for m in given.get("modules", ()))
    # bash looks a name without a slash up in $PATH before the current folder (`source
    # setup.sh` could read /usr/bin/setup.sh): a file here is named as one.
    out["sources"] = tuple(s if "/" in s else "./" + s
                           for s in (check["sources"](s) for s in given.get("sources", ())))
    env = given.get("env", ())
    pairs = env.items() if isinstance(env, dict) else (
        v.parse_env_assignment(e) if isinstance(e, str) else tuple(e) for e in env)
    out["env"] = tuple((v.check_env_settable(k), v.check_text(str(val), "--env", allow_newline=True)) for k, val in pairs)
    out["propagate"] = tuple(check["propagate"](n) for n in given.get("propagate", ()))
    out["directives"] = tuple(check["directives"](d) for d in given.get("directives", ()))

    out["deepspeed_runner"] = check["deepspeed_runner"](given.get("deepspeed_runner", "pdsh"))
    out["mpi"] = check["mpi"](given.get("mpi", "openmpi"))
    _check_restarts(given, out, check)
    # The launcher's rules (srun only under Slurm, DeepSpeed's runners, torchrun's settings) and
    # the scheduler's (dialect, QOS, directives, log path, elastic agents, requeue), once every
    # value they tie together is checked; the scheduler's sets the dialect.
    launchers.get(out["launcher"]).check(out)
    scheduler.check(out, given)
    return JobSpec(**out, notes=tuple(notes))


def _check_restarts(given: dict, out: dict, check: dict) -> None:
    """torchrun's restarts and elastic size; requeue after the walltime warning."""
    for name in ("max_restarts", "requeue", "min_nodes"):
        if name in given:
            out[name] = check[name](given[name])
    if "min_nodes" in out and out["min_nodes"] > out.get("nodes", 1):
        raise v.ValidationError("--min-nodes", str(out["min_nodes"]), f"is more than --nodes {out.get('nodes', 1)}.",
                                "Give the fewest nodes the training may go on with, at most --nodes.")
    if "signal_margin" in given:
        out["signal_margin_s"] = check["signal_margin"](given["signal_margin"])
        if out["signal_margin_s"] > MAX_SIGNAL_MARGIN_S:
            raise v.ValidationError("--signal-margin", str(given["signal_margin"]),
                                    f"is more than Slurm's limit of {MAX_SIGNAL_MARGIN_S} seconds.",
                                    "Ask for a warning at most 18 hours before the walltime.")
    if not (out.get("requeue") or "signal_margin_s" in out):
        return
    margin = out.get("signal_margin_s", DEFAULT_SIGNAL_MARGIN_S)
    walltime = out.get("walltime_s")
    if walltime is not None and margin >= walltime:
        raise v.ValidationError("--signal-margin", v.describe_walltime(margin),
                                f"is not shorter than --walltime {v.describe_walltime(walltime)}: the warning "
                                "to checkpoint would come before the training starts.",
                                "Ask for a longer walltime, or a shorter --signal-margin (e.g. 2m).")
