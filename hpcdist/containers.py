"""Containers (``--container-image``): the words that run a command inside the image, per runtime.

One small class per runtime (``--container-runtime``), as the MPI flavours in
:mod:`hpcdist.launchers.mpi`; :func:`wrap` is the one place a command is put inside the image,
read by :func:`hpcdist.submission.render.launch_lines` and :func:`hpcdist.launchers.rank_program`.

Where the launcher runs:

- per-node launchers (torchrun, accelerate, DeepSpeed ``--no-ssh``) and a launcher started once
  that starts its own processes (DeepSpeed on one host, ``--launcher none``) run INSIDE the image:
  their words are wrapped before the scheduler spreads them;
- rank launchers (srun, mpirun) run OUTSIDE, on the host, where the scheduler's and the MPI's
  own plumbing is: each rank's program (``python -m hpcdist.rank SCRIPT``) is wrapped;
- DeepSpeed's multi-node runners (pdsh, openmpi, slurm) are refused: the commands they start on
  the other nodes would run outside the image;
- pyxis is a set of srun flags: only where srun starts the tasks (Slurm; torchrun's agents,
  srun's ranks).

Each runtime's syntax, and where it comes from:

- Apptainer / SingularityCE: ``apptainer exec [--nv|--rocm] [--bind SRC[:DST[:OPTS]],...] IMAGE
  CMD`` (apptainer-exec(1); SingularityCE's singularity-exec(1) reads the same). The host's
  environment, ``$PWD``, ``$HOME`` and /tmp reach the container by default. Sites: LUMI
  (docs.lumi-supercomputer.eu, "Singularity/Apptainer": ``singularity exec --bind ...``; ROCm
  images), OLCF Frontier (docs.olcf.ornl.gov, "Containers on Frontier": ``apptainer exec
  --rocm``).
- Podman (podman-run(1), docs.podman.io): ``podman run --rm --network host --ipc host -v
  "$PWD:$PWD" -w "$PWD" -e NAME... [--device nvidia.com/gpu=all | --device /dev/kfd --device
  /dev/dri] IMAGE CMD``. Podman passes no host variable unless named with ``-e NAME``; a name
  ending in ``*`` passes every host variable with that prefix (podman 4). ``--uts host`` keeps
  the node's host name, which the launchers and logs use to tell the nodes apart.
- podman-hpc (NERSC Perlmutter, github.com/NERSC/podman-hpc and docs.nersc.gov "Podman at
  NERSC"): ``podman-hpc run --rm [--gpu] [--mpi] ...`` otherwise podman's flags.
- Shifter (NERSC; shifter.readthedocs.io "shifter command", docs.nersc.gov "Shifter"): the image
  and its modules are the job's, by ``#SBATCH --image=IMAGE`` and ``#SBATCH --module=gpu`` (not
  written when a directive of the user's names the modules: Perlmutter's
  ``--module=gpu,nccl-plugin``), then ``shifter [--volume=SRC:DST] CMD`` runs in it, as NERSC's
  ``srun shifter python ...``. Slurm only.
- Pyxis/enroot (github.com/NVIDIA/pyxis README): srun's ``--container-image=IMAGE
  --container-mounts=SRC:DST[:FLAGS],... --container-workdir=DIR``; the tasks get the step's
  environment. GPUs come through enroot's hooks: no flag.
"""

from __future__ import annotations

from types import SimpleNamespace

from hpcdist import validate as v
from hpcdist.shell import Shell
from hpcdist.validate import NotHere, ValidationError

#: ``--container-runtime`` values, in the order --help lists them (apptainer the default).
RUNTIMES = ("apptainer", "singularity", "shifter", "pyxis", "podman-hpc", "podman")
#: ``--container-gpu`` values.
GPUS = ("auto", "nv", "rocm", "none")
#: The variables podman passes into the container (it passes none by itself): the schedulers',
#: the MPIs', hpcdist's, the launch's, the GPUs'. A trailing ``*`` is a prefix.
PODMAN_ENV = ("SLURM_*", "PBS_*", "OMPI_*", "PMI_*", "PMIX_*", "PALS_*", "HPCDIST_*", "NCCL_*",
              "MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
              "HIP_VISIBLE_DEVICES")
PWD = Shell('"$PWD"')
#: The image, as the words name it: the script exports it once, at its top (:func:`named_image`);
#: exported, for the agents that each node's starter runs in ``bash -c``.
IMAGE = Shell('"$HPCDIST_IMAGE"')


def gpu(spec) -> str:
    """``--container-gpu`` as meant: ``auto`` is ``nv`` when GPUs are asked for, else ``none``."""
    if spec.container_gpu == "auto":
        return "nv" if spec.gpus_per_node else "none"
    return spec.container_gpu


def bind_parts(bind: str) -> tuple[str, str, str]:
    """SRC, DST (SRC when not given), OPTS ("" when not given) of a ``--container-bind``."""
    src, dst, opts = (bind.split(":", 2) + ["", ""])[:3]
    return src, dst or src, opts


