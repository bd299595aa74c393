"""hpcdist submit / status / logs / cancel: the local backend for real, Slurm and PBS through fakes.

The local backend runs real training jobs on this machine. sbatch and qsub
here are FAKES (tests/fakes/): no scheduler runs where these tests run; they
print the documented odd outputs of real schedulers and site wrappers. The
same paths against a real Slurm arrive with the test-cluster issue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from launch import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUICKSTART = os.path.join(ROOT, "examples", "quickstart.py")
FAKES = os.path.join(ROOT, "tests", "fakes")


def hpcdist(*args, cwd, env=None, timeout=240):
    env = env or clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def recorded_jobs(cwd):
    root = os.path.join(cwd, ".hpcdist", "jobs")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


@pytest.mark.parametrize("flags", [
    ["--nodes", "2"],                                   # two torchrun agents, c10d rendezvous
    ["--procs-per-node", "2", "--launcher", "mpirun"],  # Open MPI, ranks through hpcdist.env
    ["--procs-per-node", "2", "--launcher", "deepspeed"],
], ids=["torchrun-2-agents", "mpirun", "deepspeed"])
def test_local_job_trains_and_is_recorded(flags, tmp_path):
    proc = hpcdist("submit", "--scheduler", "local", *flags, "--wait", "--json", QUICKSTART,
                   "--steps", "20", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = json.loads(proc.stdout.splitlines()[0])
    assert first["scheduler"] == "local" and first["job_id"] and os.path.isfile(first["script"])
    assert "identical on all ranks: True" in proc.stdout
    ranks = sorted(line.split()[2] for line in proc.stdout.splitlines() if line.startswith("[") and " rank " in line)
    assert ranks == ["0/2", "1/2"]
    status = json.loads(hpcdist("status", "--json", cwd=tmp_path).stdout)
    assert [(s["job_id"], s["state"], s["exit_code"]) for s in status] == [(first["job_id"], "COMPLETED", 0)]
    logs = hpcdist("logs", first["job_id"], cwd=tmp_path)
    assert "identical on all ranks: True" in logs.stdout
    folder = os.path.dirname(first["script"])
    assert oct(os.stat(folder).st_mode & 0o777) == "0o700"


FAILING = """
import sys, time
import hpcdist.env
env = hpcdist.env.resolve()
print(f"rank {env.rank} started", flush=True)
if env.rank == 1:
    sys.exit("rank 1 gives up")
