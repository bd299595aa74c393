"""Rendered job scripts: golden files for every scheduler x dialect x launcher, bash -n, quoting."""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

import pytest

from hpcdist.shell import quote
from hpcdist.submission.render import render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(HERE, "golden")
UPDATE = os.environ.get("HPCDIST_UPDATE_GOLDEN") == "1"

SCHEDULERS = [("slurm", None), ("pbs", "pro"), ("pbs", "torque"), ("local", None)]
LAUNCHERS = [
    ("torchrun", {}),
    ("deepspeed", {"deepspeed_config": "ds_config.json"}),
    ("deepspeed-nossh", {"launcher": "deepspeed", "no_ssh": True}),
    ("mpirun-openmpi", {"launcher": "mpirun"}),
    ("mpirun-mpich", {"launcher": "mpirun", "mpi": "mpich"}),
    ("srun", {}),
    ("accelerate", {}),
    ("none", {}),  # the script runs once and starts its own processes
]


def spec_for(scheduler, dialect, launcher, extra, **more):
    values = dict(
        scheduler=scheduler, dialect=dialect, launcher=extra.get("launcher", launcher), nodes=2,
        gpus_per_node=4 if scheduler != "local" else 0, procs_per_node=None if scheduler != "local" else 2,
        walltime="1h30m" if scheduler != "local" else None, modules=["cuda/12.1"] if scheduler != "local" else [],
        conda="myenv" if scheduler != "local" else None, env=["NCCL_DEBUG=INFO"],
        script="train.py", script_args=["--lr", "0.1"],
    )
    values.update({k: v for k, v in extra.items() if k != "launcher"})
    values.update(more)
    return build_spec(values, check_files=False)


CASES = [(s, d, name, extra) for s, d in SCHEDULERS for name, extra in LAUNCHERS
         if not (name == "srun" and s != "slurm")] + [
    # Each MPI flavour's ranks (with --cpus-per-proc: its CPU binding), and PBS's node agents
    # started by each flavour's launcher or by pbsdsh.
    ("pbs", "pro", "mpirun-intel", {"launcher": "mpirun", "mpi": "intel", "cpus_per_proc": 2}),
    ("pbs", "pro", "mpirun-pals", {"launcher": "mpirun", "mpi": "pals", "cpus_per_proc": 2}),
    ("pbs", "pro", "torchrun-mpich", {"launcher": "torchrun", "mpi": "mpich"}),
    ("pbs", "pro", "torchrun-intel", {"launcher": "torchrun", "mpi": "intel"}),
    ("pbs", "pro", "torchrun-pals", {"launcher": "torchrun", "mpi": "pals"}),
    ("pbs", "pro", "deepspeed-nossh-pals", {"launcher": "deepspeed", "no_ssh": True, "mpi": "pals"}),
    ("pbs", "pro", "torchrun-pbsdsh", {"launcher": "torchrun", "pbs_spread": "pbsdsh"}),
    ("pbs", "torque", "deepspeed-nossh-pbsdsh", {"launcher": "deepspeed", "no_ssh": True, "pbs_spread": "pbsdsh"}),
]


@pytest.mark.parametrize("scheduler,dialect,name,extra", CASES,
                         ids=[f"{s}{'-' + d if d else ''}-{n}" for s, d, n, _ in CASES])
def test_golden_and_bash_syntax(scheduler, dialect, name, extra):
    spec = spec_for(scheduler, dialect, name, extra)
    text = render(spec, command_line="hpcdist submit ...", workdir="/home/alice/project")
    path = os.path.join(GOLDEN, f"{scheduler}{'-' + dialect if dialect else ''}-{name}.sh")
    if UPDATE or not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"{path} differs; HPCDIST_UPDATE_GOLDEN=1 rewrites it after review"
    check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    # Directives before the first command: schedulers stop reading at the first one.
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    prefix = {"slurm": "#SBATCH", "pbs": "#PBS"}.get(scheduler)
    if prefix:
        assert not [line for line in lines[first_command:] if line.startswith(prefix)]
        assert [line for line in lines[:first_command] if line.startswith(prefix)]


