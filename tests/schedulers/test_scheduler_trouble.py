"""Scheduler trouble: sbatch/qsub that hang, print no id, meet a controller that is down, or refuse the job.

What a user sees in each case: a non-zero exit, a message naming the command,
the scheduler's own words and the fix, and no job recorded: no folder left
under .hpcdist/jobs when the scheduler refused the job, its folder listed as
"submission interrupted" when the scheduler may have queued it anyway. Transient controller
errors are retried, a bounded number of times, saying so.

Two kinds of tests:

* on the REAL test cluster (the ``cluster`` fixture: slurmctld, slurmd, Slurm's
  qsub wrapper): an invalid partition, a request no node can satisfy, and the
  controller stopped (slurmctld killed for real, then started again);
* through FAKES (tests/fakes/), only for what a real Slurm cannot be made to do
  here on demand: an sbatch that hangs (also inside a site wrapper), a site
  wrapper that prints no id, a connection error that clears on the third try,
  a "socket timed out" after the request went out, and a PBS server (none
  exists here). Each of those tests says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import testcluster
from launch import clean_env

ROOT = testcluster.ROOT
FAKES = str(ROOT / "tests" / "fakes")
QUICKSTART = ROOT / "examples" / "quickstart.py"


def hpcdist(*args, cwd, env, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def job_folders(cwd) -> list[str]:
    """Everything under .hpcdist/jobs: a failed submission must leave not even a draft folder."""
    root = os.path.join(cwd, ".hpcdist", "jobs")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def fake_env(tmp_path, **settings) -> dict:
    env = clean_env(**{"HPCDIST_FAKE_LOG": str(tmp_path / "fake.log"), "HPCDIST_RETRY_DELAY": "0.1", **settings})
    env["PATH"] = FAKES + os.pathsep + env["PATH"]
    return env


def calls_of(tmp_path, tool: str) -> list[dict]:
    """The fake's log: one entry per time ``tool`` ran."""
    log = tmp_path / "fake.log"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c["tool"] == tool]


def assert_kept_as_interrupted(cwd, env) -> None:
    """The scheduler may have queued the job: its folder stays, and status says what to check."""
    assert len(job_folders(cwd)) == 1
    (row,) = json.loads(hpcdist("status", "--json", cwd=cwd, env=env).stdout)
    assert row["state"] == "SUBMISSION INTERRUPTED" and "job name train in `" in row["reason"], row


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("")
    return str(path)


# ------------------------------------------------------------------ fakes: submission


@pytest.mark.parametrize("scheduler,variable,mode", [
    ("slurm", "HPCDIST_FAKE_SBATCH", "hang"),
    ("slurm", "HPCDIST_FAKE_SBATCH", "hang-child"),  # a site wrapper whose sbatch hangs
    ("pbs", "HPCDIST_FAKE_QSUB", "hang"),
])
def test_a_hanging_submit_command_times_out_and_keeps_the_folder_as_interrupted(
        scheduler, variable, mode, script, tmp_path):
    """FAKE sbatch/qsub: a real one cannot be made to hang on demand (slurmctld down makes it fail
    after ~9 s, tested on the cluster below)."""
    env = fake_env(tmp_path, HPCDIST_SUBMIT_TIMEOUT="2", **{variable: mode})
    started = time.monotonic()
    proc = hpcdist("submit", "--scheduler", scheduler, script, cwd=tmp_path, env=env, timeout=60)
    took = time.monotonic() - started
    command = "sbatch --parsable" if scheduler == "slurm" else "qsub -o"
    assert proc.returncode == 1, proc.stderr
    assert f"`{command}" in proc.stderr and "did not answer within 2 s (HPCDIST_SUBMIT_TIMEOUT)" in proc.stderr
    # A timeout after sending may hide an accepted job: no retry, and the user is told where to look.
    assert "may have been queued anyway: check `" in proc.stderr
    assert len(calls_of(tmp_path, "sbatch" if scheduler == "slurm" else "qsub")) == 1
    assert "Traceback" not in proc.stderr and took < 20, (took, proc.stderr)
    assert_kept_as_interrupted(tmp_path, env)


