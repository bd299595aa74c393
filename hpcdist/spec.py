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

from hpcdist import validate as v
from hpcdist.options import (  # noqa: F401 (the choices' names, as imported from here before)
    BY_NAME, DEEPSPEED_RUNNERS, FLAG, LAUNCHERS, MPI_FLAVOURS, OPTIONS, REQUIRED, SCHEDULERS, value_checks)

#: Time between the walltime warning and the walltime: enough to write a checkpoint of a
#: few GB to a parallel file system (Slurm may send its warning up to a minute early).
DEFAULT_SIGNAL_MARGIN_S = 300
#: Slurm's --signal takes at most 65535 seconds.
MAX_SIGNAL_MARGIN_S = 65535


def _option_fields(cls):
    """The options of :data:`hpcdist.options.OPTIONS` as ``cls``'s first fields, in the
    table's order, with their types and defaults; the class's own fields follow."""
    own = cls.__dict__.get("__annotations__", {})
    cls.__annotations__ = {**{o.name: o.held for o in OPTIONS}, **own}
    for o in OPTIONS:
        if o.default is not REQUIRED:
            setattr(cls, o.name, o.default)
    return cls


@dataclass(frozen=True)
@_option_fields
class JobSpec:
    """One job, every value checked; its fields are the job options (:mod:`hpcdist.options`)."""

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


#: The keys build_spec takes: each option's as given, and (as before) JobSpec's field names.
_ACCEPTED = frozenset({o.key for o in OPTIONS} | {f.name for f in fields(JobSpec)})


def build_spec(values: dict, *, check_files: bool = True) -> JobSpec:
    """A :class:`JobSpec` from merged values (strings as typed, or already typed).

    ``values`` keys are JobSpec field names, except ``mem``, ``walltime`` and
    ``signal_margin`` (as typed) instead of ``mem_mb``, ``walltime_s`` and
    ``signal_margin_s``; None means unset.
    """
    given = {k: val for k, val in values.items() if val is not None}
    unknown = set(given) - _ACCEPTED
    if unknown:
        raise TypeError(f"unknown job spec fields: {', '.join(sorted(unknown))}")
    # Each value alone, by the table's checks; the scheduler first, as some of them depend on it.
    scheduler = BY_NAME["scheduler"].checked(given.get("scheduler", "local"), None)
    out: dict = {"scheduler": scheduler}
    for o in OPTIONS:
        # The script is checked when missing too: its check says so.
        if o.check is not None and o.name != "scheduler" and (o.key in given or o.default is REQUIRED):
            out[o.name] = o.checked(given.get(o.key, ""), scheduler)
    notes = []
    if "walltime" in given:
        notes.append(f"walltime {given['walltime']!r} understood as {v.describe_walltime(out['walltime_s'])}")
    if "mem" in given:
        notes.append(f"memory {given['mem']!r} understood as {out['mem_mb']} MB per node")

    # Defaults that follow from other values, and those the rules below read.
    out.setdefault("procs_per_node", out.get("gpus_per_node", 0) or 1)
    if "job_name" not in out:
        out["job_name"] = BY_NAME["job_name"].checked(
            v.suggest_job_name(os.path.basename(out["script"]), scheduler), scheduler)
    for name in ("launcher", "deepspeed_runner", "mpi"):
        out.setdefault(name, BY_NAME[name].default)

    _scheduler_rules(out, given)
    _launcher_rules(out, given)
    _rules(out, given, check_files)
    return JobSpec(**out, notes=tuple(notes))


def _scheduler_rules(out: dict, given: dict) -> None:
    """What the scheduler allows (one call to the scheduler's own check at the merge)."""
    scheduler = out["scheduler"]
    out["dialect"] = v.check_dialect(scheduler, given.get("dialect"))
    if "qos" in out and scheduler == "pbs":
        raise v.ValidationError("--qos", out["qos"], "PBS has no QOS; it uses queues.", "Use --queue instead.")
    if scheduler == "slurm" and '"' in out.get("output", ""):
        raise v.ValidationError("--output", out["output"], "sbatch cannot read a double quote in an #SBATCH value.",
                                "Choose a log path without '\"'.")
    if scheduler == "local" and given.get("directives"):
        raise v.ValidationError("--directive", str(given["directives"][0]),
                                "the local backend has no scheduler to read it.",
                                "Drop it, or submit with --scheduler slurm or pbs.")
    if scheduler != "local":
        v.check_gpu_directives(scheduler, out["dialect"], out.get("gpus_per_node", 0), list(out.get("directives", ())))
    if out.get("min_nodes") and scheduler != "slurm":
        raise v.ValidationError("--min-nodes", str(out["min_nodes"]),
                                f"needs --scheduler slurm: under {scheduler} the node agents are started so "
                                "that one agent's end ends them all.",
                                "Use --max-restarts alone (workers restart on the same nodes), or Slurm.")
    if scheduler == "local" and (out.get("requeue") or "signal_margin_s" in out):
        flag = "--requeue" if out.get("requeue") else "--signal-margin"
        raise v.ValidationError(flag, str(given.get("requeue") or given.get("signal_margin")),
                                "the local backend has no walltime and no queue to go back to.",
                                "Submit with --scheduler slurm or pbs, or leave it out.")


