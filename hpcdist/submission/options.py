"""The job options: each once, in one table (:data:`OPTIONS`).

An option has its name in the job spec, the key it is given by (profile key, API keyword, argparse
dest), its flag(s), its type as given and as held, its default, the check of its value alone, its
owner (the one scheduler, launcher or the container that reads it:
:func:`hpcdist.submission.spec.build_spec` refuses it when its owner was not chosen), and its help.
Built from the table: the ``render``/``submit``/``doctor`` flags (:mod:`hpcdist.cli`), the profile
keys (:mod:`hpcdist.submission.profiles`), the fields of :class:`~hpcdist.submission.spec.JobSpec`,
:data:`FLAG` and :func:`value_checks`. Rules that tie several options together stay in
:func:`hpcdist.submission.spec.build_spec`.

At the bottom of the package: it imports no scheduler, launcher or container module. What an owner
knows is named, not imported (:class:`Elsewhere`): the choices of ``--scheduler`` (the schedulers'
registry's), a job name's check (the scheduler's), each looked up on first use. Plain classes and
tuples only: `hpcdist render` and `submit` import this before parsing their flags."""

from __future__ import annotations

from hpcdist import validate as v
# The checks of one value each, and the names of what an owner knows (SETUP_END and module_words are
# read through this module too).
from hpcdist.submission.option_checks import (  # noqa: F401
    Elsewhere, _one_of, _at_least_1, _at_least_0, _port, _walltime, _memory, _node_memory, _name,
    _job_name, _directive, _text, _word, MODULE_VERBS, _module, module_words, _program, _array,
    _dependency, _mail, _yes_no, _source, _env, _container_bind, _env_name, SETUP_END, _setup_line,
    _env_expand, GPU_MAPS, _binding, _constraint, _pbs_request, _script, _argument,
    _node_names)


SCHEDULERS = Elsewhere("hpcdist.schedulers:NAMES")
PBS_DIALECTS = Elsewhere("hpcdist.schedulers:PBS_DIALECTS")
LAUNCHERS = Elsewhere("hpcdist.launchers:NAMES")
DEEPSPEED_RUNNERS = Elsewhere("hpcdist.launchers:DEEPSPEED_RUNNERS")
MPI_FLAVOURS = Elsewhere("hpcdist.launchers.mpi:MPI_FLAVOURS")
CONTAINER_RUNTIMES = Elsewhere("hpcdist.containers:RUNTIMES")
CONTAINER_GPUS = Elsewhere("hpcdist.containers:GPUS")

#: The argparse groups, in the order `--help` shows them.
WHERE, ENVIRONMENT, LAUNCH = GROUPS = ("where and how big", "environment on every node", "launcher")
#: The group of the settings that send a job from a laptop (:data:`REMOTE_OPTIONS`).
REMOTE = "on a cluster, from your laptop (hpcdist connect)"

#: The default of an option that has none: the job spec cannot be made without it.
REQUIRED = object()

# The spec's type of each type as given (list: repeatable flag, list in a profile; dict: env).
_HELD = {str: "str", int: "int", bool: "bool", list: "tuple[str, ...]", dict: "tuple[tuple[str, str], ...]"}


class Option:
    """One job option. ``kind`` is its type as given in a profile (str, int, bool, list, dict); a
    list or dict option is repeatable on the command line and adds to a profile's list.
    ``check(value, option, scheduler)`` checks one value (each item of a list) alone and returns it
    as the spec holds it; ``scheduler`` None: not known yet."""

    __slots__ = ("name", "key", "kind", "default", "held", "check", "group", "flags", "metavar",
                 "choices", "help", "profile", "owner")

    def __init__(self, name, kind=str, default=None, group=None, *, check=None, key=None, held=None,
                 flags=None, metavar=None, choices=None, help=None, profile=True, owner=None):
        self.name = name  # the JobSpec field
        self.key = key or name  # as given: profile key, API keyword, argparse dest
        self.kind = kind
        self.default = () if kind in (list, dict) and default is None else default
        self.held = held or _HELD[kind] + (" | None" if default is None and kind not in (list, dict) else "")
        self.check = check
        self.group = group  # None: not a flag of its own
        self.flags = ("--" + self.key.replace("_", "-"),) if flags is None else flags
        self.metavar, self.choices, self.help = metavar, choices, help  # as argparse takes them
        self.profile = profile  # may a profile file set it
        #: The one that reads it: a scheduler ("pbs"), a launcher ("torchrun") or "container" (the image's); None:
        #: every job. A value given while its owner was not chosen is refused (hpcdist.submission.spec), not dropped.
        self.owner = owner

    @property
    def flag(self) -> str:
        """As users type it, for error messages."""
        return self.flags[0] if self.flags else self.metavar

    @property
    def is_list(self) -> bool:
        return self.kind in (list, dict)

    def checked(self, value, scheduler: str | None):
        """``value`` checked, as the spec holds it: a list's items (a dict's pairs) each."""
        if self.is_list:
            return tuple(self.check(x, self, scheduler) for x in (value.items() if isinstance(value, dict) else value))
        return self.check(value, self, scheduler)

    def __repr__(self):
        return f"Option({self.name!r})"


