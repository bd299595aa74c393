"""Containers (``--container-image``): each runtime's words under each kind of launcher, the
refusals, and hostile values quoted. Rendered scripts, read as bash reads them (shlex)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from hpcdist.submission.render import launch_lines, render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError


def spec(**values):
    base = dict(scheduler="slurm", script="train.py", nodes=2, procs_per_node=2)
    return build_spec({**base, **values}, check_files=False)


def launch(**values) -> str:
    return "\n".join(launch_lines(spec(**values)))


def words_of(line: str) -> list[str]:
    """A command's words as bash reads them, its `` \\`` continuations joined (shlex does not)."""
    return shlex.split(line.replace("\\\n", " "))


def last_words(**values) -> list[str]:
    return launch_words(spec(**values))


def launch_words(s) -> list[str]:
    """The launch line's words; where srun starts torchrun through ``bash -c '... exec CMD'`` (each
    node's NODE_RANK first, for torchrun's is_host: tests/test_ports.py), srun's words then CMD's."""
    words = words_of(launch_lines(s)[-1])
    at = words.index("bash") if "bash" in words else -1
    if at >= 0 and words[at + 1] == "-c" and "torchrun" in words[at + 2]:
        inner = words_of(words[at + 2])
        words = words[:at] + inner[inner.index("exec") + 1:]
    return words


#: The image, as the launch lines name it: the script sets it once, at its top.
IMAGE = "$HPCDIST_IMAGE"


def test_torchrun_runs_inside_apptainer_spread_by_srun():
    words = last_words(container_image="/images/pt.sif", gpus_per_node=4)
    at = words.index("apptainer")
    assert words[0] == "srun" and "torchrun" not in words[:at]
    assert words[at:at + 4] == ["apptainer", "exec", "--nv", IMAGE]
    assert words[at + 4] == "torchrun"
    assert "\nexport HPCDIST_IMAGE=/images/pt.sif\n" in render(
        spec(container_image="/images/pt.sif", gpus_per_node=4), workdir="/tmp")


def test_gpu_auto_is_none_without_gpus_and_rocm_when_asked():
    assert "--nv" not in last_words(container_image="/i.sif")
    words = last_words(container_image="/i.sif", container_gpu="rocm", container_binds=["/data", "/s:/scratch:ro"])
    at = words.index("apptainer")
    assert words[at:at + 6] == ["apptainer", "exec", "--rocm", "--bind", "/data,/s:/scratch:ro", IMAGE]


def test_singularity_is_apptainers_syntax():
    words = last_words(container_image="/i.sif", container_runtime="singularity")
    assert words[words.index("singularity") + 1] == "exec"


def test_srun_runs_on_the_host_and_each_rank_in_the_image():
    words = last_words(launcher="srun", container_image="img", container_runtime="podman")
    assert words[0] == "srun" and "--kill-on-bad-exit=1" in words
    at = words.index("podman")
    assert words[at:at + 3] == ["podman", "run", "--rm"]
    assert words[-5:] == [IMAGE, "python", "-m", "hpcdist.rank", "train.py"]


def test_the_jobs_set_up_runs_in_the_image():
    """The image's python must have hpcdist (every rank starts as python -m hpcdist.rank): the
    job's set-up runs there, with it, before the launch, and stops the job if it has not."""
    script = render(spec(launcher="srun", container_image="img", container_runtime="podman"), workdir="/tmp")
    setup = words_of(script.split("\n# The nodes", 1)[1].split("\n", 1)[1].split("\nsource", 1)[0])
    assert setup[:2] == ["podman", "run"] and setup[setup.index(IMAGE):][:4] == [IMAGE, "python", "-m", "hpcdist"]
    assert setup[setup.index(IMAGE) + 4] == "job-setup"


def test_mpirun_starts_each_rank_in_the_image():
    words = last_words(launcher="mpirun", container_image="/i.sif")
    assert words[0] == "mpirun" and words.index("mpirun") < words.index("apptainer")
    assert words[-5:] == [IMAGE, "python", "-m", "hpcdist.rank", "train.py"]


def test_launcher_none_runs_the_program_in_the_image():
    assert last_words(launcher="none", container_image="/i.sif") == [
        "apptainer", "exec", IMAGE, "python", "train.py"]