def _launcher_rules(out: dict, given: dict) -> None:
    """What the launcher allows (one call to the launcher's own check at the merge)."""
    launcher, scheduler = out["launcher"], out["scheduler"]
    if launcher == "srun" and scheduler != "slurm":
        raise v.ValidationError(
            "--launcher", "srun", f"srun starts tasks only inside a Slurm job, not under {scheduler}.",
            "Use --launcher torchrun or mpirun, or --scheduler slurm.")
    if out["deepspeed_runner"] == "slurm" and scheduler != "slurm":
        raise v.ValidationError("--deepspeed-runner", "slurm", "needs --scheduler slurm.", "Use pdsh or openmpi.")
    if (launcher == "deepspeed" and out["deepspeed_runner"] == "pdsh" and not out.get("no_ssh")
            and out.get("nodes", 1) > 1 and scheduler != "local"):
        for name, value in out.get("env", ()):
            # DeepSpeed's pdsh runner re-exports variables on the other nodes inside
            # double quotes, where $, `, " and \ would be expanded or break the line.
            bad = next((c for c in '$`"\\\n' if c in value), None)
            if bad is not None:
                raise v.ValidationError(
                    "--env", f"{name}={value}",
                    f"DeepSpeed's pdsh runner passes variables to the other nodes inside double "
                    f"quotes, where {bad!r} would be expanded or break the command.",
                    "Use --deepspeed-runner openmpi, or --no-ssh, for values like this.")
    for name in ("max_restarts", "min_nodes"):
        if out.get(name) and launcher != "torchrun":
            raise v.ValidationError(FLAG[name], str(out[name]), f"is a torchrun setting; the launcher is {launcher}.",
                                    f"Use --launcher torchrun, or leave {FLAG[name]} out.")


def _rules(out: dict, given: dict, check_files: bool) -> None:
    """The rules that tie options together, whatever the scheduler and launcher; files exist."""
    gpus = out.get("gpus_per_node", 0)
    if gpus and out["procs_per_node"] > gpus:
        raise v.ValidationError(
            "--procs-per-node", str(out["procs_per_node"]),
            f"is more than --gpus-per-node {gpus}: several processes would share a GPU.",
            "Use one process per GPU (leave --procs-per-node out), or ask for more GPUs.")
    if "conda" in out and "venv" in out:
        raise v.ValidationError("--venv", out["venv"], "cannot be used together with --conda.", "Pick one environment.")
    if check_files:
        if not os.path.isfile(out["script"]):
            raise v.ValidationError("SCRIPT", out["script"], "does not exist (relative to the current directory).",
                                    "Check the path; the job runs from the directory you submit from.")
        if "deepspeed_config" in out and not os.path.isfile(out["deepspeed_config"]):
            raise v.ValidationError("--deepspeed-config", out["deepspeed_config"], "does not exist.", "Check the path.")
        if "template" in out and not os.path.isfile(out["template"]):
            raise v.ValidationError("--template", out["template"], "does not exist.", "Check the path.")
        if "template_dir" in out and not os.path.isdir(out["template_dir"]):
            raise v.ValidationError("--template-dir", out["template_dir"], "is not a folder.", "Check the path.")
    _check_restarts(out, given)


def _check_restarts(out: dict, given: dict) -> None:
    """torchrun's elastic size; the walltime warning against the walltime."""
    if "min_nodes" in out and out["min_nodes"] > out.get("nodes", 1):
        raise v.ValidationError("--min-nodes", str(out["min_nodes"]), f"is more than --nodes {out.get('nodes', 1)}.",
                                "Give the fewest nodes the training may go on with, at most --nodes.")
    # Slurm's limit, refused under PBS too; not in the table's check, so that a profile's
    # value is refused here, as the flag, as before.
    if out.get("signal_margin_s", 0) > MAX_SIGNAL_MARGIN_S:
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