OPTIONS = (
    Option("script", str, REQUIRED, check=_script, flags=(), metavar="SCRIPT", profile=False,
           help="the training script; hpcdist's flags go before it"),
    Option("script_args", list, check=_argument, flags=(), metavar="ARGS", profile=False,
           help="the script's own: everything after SCRIPT; hpcdist's flags there are refused, "
                "except after --"),
    Option("scheduler", str, "local", WHERE, check=_one_of, choices=SCHEDULERS,
           help="local (this machine, no scheduler: a first try), slurm (sbatch) or pbs (qsub); default: local"),
    # PBS: "pro" or "torque"; its check needs the scheduler (a rule of build_spec).
    Option("dialect", str, None, WHERE, choices=PBS_DIALECTS, owner="pbs", help="PBS only (default: pro)"),
    Option("nodes", int, 1, WHERE, check=_at_least_1, help="nodes to ask for (default: 1)"),
    # Owner: the job's restart loop (hpcdist.injob.restart), under every launcher.
    Option("spare_nodes", int, 0, WHERE, check=_at_least_0, metavar="K",
           help="ask for K nodes more, started on only when one of the --nodes fails "
                "(with --max-restarts; default: 0)"),
    Option("exclude_nodes", list, None, WHERE, check=_node_names, metavar="NODES",
           help="nodes not to run on: n1,n2, n[1-3] or @FILE (a job's bad_nodes file); Slurm: "
                "--exclude; PBS, which cannot be told: left out in the job, a --spare-nodes node "
                "in its place"),
    Option("gpus_per_node", int, 0, WHERE, check=_at_least_0, help="GPUs to ask for on each node (default: 0)"),
    Option("procs_per_node", int, 1, WHERE, check=_at_least_1, help="ranks per node (default: one per GPU, else one)"),
    Option("cpus_per_proc", int, None, WHERE, check=_at_least_1, help="CPU cores for each rank (default: 1)"),
    Option("mem_mb", str, None, WHERE, key="mem", held="int | None", check=_node_memory,
           help="per node, with a unit: 16G, 500M; 0 or all: all of each node's memory (Slurm)"),
    Option("mem_per_gpu_mb", str, None, WHERE, key="mem_per_gpu", held="int | None", check=_memory, owner="slurm",
           metavar="MEM", help="Slurm: memory per GPU (--mem-per-gpu), instead of --mem"),
    Option("gpu_type", str, None, WHERE, check=_name, metavar="TYPE", help="the GPUs' model, e.g. a100, with "
           "--gpus-per-node (Slurm --gpus-per-node=TYPE:N, PBS Pro's gpu_type, a Torque node property)"),
    Option("walltime_s", str, None, WHERE, key="walltime", held="int | None", check=_walltime,
           help="90m, 1h30m, 01:30:00, 1-12:00:00 (a bare number is refused)"),
    # Names the scheduler reads; values placed in directives follow its grammar (no quoting needed).
    Option("queue", str, None, WHERE, check=_name, flags=("--queue", "--partition"),
           help="the queue (PBS -q) or partition (Slurm --partition) to submit to (default: the cluster's)"),
    Option("account", str, None, WHERE, check=_name, help="the account to charge (Slurm --account, PBS -A)"),
    Option("qos", str, None, WHERE, check=_name,
           help="Slurm: the quality of service (--qos), e.g. debug or regular; PBS has none (use --queue)"),
    Option("constraint", str, None, WHERE, check=_constraint, owner="slurm",
           help="Slurm: node features, e.g. gpu (NERSC Perlmutter), gpu&hbm80g"),
    Option("project", str, None, WHERE, check=_name, owner="pbs",
           help="PBS -P: the project to charge (NCI Gadi); --account writes -A"),
    Option("job_name", str, "job", WHERE, check=_job_name,
           help="the job's name in the queue and in its folder .hpcdist/jobs/NAME-TIME (default: the script's)"),
    Option("output", str, None, WHERE, check=_text, help="the job's log file"),
    Option("array", str, None, WHERE, check=_array, metavar="INDICES",
           help="a job array, one job per index: 0-15, 1,3,5, 0-15:2 (every second), 0-15%4 (4 at a time); "
                "Slurm --array, PBS -J (Torque -t)"),
    # A sweep: one array whose subjob i runs set i; the site's caps where its scheduler does not say
    # them (hpcdist.sweeps).
    Option("sweep", list, None, WHERE, check=Elsewhere("hpcdist.sweeps.sets:option_check"), metavar="KEY=V1,V2",
           help="run the script once per value as one job array (repeated: every combination), --KEY VALUE appended"),
    Option("sweep_file", str, None, WHERE, check=_word, metavar="FILE",
           help="the sweep's parameter sets from FILE: one a line (lr=1e-3 batch=32), or a JSON or YAML list"),
    Option("max_running", int, None, WHERE, check=_at_least_1, metavar="N",
           help="run at most N subjobs of the array or sweep at once (Slurm, PBS, Torque: indices%N)"),
    Option("max_array_size", int, None, WHERE, check=_at_least_1, metavar="N",
           help="the site's most subjobs in one array where qmgr, qstat -Bf or scontrol do not say (a sweep splits)"),
    Option("max_submit_jobs", int, None, WHERE, check=_at_least_1, metavar="N",
           help="the site's most queued jobs per user where qmgr or sacctmgr do not say (a sweep waits for room)"),
    Option("dependency", str, None, WHERE, check=_dependency, metavar="TYPE:JOB",
           help="start only after other jobs, in the scheduler's words: afterok:1234 (once 1234 succeeded), "
                "afterany:1234:1235, afternotok:1234; Slurm also singleton; PBS job ids in full: afterok:1234.server"),
    Option("mail_user", str, None, WHERE, check=_mail, flags=("--mail",), metavar="ADDRESS",
           help="mail ADDRESS (or several, comma-separated) when the job ends or fails"),
    Option("exclusive", bool, False, WHERE, check=_yes_no,
           help="the nodes for this job alone (Slurm --exclusive, PBS Pro place=scatter:excl)"),
    # How a PBS job asks for its nodes (hpcdist.schedulers.pbs.request): PBS Pro's select chunks
    # and place, or one job-wide request; site resources.
    Option("request", str, "select", WHERE, check=_one_of, choices=("select", "job-wide"), owner="pbs",
           help="PBS Pro: select chunks (default), or job-wide -l ncpus=,ngpus=,mem= (NCI Gadi)"),
    Option("select", str, None, WHERE, check=_pbs_request("check_select"), metavar="CHUNKS", owner="pbs",
           help="PBS Pro: your own select (2:ncpus=64:mpiprocs=4), checked against --nodes and --procs-per-node"),
    Option("place", str, None, WHERE, check=_pbs_request("check_place"), metavar="PLACE", owner="pbs",
           help="PBS Pro: place= (default: scatter; scatter:excl with --exclusive)"),
    Option("bare_select", bool, False, WHERE, check=_yes_no, owner="pbs",
           help="PBS Pro: select=N and --chunk-resource only, no ncpus/mpiprocs/ngpus/mem (whole-node sites)"),
    Option("chunk_resources", list, None, WHERE, check=_pbs_request("check_chunk_resource"),
           flags=("--chunk-resource",), metavar="NAME=VALUE", owner="pbs",
           help="PBS Pro: add to each select chunk, e.g. system=polaris (repeatable)"),
    Option("job_resources", list, None, WHERE, check=_pbs_request("check_job_resource"), flags=("--resource",),
           metavar="NAME=VALUE", owner="pbs",
           help="PBS: a -l NAME=VALUE line, e.g. filesystems=home:eagle, storage=gdata/a00, jobfs=100GB (repeatable)"),
    Option("directives", list, None, WHERE, check=_directive, flags=("--directive",), metavar="LINE",
           help="a raw scheduler directive, placed first (repeatable); one that begins with a dash is "
                "read as typed: --directive --gres=gpu:4"),
    Option("modules", list, None, ENVIRONMENT, check=_module, flags=("--module",), metavar="NAME",
           help="module load NAME, or a module command: 'use PATH', purge, reset, 'swap A B' (repeatable, in order)"),
    Option("sources", list, None, ENVIRONMENT, check=_source, flags=("--source",), metavar="FILE",
           help="source FILE (repeatable)"),
    Option("conda", str, None, ENVIRONMENT, check=_word, metavar="ENV",
           help="conda activate ENV (a name or a path) in the job, before the launch (not with --venv)"),
    Option("venv", str, None, ENVIRONMENT, check=_word, metavar="DIR",
           help="source DIR/bin/activate in the job, before the launch: a folder the nodes see (not with --conda)"),
    Option("stage_env", bool, False, ENVIRONMENT, check=_yes_no, help="copy the job's Python environment to every "
           "node's local storage at its start, the ranks run from there (hpcdist.submission.stage)"),
    Option("stage_dir", str, "/tmp", ENVIRONMENT, check=Elsewhere("hpcdist.submission.stage:check_dir"), metavar="DIR",
           help="--stage-env: the nodes' local storage: /tmp (default), /local/scratch, $TMPDIR, $PBS_JOBFS"),
    Option("env", dict, None, ENVIRONMENT, check=_env, metavar="NAME=VALUE", help="set in the job (repeatable)"),
    Option("propagate", list, None, ENVIRONMENT, check=_env_name, metavar="NAME",
           help="pass this variable to every node (repeatable)"),
    # The user's own shell lines: the one place hpcdist writes a value unquoted (marked as such).
    Option("setup", list, None, ENVIRONMENT, check=_setup_line, metavar="LINE",
           help="a shell line of your own, written into the script as is, not quoted (repeatable, in order)"),
    Option("setup_file", str, None, ENVIRONMENT, check=_word, metavar="FILE",
           help="shell lines of your own from FILE, copied into the script after the --setup lines"),
    Option("setup_on", str, "batch", ENVIRONMENT, check=_one_of, choices=("batch", "every-node"),
           help="where the setup lines run: batch (in the job script, before hpcdist's steps; default) or "
                "every-node (once on each node, in a shell of their own, just before the launch)"),
    Option("env_expand", dict, None, ENVIRONMENT, check=_env_expand, metavar="NAME=VALUE",
           help="as --env, but $VAR and ${VAR} in VALUE expand in the job: DATA='$SCRATCH/data' (repeatable)"),
    # Containers (hpcdist.containers): where each launcher runs, and each runtime's words.
    Option("container_image", str, None, ENVIRONMENT, check=_word, metavar="IMAGE",
           help="run the training inside this image (a .sif file, docker://..., a podman image)"),
    Option("container_runtime", str, "apptainer", ENVIRONMENT, check=_one_of,
           choices=CONTAINER_RUNTIMES, owner="container",
           help="what runs the image (default: apptainer)"),
    Option("container_gpu", str, "auto", ENVIRONMENT, check=_one_of, choices=CONTAINER_GPUS, owner="container",
           help="the GPUs in the container: nv, rocm, none (default auto: nv with --gpus-per-node)"),
    Option("container_binds", list, None, ENVIRONMENT, check=_container_bind, flags=("--container-bind",),
           metavar="SRC[:DST[:OPTS]]", owner="container", help="a host path seen in the container (repeatable)"),
    Option("launcher", str, "torchrun", LAUNCH, check=_one_of, choices=LAUNCHERS, help="what starts the ranks "
           "(default: torchrun)"),
    # Owner: hpcdist.injob.restart's health check, before the first launch.
    Option("preflight", bool, False, LAUNCH, check=_yes_no,
           help="before the launch, ask every node to answer (20 s) and leave out one that does not, or "
                "that runs another Python, hpcdist or torch (a --spare-nodes one in its place)"),
    # Owner: the job's restart loop (hpcdist.injob.restart), under every launcher but nvrx.
    Option("max_restarts", int, 0, LAUNCH, check=_at_least_0, metavar="N",
           help="when the launch fails on a node, start it again up to N times, without a node that does "
                "not answer (a --spare-nodes one in its place); not for a fault in the training's code"),
    # Owner: the restart loop with --max-restarts (hpcdist.submission.spec._check_min_nodes), else
    # torchrun's elastic size (Slurm only).
    Option("min_nodes", int, None, LAUNCH, check=_at_least_1, metavar="N",
           help="with --max-restarts: when a node is lost and no spare is left, go on with the nodes "
                "left if at least N (without: torchrun's elastic size, Slurm only)"),
    Option("requeue", int, 0, WHERE, check=_at_least_0, metavar="N",
           help="on the walltime warning, let the training checkpoint and stop, then requeue (Slurm) or "
           "resubmit (PBS) the job, at most N times; needs hpcdist.signals in the training (docs/guide/walltime.md)"),
    Option("signal_margin_s", str, None, WHERE, key="signal_margin", held="int | None", check=_walltime,
           metavar="TIME", help="send the walltime warning this long before the walltime (default: 5m)"),
    # Owner: the job's monitor (hpcdist.progress.monitor; hung: max(10x the step time, hang_floor_s)).
    Option("hang_timeout_s", str, None, WHERE, key="hang_timeout", held="int | None", check=_walltime,
           metavar="TIME", help="end the job, with every rank's stack in its log, when no rank has made a "
           "step for this long (not while a rank is checkpointing; default: never)"),
    Option("hang_floor_s", str, None, WHERE, key="hang_floor", held="int | None", check=_walltime,
           metavar="TIME", help="call the job hung only after at least this long without a step (default: 2m)"),
    Option("start_timeout_s", str, None, WHERE, key="start_timeout", held="int | None", check=_walltime,
           metavar="TIME", help="end the job, naming the ranks and where they wait, when no rank has made its "
           "first step this long after the start (default: 10m with --hang-timeout, else never)"),
    Option("deepspeed_config", str, None, LAUNCH, check=_word, metavar="FILE",
           help="a DeepSpeed JSON config, given to the script as --deepspeed_config FILE (under any launcher)"),
    Option("deepspeed_runner", str, "pdsh", LAUNCH, check=_one_of, choices=DEEPSPEED_RUNNERS, owner="deepspeed",
           help="DeepSpeed: how its launcher starts the other nodes: pdsh (over ssh; default), openmpi (mpirun), "
                "slurm (srun: --scheduler slurm only); --no-ssh: none of these"),
    Option("no_ssh", bool, False, LAUNCH, check=_yes_no, owner="deepspeed",
           help="DeepSpeed: one launcher per node, no ssh"),
    Option("ssh_port", int, None, LAUNCH, check=_port, metavar="PORT",
           help="the nodes' sshd port (default: ssh's own), for DeepSpeed's runner and hpcdist doctor's ssh check"),
    # What each writes: hpcdist.launchers.mpi.
    Option("mpi", str, "openmpi", LAUNCH, check=_one_of, choices=MPI_FLAVOURS,
           help="the MPI implementation, for --launcher mpirun and PBS's node agents: openmpi (default), "
                "mpich, intel (Intel MPI), pals (HPE Cray PALS)"),
    Option("mpiexec", str, None, LAUNCH, check=_program, metavar="PROGRAM",
           help="the MPI launcher program (default: mpirun for openmpi, mpiexec for the others)"),
    Option("pbs_spread", str, None, LAUNCH, check=_one_of, choices=("mpi", "pbsdsh"), owner="pbs",
           help="PBS: what starts one agent per node (torchrun, accelerate, DeepSpeed --no-ssh): mpi, the "
                "--mpi flavour's launcher (default), or pbsdsh"),
    # Binding, in the words of the launcher that starts the ranks (hpcdist.launchers.mpi, srun).
    Option("cpu_bind", str, None, LAUNCH, check=_binding, metavar="BINDING",
           help="bind each rank's CPUs, in its launcher's words: srun --cpu-bind=BINDING, PALS --cpu-bind, Open "
                "MPI --bind-to, MPICH -bind-to (srun and mpirun only)"),
    Option("gpu_map", str, "local-rank", LAUNCH, check=_one_of, choices=GPU_MAPS,
           help="how ranks share a node's GPUs: local-rank (each sees all and uses its local rank's; default), "
                "per-task (each sees only its own: srun --gpus-per-task=1, elsewhere as visible-devices), "
                "visible-devices (hpcdist sets CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES per rank)"),
    Option("gpu_bind", str, None, LAUNCH, check=_binding, metavar="BINDING", owner="srun",
           help="Slurm: srun --gpu-bind=BINDING for the ranks (closest, map_gpu:0,1)"),
    Option("hint", str, None, WHERE, check=_one_of, owner="slurm",
           choices=("nomultithread", "multithread", "compute_bound", "memory_bound"),
           help="Slurm: --hint (nomultithread: one task per core, no hyperthreads)"),
    Option("python", str, "python", LAUNCH, check=_program, metavar="PROGRAM",
           help="interpreter for mpirun/srun (default: python)"),
    Option("template", str, None, LAUNCH, check=_word, metavar="FILE",
           help="your own Jinja template (it may extend hpcdist/slurm.sh.j2 ...)"),
    Option("template_dir", str, None, LAUNCH, check=_word, metavar="DIR",
           help="a folder of templates (slurm.sh.j2, pbs.sh.j2 ...) used before hpcdist's"),
)


