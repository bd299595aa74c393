"""The training examples (examples/README.md) train for real, as their README says.

Every ``--scheduler local`` command of examples/README.md runs here as written
(``hpcdist submit ... --wait``, 2 processes, gloo on this CPU), with the flags
a test needs appended to the script's arguments. Each test reads what a user
reads (the log rank 0 prints) and compares what ``--save-final`` wrote:

- rank 0 alone logs, and the loss falls;
- a resumed run ends with the parameters of an uninterrupted one, bit for bit.
  DDP and FSDP2: train 30 steps and stop, then resume to 60. DeepSpeed (ZeRO
  2 and 3), the pipeline and mpi (a DeepSpeed job costs ~20 s here, so one run
  fewer): the uninterrupted run's checkpoint folder is put back in the state a
  job killed after its step-40 checkpoint leaves (later checkpoints gone,
  ``latest`` naming step 40), and the resumed run trains 40 -> 60. Each
  resumed run must say where it resumed, so a resume that silently starts
  from step 0 (and would match too) fails.

The Slurm and PBS commands of the README are rendered with --dry-run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from launch import clean_env, need

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/bootstrap.sh installs it)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
README = os.path.join(EXAMPLES, "README.md")
TIMEOUT = 300  # one job; a DeepSpeed job takes 20-40 s here when the 2 cores are shared

STEP = re.compile(r"^step (\d+) epoch \d+ loss (\d+\.\d+)$", re.M)


def readme_commands() -> list[list[str]]:
    """Every `hpcdist submit` line of the README's bash blocks, as argv."""
    text = open(README).read()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("hpcdist submit "):
                commands.append(shlex.split(line))
    return commands


def scheduler(argv):
    return argv[argv.index("--scheduler") + 1]


def local_command(script: str, config: str | None = None) -> list[str]:
    found = [c for c in readme_commands()
             if scheduler(c) == "local" and script in c and (config is None or config in c)]
    assert len(found) == 1, f"examples/README.md should have one local command for {script} {config or ''}: {found}"
    return found[0]


@pytest.fixture
def workspace(tmp_path):
    """A folder to submit from, as the README's repository root: examples/ is there."""
    os.symlink(EXAMPLES, tmp_path / "examples")
    return tmp_path


def submit(argv: list[str], cwd, *extra: str) -> str:
    """Run a README command (`hpcdist submit ... --wait script`) with ``extra``
    appended to the script's arguments; return the job's log (its stdout)."""
    assert argv[:2] == ["hpcdist", "submit"] and "--wait" in argv
    command = [sys.executable, "-m", "hpcdist"] + argv[1:] + list(extra)
    env = clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{shlex.join(command)} did not finish within {TIMEOUT} s:\n{e.stdout}\n{e.stderr}")
    assert proc.returncode == 0, f"{shlex.join(command)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def losses(log: str) -> list[tuple[int, float]]:
    return [(int(step), float(loss)) for step, loss in STEP.findall(log)]


def assert_trained(log: str, first: int = 1, last: int = 60) -> None:
    """Rank 0 alone logs (each step once, one evaluation), from ``first`` to ``last``, and the loss falls."""
    steps = losses(log)
    assert steps, f"no 'step N epoch E loss X' lines in the log:\n{log}"
    numbers = [s for s, _ in steps]
    assert numbers == sorted(set(numbers)), f"steps logged more than once (not by rank 0 alone?): {numbers}\n{log}"
    assert (numbers[0], numbers[-1]) == (first, last), log
    assert log.count("eval loss") == 1, log
    if first == 1:
        assert steps[-1][1] < steps[0][1] / 2, f"the loss did not fall: {steps}"


def assert_resumed(log: str, at: int) -> None:
    assert re.search(rf"^resumed from .* at step {at}$|^resumed at step {at}$", log, re.M), log
    assert_trained(log, first=at + 1)


def load(path) -> dict:
    return torch.load(path, map_location="cpu")


def assert_same_parameters(a, b) -> None:
    left, right = load(a), load(b)
    assert left.keys() == right.keys()
    differ = [k for k in left if not torch.equal(left[k], right[k])]
    assert not differ, f"resumed and uninterrupted runs differ in {differ}"