def test_the_whole_hanging_wrapper_is_killed(script, tmp_path):
    """FAKE sbatch (a site wrapper): its hung child held the pipes; nothing of it may outlive hpcdist."""
    env = fake_env(tmp_path, HPCDIST_SUBMIT_TIMEOUT="1", HPCDIST_FAKE_SBATCH="hang-child")
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 1
    child = int((tmp_path / "fake.log.child").read_text())
    for _ in range(50):
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # dead, not yet reaped by its new parent
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the wrapper's child {child} still runs after hpcdist gave up")


def test_exit_0_without_a_job_id_names_the_command_and_its_output(script, tmp_path):
    """FAKE sbatch: a site wrapper that swallows the id (real sbatch always prints one)."""
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path,
                   env=fake_env(tmp_path, HPCDIST_FAKE_SBATCH="no-id"))
    assert proc.returncode == 1
    assert "sbatch exited 0 but printed no job id" in proc.stderr
    assert "command: sbatch --parsable .hpcdist/jobs/" in proc.stderr                   # the command as run
    assert "Welcome to the GPU cluster" in proc.stderr                    # its own output, quoted
    assert "check `squeue --me`" in proc.stderr and "Traceback" not in proc.stderr
    assert_kept_as_interrupted(tmp_path, fake_env(tmp_path))


@pytest.mark.parametrize("scheduler,variable,modes,tool", [
    ("slurm", "HPCDIST_FAKE_SBATCH", "unreachable,unreachable,parsable", "sbatch"),
    ("pbs", "HPCDIST_FAKE_QSUB", "unreachable,pro", "qsub"),
])
def test_a_transient_connect_failure_is_retried_with_backoff(scheduler, variable, modes, tool, script, tmp_path):
    """FAKE sbatch/qsub: a controller that comes back between two tries cannot be timed for real."""
    proc = hpcdist("submit", "--scheduler", scheduler, "--json", script, cwd=tmp_path,
                   env=fake_env(tmp_path, **{variable: modes}))
    assert proc.returncode == 0, proc.stderr
    tries = modes.count(",") + 1
    assert len(calls_of(tmp_path, tool)) == tries
    said = [line for line in proc.stderr.splitlines() if "retrying in" in line]
    assert len(said) == tries - 1, proc.stderr
    assert said[0].startswith(f"hpcdist: {tool}: ") and "retrying in 0.1 s (attempt 1 of 3)" in said[0]
    assert ("Unable to contact slurm controller (connect failure)" if tool == "sbatch"
            else "cannot connect to server pbs01") in said[0]
    if tries == 3:
        assert "retrying in 0.2 s (attempt 2 of 3)" in said[1]  # the wait doubles
    assert len(job_folders(tmp_path)) == 1 and json.loads(proc.stdout)["job_id"].startswith("12345")


def test_retries_are_bounded_and_the_error_says_so(script, tmp_path):
    """FAKE sbatch: always the connect failure (the real one is on the cluster test below)."""
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path,
                   env=fake_env(tmp_path, HPCDIST_FAKE_SBATCH="unreachable", HPCDIST_SCHEDULER_RETRIES="3"))
    assert proc.returncode == 1
    assert len(calls_of(tmp_path, "sbatch")) == 4
    assert "(attempt 3 of 4)" in proc.stderr and "(attempt 4 of 4)" not in proc.stderr
    assert "cannot be reached after 4 tries" in proc.stderr and "HPCDIST_SCHEDULER_RETRIES" in proc.stderr
    assert job_folders(tmp_path) == []