def test_user_directives_come_first():
    spec = build_spec(dict(scheduler="slurm", script="t.py", directives=["--constraint=a100"]), check_files=False)
    directives = [line for line in render(spec).splitlines() if line.startswith("#SBATCH")]
    assert directives[0] == "#SBATCH --constraint=a100"


HOSTILE = [
    "$(touch {sentinel})", "`touch {sentinel}`", "; touch {sentinel}", "&& touch {sentinel}",
    "it's \"quoted\"", "line\nbreak; touch {sentinel}", "--leading-dash", "日本語 ünïcödé", "x" * 5000,
]


@pytest.mark.parametrize("payload", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("scheduler", ["slurm", "pbs", "local"])
def test_hostile_values_are_carried_literally(payload, scheduler, tmp_path):
    sentinel = tmp_path / "pwned"
    value = payload.format(sentinel=sentinel)
    one_line = value.replace("\n", " ").lstrip("-")  # a leading '-' is refused there (tests/submission/test_hostile.py)
    spec = build_spec(dict(scheduler=scheduler, script="train.py", script_args=[value, "--x", value],
                           env=[f"PAYLOAD={value}"], conda=one_line, modules=[one_line]), check_files=False)
    text = render(spec, command_line="hpcdist submit " + shlex.quote(value), workdir=str(tmp_path))
    assert subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True).returncode == 0
    # The launch line hands the script exactly these arguments: run with each command that may
    # start it printing its arguments instead; a starter whose command is `bash -c ...` (a
    # torchrun agent's words, for its $NODE_RANK) runs that, as its node 0 would.
    launch = text.split("\n# Start ", 1)[1].split("\n", 1)[1]
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    starter = 'for ((i = 1; i <= $#; i++)); do [ "${!i}" != bash ] || exec "${@:i}"; done; '
    for name in ("srun", "mpirun", "python", "torchrun"):
        (stubs / name).write_text(f"#!/bin/bash\n{starter if name != 'torchrun' else ''}printf '%s\\0' \"$@\"\n")
        (stubs / name).chmod(0o755)
    node0 = dict(NODE_RANK="0", SLURM_NODEID="0", OMPI_COMM_WORLD_RANK="0")
    words = subprocess.run(["bash", "-c", launch], capture_output=True, env={
        **os.environ, **node0, "PATH": f"{stubs}:{os.environ['PATH']}"}).stdout.decode().split("\0")[:-1]
    assert words[-4:] == ["train.py", value, "--x", value], words
    assert not sentinel.exists()
    # Running the environment part sets the value and executes none of the payload.
    exports = "export PAYLOAD=" + text.split("\nexport PAYLOAD=", 1)[1].split("\n", 1)[0]
    out = subprocess.run(["bash", "-c", exports + '\nprintf %s "$PAYLOAD"'], capture_output=True, text=True)
    assert out.stdout == value
    assert not sentinel.exists()


@pytest.mark.parametrize("values,needles", [
    (dict(scheduler="pbs", job_name=".hidden"), ["--job-name", ".hidden"]),
    (dict(scheduler="pbs", job_name="a=b"), ["--job-name", "="]),
    (dict(scheduler="slurm", walltime="90"), ["--walltime", "90m"]),
    (dict(scheduler="slurm", gpus_per_node=4, directives=["--gres=gpu:4"]), ["--gres", "--gpus-per-node"]),
    (dict(scheduler="slurm", nodes=0), ["--nodes", "0"]),
    (dict(scheduler="local", launcher="srun"), ["--launcher", "srun"]),
    (dict(scheduler="slurm", queue="-gpu"), ["--queue"]),
    (dict(scheduler="pbs", qos="high"), ["--qos", "queue"]),
])
def test_mistakes_are_caught_before_the_queue(values, needles):
    with pytest.raises(ValidationError) as info:
        build_spec({"script": "t.py", **values}, check_files=False)
    for needle in needles:
        assert needle in str(info.value)


