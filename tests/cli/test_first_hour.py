"""What a newcomer meets in the first hour (issue 40), as the exact text they see: a mistake on the
command line in one line with its fix (no usage dump), a flag after the script (refused since
issue 50), a forgotten --scheduler where a cluster is (issue 50), the cause of a
failed job under its summary, `hpcdist --help` in two groups, every job flag's help and its page
under docs/ (no site is published: issue 50), and `hpcdist status` where no job was submitted
yet."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Where every --help's "docs:" line points: no site is published, so its page in the source.
DOCS_LINE = "docs: docs/index.md in hpcdist's source"


def hpcdist(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], env=env or clean_env(), capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("args,said", [
    (["submit", "--scheduler", "slrum", "train.py"],
     "hpcdist submit: error: --scheduler slrum: not a scheduler; did you mean slurm? (local, slurm, pbs)"),
    (["render", "--launcher", "torchrn", "train.py"],
     "hpcdist render: error: --launcher torchrn: not a launcher; did you mean torchrun? "
     "(torchrun, deepspeed, mpirun, srun, accelerate, nvrx, none)"),
    (["submit", "--mpi", "mpch", "train.py"],
     "hpcdist submit: error: --mpi mpch: not an MPI flavour; did you mean mpich? (openmpi, mpich, intel, pals)"),
    (["submit", "--nodse", "2", "train.py"], "hpcdist submit: error: unknown flag --nodse; did you mean --nodes?"),
    (["submit", "--nodse"], "hpcdist submit: error: unknown flag --nodse; did you mean --nodes?"),
    (["status", "--jsn"], "hpcdist status: error: unknown flag --jsn; did you mean --json?"),
    (["submit"], "hpcdist submit: error: SCRIPT is missing: the training script (its own arguments, ARGS, may "
                 "follow it); e.g. hpcdist submit --scheduler local --nodes 2 --wait train.py"),
    (["logs"], "hpcdist logs: error: JOB is missing: a job id or folder (hpcdist status lists them); "
               "e.g. hpcdist logs -f JOB"),
    (["submit", "--nodes"], "hpcdist submit: error: --nodes needs a value: --nodes NODES"),
    (["submit", "--scheduler"], "hpcdist submit: error: --scheduler needs a value: one of local, slurm, pbs"),
    (["submti"], "hpcdist: error: unknown command submti; did you mean submit?"),
    (["train.py"], "hpcdist: error: unknown command train.py; to run a script: hpcdist submit --scheduler local "
                   "train.py (hpcdist render shows its job script)"),
    (["logs", "--from", "x", "12"], "hpcdist logs: error: --from x: not a whole number"),
])
def test_a_mistake_on_the_command_line_is_one_line_with_its_fix(args, said, tmp_path):
    """argparse's answers were a usage dump (45 lines for --scheduler slrum), "unrecognized
    arguments" under the top-level usage, "SCRIPT, ARGS are required", the 18 commands listed."""
    (tmp_path / "train.py").write_text("")
    proc = hpcdist(*args, cwd=tmp_path)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, said + "\n", "")
    assert os.listdir(tmp_path) == ["train.py"]  # nothing written


def test_help_groups_the_commands_a_user_types_apart_from_the_in_job_ones(tmp_path):
    out = hpcdist("--help", cwd=tmp_path, env=clean_env(COLUMNS="100")).stdout
    sections = out.split("\n\n")
    users = next(s for s in sections if s.startswith("commands:\n")).splitlines()[1:]
    in_job = next(s for s in sections if s.startswith("inside a job (")).splitlines()[1:]

    def names(lines):
        return [line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("   ")]

    assert names(users) == ["render", "submit", "status", "logs", "watch", "stacks", "report", "cancel", "doctor",
                            "profiles",
                            "connect", "disconnect"]
    assert names(in_job) == ["env", "hostfile", "supervise", "requeue", "monitor", "job-setup", "agents", "restart"]
    assert users[1] == "  submit      write the job script and submit it"
    assert out.rstrip("\n").endswith(f"\n\n{DOCS_LINE}")


