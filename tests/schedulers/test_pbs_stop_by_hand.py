"""The walltime warning by hand on PBS: ``qsig -s WINCH <job>``, which a real mom's signal survives.

A mom that sees a job's processes (a job run as a user) sends qsig's signal to every process of
the job's session, the user's login shell that runs the job script among them: a USR2 kills that
shell and PBS ends the job (Exit_status 268; docs/decisions.md, 2026-11-29). The real OpenPBS
shows it with a job run as a user (tests/schedulers/test_openpbs_as_user.py). These rows, beside it, are a
STAND-IN of the mom's ``kill_session``, without a cluster: hpcdist's own PBS
script (``hpcdist submit`` through the stand-in qsub of tests/schedulers/test_openpbs_recorded.py) runs under
a ``bash`` that leads its session with no trap, as PBS's login shell does, with the variables the
mom sets; then every process whose session is that shell's (read from /proc, as the mom reads it)
gets the signal. The training is test_preemption's stand-in, which stops on hpcdist's request.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess

import pytest
from launch import wait_for
from test_openpbs_recorded import calls, hpcdist, replay
from test_preemption import TRAINING_STUB

#: The login shell PBS runs the job script under: no trap of its own, it outlives the script.
LOGIN_SHELL = 'bash "$1"; echo "login shell: the job script exited $?"'


def session(sid: int) -> list[int]:
    """The processes of session ``sid``: the session id is the 6th field of /proc/PID/stat."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:
            found.append(int(stat.split("/")[2]))
    return found


def kill_session(sid: int, sig: int) -> None:
    """What a mom does for ``qsig``: the signal to every process of the job's session."""
    for pid in session(sid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def pbs_job(tmp_path):
    """``hpcdist submit`` of the stand-in training through the stand-in qsub (job 19; the
    resubmission is 20), then its script started as PBS's mom starts it: returns (the login
    shell's process, its log, the replay's environment)."""
    started = []

    def start(*options):
        answers = [{"stdout": "19.pbshead\n"}, {"stdout": "20.pbshead\n"}]
        env = replay(tmp_path, {"qsub": [{"answers": answers}]})
        (tmp_path / "stub.py").write_text(TRAINING_STUB)
        proc = hpcdist("submit", "--scheduler", "pbs", "--launcher", "none", "--requeue", "1",
                       *options, "stub.py", "stops", cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        (qsub,) = calls(tmp_path, "qsub")
        log = tmp_path / qsub["argv"][qsub["argv"].index("-o") + 1]
        (tmp_path / "nodes").write_text("localhost\n")
        mom = {**env, "PBS_JOBID": "19.pbshead", "PBS_NODEFILE": str(tmp_path / "nodes"),
               "PBS_O_WORKDIR": str(tmp_path)}
        with open(log, "w") as out:
            shell = subprocess.Popen(["bash", "-c", LOGIN_SHELL, "-bash", qsub["argv"][-1]],
                                     cwd=tmp_path, env=mom, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        started.append(shell)
        # The training runs (the script's traps are set before its launch).
        wait_for(lambda: any("stub.py" in cmdline(pid) for pid in session(shell.pid)), 60,
                 "the training in the job's session")
        return shell, log, env

    yield start
    for shell in started:  # what a mom does at the job's end: nothing of it is left
        kill_session(shell.pid, signal.SIGKILL)
        shell.wait(10)


def test_a_usr2_to_every_process_of_the_job_kills_pbss_login_shell(pbs_job):
    """The before: ``qsig -s USR2``'s way, which hpcdist's PBS scripts used to tell users to take.
    The login shell dies of it, and on PBS that ends the job (its mom then kills the rest)."""
    shell, log, _ = pbs_job()
    kill_session(shell.pid, signal.SIGUSR2)
    assert shell.wait(30) == -signal.SIGUSR2, log.read_text()
    assert "login shell: the job script exited" not in log.read_text()


@pytest.mark.parametrize("options", [[], ["--walltime", "1h"]], ids=["no-walltime", "walltime"])
def test_qsig_winch_to_every_process_stops_the_training_and_goes_on(pbs_job, tmp_path, options):
    """``qsig -s WINCH``'s way, as the script's comment tells users: every process of the session
    gets it, the login shell (and the walltime's timer, the monitor, the training) ignore it, the
    script's trap asks the training to stop, it stops, and the job goes on as a new one (the
    stand-in qsub's second call, after this job), as on the walltime warning."""
    shell, log, env = pbs_job(*options)
    script = tmp_path / calls(tmp_path, "qsub")[0]["argv"][-1]
    with open(script) as f:
        assert "`qsig -s WINCH <job>`" in f.read()
    kill_session(shell.pid, signal.SIGWINCH)
    assert shell.wait(90) == 0, log.read_text()
    text = log.read_text()
    assert "hpcdist: walltime warning by hand (SIGWINCH) at " in text, text
    assert "stopped: the job script asked: walltime warning by hand (SIGWINCH)" in text, text
    assert "resubmitted as job 20.pbshead" in text, text
    assert text.endswith("login shell: the job script exited 0\n"), text
    first, again = calls(tmp_path, "qsub")
    assert "depend=afterany:19.pbshead" in again["argv"], again["argv"]
    assert again["argv"][-1] == str(script), again["argv"]