def test_a_socket_timeout_is_not_resubmitted(script, tmp_path):
    """FAKE sbatch: "Socket timed out" means slurmctld may have queued the job; a retry could run it twice."""
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path,
                   env=fake_env(tmp_path, HPCDIST_FAKE_SBATCH="socket-timeout,parsable"))
    assert proc.returncode == 1
    assert len(calls_of(tmp_path, "sbatch")) == 1 and "retrying" not in proc.stderr
    assert "Socket timed out on send/recv operation" in proc.stderr
    assert "may have been queued anyway: check `squeue --me` before submitting again" in proc.stderr
    assert_kept_as_interrupted(tmp_path, fake_env(tmp_path))


@pytest.mark.parametrize("variable,value", [("HPCDIST_SUBMIT_TIMEOUT", "soon"), ("HPCDIST_SUBMIT_TIMEOUT", "0"),
                                            ("HPCDIST_SCHEDULER_RETRIES", "-1"), ("HPCDIST_RETRY_DELAY", "nan")])
def test_a_bad_setting_names_the_variable_and_the_fix(variable, value, script, tmp_path):
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path, env=fake_env(tmp_path, **{variable: value}))
    assert proc.returncode == 1
    assert f"{variable}='{value}': expected" in proc.stderr and "unset it" in proc.stderr
    assert calls_of(tmp_path, "sbatch") == [] and job_folders(tmp_path) == []


# ------------------------------------------------------------------ fakes: status and --wait


def _submitted(tmp_path, script, scheduler="slurm", n=1) -> list[str]:
    ids = []
    for k in range(n):
        proc = hpcdist("submit", "--scheduler", scheduler, "--json", script, cwd=tmp_path,
                       env=fake_env(tmp_path, HPCDIST_FAKE_JOBID=str(500 + k)))
        assert proc.returncode == 0, proc.stderr
        ids.append(json.loads(proc.stdout)["job_id"])
    return ids


def test_status_says_the_controller_is_down_and_never_finished(script, tmp_path):
    """FAKE squeue/sacct: the real controller-down status is on the cluster test below; here, the
    retries are counted, and several jobs on one controller cost one round of retries."""
    first, second = _submitted(tmp_path, script, n=2)
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE="fail", HPCDIST_FAKE_SACCT="disabled")
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["state"] for r in rows] == ["UNKNOWN", "UNKNOWN"]
    assert "the Slurm controller cannot be reached (squeue: slurm_load_jobs error: Unable to contact slurm " \
           "controller (connect failure))" in rows[0]["reason"]
    assert "cannot be reached (as for job " + first + ")" in rows[1]["reason"]
    assert len(calls_of(tmp_path, "squeue")) == 3  # 1 + 2 retries, for both jobs
    assert "hpcdist: squeue: slurm_load_jobs error: Unable to contact" in proc.stderr
    table = hpcdist("status", cwd=tmp_path, env=env).stdout
    assert "unknown" in table and "cannot be reached" in table and "completed" not in table


def test_a_job_that_wrote_its_exit_code_is_judged_while_the_controller_is_down(script, tmp_path):
    """FAKE squeue: the job's own exit_code file (written by its script's EXIT trap) is the evidence."""
    (job_id,) = _submitted(tmp_path, script)
    (folder,) = job_folders(tmp_path)
    (tmp_path / ".hpcdist" / "jobs" / folder / "exit_code").write_text("3\n")
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE="fail", HPCDIST_FAKE_SACCT="disabled")
    (row,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path, env=env).stdout)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3)
    assert "exit_code file" in row["reason"] and "cannot be reached" in row["reason"]


def test_pbs_status_says_the_server_is_down(script, tmp_path):
    """FAKE qstat: no PBS server exists here (Slurm's qstat wrapper only says "Problem loading jobs")."""
    (job_id,) = _submitted(tmp_path, script, scheduler="pbs")
    env = fake_env(tmp_path, HPCDIST_FAKE_QSTAT="fail", HPCDIST_SCHEDULER_RETRIES="1")
    (row,) = json.loads(hpcdist("status", "--json", cwd=tmp_path, env=env).stdout)
    assert row["state"] == "UNKNOWN" and "the PBS server cannot be reached (qstat: " in row["reason"]
    assert len(calls_of(tmp_path, "qstat")) == 2  # -F json, retried once; the text form is not tried