def test_every_job_flag_has_a_help_text():
    from hpcdist.submission.options import OPTIONS, REMOTE_OPTIONS

    assert [o.flag for o in (*OPTIONS, *REMOTE_OPTIONS) if not o.help] == []


@pytest.mark.parametrize("flag,said", [
    ("--dependency TYPE:JOB", "start only after other jobs, in the scheduler's words: afterok:1234 (once 1234 "
                              "succeeded), afterany:1234:1235, afternotok:1234; Slurm also singleton; PBS job ids in "
                              "full: afterok:1234.server"),
    ("--array INDICES", "a job array, one job per index: 0-15, 1,3,5, 0-15:2 (every second), 0-15%4 (4 at a time); "
                        "Slurm --array, PBS -J (Torque -t)"),
    ("--qos QOS", "Slurm: the quality of service (--qos), e.g. debug or regular; PBS has none (use --queue)"),
    ("--ssh-port PORT", "the nodes' sshd port (default: ssh's own), for DeepSpeed's runner and hpcdist doctor's ssh "
                        "check"),
])
def test_submit_help_says_what_a_flag_takes(flag, said, tmp_path):
    out = hpcdist("submit", "--help", cwd=tmp_path, env=clean_env(COLUMNS="100")).stdout
    entry = re.search(rf"^  {re.escape(flag)}\s+(.*?)(?=^  \S|\n\n)", out, re.M | re.S)
    assert entry and " ".join(entry[1].split()) == said, out


def test_the_docs_line_of_every_help_points_at_no_unpublished_site(tmp_path):
    """Issue 50 item 4: every --help ended with https://hpcdist.readthedocs.io/..., which is not
    published. It names the page under docs/ (tests/project/test_docs.py checks each page and heading),
    and mkdocs.yml promises no address either."""
    from hpcdist.cli.commands import BY_HAND, COMMANDS

    assert not re.search(r"^site_url:", (ROOT / "mkdocs.yml").read_text(), re.M)
    for command in [c for c in COMMANDS if c not in BY_HAND]:
        docs = hpcdist(command, "--help", cwd=tmp_path).stdout.rstrip("\n").rsplit("\n\n", 1)[1]
        assert re.fullmatch(r"docs: docs/[\w/-]+\.md(#[\w-]+)? in hpcdist's source", docs), (command, docs)


def test_status_where_no_job_was_submitted_says_how_to_submit_one(tmp_path):
    proc = hpcdist("status", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, f"no jobs submitted from {tmp_path} yet; submit one with: hpcdist submit --scheduler local --nodes 2 "
           "--wait train.py (hpcdist render shows its job script first)\n", "")
    assert hpcdist("status", "--json", cwd=tmp_path).stdout == "[]\n"  # for tools: as it was