def example_module(name: str):
    """examples/<name>/train.py as a module, for its model class."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, name, "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def preempt_after(folder, step: int) -> None:
    """Leave ``folder`` as a job killed right after its checkpoint of ``step``
    leaves it: later checkpoints gone, DeepSpeed's ``latest`` naming ``step``."""
    tag = f"step-{step:06d}"
    later = [n for n in os.listdir(folder) if n.startswith("step-") and n.split(".")[0] > tag]
    assert later, f"no checkpoint after {tag} in {folder}: {os.listdir(folder)}"
    for name in later:
        path = os.path.join(folder, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    if os.path.exists(os.path.join(folder, "latest")):
        with open(os.path.join(folder, "latest"), "w") as f:
            f.write(tag)


# -- DDP and FSDP2: train N steps, stop, resume to 2N ---------------------------


def test_ddp_trains_and_resumes_bitwise(workspace):
    command = local_command("examples/ddp/train.py")
    # Accumulation (no_sync) and bf16 autocast on, so that their paths are the ones compared.
    flags = ["--deterministic", "--accum", "2", "--amp", "bf16"]
    full = submit(command, workspace, *flags, "--checkpoint-dir", "full", "--save-final", "full.pt")
    assert "DDP on 2 ranks (torchrun, gloo, cpu)" in full
    assert_trained(full)
    assert re.search(r"eval loss [\d.]+ accuracy 0\.(8|9)\d+ on 297 test samples from 2 ranks", full), full

    half = submit(command, workspace, *flags, "--steps", "30", "--checkpoint-dir", "half", "--save-final", "half.pt")
    assert_trained(half, last=30)
    resumed = submit(command, workspace, *flags, "--checkpoint-dir", "half", "--resume", "--save-final", "resumed.pt")
    assert_resumed(resumed, at=30)
    assert_same_parameters(workspace / "full.pt", workspace / "resumed.pt")
    with pytest.raises(AssertionError):  # the comparison can fail: 30 steps are not 60
        assert_same_parameters(workspace / "full.pt", workspace / "half.pt")

    # The checkpoint has no "module." prefix: it loads into the plain model.
    saved = sorted(os.listdir(workspace / "half"))
    assert saved == ["step-000040.pt", "step-000060.pt"], saved
    checkpoint = load(workspace / "half" / "step-000060.pt")
    example_module("ddp").Net().load_state_dict(checkpoint["model"])
    assert checkpoint["step"] == 60


def test_fsdp2_trains_and_resumes_bitwise(workspace):
    command = local_command("examples/fsdp2/train.py")
    flags = ["--deterministic", "--amp", "bf16"]  # a mixed precision policy: bf16 gathers, fp32 reductions
    full = submit(command, workspace, *flags, "--checkpoint-dir", "full", "--save-final", "full.pt")
    assert "FSDP2 on 2 ranks (torchrun, gloo, cpu)" in full
    assert_trained(full)

    half = submit(command, workspace, *flags, "--steps", "30", "--checkpoint-dir", "half", "--save-final", "half.pt")
    assert_trained(half, last=30)
    # Sharded: one file per rank and DCP's metadata; no .tmp folder is left behind.
    assert sorted(os.listdir(workspace / "half")) == ["step-000020", "step-000030"]
    assert sorted(os.listdir(workspace / "half" / "step-000030")) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    resumed = submit(command, workspace, *flags, "--checkpoint-dir", "half", "--resume", "--save-final", "resumed.pt")
    assert_resumed(resumed, at=30)
    assert_same_parameters(workspace / "full.pt", workspace / "resumed.pt")
    with pytest.raises(AssertionError):
        assert_same_parameters(workspace / "full.pt", workspace / "half.pt")
    example_module("fsdp2").Net().load_state_dict(load(workspace / "full.pt"))


# -- DeepSpeed, the pipeline, mpi: killed after step 40, resumed to 60 ----------


@pytest.mark.parametrize("config,flags,resume", [
    # ZeRO 1 and 2 share DeepSpeed's optimizer and checkpoint code (DeepSpeedZeroOptimizer,
    # gradients partitioned or not): stage 1 trains with the bf16 switch, stages 2 and
    # 3 (DeepSpeedZeroOptimizer_Stage3, sharded weights) are resumed.
    ("zero1.json", ["--bf16"], False),
    ("zero2.json", [], True),
    ("zero3.json", [], True),
], ids=["zero1-bf16", "zero2", "zero3"])
def test_deepspeed_zero_trains_and_resumes_bitwise(workspace, config, flags, resume):
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (scripts/bootstrap.sh installs it)")
    command = local_command("examples/deepspeed/train.py", f"examples/deepspeed/{config}")
    stage = config[4]
    full = submit(command, workspace, "--deterministic", *flags, "--save-final", "full.pt")
    assert f"DeepSpeed ZeRO-{stage} on 2 ranks (deepspeed, gloo, cpu, config examples/deepspeed/{config})" in full
    dtype = "bfloat16" if "--bf16" in flags else "float32"
    optimizer = "DeepSpeedZeroOptimizer_Stage3" if stage == "3" else "DeepSpeedZeroOptimizer"
    assert f"ZeRO stage {stage}, weights and activations in torch.{dtype}, optimizer {optimizer} over AdamW" in full
    assert_trained(full)
    assert "built successfully" not in full  # nothing was compiled
    example_module("deepspeed").net().load_state_dict(load(workspace / "full.pt"))

    folder = workspace / "checkpoints" / "deepspeed"
    assert (folder / "latest").read_text() == "step-000060"
    assert sorted(n for n in os.listdir(folder) if n.startswith("step-")) == ["step-000040", "step-000060"]
    if not resume:
        return
    preempt_after(folder, 40)
    resumed = submit(command, workspace, "--deterministic", *flags, "--resume", "--save-final", "resumed.pt")
    assert_resumed(resumed, at=40)
    assert_same_parameters(workspace / "full.pt", workspace / "resumed.pt")


def test_pipeline_trains_and_resumes_bitwise(workspace):
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (scripts/bootstrap.sh installs it)")
    command = local_command("examples/pipeline/train.py")
    full = submit(command, workspace, "--deterministic", "--save-final", "full.pt")
    assert "DeepSpeed pipeline, 2 stages on 2 ranks (deepspeed, gloo" in full
    assert "stage=0 layers=2" in full and "stage=1 layers=3" in full
    assert_trained(full)

    preempt_after(workspace / "checkpoints" / "pipeline", 40)
    resumed = submit(command, workspace, "--deterministic", "--resume", "--save-final", "resumed.pt")
    assert_resumed(resumed, at=40)
    assert_same_parameters(workspace / "full.pt", workspace / "resumed.pt")
    # The stages' layers, gathered, load into the same layers as one nn.Sequential.
    module = example_module("pipeline")
    torch.nn.Sequential(*(spec.build() for spec in module.layers())).load_state_dict(load(workspace / "full.pt"))


def test_mpi_trains_and_resumes_bitwise(workspace):
    need("mpirun")
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (scripts/bootstrap.sh installs it)")
    command = local_command("examples/mpi/train.py")
    full = submit(command, workspace, "--deterministic", "--save-final", "full.pt")
    assert re.search(r"MPI \+ DDP on 2 ranks \(Open MPI v[\d.]+; openmpi, gloo, cpu\)", full), full
    assert_trained(full)

    preempt_after(workspace / "checkpoints" / "mpi", 40)
    resumed = submit(command, workspace, "--deterministic", "--resume", "--save-final", "resumed.pt")
    assert_resumed(resumed, at=40)
    assert_same_parameters(workspace / "full.pt", workspace / "resumed.pt")


def test_synthetic_data_without_a_launcher(tmp_path):
    """--synthetic trains too, and an example runs as a plain single process."""
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "ddp", "train.py"), "--synthetic", "--steps", "30"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "DDP on 1 rank (single, gloo, cpu)" in proc.stdout
    assert_trained(proc.stdout, last=30)