def test_podman_passes_the_jobs_variables_and_the_users_names():
    words = last_words(container_image="img", container_runtime="podman", env=["FOO=bar baz"], propagate=["MY_VAR"],
                       gpus_per_node=2)
    names = [words[i + 1] for i, w in enumerate(words) if w == "-e"]
    for name in ("SLURM_*", "PBS_*", "OMPI_*", "PMI_*", "PMIX_*", "HPCDIST_*", "MASTER_ADDR", "MASTER_PORT",
                 "NODE_RANK", "FOO", "MY_VAR"):
        assert name in names
    assert "PATH" not in names and "bar baz" not in words  # the image's PATH; values stay on the host
    at = words.index("podman")
    assert words[at:at + 11] == ["podman", "run", "--rm", "--network", "host", "--ipc", "host", "--uts", "host",
                                 "-v", "$PWD:$PWD"]  # shlex keeps "$PWD" unexpanded
    assert ["--device", "nvidia.com/gpu=all", IMAGE, "torchrun"] == words[words.index(IMAGE) - 2:words.index(IMAGE) + 2]


def test_podman_rocm_devices_and_binds():
    words = last_words(container_image="img", container_runtime="podman", container_gpu="rocm",
                       container_binds=["/data", "/s:/scratch:ro"])
    assert "/dev/kfd" in words and "/dev/dri" in words
    assert ["-v", "/data:/data"] == words[words.index("/data:/data") - 1:words.index("/data:/data") + 1]
    assert "/s:/scratch:ro" in words


def test_accelerate_node_rank_set_outside_then_passed_in():
    line = launch_lines(spec(launcher="accelerate", container_image="img", container_runtime="podman"))[-1]
    inner = words_of(line)[-1]  # bash -c '...', a script of its own lines
    assert inner.split() [:3] == ['export', 'NODE_RANK="$SLURM_NODEID"', "exec"] and "exec podman run" in inner
    assert "-e NODE_RANK" in inner and '--machine_rank="$NODE_RANK"' in inner


def test_podman_hpc_gpu_and_mpi_flags():
    words = last_words(launcher="srun", container_image="img", container_runtime="podman-hpc", gpus_per_node=4)
    at = words.index("podman-hpc")
    assert words[at + 1] == "run" and "--gpu" in words and "--mpi" in words
    assert "--gpu" in last_words(container_image="img", container_runtime="podman-hpc", gpus_per_node=4)


def test_shifter_directive_and_words():
    s = spec(container_image="docker:nersc/pytorch:24.06", container_runtime="shifter", gpus_per_node=4,
             container_binds=["/global/cfs/p:/data"])
    script = render(s, workdir="/tmp")
    # The image and its GPU module are the job's (NERSC's srun shifter python ...).
    assert "#SBATCH --image=docker:nersc/pytorch:24.06\n#SBATCH --module=gpu\n" in script
    words = launch_words(s)
    at = words.index("shifter")
    assert words[at:at + 3] == ["shifter", "--volume=/global/cfs/p:/data", "torchrun"]
    # A --module directive of the user's (Perlmutter's gpu,nccl-plugin) is not doubled.
    own = render(spec(container_image="docker:nersc/pytorch:24.06", container_runtime="shifter", gpus_per_node=4,
                      directives=["--module=gpu,nccl-plugin"]), workdir="/tmp")
    assert own.count("--module=") == 1 and "#SBATCH --module=gpu,nccl-plugin\n" in own


def test_without_hpcdist_on_the_batch_host_the_jobs_set_up_runs_in_the_image():
    script = render(spec(container_image="/images/torch.sif", container_runtime="apptainer"), workdir="/tmp")
    assert '\napptainer exec "$HPCDIST_IMAGE" python -m hpcdist job-setup --scheduler slurm' in script
    # pyxis reaches its image only through srun's tasks: the set-up runs on the host.
    pyxis = render(spec(container_image="nvcr.io#nvidia/pytorch:24.01-py3", container_runtime="pyxis"),
                   workdir="/tmp")
    assert "\nhpcdist job-setup --scheduler slurm" in pyxis