def cluster_commands(folder, *programs: str) -> dict:
    """An environment whose PATH holds this python and, of a cluster's commands, only
    ``programs``: each a stand-in that leaves a file behind if anything runs it."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for program in programs:
        ran = shlex.quote(str(folder / f"{program}-ran"))
        (bin_dir / program).write_text(f"#!/bin/sh\n: > {ran}\n")
        (bin_dir / program).chmod(0o755)
    return clean_env(PATH=f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}")


#: After the script: (the words, what hpcdist says). Issue 50 item 4: each was warned about, then
#: submitted with the flag handed to the script (`train.py --dry-run` went to sbatch for real).
AFTER_THE_SCRIPT = [
    (["submit", "--scheduler", "slurm", "train.py", "--lr", "0.1", "--dry-run"],
     "--dry-run comes after train.py, so it would go to train.py, not to hpcdist (everything "
     "after the script is the script's); put it before the script: hpcdist submit --scheduler "
     "slurm --dry-run train.py --lr 0.1; or, if train.py takes --dry-run itself, put -- after "
     "train.py: train.py -- --lr 0.1 --dry-run"),
    (["submit", "--scheduler", "slurm", "train.py", "--wait"],
     "--wait comes after train.py, so it would go to train.py, not to hpcdist (everything after "
     "the script is the script's); put it before the script: hpcdist submit --scheduler slurm "
     "--wait train.py; or, if train.py takes --wait itself, put -- after train.py: train.py -- "
     "--wait"),
    (["submit", "--nodes", "2", "--", "train.py", "--scheduler", "slurm", "--launcher=srun"],
     "--scheduler slurm, --launcher=srun come after train.py, so they would go to train.py, not "
     "to hpcdist (everything after the script is the script's); put them before the script: "
     "hpcdist submit --nodes 2 --scheduler slurm --launcher=srun train.py; or, if train.py takes "
     "--scheduler or --launcher itself, put -- after train.py: train.py -- --scheduler slurm "
     "--launcher=srun"),
    (["render", "--scheduler", "slurm", "train.py", "--nodes", "2", "--lr", "0.1"],
     "--nodes 2 comes after train.py, so it would go to train.py, not to hpcdist (everything "
     "after the script is the script's); put it before the script: hpcdist render --scheduler "
     "slurm --nodes 2 train.py --lr 0.1; or, if train.py takes --nodes itself, put -- after "
     "train.py: train.py -- --nodes 2 --lr 0.1"),
    (["submit", "--scheduler", "slurm", "train.py", "--profile", "polaris", "--output", "out.txt"],
     "--profile polaris comes after train.py, so it would go to train.py, not to hpcdist "
     "(everything after the script is the script's); put it before the script: hpcdist submit "
     "--scheduler slurm --profile polaris train.py --output out.txt; or, if train.py takes "
     "--profile itself, put -- after train.py: train.py -- --profile polaris --output out.txt"),
]


@pytest.mark.parametrize("args,said", AFTER_THE_SCRIPT,
                         ids=[said.split(" come")[0] for _, said in AFTER_THE_SCRIPT])
def test_a_hpcdist_flag_after_the_script_is_refused_with_the_fix(args, said, tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist(*args, cwd=tmp_path, env=cluster_commands(tmp_path, "sbatch"))
    assert (proc.returncode, proc.stderr, proc.stdout) == (
        1, f"hpcdist {args[0]}: error: {said}\n", "")
    assert sorted(os.listdir(tmp_path)) == ["bin", "train.py"]  # no job folder; sbatch never ran


def test_after_a_double_dash_a_flag_of_hpcdist_s_name_is_the_script_s(tmp_path):
    """The way out for a script that takes --nodes or --dry-run itself: `--` after the script
    (argparse takes it away: the script gets what follows), or before the flag (the script gets
    the `--` too). No refusal, no warning."""
    (tmp_path / "train.py").write_text("")
    for after, gets in ((["--", "--nodes", "2", "--dry-run"], "train.py --nodes 2 --dry-run"),
                        (["--lr", "0.1", "--", "--wait"], "train.py --lr 0.1 -- --wait")):
        proc = hpcdist("submit", "--dry-run", "--scheduler", "slurm", "train.py", *after,
                       cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "#SBATCH --nodes=1\n" in proc.stdout and gets in proc.stdout
        assert proc.stderr.startswith("hpcdist submit: dry run, nothing submitted"), proc.stderr


def test_a_flag_that_scripts_often_take_too_stays_the_script_s_with_a_warning(tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("render", "--scheduler", "slurm", "train.py", "--output", "out.txt",
                   "--lr", "0.1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "hpcdist render: warning: --output out.txt comes after train.py, so it goes to train.py, "
        "not to hpcdist (everything after the script is the script's); to give it to hpcdist, put "
        "it before train.py (`train.py -- ...` keeps it train.py's, without this warning)\n")
    assert "train.py --output out.txt --lr 0.1" in proc.stdout
    proc = hpcdist("render", "--scheduler", "slurm", "train.py", "--", "--output", "out.txt",
                   cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


#: What `submit --nodes 2 --gpus-per-node 4 train.py` says with --scheduler forgotten, where
#: both sbatch and qsub are on PATH.
UNCHOSEN = ("--scheduler not given, so local: all 8 ranks of --nodes 2 would start on this "
            "machine, though sbatch and qsub are here; give --scheduler slurm or --scheduler pbs "
            "to submit to the cluster, or --scheduler local to run them here on purpose")


def test_a_job_of_several_nodes_with_no_scheduler_is_refused_where_a_cluster_is(tmp_path):
    """Issue 50 item 4: the local default started 8 ranks on the login node without a word,
    though sbatch and qsub were there."""
    (tmp_path / "train.py").write_text("")
    job = ["--nodes", "2", "--gpus-per-node", "4", "train.py"]
    env = cluster_commands(tmp_path, "sbatch", "qsub")
    proc = hpcdist("submit", *job, cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stderr, proc.stdout) == (
        1, f"hpcdist submit: error: {UNCHOSEN}\n", "")
    assert sorted(os.listdir(tmp_path)) == ["bin", "train.py"]  # nothing ran, no job folder
    # Render and a dry run start nothing: they say the same as a warning, and go on.
    for args in (["render", *job], ["submit", "--dry-run", *job]):
        proc = hpcdist(*args, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines()[0] == f"hpcdist {args[0]}: warning: {UNCHOSEN}"
        assert "agents --local --nodes 2 --" in proc.stdout
    # Where only one of them is, the fix names its scheduler alone.
    pbs_only = tmp_path / "pbs-only"
    pbs_only.mkdir()
    (pbs_only / "train.py").write_text("")
    proc = hpcdist("render", "--nodes", "3", "train.py", cwd=pbs_only,
                   env=cluster_commands(pbs_only, "qsub"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "hpcdist render: warning: --scheduler not given, so local: all 3 ranks of --nodes 3 would "
        "start on this machine, though qsub is here; give --scheduler pbs to submit to the "
        "cluster, or --scheduler local to run them here on purpose\n")


@pytest.mark.parametrize("case", ["--scheduler local", "profile", "one node", "no cluster here"])
def test_the_local_default_stands_when_chosen_or_where_no_cluster_is(case, tmp_path):
    (tmp_path / "train.py").write_text("")
    env = cluster_commands(tmp_path, *(() if case == "no cluster here" else ("sbatch", "qsub")))
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-config")
    flags = {"--scheduler local": ["--scheduler", "local", "--nodes", "2"],
             "one node": ["--nodes", "1"]}.get(case, ["--nodes", "2"])
    if case == "profile":
        (tmp_path / "hpcdist.toml").write_text(
            'default = "here"\n[profiles.here]\nscheduler = "local"\n')
    proc = hpcdist("submit", "--dry-run", *flags, "train.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr


def test_the_last_error_line_of_a_log_is_the_rank_s_not_the_launcher_s():
    from hpcdist.failures import error_line

    log = """hpcdist: job 7 is running