# -- the README --------------------------------------------------------------

TESTED_LOCALLY = [("examples/ddp/train.py", None), ("examples/fsdp2/train.py", None),
                  ("examples/deepspeed/train.py", "examples/deepspeed/zero1.json"),
                  ("examples/deepspeed/train.py", "examples/deepspeed/zero2.json"),
                  ("examples/deepspeed/train.py", "examples/deepspeed/zero3.json"),
                  ("examples/pipeline/train.py", None), ("examples/mpi/train.py", None)]


def test_every_local_command_of_the_readme_is_run_above():
    local = [c for c in readme_commands() if scheduler(c) == "local"]
    assert sorted(map(tuple, local)) == sorted(tuple(local_command(s, c)) for s, c in TESTED_LOCALLY)
    scripts = {os.path.relpath(p, ROOT) for p in (os.path.join(EXAMPLES, d, "train.py") for d in os.listdir(EXAMPLES))
               if os.path.isfile(p)}
    # Every example folder the README covers has a Slurm and a PBS command too.
    for script, _ in TESTED_LOCALLY:
        assert script in scripts
        assert {scheduler(c) for c in readme_commands() if script in c} == {"local", "slurm", "pbs"}, script


@pytest.mark.parametrize("command", [c for c in readme_commands() if scheduler(c) != "local"],
                         ids=lambda c: f"{scheduler(c)}-{next(w for w in c if w.endswith('train.py')).split('/')[1]}")
def test_cluster_commands_of_the_readme_render(command, workspace):
    argv = [sys.executable, "-m", "hpcdist", "submit", "--dry-run"] + command[2:]
    proc = subprocess.run(argv, cwd=workspace, env=clean_env(), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    script = next(w for w in command if w.endswith("train.py"))
    launch = [line for line in proc.stdout.splitlines() if script in line and not line.startswith("#")]
    assert launch, proc.stdout
    if "--deepspeed-config" in command:
        config = command[command.index("--deepspeed-config") + 1]
        assert f"--deepspeed_config {config}" in launch[-1]
    assert "would run: " + ("sbatch" if scheduler(command) == "slurm" else "qsub") in proc.stderr