def _job_in_process(tmp_path, script, monkeypatch, **fake_modes):
    from hpcdist import jobs

    (job_id,) = _submitted(tmp_path, script)
    for name, value in fake_env(tmp_path, HPCDIST_SCHEDULER_RETRIES="0", **fake_modes).items():
        monkeypatch.setenv(name, value)
    return jobs.find(job_id, root=str(tmp_path / ".hpcdist" / "jobs"))


def test_wait_keeps_waiting_while_the_controller_is_down(script, tmp_path, monkeypatch, capsys):
    """FAKE squeue/sacct: down for three polls, then back; --wait neither gives up nor claims an end."""
    from hpcdist.submission import submit as submission

    job = _job_in_process(tmp_path, script, monkeypatch, HPCDIST_FAKE_SQUEUE="fail,fail,fail,running,gone",
                          HPCDIST_FAKE_SACCT="disabled,disabled,disabled,completed")
    monkeypatch.setattr(submission, "UNKNOWN_PATIENCE_S", 0.0)  # an ordinary "unknown" would end it at once
    assert submission.wait(job, poll=0.05) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith(f"hpcdist: job {job.job_id}")]
    assert said[0].startswith(f"hpcdist: job {job.job_id} is unknown: the controller is down (the Slurm controller "
                              "cannot be reached") and "still waiting, up to 600 s" in said[0]
    assert [line.split(" is ")[1].split(" ")[0] for line in said[1:]] == ["running", "completed"]


def test_wait_gives_up_on_a_controller_that_stays_down(script, tmp_path, monkeypatch, capsys):
    """FAKE squeue/sacct: a bounded wait, and the message says why."""
    from hpcdist.submission import submit as submission

    job = _job_in_process(tmp_path, script, monkeypatch, HPCDIST_FAKE_SQUEUE="fail", HPCDIST_FAKE_SACCT="disabled")
    monkeypatch.setattr(submission, "CONTROLLER_PATIENCE_S", 0.3)
    assert submission.wait(job, poll=0.05) == 1
    err = capsys.readouterr().err
    assert f"gave up waiting for job {job.job_id} after 0.3 s: the Slurm controller cannot be reached" in err
    assert f"`hpcdist status {job.job_id}` tells once the controller is back" in err


# ------------------------------------------------------------------ no scheduler set up at all


def _real(program: str) -> str:
    import shutil

    path = shutil.which(program)
    if path is None or path.startswith(FAKES):
        pytest.skip(f"no real {program} installed here (the test cluster's set-up installs slurm-wlm)")
    return path


def _without_slurm_conf(tmp_path, **extra) -> dict:
    env = clean_env(HPCDIST_RETRY_DELAY="0.1")
    env.pop("SLURM_CONF", None)
    return {**env, **extra}


def _no_slurm_configuration(tmp_path) -> dict:
    """The environment of a machine with Slurm's commands and no Slurm: no SLURM_CONF, no
    /etc/slurm/slurm.conf (what `scripts/test.sh` leaves behind), so the real commands fail
    on their configless DNS look-up."""
    if os.path.exists("/etc/slurm/slurm.conf"):
        pytest.skip("this host has /etc/slurm/slurm.conf: its Slurm commands find a configuration")
    return _without_slurm_conf(tmp_path)


NO_SLURM = ("is installed but cannot reach a Slurm controller ({program}: fatal: Could not establish a "
            "configuration source). On a login node this is a site problem (ask the cluster's admins); on a machine "
            "with no Slurm cluster set up: use --scheduler local, or set SLURM_CONF to the cluster's slurm.conf.")