def test_missing_script_is_caught(tmp_path):
    with pytest.raises(ValidationError, match="SCRIPT.*does not exist"):
        build_spec({"script": str(tmp_path / "nope.py")})


def test_user_template_extends_ours(tmp_path):
    own = tmp_path / "mine.sh.j2"
    own.write_text('{% extends "hpcdist/slurm.sh.j2" %}\n{% block environment %}\n'
                   'source /site/setup.sh\n{{ super() | raw }}{% endblock %}\n')
    spec = build_spec(dict(scheduler="slurm", script="t.py", template=str(own)), check_files=False)
    text = render(spec)
    assert "source /site/setup.sh" in text and "#SBATCH --nodes=1" in text


def test_template_folder_replaces_ours_and_can_extend_it(tmp_path):
    (tmp_path / "slurm.sh.j2").write_text(
        '{% extends "hpcdist/slurm.sh.j2" %}\n{% block directives %}#SBATCH --constraint=site\n'
        '{{ super() | raw }}{% endblock %}\n')
    spec = build_spec(dict(scheduler="slurm", script="t.py", template_dir=str(tmp_path)), check_files=False)
    lines = render(spec).splitlines()
    assert "#SBATCH --constraint=site" in lines and "#SBATCH --nodes=1" in lines
    # The other schedulers still use ours.
    pbs = build_spec(dict(scheduler="pbs", script="t.py", template_dir=str(tmp_path)), check_files=False)
    assert "#PBS -N t" in render(pbs)


def test_a_template_may_use_another_schedulers_filters(tmp_path):
    """Each scheduler's filters are registered when a render first asks for them; the script
    runs twice in fresh processes (the template compiled, then read from the bytecode cache)."""
    own = tmp_path / "mine.sh.j2"
    own.write_text('{% extends "hpcdist/slurm.sh.j2" %}\n'
                   '{% block workdir %}# pbs: {{ spec.walltime_s | pbs_walltime }}\n'
                   '{{ super() | raw }}{% endblock %}\n')
    code = ("import sys; from hpcdist.submission.render import render; from hpcdist.submission.spec import build_spec\n"
            "plain = render(build_spec(dict(scheduler='slurm', script='t.py', walltime='90m'), check_files=False))\n"
            "assert 'hpcdist.schedulers.pbs.submit' not in sys.modules\n"
            f"print(render(build_spec(dict(scheduler='slurm', script='t.py', walltime='90m', template={str(own)!r}),"
            " check_files=False)))")
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
        assert proc.returncode == 0, proc.stderr
        assert "# pbs: 01:30:00" in proc.stdout and "#SBATCH --time=01:30:00" in proc.stdout


def test_deepspeed_pdsh_refuses_values_it_would_expand_on_other_nodes():
    values = dict(scheduler="slurm", nodes=2, launcher="deepspeed", script="t.py", env=["TOKEN=a$(b)"])
    with pytest.raises(ValidationError, match="--env.*double quotes.*--deepspeed-runner openmpi"):
        build_spec(values, check_files=False)
    build_spec({**values, "deepspeed_runner": "openmpi"}, check_files=False)
    build_spec({**values, "no_ssh": True}, check_files=False)