def test_pyxis_is_srun_flags_for_the_agents_and_the_ranks():
    for launcher in ("torchrun", "srun"):
        words = last_words(launcher=launcher, container_image="nvcr.io#nvidia/pytorch:24.01-py3",
                           container_runtime="pyxis", container_binds=["/data"])
        assert "--container-image=$HPCDIST_IMAGE" in words
        assert "--container-mounts=$PWD:$PWD,/data" in words and "--container-workdir=$PWD" in words
        assert words.index("--container-workdir=$PWD") < words.index(launcher if launcher == "torchrun" else "python")


@pytest.mark.parametrize("values,flag", [
    (dict(container_runtime="podman"), "--container-runtime"),
    (dict(container_gpu="nv"), "--container-gpu"),
    (dict(container_binds=["/data"]), "--container-bind"),
])
def test_a_container_setting_without_an_image_is_refused(values, flag):
    with pytest.raises(ValidationError) as e:
        spec(**values)
    assert e.value.field == flag and "--container-image" in str(e.value)


@pytest.mark.parametrize("values,field,words", [
    (dict(launcher="deepspeed"), "--container-image", "--no-ssh"),
    (dict(launcher="deepspeed", deepspeed_runner="openmpi"), "--container-image", "outside the image"),
    (dict(launcher="mpirun", container_runtime="pyxis"), "--container-runtime", "srun does not start"),
    (dict(launcher="none", container_runtime="pyxis"), "--container-runtime", "srun does not start"),
    (dict(scheduler="pbs", container_runtime="pyxis"), "--container-runtime", "srun does not start"),
    (dict(scheduler="pbs", container_runtime="shifter"), "--container-runtime", "Slurm"),
    (dict(container_runtime="shifter", container_binds=["/data"]), "--container-bind", "SRC:DST"),
    (dict(container_runtime="podman-hpc", container_gpu="rocm"), "--container-gpu", "no rocm"),
    (dict(container_binds=["data"]), "--container-bind", "absolute"),
    (dict(container_binds=["/a,/b"]), "--container-bind", "separator"),
    (dict(container_binds=["/a$(reboot)"]), "--container-bind", "'$'"),
])
def test_refused_with_field_and_fix(values, field, words):
    with pytest.raises(ValidationError) as e:
        spec(container_image="img", **values)
    assert e.value.field == field and words in str(e.value), str(e.value)


def test_deepspeed_no_ssh_and_one_host_run_inside():
    inner = words_of(last_words(launcher="deepspeed", no_ssh=True, container_image="/i.sif")[-1])
    assert inner[inner.index("apptainer"):inner.index("apptainer") + 4] == ["apptainer", "exec", IMAGE, "deepspeed"]
    one = last_words(launcher="deepspeed", nodes=1, container_image="/i.sif")
    assert one[:4] == ["apptainer", "exec", IMAGE, "deepspeed"]


def test_newline_in_the_image_is_refused():
    with pytest.raises(ValidationError) as e:
        spec(container_image="img\nreboot")
    assert e.value.field == "--container-image"


@pytest.mark.parametrize("runtime", ["apptainer", "podman", "podman-hpc"])
def test_a_hostile_image_name_stays_one_word(runtime, tmp_path):
    hostile = "/x/i'; touch pwned; echo '$(id)`id`.sif"
    s = spec(container_image=hostile, container_runtime=runtime, container_binds=["/d i r:/data"],
             launcher="srun")
    script = render(s, workdir=str(tmp_path))
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    # Set once, as one word; every command names it.
    (line,) = [line for line in script.splitlines() if line.startswith("export HPCDIST_IMAGE=")]
    shown = subprocess.run(["bash", "-c", f'{line}\nprintf %s "$HPCDIST_IMAGE"'], cwd=tmp_path,
                           capture_output=True, text=True)
    assert shown.stdout == hostile
    assert all(IMAGE in words_of(line) for line in launch_lines(s))
    assert not (tmp_path / "pwned").exists()


def test_no_container_leaves_the_words_as_they_were():
    plain = launch(launcher="srun")
    assert "apptainer" not in plain and "podman" not in plain
    assert render(spec(), workdir="/tmp").count("#SBATCH --image") == 0