def test_real_sbatch_with_no_slurm_configured_says_so_once(script, tmp_path):
    """The REAL sbatch, with no configuration anywhere: it fails on its own DNS SRV look-up."""
    _real("sbatch")
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path, env=_no_slurm_configuration(tmp_path))
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "hpcdist submit: error: sbatch " + NO_SLURM.format(program="sbatch") + "\n"
    assert job_folders(tmp_path) == []  # and not retried: nothing said "retrying"


def test_real_sbatch_with_an_unusable_slurm_conf_says_so(script, tmp_path):
    """The REAL sbatch, with SLURM_CONF naming an empty file: no cluster in it."""
    _real("sbatch")
    (tmp_path / "slurm.conf").write_text("")
    env = _without_slurm_conf(tmp_path, SLURM_CONF=str(tmp_path / "slurm.conf"))
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "retrying" not in proc.stderr
    assert proc.stderr.startswith("hpcdist submit: error: sbatch is installed but cannot reach a Slurm controller "
                                  "(sbatch: fatal: Unable to process configuration file). On a login node this is "
                                  "a site problem"), proc.stderr
    assert job_folders(tmp_path) == []


def test_real_sbatch_with_a_controller_that_is_not_there(script, tmp_path):
    """The REAL sbatch, with a slurm.conf whose controller's port nobody listens on (~9 s: sbatch's own tries)."""
    import socket

    _real("sbatch")
    with socket.socket() as s:  # a port free now on this host
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "slurm.conf").write_text(
        f"ClusterName=nowhere\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={port}\nAuthType=auth/none\n"
        "NodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost Default=YES\n")
    env = _without_slurm_conf(tmp_path, SLURM_CONF=str(tmp_path / "slurm.conf"), HPCDIST_SCHEDULER_RETRIES="0")
    proc = hpcdist("submit", "--scheduler", "slurm", script, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "hpcdist submit: error: sbatch is installed but cannot reach a Slurm controller (sbatch: error: Batch job "
        "submission failed: Unable to contact slurm controller (connect failure)).\nThe Slurm controller cannot be "
        "reached: on a login node it may be down or restarting; try again when it is back"), proc.stderr
    assert "use --scheduler local" in proc.stderr and job_folders(tmp_path) == []