time.sleep(300)
"""


def test_a_dead_rank_ends_the_local_job(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(FAILING)
    started = time.monotonic()
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2", "--wait", str(script),
                   cwd=tmp_path)
    assert proc.returncode != 0
    assert time.monotonic() - started < 60
    assert "rank 1 gives up" in proc.stdout
    (status,) = json.loads(hpcdist("status", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "FAILED"


def test_cancel_a_local_job(tmp_path):
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(300)\n")
    job_id = hpcdist("submit", str(script), cwd=tmp_path).stdout.strip()
    assert hpcdist("cancel", job_id, cwd=tmp_path).returncode == 0
    for _ in range(50):
        (status,) = json.loads(hpcdist("status", "--json", cwd=tmp_path).stdout)
        if status["state"] != "RUNNING":
            break
        time.sleep(0.2)
    assert status["state"] == "CANCELLED"


def test_dry_run_submits_and_writes_nothing(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    proc = hpcdist("submit", "--scheduler", "slurm", "--nodes", "2", "--dry-run", str(script), cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("#!/bin/bash") and "#SBATCH --nodes=2" in proc.stdout
    assert "would run: sbatch --parsable" in proc.stderr
    assert recorded_jobs(tmp_path) == []


def fake_env(tmp_path, **modes):
    env = clean_env(HPCDIST_FAKE_LOG=str(tmp_path / "fake.log"), **modes)
    env["PATH"] = FAKES + os.pathsep + env["PATH"]
    return env


@pytest.mark.parametrize("mode,job_id", [
    ("parsable", "12345"), ("parsable-cluster", "12345"), ("on-cluster", "12345"),
    ("banner", "12345"), ("wrapper-number-only", "12345"),
])
def test_slurm_submit_reads_the_job_id(mode, job_id, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    proc = hpcdist("submit", "--scheduler", "slurm", "--json", str(script), cwd=tmp_path,
                   env=fake_env(tmp_path, HPCDIST_FAKE_SBATCH=mode))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["job_id"] == job_id
    calls = [json.loads(line) for line in open(tmp_path / "fake.log")]
    assert calls[0]["tool"] == "sbatch" and "--parsable" in calls[0]["argv"]
    assert "#SBATCH --nodes=1" in calls[0]["script_text"]


@pytest.mark.parametrize("mode,job_id", [("pro", "12345."), ("fqdn", "12345."), ("array", "12345[]"),
                                         ("banner-numbers-first", "12345"), ("prefix", "12345")])
def test_pbs_submit_reads_the_job_id(mode, job_id, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    proc = hpcdist("submit", "--scheduler", "pbs", "--json", str(script), cwd=tmp_path,
                   env=fake_env(tmp_path, HPCDIST_FAKE_QSUB=mode))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["job_id"].startswith(job_id)


@pytest.mark.parametrize("scheduler,variable,mode,needle", [
    ("slurm", "HPCDIST_FAKE_SBATCH", "fail", "invalid partition"),
    ("slurm", "HPCDIST_FAKE_SBATCH", "no-id", "sbatch"),
    ("slurm", "HPCDIST_FAKE_SBATCH", "error-with-id", "sbatch"),
    ("pbs", "HPCDIST_FAKE_QSUB", "fail", "Unknown queue"),
    ("pbs", "HPCDIST_FAKE_QSUB", "no-id", "qsub"),
])
def test_failed_submission_records_no_id(scheduler, variable, mode, needle, tmp_path):
    """A refusal leaves nothing; exit 0 without an id keeps the folder (the job may exist), its
    record without an id (tests/submission/test_submit_records.py: status lists it as interrupted)."""
    script = tmp_path / "train.py"
    script.write_text("")
    proc = hpcdist("submit", "--scheduler", scheduler, str(script), cwd=tmp_path,
                   env=fake_env(tmp_path, **{variable: mode}))
    assert proc.returncode == 1
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    if mode != "no-id":
        assert recorded_jobs(tmp_path) == []
        return
    (folder,) = recorded_jobs(tmp_path)
    record = json.loads((tmp_path / ".hpcdist" / "jobs" / folder / "record.json").read_text())
    assert record["job_id"] == "" and "submitting" in record


def test_missing_sbatch_is_a_clear_error(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    env = clean_env()
    env["PATH"] = os.path.dirname(sys.executable)  # no sbatch anywhere
    proc = hpcdist("submit", "--scheduler", "slurm", str(script), cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "sbatch is not installed" in proc.stderr
    assert recorded_jobs(tmp_path) == []


def test_slurm_status_follows_the_job(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE="pending,running,gone", HPCDIST_FAKE_SACCT="failed")
    job_id = hpcdist("submit", "--scheduler", "slurm", str(script), cwd=tmp_path, env=env).stdout.strip()
    states = [json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path, env=env).stdout)[0]["state"]
              for _ in range(3)]
    assert states == ["PENDING", "RUNNING", "FAILED"]


def test_python_api_submits_follows_and_reads_back(tmp_path, monkeypatch):
    import hpcdist

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "environ", clean_env())
    job = hpcdist.submit(QUICKSTART, "--steps", "10", nodes=2, env={"MY_FLAG": "1"})
    assert job.scheduler == "local" and job.state() in ("RUNNING", "COMPLETED")
    assert job.wait(poll=0.5) == 0, job.logs()
    assert "identical on all ranks: True" in job.logs()
    again = hpcdist.job(job.job_id)
    assert again.state() == "COMPLETED" and again.folder == job.folder
    assert "export MY_FLAG=1" in open(job.script).read()


def test_jobs_submitted_in_the_same_second_get_their_own_folders(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    script = tmp_path / "quick.py"
    script.write_text("print('ok')\n")
    with ThreadPoolExecutor(6) as pool:
        procs = list(pool.map(lambda _: hpcdist("submit", "--json", str(script), cwd=tmp_path), range(6)))
    assert [p.returncode for p in procs] == [0] * 6, [p.stderr for p in procs]
    folders = {json.loads(p.stdout)["folder"] for p in procs}
    assert len(folders) == 6 and len(recorded_jobs(tmp_path)) == 6


def _all_reduce_rank(offset):
    import torch
    import torch.distributed as dist

    import hpcdist.env as henv

    env = henv.init_distributed(timeout=60)
    total = torch.tensor([float(env.rank + offset)])
    dist.all_reduce(total)
    dist.barrier()
    dist.destroy_process_group()
    return env.rank, env.world_size, env.launcher, total.item()


def test_submit_function_runs_a_function_on_every_task(tmp_path):
    """Through submitit's local executor: 2 tasks, ranks from hpcdist.env, a real all_reduce."""
    import hpcdist

    pytest.importorskip("submitit")
    import cloudpickle

    # The task process cannot import this test module: send the function by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    job = hpcdist.submit_function(_all_reduce_rank, 10, scheduler="local", procs_per_node=2,
                                  folder=str(tmp_path / "submitit"))
    assert sorted(job.results()) == [(0, 2, "submitit", 21.0), (1, 2, "submitit", 21.0)]


def test_submit_function_refuses_lsf_and_local_multi_node(tmp_path):
    """PBS goes through hpcdist's submitit plugin (tests/functions/test_submitit_pbs.py); LSF has none."""
    import hpcdist
    from hpcdist.validate import ValidationError

    pytest.importorskip("submitit")
    with pytest.raises(ValidationError, match="scheduler 'lsf'"):
        hpcdist.submit_function(print, scheduler="lsf")
    with pytest.raises(ValidationError, match="nodes '2'.*one node"):
        hpcdist.submit_function(print, scheduler="local", nodes=2, folder=str(tmp_path))


def test_a_reused_pid_is_not_taken_for_a_running_local_job(tmp_path):
    script = tmp_path / "quick.py"
    script.write_text("print('ok')\n")
    job = json.loads(hpcdist("submit", "--json", "--wait", str(script), cwd=tmp_path).stdout.splitlines()[0])
    folder = os.path.dirname(job["script"])
    os.remove(os.path.join(folder, "exit_code"))  # as if the runner died without a word
    # The pid now names another process (this test's own), started at another time.
    with open(os.path.join(folder, "runner"), "w") as f:
        f.write(f"{os.getpid()} 1\n")
    (status,) = json.loads(hpcdist("status", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "FAILED" and "without an exit code" in status["reason"]
