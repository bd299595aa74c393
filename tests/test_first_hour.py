"""What a newcomer meets in the first hour (issue 40), as the exact text they see: a mistake on the
command line in one line with its fix (no usage dump), a flag after the script, the cause of a
failed job under its summary, `hpcdist --help` in two groups, every job flag's help and its page
on the published site, and `hpcdist status` where no job was submitted yet."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: The published site (mkdocs.yml's site_url), where every --help's "docs:" line points.
SITE = "https://hpcdist.readthedocs.io/en/latest/"


def hpcdist(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], env=env or clean_env(), capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("args,said", [
    (["submit", "--scheduler", "slrum", "train.py"],
     "hpcdist submit: error: --scheduler slrum: not a scheduler; did you mean slurm? (local, slurm, pbs)"),
    (["render", "--launcher", "torchrn", "train.py"],
     "hpcdist render: error: --launcher torchrn: not a launcher; did you mean torchrun? "
     "(torchrun, deepspeed, mpirun, srun, accelerate, none)"),
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
    names = lambda lines: [line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("   ")]
    assert names(users) == ["render", "submit", "status", "logs", "watch", "stacks", "cancel", "doctor", "profiles",
                            "connect", "disconnect"]
    assert names(in_job) == ["env", "hostfile", "supervise", "requeue", "monitor", "job-setup", "agents"]
    assert users[1] == "  submit      write the job script and submit it"
    assert out.rstrip("\n").endswith(f"\n\ndocs: {SITE}")


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


def test_the_docs_line_of_every_help_is_a_page_of_the_published_site(tmp_path):
    """A pip user has no docs/ folder: the help points to the site mkdocs.yml publishes, at a page
    and heading that exist."""
    from hpcdist.cli import COMMANDS, in_job, watch
    from hpcdist.cli.common import DOCS

    assert DOCS == SITE
    assert re.search(rf"^site_url: {re.escape(SITE)}$", (ROOT / "mkdocs.yml").read_text(), re.M)
    for command in [c for c in COMMANDS if c not in in_job.BY_HAND + watch.BY_HAND]:
        docs = hpcdist(command, "--help", cwd=tmp_path).stdout.rstrip("\n").rsplit("\n\n", 1)[1]
        assert docs.startswith(f"docs: {SITE}"), (command, docs)
        page, _, anchor = docs.removeprefix(f"docs: {SITE}").partition("#")
        text = (ROOT / "docs" / (page.rstrip("/") + ".md")).read_text()
        slugs = {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", h.replace("`", "")).strip().lower())
                 for h in re.findall(r"^#+ (.+)$", text, re.M)}
        assert not anchor or anchor in slugs, (command, docs)


def test_status_where_no_job_was_submitted_says_how_to_submit_one(tmp_path):
    proc = hpcdist("status", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, f"no jobs submitted from {tmp_path} yet; submit one with: hpcdist submit --scheduler local --nodes 2 "
           "--wait train.py (hpcdist render shows its job script first)\n", "")
    assert hpcdist("status", "--json", cwd=tmp_path).stdout == "[]\n"  # for tools: as it was


def test_a_flag_of_hpcdist_after_the_script_is_the_script_s_with_a_warning(tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", "--dry-run", "--scheduler", "slurm", "train.py", "--nodes", "2", "--lr", "0.1",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "hpcdist submit: warning: --nodes 2 comes after train.py, so it goes to train.py, not to hpcdist (everything "
        "after the script is the script's); to give it to hpcdist, put it before train.py")
    assert "#SBATCH --nodes=1\n" in proc.stdout and "train.py --nodes 2 --lr 0.1\n" in proc.stdout  # as before
    proc = hpcdist("submit", "--dry-run", "--scheduler", "slurm", "train.py", "--lr", "0.1", cwd=tmp_path)
    assert "warning" not in proc.stderr


def test_the_last_error_line_of_a_log_is_the_rank_s_not_the_launcher_s():
    from hpcdist.cli.jobs import error_line

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
    """The issue's case: `--nodes 2` after the script; torchrun's tracebacks, then the summary with
    the script's own error line under it (in --wait, and in `hpcdist logs` after)."""
    (tmp_path / "train.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    proc = hpcdist("submit", "--scheduler", "local", "--wait", "train.py", "--nodes", "2", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    job = proc.stdout.split()[0]
    lines = proc.stderr.splitlines()
    first = next(k for k, line in enumerate(lines) if line.startswith(f"hpcdist: job {job} failed; the first to fail"))
    assert lines[first + 1] == "hpcdist: the last error line in its log: train.py: error: unrecognized arguments: " \
                               "--nodes 2", proc.stderr
    logs = hpcdist("logs", job, cwd=tmp_path)
    assert logs.stderr.splitlines()[-1] == lines[first + 1], logs.stderr