def bind_text(bind: str) -> str:
    """``SRC:DST[:OPTS]``, DST spelled out (podman's ``-v``, Shifter's ``--volume``)."""
    return ":".join(p for p in bind_parts(bind) if p)


class Runtime:
    """One container runtime: the words that run a command in the image."""

    name = title = program = ""
    #: The GPU kinds it can be asked for (besides none).
    gpus = ("nv", "rocm")
    #: The batch shell can run a command in the image (pyxis's image is reached only by srun's tasks).
    in_batch_shell = True

    def check(self, values: dict, launcher, scheduler) -> None:
        """Refuse what this runtime cannot do with the other values, the launcher (a
        :class:`hpcdist.launchers.Launcher`, passed in: the launchers import this module) and the
        scheduler (passed in: containers import none; its ``runs_srun`` is what a runtime asks)."""

    def words(self, spec, command: list) -> list:
        raise NotImplementedError

    def srun_flags(self, spec) -> list:
        """Flags of the srun that starts the tasks (pyxis): the tasks then run in the image."""
        return []

    def directives(self, spec) -> list[str]:
        """Directive options for the job (shifter's ``--image``), as the scheduler writes them."""
        return []


class Apptainer(Runtime):
    name, title, program = "apptainer", "Apptainer", "apptainer"

    def words(self, spec, command):
        flags = {"nv": ["--nv"], "rocm": ["--rocm"]}.get(gpu(spec), [])
        binds = ["--bind", ",".join(spec.container_binds)] if spec.container_binds else []
        return [self.program, "exec", *flags, *binds, IMAGE, *command]


class Singularity(Apptainer):
    name, title, program = "singularity", "Singularity", "singularity"


class Podman(Runtime):
    name, title, program = "podman", "Podman", "podman"

    def env_names(self, spec) -> list[str]:
        # The user's --env and --propagate names too; not PATH & co (BASE_PROPAGATED): the image's own.
        return list(dict.fromkeys(PODMAN_ENV + tuple(k for k, _ in spec.env + spec.env_expand) + tuple(spec.propagate)))

    def gpu_flags(self, spec) -> list:
        return {"nv": ["--device", "nvidia.com/gpu=all"],
                "rocm": ["--device", "/dev/kfd", "--device", "/dev/dri"]}.get(gpu(spec), [])

    def words(self, spec, command):
        volumes = [w for b in spec.container_binds for w in ("-v", bind_text(b))]
        env = [w for name in self.env_names(spec) for w in ("-e", name)]
        return [self.program, "run", "--rm", "--network", "host", "--ipc", "host", "--uts", "host",
                "-v", Shell('"$PWD:$PWD"'), "-w", PWD, *volumes, *env, *self.gpu_flags(spec),
                IMAGE, *command]


class PodmanHpc(Podman):
    name, title, program = "podman-hpc", "podman-hpc", "podman-hpc"
    gpus = ("nv",)

    def gpu_flags(self, spec):
        # --gpu: NERSC's module for the NVIDIA GPUs; --mpi: the host's Cray MPICH, for mpi4py ranks
        # (the launchers that start the ranks: their starts_ranks; not imported, they import this).
        return (["--gpu"] if gpu(spec) == "nv" else []) + (["--mpi"] if spec.launcher in ("srun", "mpirun") else [])


class Shifter(Runtime):
    name, title, program = "shifter", "Shifter", "shifter"
    gpus = ("nv",)

    def check(self, values, launcher, scheduler):
        if not scheduler.runs_srun:
            raise NotHere("--container-runtime", "shifter",
                          f"Shifter's images are staged by Slurm (#SBATCH --image), not under "
                          f"{values['scheduler']}.", "Use --scheduler slurm, or apptainer/podman.")
        image = values["container_image"]
        if any(c.isspace() or c in "'\"\\" for c in image):
            raise ValidationError("--container-image", image, "an #SBATCH --image value cannot hold spaces or quotes.",
                                  "Give the image as docker:NAME:TAG.")
        for b in values.get("container_binds", ()):
            if ":" not in b:
                raise ValidationError("--container-bind", b, "Shifter needs both paths: SRC:DST.",
                                      f"Give --container-bind {b}:{b}.")

    def words(self, spec, command):
        volumes = [f"--volume={bind_text(b)}" for b in spec.container_binds]
        return [self.program, *volumes, *command]

    def directives(self, spec):
        # A --module of the user's own stands: a second one would replace its list.
        theirs = any("--module=" in line for line in spec.directives)
        return [f"--image={spec.container_image}"] + (["--module=gpu"] if gpu(spec) == "nv" and not theirs else [])


