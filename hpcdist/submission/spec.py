"""The job spec: one validated description of a job, before any script exists.

Values come, lowest to highest, from built-in defaults, a profile file and
command-line flags (:func:`build_spec` takes them already merged). Every
check that can fail before the queue fails here, with a
:class:`~hpcdist.validate.ValidationError` naming the flag, the value, the
rule and the fix; nothing is written before the spec is whole.
"""

from __future__ import annotations

import os
import re

from hpcdist import containers, launchers
from hpcdist.schedulers import registry as schedulers
from hpcdist import validate as v
from hpcdist.frozen import DataclassFields, Frozen
from hpcdist.submission.options import BY_NAME, OPTIONS, REQUIRED
from hpcdist.shell import Shell, quote

#: Time between the walltime warning and the walltime: enough to write a checkpoint of a
#: few GB to a parallel file system (Slurm may send its warning up to a minute early).
DEFAULT_SIGNAL_MARGIN_S = 300
#: Slurm's --signal takes at most 65535 seconds.
MAX_SIGNAL_MARGIN_S = 65535


#: JobSpec's fields: the options, in the table's order, then ``notes``.
_FIELDS = tuple(o.name for o in OPTIONS) + ("notes",)
#: The fields equality and hash look at: all but ``notes``.
_COMPARED = _FIELDS[:-1]
_DEFAULTS = {**{o.name: o.default for o in OPTIONS if o.default is not REQUIRED}, "notes": ()}