#: Where a job goes when it is sent from a laptop: :mod:`hpcdist.remote` owns them (they are not the
#: job's: the login node's hpcdist never sees them). A profile sets them, or the flags below.
REMOTE_OPTIONS = (
    Option("remote", str, None, REMOTE, check=lambda x, o, _: v.check_ssh_destination(str(x), o.flag),
           metavar="HOST", owner="remote",
           help="run the command on this cluster's login node over ssh: user@host or a Host of your ~/.ssh/config "
                "(open the connection once with `hpcdist connect`)"),
    Option("remote_folder", str, "hpcdist", REMOTE, metavar="DIR",
           check=lambda x, o, _: v.check_remote_folder(str(x), o.flag), owner="remote",
           help="where hpcdist keeps code snapshots and job folders on the cluster: relative to your home there, "
                "absolute, or $VAR/... (default: hpcdist; a folder the compute nodes see, e.g. $SCRATCH/hpcdist)"),
    Option("remote_hpcdist", str, "hpcdist", REMOTE, check=_text, metavar="COMMAND", owner="remote",
           help="the hpcdist command on the login node (default: hpcdist; e.g. '~/venv/bin/hpcdist')"),
    Option("include", list, None, REMOTE, check=_text, metavar="PATH", owner="remote",
           help="send this file or folder with the code besides what git tracks (repeatable)"),
)

