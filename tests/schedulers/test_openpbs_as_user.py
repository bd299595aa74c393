"""The stop by hand on the real OpenPBS, with the job run as a user, as on every real site.

The other OpenPBS rows run their jobs as root, and this cluster's moms skip root's processes
(NOTES.md): qsig reaches none of them. Here the job is submitted by ``pbsuser``, so the mom sees
its processes and ``qsig`` signals every one of them, the login shell that runs the job script
among them (tests/schedulers/test_pbs_stop_by_hand.py shows the same with a stand-in of the mom).

The user cannot read the tests' venv (under /root, 0700), so they get one of their own: a venv of
Debian's /usr/bin/python3 in their home, holding copies of hpcdist (with its entry points: the
submitit plugin) and the packages the rows import, none of them torch. The training is
test_preemption's stand-in, which stops on hpcdist's request.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import pathlib
import shlex
import shutil
import subprocess
import uuid

import pytest

import testcluster
from launch import wait_for
from test_preemption import TRAINING_STUB
from test_submitit_pbs import results_of
from test_submitit_pbs_api import GUIDE

USER = "pbsuser"
PYTHON = "/usr/bin/python3"
#: What the rows import beside hpcdist (jinja2 and markupsafe: submit; the others: submitit).
PACKAGES = ("jinja2", "markupsafe", "submitit", "cloudpickle", "typing_extensions")


def _copy_package(name: str, into: pathlib.Path) -> None:
    spec = importlib.util.find_spec(name)
    skip = shutil.ignore_patterns("__pycache__")
    if spec.submodule_search_locations:
        where = pathlib.Path(spec.submodule_search_locations[0])
        shutil.copytree(where, into / where.name, ignore=skip)
    else:
        shutil.copy(spec.origin, into)


class User:
    """The user's venv and folder (in their home, which every host sees), removed at the end."""

    def __init__(self, cluster, top: pathlib.Path):
        self.cluster, self.top = cluster, top
        self.venv, self.folder = top / "venv", top / "job"
        self.python = str(self.venv / "bin" / "python")

    def shell(self, words: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A shell line run as the user on the head, in their folder."""
        return self.cluster.as_user(self.cluster.HEAD, f"cd {shlex.quote(str(self.folder))} && {words}",
                                    timeout=timeout)

    def hpcdist(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.shell(" ".join(shlex.quote(a) for a in (self.python, "-m", "hpcdist", *args)),
                          timeout=timeout)


@pytest.fixture
def user(openpbs_cluster):
    if not pathlib.Path(PYTHON).exists():
        pytest.fail(f"{PYTHON} is missing: the user's python for these rows (Debian's python3)")
    openpbs_cluster.history(False)
    home = pathlib.Path(subprocess.run(["getent", "passwd", USER], capture_output=True, text=True,
                                       check=True).stdout.split(":")[5])
    made = User(openpbs_cluster, home / f"hpcdist-test-{uuid.uuid4().hex[:8]}")
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(made.venv)], check=True)
    (site,) = made.venv.glob("lib/python3*/site-packages")
    shutil.copytree(testcluster.ROOT / "hpcdist", site / "hpcdist",
                    ignore=shutil.ignore_patterns("__pycache__"))
    info = importlib.metadata.distribution("hpcdist")._path  # its entry points: submitit's plugin
    shutil.copytree(info, site / pathlib.Path(info).name)
    for name in PACKAGES:
        _copy_package(name, site)
    made.folder.mkdir()
    (made.folder / "stub.py").write_text(TRAINING_STUB)
    subprocess.run(["chown", "-R", f"{USER}:", str(made.top)], check=True)
    yield made
    shutil.rmtree(made.top, ignore_errors=True)


def submit_stub(user: User, *options: str) -> str:
    proc = user.hpcdist("submit", "--scheduler", "pbs", "--launcher", "none", "--requeue", "1",
                        "--json", "--venv", str(user.venv), *options, "stub.py", "stops")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[0])["job_id"]


def row_of(user: User, job_id: str) -> dict:
    proc = user.hpcdist("status", "--json", job_id)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    return row


def log_of(user: User, job_id: str) -> str:
    return user.hpcdist("logs", job_id).stdout


@pytest.mark.parametrize("options", [[], ["--walltime", "10m"]], ids=["no-walltime", "walltime"])
def test_qsig_winch_stops_the_training_and_the_job_goes_on(user, openpbs_cluster, options):
    """``qsig -s WINCH <job>``, as the script's comment tells users: the training stops on
    hpcdist's request, the job resubmits itself, and the next job completes (restart 1)."""
    job_id = submit_stub(user, *options)
    wait_for(lambda: "stub.py" in _job_ps(openpbs_cluster), 120, "the training running")
    said = openpbs_cluster.on(openpbs_cluster.HEAD, f"qsig -s WINCH {shlex.quote(job_id)}")
    assert said.returncode == 0, said.stderr
    wait_for(lambda: row_of(user, job_id)["state"] == "COMPLETED", 180, "the resubmitted job's end")
    row, log = row_of(user, job_id), log_of(user, job_id)
    assert (row["exit_code"], row["restarts"]) == (0, 1), (row, testcluster.log_excerpt(log))
    assert "walltime warning by hand (SIGWINCH)" in log, testcluster.log_excerpt(log)
    assert "stopped: the job script asked: walltime warning by hand (SIGWINCH)" in log, log
    assert "run 2: nothing left to do" in log, testcluster.log_excerpt(log)


@pytest.mark.parametrize("history", [False, True], ids=["history-off", "history-on"])
def test_qsig_usr2_ends_the_job_and_it_does_not_read_completed(history, user, openpbs_cluster):
    """The before: ``qsig -s USR2``, which hpcdist's PBS scripts used to tell users to send. On a
    real site the mom's USR2 kills the job's login shell, and PBS ends the job: it must not be
    resubmitted, and its record must not say it completed (history on: FAILED 140, USR2's 128+12;
    off: UNKNOWN, saying the script may have been killed before it could write its end)."""
    openpbs_cluster.history(history)
    job_id = submit_stub(user)
    wait_for(lambda: "stub.py" in _job_ps(openpbs_cluster), 120, "the training running")
    said = openpbs_cluster.on(openpbs_cluster.HEAD, f"qsig -s USR2 {shlex.quote(job_id)}")
    assert said.returncode == 0, said.stderr
    wait_for(lambda: row_of(user, job_id)["state"] not in ("RUNNING", "PENDING"), 120, "the job's end")
    row, log = row_of(user, job_id), log_of(user, job_id)
    assert row["restarts"] == 0, (row, testcluster.log_excerpt(log))
    if history:  # PBS's Exit_status says the signal
        assert (row["state"], row["exit_code"]) == ("FAILED", 140) and "signal 12" in row["reason"], row
    else:  # PBS forgot the job, and the script was killed before it could say how it ended
        assert row["state"] == "UNKNOWN" and "killed before its script" in row["reason"], row
    assert "resubmitted" not in log and "run 2" not in log, testcluster.log_excerpt(log)
    wait_for(lambda: "stub.py" not in _job_ps(openpbs_cluster), 60, "nothing of the job left")


def _job_ps(pbs) -> str:
    """The user's processes on the compute hosts, as ``ps`` lists them."""
    return "\n".join(pbs.on(node, f"ps -u {USER} -o pid,args").stdout for node in pbs.NODES)


def test_submitits_checkpointing_guide_times_out_a_pbs_job_run_as_a_user(user):
    """submitit's checkpointing guide as written (but for cluster="pbs"), tested as it says, with
    ``job._interrupt(timeout=True)``: hpcdist's executor sends ``qsig -s WINCH``, the model is
    checkpointed, one of the 3 timeouts is used, and the job goes on as a new PBS job; the count
    reaches 40 over the two runs. (Root's jobs cannot show it here: tests/functions/test_submitit_pbs_api.py
    keeps the preempted row.) About 1.5 min."""
    (user.folder / "main.py").write_text(GUIDE)
    subprocess.run(["chown", f"{USER}:", str(user.folder / "main.py")], check=True)
    out = results_of(user.shell(f"{shlex.quote(user.python)} main.py timeout", timeout=600))
    model, out["err"] = out["model"], out["err"][-3000:]
    assert model["step"] == 40 and len(model["runs"]) == 2, out
    assert model["runs"][0] != model["runs"][1], out  # resubmitted: a new PBS job
    assert out["countdowns"] == [2, 2] and out["state"] == "COMPLETED", out
    assert "walltime warning by hand (SIGWINCH): this job is timed-out" in out["err"], out["err"]