class JobSpec(Frozen):
    """One job, every value checked; its fields are the job options (:mod:`hpcdist.submission.options`).

    A frozen dataclass in all but its making (:mod:`hpcdist.frozen`): keyword or positional
    fields in the table's order, defaults as class attributes, equality and hash over the
    options, a repr of every field, immutable, and ``dataclasses.fields``, ``asdict`` and
    ``replace`` work on it.
    """

    __annotations__ = {o.name: o.held for o in OPTIONS}
    __match_args__ = _FIELDS
    __dataclass_fields__ = DataclassFields()
    __dataclass_params__ = DataclassFields()
    _compared = _COMPARED
    #: What was understood from values that are easy to misread (walltime, memory).
    notes: tuple[str, ...]

    # What a launcher asks of the job's scheduler, on the spec it is handed (launchers import none).
    @property
    def one_host(self) -> bool:
        """Every "node" of the job is this one host (the local backend)."""
        return schedulers.get(self.scheduler).one_host

    @property
    def runs_srun(self) -> bool:
        """The scheduler starts tasks with srun (Slurm)."""
        return schedulers.get(self.scheduler).runs_srun

    @classmethod
    def _dataclass_twin(cls, dataclasses):
        return dataclasses.make_dataclass(cls.__name__, [
            (name, cls.__annotations__[name], dataclasses.field(
                **({} if name not in _DEFAULTS else {"default": _DEFAULTS[name]}),
                compare=name in _COMPARED))
            for name in _FIELDS], frozen=True)

    def __init__(self, *args, **kwargs):
        if len(args) > len(_FIELDS):
            raise TypeError(f"JobSpec.__init__() takes from 2 to {len(_FIELDS) + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        values = dict(zip(_FIELDS, args))
        for name, value in kwargs.items():
            if name not in _FIELDS:
                raise TypeError(f"JobSpec.__init__() got an unexpected keyword argument {name!r}")
            if name in values:
                raise TypeError(f"JobSpec.__init__() got multiple values for argument {name!r}")
            values[name] = value
        missing = [name for name in _FIELDS if name not in values and name not in _DEFAULTS]
        if missing:
            raise TypeError(f"JobSpec.__init__() missing {len(missing)} required positional argument"
                            f"{'s' if len(missing) > 1 else ''}: {' and '.join(map(repr, missing))}")
        self.__dict__.update((name, values[name] if name in values else _DEFAULTS[name]) for name in _FIELDS)

    def __repr__(self):
        return f"{type(self).__qualname__}({', '.join(f'{name}={self.__dict__[name]!r}' for name in _FIELDS)})"

    @property
    def total_procs(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def cpus_per_node(self) -> int:
        """The CPUs a node's processes are given (one each unless ``cpus_per_proc`` says)."""
        return self.procs_per_node * (self.cpus_per_proc or 1)

    @property
    def allocated_nodes(self) -> int:
        """The nodes asked of the scheduler: the launch's and its spares."""
        return self.nodes + self.spare_nodes

    @property
    def excluded_nodes(self) -> list:
        """The nodes --exclude-nodes names, each once, in order."""
        return list(dict.fromkeys(n for names in self.exclude_nodes for n in names.split(",")))

    @property
    def srun_restart_words(self) -> list:
        """srun's words for a launch that restarts: ``--overlap``, as a failed launch's step may hold
        the nodes' CPUs until Slurm hears from its lost node (minutes: "step creation temporarily
        disabled"); and where the allocation has spares, the set-up's node list, as srun left to
        choose may take a spare, or a node a restart left out."""
        words = ["--overlap"] if self.restarts_launch else []
        listed = self.spare_nodes or self.shrinks  # the launch's nodes are not all the allocation's
        return words + ([Shell('--nodelist="$HPCDIST_NODEFILE"')] if listed else [])

    @property
    def restarts_launch(self) -> bool:
        """The job script starts the launch again when it fails (hpcdist.injob.restart)."""
        # nvrx: ft_launcher's own restarts (hpcdist.launchers.nvrx).
        return self.max_restarts > 0 and self.launcher != "nvrx"

    @property
    def elastic(self) -> bool:
        """torchrun's elastic size (``--nnodes=MIN:MAX``): ``--min-nodes`` without restarts. With
        ``--max-restarts`` the job script's restarts win: :attr:`shrinks`."""
        return self.min_nodes is not None and self.min_nodes < self.nodes and not self.max_restarts

    @property
    def shrinks(self) -> bool:
        """A restart may go on with fewer nodes (down to ``min_nodes``) when no spare is left: the
        launch's counts are then the set-up's (``$HPCDIST_NNODES``), not numbers: :meth:`count`."""
        return self.min_nodes is not None and self.min_nodes < self.nodes and self.restarts_launch

    def count(self, flag: str = "", per_node: int = 1) -> Shell:
        """``flag`` and the launch's nodes times ``per_node`` (``--nnodes=2``), as one shell word; in
        a job that may go on with fewer nodes, the count of the nodes the set-up chose."""
        if not self.shrinks:
            return Shell(f"{flag}{self.nodes * per_node}")
        if per_node == 1:
            return Shell(f'{flag}"$HPCDIST_NNODES"')
        return Shell(f'{flag}"$((HPCDIST_NNODES * {per_node}))"')

    @property
    def stops_on_warning(self) -> bool:
        """The script asks the training to checkpoint and stop on the walltime warning."""
        return self.requeue > 0 or self.signal_margin_s is not None

    @property
    def signal_margin(self) -> int:
        return DEFAULT_SIGNAL_MARGIN_S if self.signal_margin_s is None else self.signal_margin_s

    def as_dict(self) -> dict:
        return {name: self.__dict__[name] for name in _FIELDS}

    def replace(self, **changes) -> "JobSpec":
        """``dataclasses.replace(self, **changes)`` without making the dataclass twin (its code is
        generated and compiled: a third of a first submit's cost past jinja2, in a submitit
        user's process)."""
        return type(self)(**{**self.as_dict(), **changes})


for _name, _default in _DEFAULTS.items():  # as a dataclass has them
    setattr(JobSpec, _name, _default)
del _name, _default

#: The keys build_spec takes: each option's as given, and (as before) JobSpec's field names.
_ACCEPTED = frozenset({o.key for o in OPTIONS} | set(_FIELDS))


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
        notes.append(f"memory {given['mem']!r} understood as " + (f"{out['mem_mb']} MB per node" if out["mem_mb"]
                                                                 else "all of each node's memory"))

    # Defaults that follow from other values, and those the rules below read.
    out.setdefault("procs_per_node", out.get("gpus_per_node", 0) or 1)
    if "job_name" not in out:
        out["job_name"] = BY_NAME["job_name"].checked(
            schedulers.get(scheduler).suggest_job_name(os.path.basename(out["script"])), scheduler)
    for name in ("launcher", "deepspeed_runner", "mpi"):
        out.setdefault(name, BY_NAME[name].default)

    # A setting whose owner was not chosen; then the launcher's rules (srun only under Slurm,
    # DeepSpeed's runners) and the scheduler's (dialect, QOS, directives, log path, elastic
    # agents, requeue): the scheduler's sets the dialect.
    _check_owners(out, given)
    # Launchers and schedulers import neither: each is handed the other here.
    launcher, chosen = launchers.get(out["launcher"]), schedulers.get(scheduler)
    launcher.check(out, chosen)
    containers.check(out, given, launcher, chosen)
    chosen.check(out, given, launcher)
    _rules(out, given, check_files)
    _check_array(out)
    return JobSpec(**out, notes=tuple(notes))


def _check_owners(out: dict, given: dict) -> None:
    """The one rule for every setting that one scheduler, launcher or the container reads
    (:attr:`hpcdist.submission.options.Option.owner`): given while its owner was not chosen, it is refused,
    naming the flag and the owner, not dropped without a word."""
    for o in OPTIONS:
        owner = o.owner
        if owner is None or out.get(o.name) in (None, (), False, o.default):
            continue
        value = given.get(o.key, out[o.name])  # as typed (--mem-per-gpu 4G, not 4096)
        shown = ",".join(value) if isinstance(value, (tuple, list)) else str(value)
        if owner == "container":
            if not out.get("container_image"):
                raise v.NotHere(o.flag, shown, "is a container setting, but no image is given.",
                                "Add --container-image IMAGE, or leave it out.")
        elif owner in schedulers.NAMES:
            if owner != out["scheduler"]:
                raise v.NotHere(o.flag, shown, f"is a {schedulers.get(owner).title} setting, and "
                                f"--scheduler is {out['scheduler']}.",
                                f"Leave it out, or use --scheduler {owner}.")
        elif owner != out["launcher"]:
            raise v.NotHere(o.flag, shown,
                            f"is a {owner} setting; the launcher is {out['launcher']}.",
                            f"Use --launcher {owner}, or leave {o.flag} out.")


def _rules(out: dict, given: dict, check_files: bool) -> None:
    """The rules that tie options together, whatever the scheduler and launcher; files exist."""
    _check_program(out)
    gpus = out.get("gpus_per_node", 0)
    if gpus and out["procs_per_node"] > gpus:
        raise v.ValidationError(
            "--procs-per-node", str(out["procs_per_node"]),
            f"is more than --gpus-per-node {gpus}: several processes would share a GPU.",
            "Use one process per GPU (leave --procs-per-node out), or ask for more GPUs.")
    if out.get("gpu_type") and not gpus:
        raise v.ValidationError("--gpu-type", out["gpu_type"], "names a GPU model, but no GPUs are asked for.",
                                "Add --gpus-per-node N, or leave --gpu-type out.")
    if out.get("mem_per_gpu_mb") and (not gpus or out.get("mem_mb") is not None):
        why = ("asks for memory per GPU, but no GPUs are asked for." if not gpus else
               f"is given with --mem {given.get('mem')}: Slurm takes one of --mem and --mem-per-gpu.")
        raise v.ValidationError("--mem-per-gpu", str(given["mem_per_gpu"]), why,
                                "Add --gpus-per-node N." if not gpus else "Keep one of them.")
    both = {k for k, _ in out.get("env", ())} & {k for k, _ in out.get("env_expand", ())}
    if both:
        name = sorted(both)[0]
        raise v.ValidationError("--env-expand", name, "is also given with --env: the script would set it twice.",
                                "Keep one of them.")
    if out.get("setup_on", "batch") != "batch" and not (out.get("setup") or out.get("setup_file")):
        raise v.ValidationError("--setup-on", out["setup_on"], "says where setup lines run, but none are given.",
                                "Add --setup LINE or --setup-file FILE, or leave --setup-on out.")
    if "conda" in out and "venv" in out:
        raise v.ValidationError("--venv", out["venv"], "cannot be used together with --conda.", "Pick one environment.")
    nodes, procs = out.get("nodes", 1), out["procs_per_node"]
    if nodes * procs > v.MAX_COUNT:
        raise v.ValidationError("--nodes", str(nodes), f"times --procs-per-node {procs} is {nodes * procs} processes, "
                                f"more than {v.MAX_COUNT}, the most a scheduler or launcher counts.", "Ask for fewer.")
    if check_files:
        _check_file("SCRIPT", out["script"], " (relative to the current directory)",
                    "Check the path; the job runs from the directory you submit from.")
        for key, flag in (("deepspeed_config", "--deepspeed-config"), ("template", "--template"),
                          ("setup_file", "--setup-file")):
            if key in out:
                _check_file(flag, out[key], "", "Check the path.")
        if "template_dir" in out and not os.path.isdir(out["template_dir"]):
            raise v.ValidationError("--template-dir", out["template_dir"], "is not a folder.", "Check the path.")
        _check_output(out)
    _check_restarts(out, given)


def _check_array(out: dict) -> None:
    """An array's rules: a sweep is an array already; ``--max-running N`` limits an array or a
    sweep, and a plain array's N becomes its own ``%N`` (``0-5%2``: Slurm --array, PBS Pro -J and
    Torque -t read it; the renderer writes the indices as they are). A sweep's arrays get theirs
    when it is cut (:func:`hpcdist.sweeps.arrays.array_of`)."""
    sweep = out.get("sweep") or out.get("sweep_file")
    if sweep and out.get("array"):
        raise v.ValidationError("--array", out["array"], "a sweep is an array already: its indices are the sets'.",
                                "Leave --array out (--max-running N limits how many run at once).")
    running = out.get("max_running")
    if not running or sweep:
        return
    if not out.get("array"):
        raise v.ValidationError("--max-running", running, "it limits the subjobs of an array or a sweep, "
                                "and this job is neither.", "Give --sweep or --array, or leave it out.")
    out["array"] = f"{out['array'].partition('%')[0]}%{running}"


def _check_output(out: dict) -> None:
    """The log (``--output``) must not be a file the job reads (it would be overwritten, as
    ``s.py`` was by ``--output s.py``), nor a folder, nor in a folder that does not exist (the
    scheduler would not create it: the job would run, or fail, with no log at all)."""
    log = out.get("output")
    if not log or "%" in log:  # %j/%x are filled in by the scheduler: it names a file of its own
        return
    fix = "Name a new file for the log (e.g. --output logs/train.log), or leave --output out."
    for name, field in (("script", "SCRIPT"), ("deepspeed_config", "--deepspeed-config"), ("template", "--template")):
        if name in out and os.path.exists(log) and os.path.exists(out[name]) and os.path.samefile(log, out[name]):
            raise v.ValidationError("--output", log, f"is {field} {out[name]!r}: the job's log "
                                    "would overwrite it.", fix)
    if os.path.isdir(log):
        raise v.ValidationError("--output", log, "is a folder; the log is a file.", fix)
    folder = os.path.dirname(log) or "."
    if not os.path.isdir(folder):
        raise v.ValidationError("--output", log, f"is in {folder!r}, which does not exist: the "
                                "scheduler would not create it, and the job would have no log.",
                                f"Create it first (mkdir -p {quote(folder)}).")


def _check_program(out: dict) -> None:
    """SCRIPT is what the launcher starts with the job's python: ``python train.py`` given as SCRIPT
    (python python train.py), or a shell script under a launcher that starts it with python, would
    fail only inside the job, after the queue."""
    script, launcher = out["script"], out["launcher"]
    if re.fullmatch(r"python[0-9.]*", os.path.basename(script)):
        first = next((a for a in out.get("script_args", ()) if a.endswith(".py")), "train.py")
        raise v.ValidationError(
            "SCRIPT", script, "hpcdist starts SCRIPT with the job's python itself: the job would "
            f"run python {script} ...", f"Drop {script}: give {first} as SCRIPT, its arguments "
            "after it (the job's python: --python PATH, --venv or --conda).")
    if script.endswith(launchers.SHELL_SCRIPTS) and launcher != "none":
        raise v.ValidationError(
            "SCRIPT", script, f"is a shell script, and --launcher {launcher} starts SCRIPT with "
            f"python on every rank: python {script} would fail inside the job.", "Give --launcher "
            "none to run it once with bash (it starts its own processes: torchrun, mpirun), or "
            "give the Python script it runs as SCRIPT (its set-up lines: --setup-file FILE).")


def _check_file(flag: str, path: str, where: str, fix: str) -> None:
    """``path`` is a file (``where`` says relative to what, when the error names it)."""
    if os.path.isdir(path):
        raise v.ValidationError(flag, path, "is a directory; it must name a file.", fix)
    if not os.path.isfile(path):
        raise v.ValidationError(flag, path, f"does not exist{where}.", fix)


def _check_min_nodes(out: dict) -> None:
    """--min-nodes: with --max-restarts, the fewest nodes the job script's restarts go on with
    (every launcher but nvrx, Slurm and PBS); without, torchrun's elastic size (Slurm only: the
    scheduler's check_elastic)."""
    least, nodes = out.get("min_nodes"), out.get("nodes", 1)
    if least is None or least >= nodes:
        return
    launcher = out.get("launcher")
    if not out.get("max_restarts") and launcher != "torchrun":
        raise v.ValidationError("--min-nodes", str(least), f"goes on with fewer nodes only at a restart, "
                                f"and this job has none (without --max-restarts it is torchrun's elastic "
                                f"size; the launcher is {launcher}).",
                                "Give --max-restarts N too, or leave --min-nodes out.")
    if launcher == "nvrx":
        raise v.ValidationError("--min-nodes", str(least), "ft_launcher restarts the workers on the job's "
                                "nodes itself (--launcher nvrx: its --max-restarts).",
                                "Leave --min-nodes out, or use --launcher torchrun (hpcdist's restarts).")
    if schedulers.get(out["scheduler"]).one_host:
        raise v.ValidationError("--min-nodes", str(least), "every node of a local job is this host: none is "
                                "ever lost.", "Leave --min-nodes out, or submit with --scheduler slurm or pbs.")


def _check_restarts(out: dict, given: dict) -> None:
    """torchrun's elastic size; spares; the walltime warning against the walltime."""
    if "min_nodes" in out and out["min_nodes"] > out.get("nodes", 1):
        raise v.ValidationError("--min-nodes", str(out["min_nodes"]), f"is more than --nodes {out.get('nodes', 1)}.",
                                "Give the fewest nodes the training may go on with, at most --nodes.")
    spares = out.get("spare_nodes")
    if spares and not out.get("max_restarts") and not out.get("exclude_nodes"):
        raise v.ValidationError("--spare-nodes", str(spares), "a spare node is started on only at a restart, "
                                "and this job has none.", "Give --max-restarts N too, or leave --spare-nodes out.")
    if spares and out.get("launcher") == "nvrx":
        raise v.ValidationError("--spare-nodes", str(spares), "ft_launcher restarts the workers on the "
                                "job's nodes itself (--launcher nvrx: its --max-restarts).",
                                "Leave --spare-nodes out, or use --launcher torchrun (hpcdist's restarts).")
    if out.get("exclude_nodes") and schedulers.get(out["scheduler"]).one_host:
        raise v.ValidationError("--exclude-nodes", ",".join(out["exclude_nodes"]), "every node of a local "
                                "job is this host.", "Leave --exclude-nodes out, or submit with --scheduler "
                                "slurm or pbs.")
    if spares and schedulers.get(out["scheduler"]).one_host:
        raise v.ValidationError("--spare-nodes", str(spares), "every node of a local job is this host.",
                                "Leave --spare-nodes out, or submit with --scheduler slurm or pbs.")
    _check_min_nodes(out)
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