usage: train.py [-h] [--lr LR]
train.py: error: unrecognized arguments: --nodes 2
E1127 11:03:55.373000 24691 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2)
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
hpcdist: the agent on node 0 (vm) ended with status 1; ending the other agents
"""
    assert error_line(log) == "train.py: error: unrecognized arguments: --nodes 2"
    assert error_line("[rank1]: ValueError: bad batch\n[rank0]: RuntimeError: Connection reset by peer\n") == \
        "ValueError: bad batch"
    assert error_line("epoch 1\nepoch 2\n") is None


def test_a_failed_job_s_summary_quotes_its_error_line(tmp_path):
    """The issue's case: `--nodes 2` given to a script that does not take it (after `--`: without,
    hpcdist refuses it); torchrun's tracebacks, then the summary with the script's own error line
    under it (in --wait, and in `hpcdist logs` after)."""
    (tmp_path / "train.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    proc = hpcdist("submit", "--scheduler", "local", "--wait", "train.py", "--", "--nodes", "2",
                   cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    job = proc.stdout.split()[0]
    lines = proc.stderr.splitlines()
    first = next(k for k, line in enumerate(lines) if line.startswith(f"hpcdist: job {job} failed; the first to fail"))
    assert lines[first + 1] == "hpcdist: the last error line in its log: train.py: error: unrecognized arguments: " \
                               "--nodes 2", proc.stderr
    logs = hpcdist("logs", job, cwd=tmp_path)
    assert logs.stderr.splitlines()[-1] == lines[first + 1], logs.stderr


#: The README's Slurm command, with `local` for `slurm`: what the local backend does not take.
README_SLURM_HERE = ["submit", "--scheduler", "local", "--nodes", "2", "--gpus-per-node", "4",
                     "--walltime", "12h", "--queue", "gpu", "--dry-run", "train.py"]
NO_WALLTIME = ("the local backend runs the job until it ends: nothing enforces a walltime. Leave "
               "--walltime out, or submit with --scheduler slurm or pbs.")
NO_QUEUE = "the local backend has no queue. Leave --queue out, or submit with --scheduler slurm or pbs."


def test_every_setting_the_local_backend_does_not_take_is_named_at_once(tmp_path):
    """Issue 50 item 4: the README's Slurm command with `local` was refused one key per try."""
    (tmp_path / "train.py").write_text("")
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "no-config"))
    proc = hpcdist(*README_SLURM_HERE, cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert proc.stderr == (
        "hpcdist submit: error: 2 settings are not taken by this job (--scheduler local), each with "
        f"its fix:\n  --walltime '12h': {NO_WALLTIME}\n  --queue 'gpu': {NO_QUEUE}\n")


def test_a_default_profile_s_settings_are_named_at_once_with_the_way_to_go_without_it(tmp_path):
    """Issue 50 item 4: with a default profile, `--scheduler local` was refused for the profile's
    own queue and walltime, one per try, and `--profile none` was refused too: no way out."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "hpcdist.toml").write_text(
        'default = "mycluster"\n[profiles.mycluster]\nscheduler = "slurm"\nqueue = "gpu"\n'
        'walltime = "12h"\n')
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "no-config"))
    job = ["submit", "--scheduler", "local", "--nodes", "2", "--dry-run", "train.py"]
    proc = hpcdist(*job, cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert proc.stderr == (
        "hpcdist submit: using profile mycluster (the default in hpcdist.toml); --profile NAME "
        "chooses another, --profile none uses none\n"
        "hpcdist submit: error: 2 settings are not taken by this job (--scheduler local), each with "
        "its fix:\n"
        f"  hpcdist.toml: profiles.mycluster.walltime = '12h': {NO_WALLTIME}\n"
        f"  hpcdist.toml: profiles.mycluster.queue = 'gpu': {NO_QUEUE}\n"
        "Or, to try the job without profile mycluster: --profile none.\n")
    proc = hpcdist(*job[:-1], "--profile", "none", "train.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "agents --local --nodes 2 --" in proc.stdout and "warning" not in proc.stderr
    # One refusal alone says the way out too.
    (tmp_path / "hpcdist.toml").write_text(
        'default = "mycluster"\n[profiles.mycluster]\nscheduler = "slurm"\nqueue = "gpu"\n')
    proc = hpcdist(*job, cwd=tmp_path, env=env)
    assert proc.stderr.splitlines()[-1] == (
        f"hpcdist submit: error: hpcdist.toml: profiles.mycluster.queue = 'gpu': {NO_QUEUE} Or, to "
        "try the job without profile mycluster: --profile none."), proc.stderr


def test_polaris_without_the_account_and_walltime_its_qsub_requires_is_refused_before_the_queue(
        tmp_path):
    """Issue 50 item 4: `--profile polaris` rendered and submitted with no -A and no walltime,
    which ALCF's qsub refuses ("Running Jobs using PBS": -A, walltime and filesystems are
    mandatory). Submit refuses, naming both and the fix; render, which queues nothing and whose
    script a user may finish by hand, warns the same and prints it."""
    (tmp_path / "train.py").write_text("")
    env = cluster_commands(tmp_path, "qsub")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-config")
    preset = ROOT / "hpcdist" / "sites" / "polaris.toml"
    said = ("--account and --walltime are missing: profile polaris's scheduler refuses a job "
            f"without them (required = [\"account\", \"walltime\"] in {preset}); give --account "
            "PROJECT --walltime 1h (before the script)")
    proc = hpcdist("submit", "--profile", "polaris", "--nodes", "2", "train.py", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stderr, proc.stdout) == (1, f"hpcdist submit: error: {said}\n", "")
    assert sorted(os.listdir(tmp_path)) == ["bin", "train.py"]  # qsub never ran, no job folder
    proc = hpcdist("submit", "--profile", "polaris", "--account", "P1", "train.py", cwd=tmp_path, env=env)
    assert proc.stderr.splitlines()[-1].startswith("hpcdist submit: error: --walltime is missing: "), \
        proc.stderr
    proc = hpcdist("render", "--profile", "polaris", "--nodes", "2", "train.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stderr == f"hpcdist render: warning: {said}\n", proc.stderr
    assert "#PBS -l select=2:system=polaris" in proc.stdout
    proc = hpcdist("render", "--profile", "polaris", "--account", "P1", "--walltime", "30m", "train.py",
                   cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert "#PBS -A P1\n" in proc.stdout


@pytest.mark.parametrize("words,said", [
    (["python", "train.py", "--lr", "0.1"],
     "SCRIPT 'python': hpcdist starts SCRIPT with the job's python itself: the job would run python "
     "python ... Drop python: give train.py as SCRIPT, its arguments after it (the job's python: "
     "--python PATH, --venv or --conda)."),
    (["train.sh"],
     "SCRIPT 'train.sh': is a shell script, and --launcher torchrun starts SCRIPT with python on every "
     "rank: python train.sh would fail inside the job. Give --launcher none to run it once with bash "
     "(it starts its own processes: torchrun, mpirun), or give the Python script it runs as SCRIPT "
     "(its set-up lines: --setup-file FILE)."),
])
def test_a_script_the_launcher_cannot_start_is_refused_before_the_queue(words, said, tmp_path):
    """Issue 50 item 4: `python train.py` and `train.sh` as SCRIPT were queued, and failed inside
    the job (python python train.py; python train.sh)."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "train.sh").write_text("echo hello from bash\n")
    proc = hpcdist("submit", "--scheduler", "slurm", *words, cwd=tmp_path,
                   env=cluster_commands(tmp_path, "sbatch"))
    assert (proc.returncode, proc.stderr, proc.stdout) == (1, f"hpcdist submit: error: {said}\n", "")
    assert sorted(os.listdir(tmp_path)) == ["bin", "train.py", "train.sh"]  # sbatch never ran