#: Options by JobSpec field name.
BY_NAME = {o.name: o for o in OPTIONS}

#: Flags as users type them, for error messages, by JobSpec field name.
FLAG = {o.name: o.flag for o in OPTIONS}
#: The option that names a profile, which every job command takes besides the table's.
PROFILE_FLAG = "--profile"
#: Every flag of the job options, and those that take one value (:mod:`hpcdist.cli.dash_values`).
OPTION_FLAGS = frozenset(f for o in OPTIONS for f in o.flags) | {PROFILE_FLAG}
FLAGS_WITH_A_VALUE = frozenset(f for o in OPTIONS if o.kind is not bool for f in o.flags) | {PROFILE_FLAG}


def value_checks(scheduler: str | None) -> dict:
    """The check of each value that needs no other value, by its key as given (``walltime``,
    not ``walltime_s``); each returns the value as the spec holds it (a list's: each item).
    :func:`~hpcdist.submission.spec.build_spec` runs them, and so do profiles (:mod:`hpcdist.submission.profiles`)
    when a file is read, so that a mistake there names the key and the file. ``scheduler``
    None: not known yet."""
    return {o.key: (lambda x, o=o: o.check(x, o, scheduler)) for o in OPTIONS if o.check and o.profile}


def add_flags(p, script: bool = True) -> None:
    """The job options' flags on an argparse parser (render, submit, doctor); ``script``: and SCRIPT ARGS."""
    import argparse  # not at the top: the spec imports this module, and status, logs and the API build no parser

    # The job options' flags, from their table, group by group (the usage line lists them in
    # the order they are added).
    for title in (*GROUPS, REMOTE):  # the remote ones for --help: hpcdist.cli.remote reads them
        group = p.add_argument_group(title)
        for o in (*OPTIONS, *REMOTE_OPTIONS):
            if o.group != title:
                continue
            kwargs = {"dest": o.key}
            if o.kind is bool:
                # None, not False, when not given: a profile's true then stands.
                kwargs.update(action="store_true", default=None)
            elif o.is_list:
                kwargs["action"] = "append"
            kwargs.update((k, getattr(o, k)) for k in ("choices", "metavar") if getattr(o, k) is not None)
            if o.help:  # argparse reads % as a format
                kwargs["help"] = o.help.replace("%", "%%")
            group.add_argument(*o.flags, **kwargs)
    p.add_argument(PROFILE_FLAG, metavar="NAME",
                   help="a profile from ./hpcdist.toml or ~/.config/hpcdist/config.toml, or a site preset "
                   "(hpcdist profiles lists them); none: no profile, not even a file's default one")
    if script:
        p.add_argument("script", metavar=BY_NAME["script"].metavar, help=BY_NAME["script"].help)
        p.add_argument("script_args", nargs=argparse.REMAINDER, metavar=BY_NAME["script_args"].metavar,
                       help=BY_NAME["script_args"].help)
