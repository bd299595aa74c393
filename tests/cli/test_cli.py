"""The hpcdist command, run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from launch import clean_env


def hpcdist(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], env=env or clean_env(),
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def test_env_json_outside_any_launcher():
    proc = hpcdist("env", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["rank"], data["world_size"], data["launcher"]) == (0, 1, "single")


def test_env_explain_lists_every_variable_consulted():
    proc = hpcdist("env", "--explain", env=clean_env(
        OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK="1",
        OMPI_COMM_WORLD_LOCAL_SIZE="2", SLURM_JOB_ID="99"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "launcher          openmpi" in out
    assert "OMPI_COMM_WORLD_RANK=1" in out
    assert "TORCHELASTIC_RUN_ID (unset)" in out          # consulted, and said so
    assert "derived from the job id SLURM_JOB_ID=99" in out
    assert "  openmpi    yes" in out and "  torchrun   no" in out


def test_env_explain_json():
    proc = hpcdist("env", "--json", "--explain")
    data = json.loads(proc.stdout)
    assert data["explain"]["detection"][-1] == {"launcher": "single", "detected": True, "markers": []}
    assert "TORCHELASTIC_RUN_ID" in data["explain"]["consulted"]


def test_env_error_is_one_message_and_exit_1():
    proc = hpcdist("env", env=clean_env(PMI_RANK="1", PMI_SIZE="2", RANK="0"))
    assert proc.returncode == 1
    assert proc.stderr.startswith("hpcdist env: error: contradictory global rank")
    assert "Traceback" not in proc.stderr


def test_env_warns_in_a_batch_step_of_a_multi_task_job():
    proc = hpcdist("env", "--json", env=clean_env(
        SLURM_JOB_ID="5", SLURM_PROCID="0", SLURM_NTASKS="4", SLURM_JOB_NODELIST="n[1-2]"))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["world_size"] == 1
    assert proc.stderr.count("hpcdist env: warning: ") == 1 and "srun" in proc.stderr


def test_hostfile_from_pbs_nodefile(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("n1\nn1\nn2\nn2\n")
    proc = hpcdist("hostfile", "--format", "deepspeed", env=clean_env(PBS_NODEFILE=str(nodefile)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "n1 slots=2\nn2 slots=2\n"


def test_hostfile_from_slurm():
    proc = hpcdist("hostfile", "--format", "deepspeed", env=clean_env(
        SLURM_JOB_NODELIST="gpu[001-003],cn7", SLURM_TASKS_PER_NODE="2(x3),1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["gpu001 slots=2", "gpu002 slots=2", "gpu003 slots=2", "cn7 slots=1"]


def test_hostfile_mismatch_fails_naming_both_variables(tmp_path):
    out = tmp_path / "hostfile"
    proc = hpcdist("hostfile", "-o", str(out), env=clean_env(
        SLURM_JOB_NODELIST="gpu[001-003],cn7", SLURM_TASKS_PER_NODE="2(x3)"))
    assert proc.returncode == 1
    assert "SLURM_JOB_NODELIST" in proc.stderr and "SLURM_TASKS_PER_NODE" in proc.stderr
    assert not out.exists()
    assert os.listdir(tmp_path) == []  # nothing half-written


def test_hostfile_output_is_written_atomically_and_replaces(tmp_path):
    out = tmp_path / "hostfile"
    out.write_text("old\n")
    proc = hpcdist("hostfile", "--format", "mpich", "--slots-per-node", "4", "-o", str(out),
                   env=clean_env(SLURM_JOB_NODELIST="n[1-2]", SLURM_TASKS_PER_NODE="1(x2)"))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "n1:4\nn2:4\n"
    assert sorted(os.listdir(tmp_path)) == ["hostfile"]


def test_hostfile_into_a_missing_directory_is_a_clear_error(tmp_path):
    proc = hpcdist("hostfile", "-o", str(tmp_path / "no" / "such" / "file"),
                   env=clean_env(SLURM_JOB_NODELIST="n1", SLURM_TASKS_PER_NODE="1"))
    assert proc.returncode == 1
    assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_slots_per_node_is_a_usage_error():
    proc = hpcdist("hostfile", "--slots-per-node", "0")
    assert proc.returncode == 2
    assert "--slots-per-node" in proc.stderr


def test_version_and_console_script():
    proc = hpcdist("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("hpcdist ")


def test_the_scripts_own_flags_are_never_taken_for_ours(tmp_path):
    """`train.py -- --deepspeed --nodes 3`: both belong to train.py (--deepspeed is no abbreviation
    of --deepspeed-config; --nodes, a flag of hpcdist's, after `--`: without it, it is refused)."""
    (tmp_path / "train.py").write_text("")
    for after in (["--deepspeed", "--steps", "3"], ["--", "--deepspeed", "--nodes", "3"]):
        proc = hpcdist("render", "--scheduler", "slurm", "--nodes", "2", "train.py", *after,
                       cwd=tmp_path)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert "#SBATCH --nodes=2" in proc.stdout
        assert f"train.py {' '.join(a for a in after if a != '--')}" in proc.stdout


def test_a_value_that_begins_with_a_dash_is_read_as_typed(tmp_path):
    """`--directive '--gres=gpu:4'` and `--directive -V`, the form users type (argparse alone
    refuses it: "expected one argument"); the script's own `--lr -1` stays as it was."""
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("render", "--scheduler", "slurm", "--directive", "--gres=gpu:4", "--directive", "-V",
                   "train.py", "--lr", "-1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --gres=gpu:4\n#SBATCH -V\n" in proc.stdout
    assert "train.py --lr -1\n" in proc.stdout
    # A value that is one of the command's options is still a missing value, as before.
    proc = hpcdist("render", "--scheduler", "slurm", "--directive", "--nodes", "2", "train.py", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "hpcdist render: error: --directive needs a value: --directive LINE "
                                              "(--nodes is a flag of its own; to give it as the value: "
                                              "--directive=--nodes)\n")
    # The help says so.
    assert "--directive --gres=gpu:4" in " ".join(hpcdist("render", "--help").stdout.split())


def _piped_into_a_closed_reader(*args, cwd):
    """The real CLI writing into a pipe whose reader has gone (`hpcdist status | head` once head
    is done): the read end is closed before the command starts, so every write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "hpcdist", *args], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=60, env=clean_env(), cwd=cwd)
    finally:
        os.close(write_end)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    (tmp_path / "train.py").write_text("")
    job = tmp_path / ".hpcdist" / "jobs" / "train-1"
    job.mkdir(parents=True)
    (job / "job.log").write_text("epoch 1\n" * 10000)
    (job / "record.json").write_text(json.dumps({"job_id": "12", "scheduler": "local", "job_name": "train",
                                                 "log": str(job / "job.log")}))
    for args in (["status"], ["status", "--json"], ["logs", "12"],
                 ["render", "--scheduler", "slurm", "--nodes", "2", "train.py"]):
        proc = _piped_into_a_closed_reader(*args, cwd=tmp_path)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, (args, proc.stderr)
        assert proc.returncode == 141, (args, proc.stderr)  # 128 + SIGPIPE, as for a C tool


def test_plain_status_is_parsed_as_argparse_would():
    from hpcdist import cli

    for argv in (["status"], ["status", "12"], ["status", "12", "train-20250101-120000"]):
        assert vars(cli._plain_status(argv)) == vars(cli.build_parser(argv).parse_args(argv))
    for argv in ([], ["status", "--json"], ["status", "-h"], ["status", "12", "--json"], ["logs", "12"]):
        assert cli._plain_status(argv) is None


def test_a_subcommand_built_alone_is_the_one_built_among_all(capsys):
    """`hpcdist NAME ...` builds NAME's parser only; an argv that does not start with a
    subcommand builds them all (with the job flags of the one named)."""
    from hpcdist import cli

    def shown(argv):
        with pytest.raises(SystemExit):
            cli.build_parser(argv).parse_args(argv)
        return capsys.readouterr().out

    for name in cli.COMMANDS:
        alone = shown([name, "--help"])
        assert alone.startswith(f"usage: hpcdist {name} ")
        assert alone == shown(["--not-an-option", name, "--help"]), name  # help ends the parse first
    listed = shown(["--help"])
    assert all(f"\n  {name} " in listed for name in cli.COMMANDS)


@pytest.mark.parametrize("args,said", [
    (["doctor", "--remote", "me@login", "--scheduler", "slurm"],
     "hpcdist doctor: error: --remote: hpcdist doctor runs where it is typed (submit, render, status, logs and "
     "cancel go to a cluster from a laptop); run it on the login node"),
    (["submit", "--include", "data", "--dry-run", "train.py"],
     "hpcdist submit: error: --include is for a job sent to a cluster from here: give --remote HOST too, or a "
     "--profile whose remote = \"user@host\""),
])
def test_a_remote_setting_where_no_cluster_is_named_is_refused(args, said, tmp_path):
    """Issue 32: the remote settings are flags of the job commands (for --help); without a
    cluster to send to they say so, nothing is run or written."""
    proc = hpcdist(*args, cwd=tmp_path)
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (1, said, "")
    assert os.listdir(tmp_path) == []


def test_the_in_job_commands_are_listed_by_their_modules_own_first_lines():
    """`hpcdist --help` lists job-setup and agents from a table, not by loading them (a third of the
    list's cost): the table says what their docstrings say."""
    from hpcdist.cli.in_job import LISTED
    from hpcdist.injob import agents, job_setup, restart

    assert LISTED == {name: module.__doc__.split("\n")[0].split(": ", 1)[1]
                      for name, module in (("job-setup", job_setup), ("agents", agents), ("restart", restart))}


def as_written(text: str) -> str:
    """top_help.py's TEXT as its source spells it: the help's own lines in a triple-quoted string
    (one source line each, within the linter's line length)."""
    assert "\\" not in text and '"""' not in text and text.endswith("\n"), repr(text)
    return f'TEXT = """\\\n{text}"""\n'


def test_the_top_level_help_written_out_is_what_argparse_formats(monkeypatch):
    """`hpcdist --help` prints hpcdist/cli/top_help.py's text (building every parser for it cost
    three times `python -c pass`): the text is argparse's own, at 80 columns. After a change to
    the commands: `HPCDIST_UPDATE_GOLDEN=1 pytest tests/cli/test_cli.py -k top_level_help`."""
    import hpcdist.cli.top_help as written
    from hpcdist.cli import build_parser

    monkeypatch.setenv("COLUMNS", "80")
    text = build_parser(["--help"]).format_help()
    if os.environ.get("HPCDIST_UPDATE_GOLDEN"):
        source = open(written.__file__).read().replace(as_written(written.TEXT), as_written(text))
        open(written.__file__, "w").write(source)
    assert written.TEXT == text
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "--help"], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (0, text)


@pytest.mark.parametrize("state_dir", [False, True])
def test_status_with_no_jobs_loads_neither_json_nor_the_job_folders_code(tmp_path, state_dir):
    """`hpcdist status` with nothing submitted, the first command a user types: 2x `python -c
    pass` at most (bench/bench_floor.py). json comes with the first job's record; the job folders'
    code only where a .hpcdist folder is (one that could hold jobs, or be wrong)."""
    if state_dir:
        (tmp_path / ".hpcdist").mkdir()
    probe = ("import sys; from hpcdist.cli import main; main(['status']); "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith(('hpcdist', 'json')))))")
    proc = subprocess.run([sys.executable, "-c", probe], env=clean_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    said, loaded = proc.stdout.splitlines()
    assert said.startswith(f"no jobs submitted from {tmp_path} yet"), proc.stdout + proc.stderr
    assert "json" not in loaded.split(), loaded
    assert ("hpcdist.jobs" in loaded.split()) == state_dir, loaded


#: hpcdist.cli's command modules: each loaded by its own commands alone (hpcdist.cli.commands).
COMMAND_MODULES = ("jobs", "watch", "report", "remote", "in_job")


@pytest.mark.parametrize("argv, state_dir", [(["status"], False), (["status"], True), (["--version"], False),
                                             (["--help"], False)])
def test_status_version_and_help_load_no_command_s_module(tmp_path, argv, state_dir):
    """Issue 48: `hpcdist status` with no jobs stayed over 2x `python -c pass` beside an empty
    .hpcdist folder, most of what was left being hpcdist.cli importing all five command modules
    to list its commands (~8M instructions). Status's own code is hpcdist.cli.status; the
    commands' names are hpcdist.cli.commands; --version and --help need no module either."""
    if state_dir:
        (tmp_path / ".hpcdist").mkdir()
    probe = (f"import sys; from hpcdist.cli import main; main({argv!r}); "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith('hpcdist.cli'))))")
    proc = subprocess.run([sys.executable, "-c", probe], env=clean_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.splitlines()[-1].split()
    assert [m for m in loaded if m.removeprefix("hpcdist.cli.") in COMMAND_MODULES] == [], loaded