def test_deepspeed_env_file_leaves_out_values_it_would_expand(tmp_path):
    """DeepSpeed's pdsh runner exports its environment file's values on the other nodes inside
    double quotes: the job's set-up leaves out those that would be expanded there."""
    spec = build_spec(dict(scheduler="slurm", nodes=2, launcher="deepspeed", script="t.py",
                           env=["SAFE=ok"]), check_files=False)
    setup = render(spec).split("job-setup", 1)[1].split("\nsource", 1)[0]
    assert "--deepspeed-env" in setup and "--pass SAFE" in setup
    env = {"PATH": os.environ["PATH"], "SAFE": "ok", "NCCL_DEBUG": "INFO", "NCCL_X": "a$(touch x)",
           "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "1(x2)"}
    argv = ["job-setup", "--scheduler", "slurm", "--nodes", "2", "--dir", str(tmp_path), "--hostfile",
            "deepspeed:1", "--deepspeed-env", "--pass", "SAFE"]
    subprocess.run([sys.executable, "-m", "hpcdist", *argv], env=env, check=True, capture_output=True)
    lines = (tmp_path / "deepspeed_env").read_text().splitlines()
    assert "SAFE=ok" in lines and "NCCL_DEBUG=INFO" in lines and "MASTER_ADDR=n1" in lines
    assert not [line for line in lines if line.startswith("NCCL_X")]
    assert f"export DS_ENV_FILE={tmp_path}/deepspeed_env" in (tmp_path / "job.env").read_text()


@pytest.mark.parametrize("launcher", ["deepspeed", "torchrun", "srun", "mpirun"])
def test_the_deepspeed_config_reaches_the_script_under_every_launcher(launcher):
    spec = build_spec(dict(scheduler="slurm", script="train.py", script_args=["--lr", "1"], launcher=launcher,
                           deepspeed_config="ds.json"), check_files=False)
    # (torchrun's agent runs in bash -c '...' for its $NODE_RANK: the line ends the quote)
    ending = "'\n" if launcher == "torchrun" else "\n"
    assert "train.py --lr 1 --deepspeed_config ds.json" + ending in render(spec)


#: Walltime and preemption: the warning, the trap, the launch in the background, the requeue.
STOPPING = [
    ("slurm", None, "torchrun", {"requeue": 2, "max_restarts": 1, "min_nodes": 1}),
    ("pbs", "pro", "deepspeed", {"requeue": 3, "signal_margin": "10m"}),
    ("pbs", "torque", "mpirun-openmpi", {"launcher": "mpirun", "signal_margin": "2m", "walltime": None}),
]


@pytest.mark.parametrize("scheduler,dialect,name,extra", STOPPING,
                         ids=[f"{s}{'-' + d if d else ''}-{n}" for s, d, n, _ in STOPPING])
def test_golden_requeue_scripts(scheduler, dialect, name, extra):
    spec = spec_for(scheduler, dialect, name, extra, **{k: v for k, v in extra.items() if k != "launcher"})
    text = render(spec, command_line="hpcdist submit ...", workdir="/home/alice/project",
                  job_dir="/home/alice/project/.hpcdist/jobs/train-20261122-120000")
    path = os.path.join(GOLDEN, f"stop-{scheduler}{'-' + dialect if dialect else ''}-{name}.sh")
    if UPDATE or not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"{path} differs; HPCDIST_UPDATE_GOLDEN=1 rewrites it after review"
    check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("values,needles", [
    (dict(scheduler="local", requeue=1), ["--requeue", "local backend has no walltime", "--scheduler slurm or pbs"]),
    (dict(scheduler="slurm", walltime="10m", signal_margin="10m"), ["--signal-margin", "not shorter than --walltime",
                                                                    "shorter --signal-margin"]),
    (dict(scheduler="slurm", signal_margin="19h"), ["--signal-margin", "65535"]),
    (dict(scheduler="slurm", signal_margin="300"), ["--signal-margin", "bare number"]),
    (dict(scheduler="slurm", requeue=-1), ["--requeue", "-1"]),
    (dict(scheduler="slurm", spare_nodes=1), ["--spare-nodes", "only at a restart", "--max-restarts N"]),
    (dict(scheduler="local", max_restarts=1, spare_nodes=1), ["--spare-nodes", "this host", "slurm or pbs"]),
    (dict(scheduler="slurm", nodes=2, min_nodes=3), ["--min-nodes", "more than --nodes 2"]),
    (dict(scheduler="pbs", nodes=2, min_nodes=3, max_restarts=2), ["--min-nodes", "3", "more than --nodes 2"]),
    (dict(scheduler="slurm", nodes=2, min_nodes=1, launcher="mpirun"),
     ["--min-nodes", "1", "only at a restart", "launcher is mpirun", "--max-restarts N"]),
    (dict(scheduler="pbs", nodes=2, min_nodes=1, launcher="mpirun"),
     ["--min-nodes", "1", "needs --scheduler slurm", "--max-restarts N"]),
    (dict(scheduler="slurm", nodes=2, min_nodes=1, max_restarts=1, launcher="nvrx"),
     ["--min-nodes", "1", "ft_launcher", "--launcher torchrun"]),
    (dict(scheduler="local", nodes=2, min_nodes=1, max_restarts=1), ["--min-nodes", "1", "this host",
                                                                    "--scheduler slurm or pbs"]),
])
def test_restart_and_requeue_mistakes_are_caught(values, needles):
    with pytest.raises(ValidationError) as e:
        build_spec({"script": "train.py", **values}, check_files=False)
    for needle in needles:
        assert needle in str(e.value), str(e.value)


def test_elastic_needs_slurm():
    with pytest.raises(ValidationError) as e:
        build_spec({"script": "train.py", "scheduler": "pbs", "nodes": 2, "min_nodes": 1}, check_files=False)
    assert "--min-nodes" in str(e.value) and "needs --scheduler slurm" in str(e.value)


def test_module_commands_run_in_order_with_their_words(tmp_path):
    """`module use PATH`, `purge`, `swap A B` as sites' scripts write them (a bare name is loaded);
    bash runs the environment block with a `module` that records its arguments."""
    spec = build_spec({"script": "t.py", "modules": ["purge", "use /soft/modulefiles", "conda", "swap a b"]},
                      check_files=False)
    text = render(spec, workdir="/w")
    block = text[text.index("command -v module"):text.index("set -u", text.index("command -v module"))]
    log = tmp_path / "calls"
    proc = subprocess.run(["bash", "-c", f'module() {{ echo "$*" >> {quote(str(log))}; }}\n' + block],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == ["purge", "use /soft/modulefiles", "load conda", "swap a b"]
    with pytest.raises(ValidationError, match="module purge takes no names"):
        build_spec({"script": "t.py", "modules": ["purge x"]}, check_files=False)


def test_templates_md_lists_every_block_of_every_template_in_order():
    """TEMPLATES.md's block list is what a user's template may override: every `{% block %}` of our
    templates, in the script's order, each naming the templates that define or fill it."""
    import re

    folder = os.path.join(os.path.dirname(HERE), "hpcdist", "schedulers")
    found: dict[str, set] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.j2"))):
        for name in re.findall(r"{%-? block (\w+)", open(path, encoding="utf-8").read()):
            found.setdefault(name, set()).add(os.path.basename(path))
    with open(os.path.join(folder, "TEMPLATES.md"), encoding="utf-8") as f:
        section = f.read().split("## Blocks", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    listed = re.findall(r"^- `(\w+)` \(([^)]*)\)", section, re.M)
    layout = re.findall(r"{%-? block (\w+)", open(os.path.join(folder, "job.sh.j2"), encoding="utf-8").read())
    assert [name for name, _ in listed] == layout
    assert {name: {t for t in found[name] if t in where} for name, where in listed} == found


def test_a_long_path_in_an_indented_line_stays_one_word():
    """A job folder deep enough that its requeue line runs past the width: every path stays whole
    on its line. A word broken by a continuation inside the script's indented blocks (the requeue
    under its `if`, a launch inside `launch()`) is two words to bash: `hpcdist requeue` said "one
    word too many" in every requeued job of a run whose folders were deep (2026-11-29)."""
    deep = "/scratch/" + "/".join(["a-rather-long-project-folder-name"] * 4) + "/.hpcdist/jobs/train-1"
    spec = spec_for("slurm", None, "torchrun", {}, requeue=2, max_restarts=1)
    text = render(spec, command_line="hpcdist submit ...", workdir=deep.split("/.hpcdist")[0],
                  job_dir=deep)
    assert not re.search(r"[^\s]\\\n", text), [line for line in text.splitlines() if line.endswith("\\")
                                               and not line.endswith(" \\")]
    assert f"{deep}/job.sh" in text or "jobs/train-1/job.sh" in text