class Pyxis(Runtime):
    name, title, program = "pyxis", "Pyxis (enroot)", "srun"
    in_batch_shell = False

    def check(self, values, launcher, scheduler):
        # per_node reads these of a spec; values holds only those given.
        spec = SimpleNamespace(no_ssh=values.get("no_ssh", False), nodes=values.get("nodes", 1),
                               one_host=scheduler.one_host)
        if not scheduler.runs_srun or not (
                values["launcher"] == "srun" or launcher.per_node(spec)):
            raise ValidationError(
                "--container-runtime", "pyxis",
                f"pyxis puts srun's tasks in the image, and srun does not start the tasks of --launcher "
                f"{values['launcher']} under {values['scheduler']}.",
                "Use --scheduler slurm with --launcher torchrun, accelerate or srun, or another runtime "
                "(apptainer, podman).")

    def words(self, spec, command):
        return list(command)  # srun's flags put the task in the image

    def srun_flags(self, spec):
        mounts = ",".join(["$PWD:$PWD", *spec.container_binds])
        # In double quotes, for $PWD to expand: the binds hold no $ ` " or backslash (check_bind).
        return [Shell('--container-image="$HPCDIST_IMAGE"'), Shell(f'--container-mounts="{mounts}"'),
                Shell('--container-workdir="$PWD"')]


#: The runtimes by name.
BY_NAME = {r.name: r for r in (Apptainer(), Singularity(), Shifter(), Pyxis(), PodmanHpc(), Podman())}


def get(spec) -> Runtime | None:
    """The job's runtime, or None without an image."""
    return BY_NAME[spec.container_runtime] if spec.container_image else None


def wrap(spec, command: list) -> list:
    """``command`` run inside the job's image (unchanged without one)."""
    runtime = get(spec)
    return runtime.words(spec, command) if runtime else list(command)


def named_image(spec) -> str | None:
    """The image the script exports once, at its top, as ``HPCDIST_IMAGE`` (the words name it so,
    :data:`IMAGE`). None without one, and for Shifter, whose image is a directive of the job."""
    runtime = get(spec)
    return spec.container_image if runtime is not None and runtime.name != "shifter" else None


def script_lines(spec, files: tuple) -> list[str]:
    """Lines before the job's set-up: the allocation's ``files`` (by the variable that names each:
    a scheduler may keep them where no image sees them, as PBS's node file in the MOM's aux
    folder), copied into the run folder (in the submit folder, which every runtime shows the
    image) and named there."""
    if get(spec) is None or not files:
        return []
    lines = ["# The allocation's files, where the image sees them."]
    for name in files:
        lines += [f'cp "${name}" "$run_dir/{name.lower()}"', f'export {name}="$run_dir/{name.lower()}"']
    return lines


def in_batch_shell(spec) -> bool:
    """Whether the batch shell can run a command in the job's image (True without one)."""
    runtime = get(spec)
    return runtime is None or runtime.in_batch_shell


def srun_flags(spec) -> list:
    runtime = get(spec)
    return runtime.srun_flags(spec) if runtime else []


def directives(spec) -> list[str]:
    runtime = get(spec)
    return runtime.directives(spec) if runtime else []


def check(values: dict, given: dict, launcher, scheduler) -> None:
    """The container settings' rules (``values``: the spec's fields; ``given``: as set;
    ``launcher`` and ``scheduler``: the job's, handed in)."""
    # Without an image, the container settings were refused by their owner's rule (hpcdist.submission.spec).
    if not values.get("container_image"):
        return
    runtime = BY_NAME[values.get("container_runtime") or "apptainer"]
    wanted = values.get("container_gpu") or "auto"
    if wanted not in ("auto", "none") and wanted not in runtime.gpus:
        raise ValidationError("--container-gpu", wanted, f"{runtime.title} has no {wanted} GPU support here.",
                              f"Use --container-gpu {' or '.join(runtime.gpus)}, or none.")
    launcher.check_container(values, scheduler)
    runtime.check(values, launcher, scheduler)


def option_bind(value, option, scheduler) -> str:
    """The bind check of the job options' table (:mod:`hpcdist.submission.options`)."""
    return check_bind(str(value), option.flag)


def check_bind(value: str, flag: str) -> str:
    """SRC[:DST[:OPTS]]: absolute paths; no comma (apptainer's and pyxis's list separator), no
    ``$``, backquote, double quote or backslash (pyxis's list sits in double quotes)."""
    value = v.check_word(str(value), flag)
    bad = next((c for c in ',$`"\\' if c in value), None)
    if bad is not None:
        raise v.ValidationError(flag, value, f"{bad!r} cannot be in a bind (the runtimes read ',' as a separator).",
                                "Give one bind per --container-bind, with plain paths.")
    src, dst, opts = bind_parts(value)
    for path in (src, dst):
        if not path.startswith("/"):
            raise v.ValidationError(flag, value, f"{path!r} is not an absolute path.",
                                    "Give absolute paths: --container-bind /data or /scratch/me:/data:ro.")
    return value