def test_a_shell_script_runs_with_bash_under_launcher_none(tmp_path):
    """The fix the refusal gives: --launcher none runs a shell script once, with bash (a real
    local job)."""
    (tmp_path / "train.sh").write_text("echo \"hello from $0 in ${BASH_VERSION:+bash}\"\n")
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--wait", "train.sh",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "hello from train.sh in bash\n" in proc.stderr + proc.stdout, proc.stderr



def test_an_unknown_profile_gets_the_nearest_name(tmp_path):
    """Issue 50 item 4: `--profile polars` listed every name but pointed at none."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "hpcdist.toml").write_text('[profiles.mycluster]\nscheduler = "slurm"\n')
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "no-config"))
    from hpcdist.submission.profiles import presets

    for args, nearest in ((["render", "--profile", "polars", "train.py"], "polaris"),
                          (["submit", "--profile", "mycluter", "train.py"], "mycluster"),
                          (["profiles", "perlmuter"], "perlmutter")):
        proc = hpcdist(*args, cwd=tmp_path, env=env)
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
        assert proc.stderr == (
            f"hpcdist {args[0]}: error: no profile {args[2 if args[0] != 'profiles' else 1]!r} in "
            f"hpcdist.toml or {tmp_path}/no-config/hpcdist/config.toml; known: mycluster; site presets: "
            f"{', '.join(presets())}; none: no profile; did you mean {nearest}?\n")
