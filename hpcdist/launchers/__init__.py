"""The launchers a job script can start the training with: one module each, all they know.

Where it runs: on the login node (the launch lines of a script being rendered) and inside the job
script (what a launcher prepares per node).

A launcher (torchrun, DeepSpeed, mpirun, srun, accelerate, or none) owns, in
its module, on the pattern of DeepSpeed's ``multinode_runner.py``:

- ``check(values)``: its rules that tie it to the other job options
  (:func:`hpcdist.submission.spec.build_spec` calls it once every value is checked);
- ``words(spec)``: its command; ``setup(spec)``: shell lines it needs just
  before (in the launch block); ``job_setup(spec)``: what the job's set-up
  must prepare for it (DeepSpeed's ``DS_ENV_FILE``); ``describe(spec)``: the
  launch block's comment;
- ``per_node(spec)``: whether it runs as one agent per node, spread by the
  scheduler, or once, from the first node; ``hostfile_format(spec)``;
- ``failures(text, agents, nodes)``: the lines of its own in a job's log that
  name a failed rank (read by :mod:`hpcdist.failures`).

Words a user supplied (script, arguments, paths) are shell-quoted; values that
exist only inside the running job are references to shell variables the job's
set-up exports before the launch (:mod:`hpcdist.injob.job_setup`): ``HPCDIST_HOSTFILE``
(the hostfile in this launcher's format), ``MASTER_ADDR``, ``MASTER_PORT``
(the first host, and a free port drawn at random there), ``HPCDIST_JOB_ID``;
``NODE_RANK`` is set per node where the agents are spread. :data:`~hpcdist.shell.BREAK`
marks where a long launch line goes on on the next line.

:data:`NAMES` feeds ``--launcher``'s choices; :func:`get` imports only the one
module asked for. MPI implementations are data of the mpirun launcher
(:mod:`hpcdist.launchers.mpi`).
"""

from __future__ import annotations

#: The launchers, in the order ``--launcher`` lists them; each is the module of that name.
NAMES = ("torchrun", "deepspeed", "mpirun", "srun", "accelerate", "nvrx", "none")
#: How DeepSpeed's launcher reaches the other nodes (``--deepspeed-runner``): named here so that
#: the flag's choices need not import :mod:`hpcdist.launchers.deepspeed`, which says what each does.
DEEPSPEED_RUNNERS = ("pdsh", "openmpi", "slurm")

_LOADED: dict[str, "Launcher"] = {}


def get(name: str) -> "Launcher":
    """The launcher of that name (KeyError for a name not in :data:`NAMES`)."""
    if name not in NAMES:
        raise KeyError(name)
    if name not in _LOADED:
        # __import__, not importlib: importlib is one more module for every `hpcdist render`.
        _LOADED[name] = __import__(f"{__name__}.{name}", fromlist=["LAUNCHER"]).LAUNCHER
    return _LOADED[name]


# ``spec`` below and in every launcher is a hpcdist.submission.spec.JobSpec, not imported: the
# spec imports this package.


#: A SCRIPT of these names is a shell script: every launcher but ``none`` starts SCRIPT with python
#: (``python train.sh`` fails inside the job), and ``none`` runs it with bash.
SHELL_SCRIPTS = (".sh", ".bash")


def program(spec, argparse_launcher: bool = False) -> list:
    """The training program and its arguments, as the launcher should start it.

    ``argparse_launcher``: the launcher reads the script's arguments with
    argparse's REMAINDER (DeepSpeed, accelerate), which swallows a
    ``--`` right after the script: that one is doubled.
    """
    from hpcdist.shell import BREAK

    args = list(spec.script_args)
    if argparse_launcher and args[:1] == ["--"]:
        args.insert(0, "--")
    if spec.deepspeed_config:
        # Under any launcher: a DeepSpeed script started by torchrun or srun reads it too.
        args += ["--deepspeed_config", spec.deepspeed_config]
    return [BREAK, spec.script] + args


def rank_module(spec) -> list:
    """``-m hpcdist.rank`` and its options: ``--own-gpu`` where each rank is to see only its own
    GPU and no scheduler sees to it (``--gpu-map``: :func:`hpcdist.rank.own_gpu`)."""
    own = spec.gpu_map == "visible-devices" or spec.gpu_map == "per-task" and spec.launcher != "srun"
    return ["-m", "hpcdist.rank"] + (["--own-gpu"] if own else [])


def rank_program(spec) -> list:
    """The program for a launcher that starts every rank itself (srun, mpirun): through
    :mod:`hpcdist.rank`, which gives the frameworks hpcdist's answer before the script runs;
    inside the job's container when it has one (the launcher itself runs on the host)."""
    from hpcdist import containers

    return containers.wrap(spec, [spec.python, *rank_module(spec)] + program(spec))


def hpcdist_command(spec, in_image: bool = False) -> list:
    """How the job script runs hpcdist: ``python -m hpcdist``, with the training's python, which
    the ranks of srun, mpirun and DeepSpeed need it in anyway. With a container: the ``hpcdist``
    command of the host (pdsh, pbsdsh, srun and qsub are the host's), or, ``in_image``, the
    image's (the job's set-up, which needs no host command; pyxis reaches its image only through
    srun). The doctor's own job (``--python hpcdist``) runs the command."""
    from hpcdist import containers

    if spec.python == "hpcdist":
        return ["hpcdist"]
    if containers.get(spec) is None:
        return [spec.python, "-m", "hpcdist"]
    if in_image and containers.in_batch_shell(spec):
        return containers.wrap(spec, [spec.python, "-m", "hpcdist"])
    return ["hpcdist"]


