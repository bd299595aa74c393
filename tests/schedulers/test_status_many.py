"""`hpcdist status` over many recorded jobs: one scheduler command per chunk of jobs, none for a
job whose end is recorded for good, and each job still gets its own state.

Through FAKES (tests/fakes/squeue, sacct, qstat): STAND-INS that print what the real commands
print and count their calls into a file (HPCDIST_FAKE_LOG), since the real test cluster is shared
and cannot hold hundreds of jobs for a test. The job folders are built with hpcdist's own
jobs.py (what `hpcdist submit` writes), without submitting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from launch import clean_env

from hpcdist import jobs
from hpcdist.schedulers.batch import QUERY_CHARS

FAKES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fakes")


def hpcdist(*args, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def fake_env(tmp_path, **settings) -> dict:
    env = clean_env(**{"HPCDIST_FAKE_LOG": str(tmp_path / "fake.log"), "HPCDIST_RETRY_DELAY": "0.1", **settings})
    env["PATH"] = FAKES + os.pathsep + env["PATH"]
    return env


def calls_of(tmp_path, tool: str) -> list[list[str]]:
    """The argv of each time the stand-in ``tool`` ran."""
    log = tmp_path / "fake.log"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c["argv"] for c in calls if c["tool"] == tool]


def asked_ids(argv: list[str], option: str) -> list[str]:
    """The ids one call asked about: ``-j a,b,c`` (squeue, sacct) or qstat's trailing ids."""
    if option == "-j":
        return argv[argv.index("-j") + 1].split(",")
    return [word for word in argv if word[0].isdigit()]


def calls_needed(ids: list[str]) -> int:
    """How many calls asking about ``ids`` in order take, each given at most QUERY_CHARS
    characters of ids (one separator each): counted here, by hand."""
    calls, size = 1, 0
    for job_id in ids:
        size += len(job_id) + 1
        if size > QUERY_CHARS:
            calls, size = calls + 1, len(job_id) + 1
    return calls


def record_jobs(tmp_path, ids: list[str], scheduler: str = "slurm", dialect: str | None = None,
                extra: dict | None = None) -> dict:
    """A job folder for each id, as `hpcdist submit` leaves it (plus ``extra[id]`` in its record):
    {id: folder}."""
    root = tmp_path / ".hpcdist" / "jobs"
    folders = {}
    for job_id in ids:
        draft = jobs.Draft(str(root), f"train-{job_id.split('.')[0]}")
        draft.commit({"job_id": job_id, "cluster": None, "scheduler": scheduler, "dialect": dialect,
                      "job_name": "train", "workdir": str(tmp_path), "log": os.path.join(draft.path, "job.log"),
                      "submitted_at": 0.0, "command_line": "hpcdist submit train.py", **(extra or {}).get(job_id, {})})
        folders[job_id] = draft.path
    return folders


def test_slurm_status_asks_once_per_chunk_and_not_about_jobs_that_ended_for_good(tmp_path):
    # Array tasks with 10-digit ids (19 characters with the comma): more than one call's worth.
    ids = [f"{4_000_000_000 + k}_{1_000_000 + k}" for k in range(QUERY_CHARS // 19 + 30)]
    gone = ids[5:12]  # left the queue: sacct knows how they ended
    lost = ids[20:23]  # in neither: their exit_code file says how they ended
    ended = ids[40:50]  # --wait recorded the scheduler's "completed" about the id they go on under
    preempted = ids[50]  # recorded as preempted: Slurm may requeue it, so it is asked about again
    extra = {i: {"state": "COMPLETED", "exit_code": 0, "reason": None, "ended_id": i} for i in ended}
    extra[preempted] = {"state": "PREEMPTED", "exit_code": 0, "reason": None, "ended_id": preempted}
    folders = record_jobs(tmp_path, ids, extra=extra)
    for job_id in lost:
        with open(os.path.join(folders[job_id], "exit_code"), "w") as f:
            f.write("3\n")
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE_GONE=",".join(gone + lost), HPCDIST_FAKE_SACCT_GONE=",".join(lost))
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {row["job_id"]: row for row in json.loads(proc.stdout)}
    assert sorted(rows) == sorted(ids)
    for job_id in ids:
        expected = (("COMPLETED", 0) if job_id in gone + ended else ("FAILED", 3) if job_id in lost
                    else ("RUNNING", None))
        assert (rows[job_id]["state"], rows[job_id]["exit_code"]) == expected, job_id
    assert "exit_code file" in rows[lost[0]]["reason"]
    squeue, sacct = calls_of(tmp_path, "squeue"), calls_of(tmp_path, "sacct")
    asked = [i for i in ids if i not in ended]
    assert len(squeue) == calls_needed(asked) == 2
    assert all(len(argv[argv.index("-j") + 1]) < QUERY_CHARS for argv in squeue)
    assert sorted(i for argv in squeue for i in asked_ids(argv, "-j")) == sorted(set(ids) - set(ended))
    # Only the jobs squeue left out, in one sacct.
    assert [sorted(asked_ids(argv, "-j")) for argv in sacct] == [sorted(gone + lost)]


def test_two_thousand_slurm_jobs_cost_one_squeue_and_one_sacct(tmp_path):
    """Each call costs a real controller 50-100 ms: 2,000 jobs with ids as a site gives them
    (7 digits) are asked about in one squeue, and the ones it left out in one sacct."""
    ids = [str(4_100_000 + k) for k in range(2000)]
    record_jobs(tmp_path, ids)
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE_GONE=",".join(ids[::2]))
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    states = {row["job_id"]: row["state"] for row in json.loads(proc.stdout)}
    assert states == {i: "COMPLETED" if k % 2 == 0 else "RUNNING" for k, i in enumerate(ids)}
    (squeue,), (sacct,) = calls_of(tmp_path, "squeue"), calls_of(tmp_path, "sacct")
    assert sorted(asked_ids(squeue, "-j")) == ids and sorted(asked_ids(sacct, "-j")) == ids[::2]


