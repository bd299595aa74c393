"""The local backend runs on this host, whatever shell it is submitted from (issue 29 items 4, 10).

Real local jobs, a real Open MPI mpirun. The shell around the submission is a stand-in: the
variables an ``salloc`` shell on a 2-node allocation and a ``qsub -I`` shell export (as Slurm
and PBS document them, with their node lists naming hosts that are not here), set by hand,
since no allocation can be had where these tests run without the cluster fixture.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from test_submit import hpcdist

from launch import clean_env

#: A rank that says what it was given.
REPORT = """
import os, sys
import hpcdist.env
env = hpcdist.env.resolve()
seen = {name: os.environ.get(name) for name in ("SLURM_JOB_ID", "PBS_NODEFILE", "PMI_RANK")}
# One write, the line with its end: print() writes them apart (PYTHONUNBUFFERED), and two ranks'
# lines on the shared log could run into one.
sys.stdout.write(f"rank {env.rank} of {env.world_size} master {env.master_addr}:{env.master_port} saw {seen}\\n")
"""


def _inside_an_allocation(tmp_path) -> dict:
    nodefile = tmp_path / "pbs_nodefile"
    nodefile.write_text("pbsnode1\npbsnode2\n")
    return clean_env(
        OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        # salloc --nodes 2 (slurm.schedmd.com/salloc.html, "OUTPUT ENVIRONMENT VARIABLES")
        SLURM_JOB_ID="777", SLURM_JOBID="777", SLURM_JOB_NODELIST="node[1-2]", SLURM_NODELIST="node[1-2]",
        SLURM_JOB_NUM_NODES="2", SLURM_NNODES="2", SLURM_TASKS_PER_NODE="1(x2)", SLURM_NTASKS="2",
        SLURM_JOB_CPUS_PER_NODE="1(x2)", PMI_RANK="0",
        # qsub -I: PBS_NODEFILE, PBS_JOBID
        PBS_JOBID="9.pbshead", PBS_NODEFILE=str(nodefile), PBS_ENVIRONMENT="PBS_INTERACTIVE",
        # and a tutorial's master (item 10)
        MASTER_ADDR="localhost", MASTER_PORT="29500")


def test_a_local_mpirun_job_submitted_inside_an_allocation_runs_on_this_host(tmp_path):
    """From an salloc / qsub -I shell: Open MPI's mpirun would read Slurm's allocation and refuse
    the job's hostfile ("a hostfile ... contains at least one node not present in the
    allocation"). The job runs its 2 ranks here, on a master of its own."""
    (tmp_path / "report.py").write_text(REPORT)
    proc = hpcdist("submit", "--launcher", "mpirun", "--procs-per-node", "2", "--wait", "--json", "report.py",
                   cwd=tmp_path, env=_inside_an_allocation(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = json.loads(proc.stdout.splitlines()[0])
    log = open(job["log"]).read()
    assert "hpcdist: nodes: " + os.uname().nodename + "; master: 127.0.0.1:" in log, log
    port = log.split("; master: 127.0.0.1:", 1)[1].split("\n", 1)[0]
    assert port != "29500"
    empty = "{'SLURM_JOB_ID': None, 'PBS_NODEFILE': None, 'PMI_RANK': None}"
    assert sorted(line for line in log.splitlines() if line.startswith("rank ")) == [
        f"rank {rank} of 2 master 127.0.0.1:{port} saw {empty}" for rank in (0, 1)], log


def test_a_local_torchrun_job_inside_an_allocation_meets_on_this_host(tmp_path):
    """The same shell, two torchrun "nodes": both agents meet at 127.0.0.1 on the job's own
    port, not at the tutorial's localhost:29500 nor on the allocation's nodes."""
    (tmp_path / "report.py").write_text(REPORT)
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2", "--wait", "--json",
                   "report.py", cwd=tmp_path, env=_inside_an_allocation(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = open(json.loads(proc.stdout.splitlines()[0])["log"]).read()
    ranks = sorted(line.split(" master ")[0] for line in log.splitlines() if line.startswith("rank "))
    assert ranks == ["rank 0 of 2", "rank 1 of 2"], log
    assert ":29500" not in log.split("hpcdist: nodes: ", 1)[1].split("\n", 1)[0], log


@pytest.mark.parametrize("flags,flag", [
    (["--walltime", "1h"], "--walltime '1h'"),
    (["--array", "0-3"], "--array '0-3'"),
    (["--dependency", "afterok:123"], "--dependency 'afterok:123'"),
    (["--queue", "gpu"], "--queue 'gpu'"),
    (["--account", "proj1"], "--account 'proj1'"),
    (["--qos", "high"], "--qos 'high'"),
    (["--exclusive"], "--exclusive"),
    (["--mail", "me@example.org"], "--mail 'me@example.org'"),
    (["--output", "run-%u.log"], "--output 'run-%u.log'"),
])
def test_what_the_local_backend_cannot_do_is_refused_by_name(tmp_path, flags, flag):
    """An array run once, a dependency not waited for (a chain out of order), a walltime never
    enforced, a queue or account nobody reads: refused in one line naming the flag and the way
    out, before anything is written or run."""
    (tmp_path / "train.py").write_text("open('ran', 'w').close()\n")
    proc = hpcdist("submit", "--launcher", "none", *flags, "train.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"hpcdist submit: error: {flag}") and "the local backend" in line, line
    assert "or submit with --scheduler slurm or pbs" in line or "Use those" in line, line
    assert proc.stdout == "" and not (tmp_path / ".hpcdist").exists() and not (tmp_path / "ran").exists()


def test_an_output_with_percent_j_is_the_log_the_job_writes_and_hpcdist_reads(tmp_path):
    """``--output 'logs/run-%x-%j.log'``: the job writes logs/run-train-<id>.log (not a file named
    run-%j.log that every such job shares), and ``--wait`` and ``hpcdist logs`` show it."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "train.py").write_text("print('the training speaks')\n")
    proc = hpcdist("submit", "--launcher", "none", "--job-name", "train", "--output", "logs/run-%x-%j.log", "--wait",
                   "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = proc.stdout.splitlines()[0]
    assert "the training speaks" in proc.stdout
    assert sorted(os.listdir(tmp_path / "logs")) == [f"run-train-{job_id}.log"]
    assert "the training speaks" in (tmp_path / "logs" / f"run-train-{job_id}.log").read_text()
    logs = hpcdist("logs", job_id, cwd=tmp_path)
    assert logs.returncode == 0 and "the training speaks" in logs.stdout, logs.stdout + logs.stderr


#: A job that does what makes a cancel hard: it ignores SIGTERM, and leaves a process behind in a
#: session of its own (setsid), as a daemonising tool or a double fork would.
STUBBORN = """
import os, signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
away = subprocess.Popen(["sleep", "300"], start_new_session=True)
with open("pids", "w") as f:
    f.write(f"{os.getpid()} {away.pid}\\n")
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cancel_ends_every_process_of_the_job_even_one_that_ignores_sigterm_or_left_its_group(tmp_path):
    """``hpcdist cancel`` returns once the job's processes are gone: SIGTERM, then SIGKILL after the
    grace (as Slurm's KillWait) for the one that ignores it, and the one in a session of its own
    is found and ended too. It says what it is doing meanwhile."""
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    proc = hpcdist("submit", "--launcher", "none", "stubborn.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.split()[0]
    for _ in range(300):
        if (tmp_path / "pids").exists() and (tmp_path / "pids").read_text().endswith("\n"):
            break
        time.sleep(0.1)
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    try:
        cancel = hpcdist("cancel", job_id, cwd=tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        left = [pid for pid in pids if _alive(pid)]
        assert left == [], f"processes of job {job_id} still run after `hpcdist cancel` returned: {left}"
        assert f"hpcdist cancel: cancelling job {job_id}: " in cancel.stderr, cancel.stderr
        assert "s after SIGTERM: sending SIGKILL" in cancel.stderr, cancel.stderr
        (status,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)
        # Killed before its runner could write an exit code: as a shell says it (128 + SIGKILL),
        # not a blank (a loaded machine's torchrun outlived the grace once: docs/guide/first-job.md).
        assert (status["state"], status["exit_code"]) == ("CANCELLED", 137), status
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, 9)


def test_cancel_of_a_job_whose_runner_ended_ends_the_processes_it_left(tmp_path):
    """A job whose launcher was killed (the OOM killer ending a torchrun agent) ends, failed,
    while a process it started runs on: ``hpcdist cancel`` ends that process and says so, instead
    of "already ended"."""
    (tmp_path / "left.py").write_text(
        "import os, subprocess\n"
        "away = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "open('pids', 'w').write(f'{away.pid}\\n')\n"
        "os.kill(os.getpid(), 9)\n")
    proc = hpcdist("submit", "--launcher", "none", "--wait", "left.py", cwd=tmp_path)
    assert proc.returncode == 137, proc.stdout + proc.stderr
    job_id = proc.stdout.split()[0]
    (pid,) = [int(p) for p in (tmp_path / "pids").read_text().split()]
    try:
        assert _alive(pid)
        cancel = hpcdist("cancel", job_id, cwd=tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        assert (f"hpcdist cancel: job {job_id} has ended (failed, exit 137), but 1 of its processes still run: "
                "ending them") in cancel.stderr, cancel.stderr
        assert not _alive(pid)
        again = hpcdist("cancel", job_id, cwd=tmp_path)
        assert again.returncode == 1 and "has already ended (failed, exit 137): nothing to cancel" in again.stderr
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def _on_login2(tmp_path, *args: str, timeout: float = 120):
    """``hpcdist ARGS`` as on a second login node sharing this folder: a host name of its own
    (a UTS namespace) and its own processes (a pid namespace: this host's runner is not there)."""
    import subprocess
    import sys

    inner = 'hostname login2 && exec "$@"'
    return subprocess.run(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "bash", "-c", inner, "bash",
                           sys.executable, "-m", "hpcdist", *args], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_a_local_job_seen_from_another_login_node_is_not_called_failed(tmp_path):
    """The home folder is shared by login1 and login2: a job running on login1 reads, on login2,
    "unknown: running on login1; cannot be checked from login2", not "failed (the runner ended
    without an exit code)"; cancel there says where to cancel it, and once the job has ended,
    its exit code reads the same on both."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root for its UTS and pid namespaces (unshare)")
    (tmp_path / "train.py").write_text("import time\nwhile not __import__('os').path.exists('stop'):\n"
                                       "    time.sleep(0.2)\nprint('done')\n")
    proc = hpcdist("submit", "--launcher", "none", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.split()[0]
    here = os.uname().nodename
    try:
        status = _on_login2(tmp_path, "status", "--json", job_id)
        (row,) = json.loads(status.stdout)
        assert (row["state"], row["reason"]) == ("UNKNOWN", f"running on {here}; cannot be checked from login2"), row
        cancel = _on_login2(tmp_path, "cancel", job_id)
        assert cancel.returncode == 1
        assert cancel.stderr.strip() == (
            f"hpcdist cancel: error: job {job_id} is a local job of {here}: running on {here}; cannot be checked "
            f"from login2. Cancel it there (ssh {here} hpcdist cancel {job_id})")
        (row,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)
        assert row["state"] == "RUNNING"  # and on its own host, it runs
    finally:
        (tmp_path / "stop").touch()
    for _ in range(100):
        (row,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)
        if row["state"] != "RUNNING":
            break
        time.sleep(0.2)
    (row,) = json.loads(_on_login2(tmp_path, "status", "--json", job_id).stdout)
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), row