def failure(why: str, **fields) -> dict:
    """A failed rank as a launcher's log line tells it: the arguments of
    :class:`hpcdist.failures.Failure` (``rank``, ``host``, ``local_rank``, ``source``),
    as plain data: :mod:`hpcdist.failures` reads the launchers, not the other way round."""
    return dict(why=why, **fields)


def exit_why(code: int) -> str:
    """A rank's exit code as a launcher reports it, in words: a negative code is the signal that killed it."""
    if code >= 0:
        return f"exit code {code}"
    import signal

    try:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"killed by signal {-code}"


class Launcher:
    """One launcher; the defaults are those of a launcher started once, with no rules of its own."""

    name: str
    #: Its ranks start through hpcdist.rank, which can give each its own GPU (--gpu-map).
    ranks_through_hpcdist = False
    #: It starts every rank itself (srun, mpirun): it binds them (--cpu-bind in its words), and
    #: runs outside a container, on the host: each rank's program is put in the image
    #: (:func:`rank_program`). Otherwise the launcher itself runs in the image
    #: (:func:`hpcdist.submission.render.launch_lines`).
    starts_ranks = False

    def check(self, values: dict, scheduler) -> None:
        """Refuse option values this launcher cannot run with (raise :class:`~hpcdist.validate.ValidationError`).

        ``values``: the job spec's fields, each already checked on its own. The settings another
        launcher owns (``--max-restarts`` is torchrun's) were refused before (hpcdist.submission.spec).
        ``scheduler``: the job's scheduler, handed in (launchers import none): what a launcher may
        ask of it is whether it starts tasks with srun (``runs_srun``) and whether all its "nodes"
        are this one host (``one_host``).
        """
        self.check_binding(values)

    def check_binding(self, values: dict) -> None:
        """--cpu-bind needs a launcher that starts (and binds) every rank; --gpu-map other than
        local-rank needs ranks that start through hpcdist.rank (or srun's own --gpus-per-task)."""
        from hpcdist.validate import ValidationError

        if values.get("cpu_bind") and not self.starts_ranks:
            raise ValidationError("--cpu-bind", values["cpu_bind"], f"binds each rank's CPUs, but {self.name} starts "
                                  "the ranks without a binding of its own (its agents share each node).",
                                  "Use --launcher srun or mpirun, or leave --cpu-bind out.")
        if values.get("gpu_bind") and self.name != "srun":
            raise ValidationError("--gpu-bind", values["gpu_bind"], f"is srun's binding of each rank's GPUs; the "
                                  f"launcher is {self.name}.", "Use --launcher srun, or leave --gpu-bind out.")
        gpu_map = values.get("gpu_map", "local-rank")
        if gpu_map != "local-rank" and not self.ranks_through_hpcdist:
            raise ValidationError("--gpu-map", gpu_map, f"gives each rank only its own GPU, but {self.name} starts its "
                                  "workers itself: each sees all of the node's GPUs, and hpcdist.env.init_distributed "
                                  "picks the one of its local rank.",
                                  "Use --launcher srun, mpirun or deepspeed, or leave --gpu-map out.")

    def check_container(self, values: dict, scheduler) -> None:
        """Refuse a ``--container-image`` this launcher cannot run in (raise ValidationError)."""

    def words(self, spec) -> list:
        raise NotImplementedError

    def setup(self, spec) -> list[str]:
        """Shell lines the launch needs just before it starts (in the launch block)."""
        return []

    def job_setup(self, spec) -> list[str]:
        """Flags of ``hpcdist job-setup`` (:mod:`hpcdist.injob.job_setup`) this launcher needs besides its
        hostfile (DeepSpeed's pdsh runner: ``--deepspeed-env``)."""
        return []

    def describe(self, spec, spread: str = "") -> str:
        """What the launch does, for the comment above it (``spread``: how the scheduler starts a
        per-node launcher on every node, as " with srun")."""
        return f"Start the training with {self.name}."

    def per_node(self, spec) -> bool:
        """True: one agent per node, spread by the scheduler; False: started once, from the first node."""
        return False

    def hostfile_format(self, spec) -> str | None:
        """The format of ``$HPCDIST_HOSTFILE`` (:data:`hpcdist.allocation.HOSTFILE_FORMATS`), where
        the launcher reads one; None: it reads none (the job's set-up writes none)."""
        return None

    def failures(self, text: str, agents: bool, nodes: list[str]) -> list[tuple[int, dict]]:
        """(position in the log, :func:`failure`) for each of this launcher's own lines about a failed rank.

        ``agents``: the job ran one launcher per node, spread by srun or mpirun,
        whose task numbers are then agents, not ranks. ``nodes``: the job's
        hosts in order, from hpcdist's ``nodes:`` line (empty if absent).
        """
        return []

    def global_rank(self, text: str, host: str | None, local_rank: int) -> int | None:
        """The global rank of ``local_rank`` on ``host``, where this launcher's log tells it."""
        return None