def test_a_batch_answer_missing_some_jobs_still_gives_each_its_state(tmp_path):
    """squeue lists one job, sacct another, neither the last two: each gets the answer it would get
    asked about alone."""
    ids = ["700", "701", "702", "703"]
    folders = record_jobs(tmp_path, ids)
    with open(os.path.join(folders["702"], "exit_code"), "w") as f:
        f.write("0\n")
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE="pending", HPCDIST_FAKE_SACCT="failed",
                   HPCDIST_FAKE_SQUEUE_GONE="701,702,703", HPCDIST_FAKE_SACCT_GONE="702,703")
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {row["job_id"]: row for row in json.loads(proc.stdout)}
    assert (rows["700"]["state"], rows["700"]["reason"]) == ("PENDING", "Priority")
    assert (rows["701"]["state"], rows["701"]["exit_code"]) == ("FAILED", 1)
    assert (rows["702"]["state"], rows["702"]["exit_code"]) == ("COMPLETED", 0)
    assert rows["703"]["state"] == "UNKNOWN"
    assert rows["703"]["reason"] == "not in squeue, and sacct has no record (is accounting off?)"
    assert len(calls_of(tmp_path, "squeue")) == 1 and len(calls_of(tmp_path, "sacct")) == 1


def test_an_unreachable_controller_answers_for_all_its_jobs_across_chunks(tmp_path):
    ids = [f"{4_000_000_000 + k}_{1_000_000 + k}" for k in range(QUERY_CHARS // 19 + 5)]
    record_jobs(tmp_path, ids)
    env = fake_env(tmp_path, HPCDIST_FAKE_SQUEUE="fail", HPCDIST_FAKE_SACCT="disabled")
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {row["state"] for row in rows} == {"UNKNOWN"}
    assert "the Slurm controller cannot be reached (squeue: slurm_load_jobs error" in rows[0]["reason"]
    assert all(f"cannot be reached (as for job {rows[0]['job_id']})" in row["reason"] for row in rows[1:])
    assert len(calls_of(tmp_path, "squeue")) == 3  # 1 + 2 retries, for all the jobs
    assert len(calls_of(tmp_path, "sacct")) == 1


def test_pbs_status_asks_once_per_chunk_and_reads_each_unknown_job(tmp_path):
    """PBS Pro: qstat -f -F json -x with many ids lists those it knows and says "Unknown Job Id"
    for the others (whose exit_code file, when there is one, says how they ended)."""
    # A long server name: more than one call's worth of ids.
    ids = [f"{3000 + k}.pbs01.cluster-head.example.org" for k in range(QUERY_CHARS // 36 + 10)]
    folders = record_jobs(tmp_path, ids, scheduler="pbs", dialect="pro")
    unknown = ids[3:6]
    with open(os.path.join(folders[unknown[0]], "exit_code"), "w") as f:
        f.write("0\n")
    env = fake_env(tmp_path, HPCDIST_FAKE_QSTAT="failed", HPCDIST_FAKE_QSTAT_UNKNOWN=",".join(unknown))
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {row["job_id"]: row for row in json.loads(proc.stdout)}
    for job_id in ids:
        expected = (("COMPLETED", 0) if job_id == unknown[0] else ("UNKNOWN", None) if job_id in unknown
                    else ("FAILED", 1))
        assert (rows[job_id]["state"], rows[job_id]["exit_code"]) == expected, job_id
    assert rows[unknown[1]]["reason"] == "qstat no longer knows the job"
    qstat = calls_of(tmp_path, "qstat")
    assert len(qstat) == calls_needed(ids) == 2
    assert all("json" in argv and sum(len(i) + 1 for i in asked_ids(argv, "qstat")) <= QUERY_CHARS for argv in qstat)


def test_torque_status_asks_once_with_the_text_form(tmp_path):
    ids = ["41.torque-head", "42.torque-head", "43.torque-head"]
    record_jobs(tmp_path, ids, scheduler="pbs", dialect="torque")
    env = fake_env(tmp_path, HPCDIST_FAKE_PBS_FLAVOR="torque", HPCDIST_FAKE_QSTAT="queued")
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert [row["state"] for row in json.loads(proc.stdout)] == ["PENDING"] * 3
    assert calls_of(tmp_path, "qstat") == [["-f", *ids]]