def test_real_squeue_and_scancel_with_no_slurm_configured(script, tmp_path):
    """A job recorded through the FAKE sbatch (no real Slurm can take one here); then the REAL
    squeue and scancel, with no configuration: status and cancel say what the matter is."""
    _real("squeue"), _real("scancel")
    env = _no_slurm_configuration(tmp_path)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "sbatch").symlink_to(os.path.join(FAKES, "sbatch"))
    proc = hpcdist("submit", "--scheduler", "slurm", "--json", script, cwd=tmp_path,
                   env=dict(env, PATH=f"{fake_bin}{os.pathsep}{env['PATH']}"))
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["job_id"]
    (row,) = json.loads(hpcdist("status", "--json", cwd=tmp_path, env=env).stdout)
    assert row["state"] == "UNKNOWN" and row["reason"] == "squeue " + NO_SLURM.format(program="squeue")
    proc = hpcdist("cancel", job_id, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert proc.stderr == (f"hpcdist cancel: error: job {job_id} was not cancelled: scancel "
                           + NO_SLURM.format(program="scancel") + "\n")


def test_real_slurm_qsub_wrapper_with_no_slurm_configured(script, tmp_path):
    """The REAL qsub of Slurm's Torque wrapper (slurm-wlm-torque, Perl): Slurm's words, as "perl: ..."."""
    qsub = _real("qsub")
    with open(qsub, "rb") as f:
        if b"perl" not in f.readline():
            pytest.skip(f"{qsub} is not Slurm's Perl qsub wrapper")
    proc = hpcdist("submit", "--scheduler", "pbs", script, cwd=tmp_path, env=_no_slurm_configuration(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr == (
        "hpcdist submit: error: qsub is installed but cannot reach a PBS server (perl: fatal: Could not establish a "
        "configuration source). On a login node this is a site problem (ask the cluster's admins); on a machine with "
        "no PBS cluster set up: use --scheduler local, or set SLURM_CONF to the cluster's slurm.conf (this qsub is "
        "Slurm's Torque wrapper).\n")


@pytest.mark.parametrize("mode,line", [
    ("no-conf-openpbs", "pbsconf error: pbs conf variables not found: PBS_HOME"),
    ("no-server-torque", "qsub: cannot connect to server (null) (errno=15137) could not connect to trqauthd"),
    ("bad-server-name", "qsub: Cannot resolve default server host 'pbs01' - check server_name file."),
])
def test_qsub_with_no_pbs_server_set_up_says_so_once(mode, line, script, tmp_path):
    """FAKE qsub, a stand-in: no PBS server can run here; it prints what PBS's own clients print (tests/fakes/qsub)."""
    proc = hpcdist("submit", "--scheduler", "pbs", script, cwd=tmp_path, env=fake_env(tmp_path, HPCDIST_FAKE_QSUB=mode))
    assert proc.returncode == 1
    assert proc.stderr == (
        f"hpcdist submit: error: qsub is installed but cannot reach a PBS server ({line}). On a login node this is a "
        "site problem (ask the cluster's admins); on a machine with no PBS cluster set up: use --scheduler local, or "
        "set PBS_SERVER (PBS Pro, OpenPBS) or PBS_DEFAULT (Torque) to the server's host name.\n")
    assert len(calls_of(tmp_path, "qsub")) == 1 and job_folders(tmp_path) == []  # not retried: it cannot help


# ------------------------------------------------------------------ the retry rules, on their own


@pytest.mark.parametrize("text,kind", [
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", "not_sent"),
    ("sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying", "not_sent"),
    ("Connection refused\nqsub: cannot connect to server pbs01 (errno=111)", "not_sent"),
    ("pbs_iff: cannot connect to host", "not_sent"),
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", "maybe_sent"),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (receive failure)",
     "maybe_sent"),
    ("squeue: error: slurm_receive_msg: Zero Bytes were transmitted or received", "maybe_sent"),
    ("sbatch: error: invalid partition specified: gpu", None),
    ("", None),
    # No scheduler set up at all: another try cannot help.
    ("sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
     "sbatch: fatal: Could not establish a configuration source", "not_configured"),
    ("pbsconf error: pbs conf variables not found: PBS_HOME\nqsub: cannot connect to server (errno=0)",
     "not_configured"),
])
def test_which_errors_prove_the_request_never_arrived(text, kind):
    from hpcdist.schedulers import retry

    assert bool(retry.not_sent(text)) == (kind == "not_sent")
    assert bool(retry.maybe_sent(text)) == (kind == "maybe_sent")
    assert bool(retry.unreachable(text)) == (kind in ("not_sent", "maybe_sent"))
    assert bool(retry.not_configured(text)) == (kind == "not_configured")


def test_with_retries_backs_off_and_stops():
    from hpcdist.schedulers import retry

    slept, said = [], []

    class Err:
        def write(self, text):
            said.append(text)

        def flush(self):
            pass

    results = iter(["down", "down", "down", "down", "down", "ok"])
    last = retry.with_retries(lambda: next(results), lambda r: "no route" if r == "down" else None,
                              command="squeue", retries=4, delay=10, sleep=slept.append, err=Err())
    assert last == "down" and slept == [10, 20, 30, 30]  # doubled, capped at MAX_DELAY_S
    assert "hpcdist: squeue: no route; retrying in 10 s (attempt 1 of 5)" in said[0]


# ------------------------------------------------------------------ the real cluster


def _slurmctld(action: str) -> None:
    proc = subprocess.run(["bash", str(testcluster.CLUSTER_SH), f"ctld-{action}"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, HPCDIST_CLUSTER_DIR=str(testcluster.state_dir())))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_an_invalid_partition_is_refused_with_slurms_own_words(scheduler, cluster, tmp_path):
    """Real sbatch (and Slurm's qsub wrapper around it) against the real slurmctld."""
    proc = hpcdist("submit", "--scheduler", scheduler, "--queue", "nosuch", str(QUICKSTART), cwd=tmp_path,
                   env=testcluster.client_env(cluster))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "invalid partition specified: nosuch" in proc.stderr           # Slurm's own message, the value
    assert f"{'sbatch' if scheduler == 'slurm' else 'qsub'} did not submit the job" in proc.stderr
    assert "Fix: check --queue" in proc.stderr and "sinfo -s" in proc.stderr
    assert "retrying" not in proc.stderr and "Traceback" not in proc.stderr
    assert job_folders(tmp_path) == [] and proc.stdout == ""


def test_gpus_the_cluster_does_not_have_are_refused(cluster, tmp_path):
    """Real sbatch: the test cluster has no GPUs (no GRES). (A node count above the cluster's is not
    refused here: without EnforcePartLimits, Slurm queues such a job, pending forever.)"""
    proc = hpcdist("submit", "--scheduler", "slurm", "--gpus-per-node", "1", str(QUICKSTART), cwd=tmp_path,
                   env=testcluster.client_env(cluster))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Invalid generic resource (gres) specification" in proc.stderr
    assert "Fix: " in proc.stderr and "--gpus-per-node" in proc.stderr
    assert job_folders(tmp_path) == []


def test_the_test_cluster_does_not_enforce_accounts(cluster, tmp_path):
    """Why no invalid-account test runs here: without slurmdbd (AccountingStorageType=accounting_storage/none)
    Slurm takes any --account. If the cluster ever enforces accounts, this fails: turn it into the real test."""
    env = testcluster.client_env(cluster)
    proc = hpcdist("submit", "--scheduler", "slurm", "--account", "nosuch", "--json", str(QUICKSTART), "--steps", "1",
                   cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    subprocess.run(["scancel", json.loads(proc.stdout)["job_id"]], env=env, timeout=30)


SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"


def test_slurmctld_down_submit_fails_after_bounded_retries_and_status_says_so(cluster, tmp_path):
    """Real slurmctld, stopped for real: sbatch's own connect failure, retried; squeue's, reported."""
    env = testcluster.client_env(cluster, HPCDIST_SCHEDULER_RETRIES="1", HPCDIST_RETRY_DELAY="0.5")
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    proc = hpcdist("submit", "--scheduler", "slurm", "--launcher", "none", "--json", "sleeper.py", cwd=tmp_path,
                   env=env)
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["job_id"]
    before = job_folders(tmp_path)
    try:
        _slurmctld("stop")
        started = time.monotonic()
        proc = hpcdist("submit", "--scheduler", "slurm", "sleeper.py", cwd=tmp_path, env=env)
        took = time.monotonic() - started
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert ("hpcdist: sbatch: sbatch: error: Batch job submission failed: Unable to contact slurm controller "
                "(connect failure); retrying in 0.5 s (attempt 1 of 2)") in proc.stderr
        assert "cannot be reached after 2 tries" in proc.stderr and "Traceback" not in proc.stderr
        assert job_folders(tmp_path) == before and proc.stdout == ""
        assert took < 60, took  # two of sbatch's own ~9 s tries, and the pause

        # squeue's own tries take ~18 s; the retries are counted through fakes above.
        status = hpcdist("status", "--json", job_id, cwd=tmp_path, env=dict(env, HPCDIST_SCHEDULER_RETRIES="0"))
        (row,) = json.loads(status.stdout)
        assert row["state"] == "UNKNOWN", row
        assert "the Slurm controller cannot be reached (squeue: slurm_load_jobs error: Unable to contact slurm " \
               "controller (connect failure))" in row["reason"]
    finally:
        _slurmctld("start")  # always: the tests after this one need the controller
    (row,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path, env=env).stdout)
    assert row["state"] in ("RUNNING", "PENDING"), row  # it ran on while the controller was away
    subprocess.run(["scancel", job_id], env=env, timeout=30)
