"""Sweeps on the real clusters: the real OpenPBS 23.06 (tests/openpbs.py; history off and on) and
the 2-host Slurm test cluster (tests/testcluster.py). Few rows, sharing jobs:

- a sweep of 2x3 sets with one set failing: its status row says so; resubmitted alone
  (`--resubmit JOB --failed`) it passes, and the sweep reads all completed;
- `--max-running 2`: at most two of the sweep's subjobs run at once (their own start and end times);
- a sweep over a lowered array cap (OpenPBS: `qmgr set server max_array_size`, restored after) split
  into several arrays that `hpcdist status` shows as one sweep, `--max-running 2` chaining them. On Slurm, MaxArraySize needs a
  slurm.conf change and a restart of the shared test cluster: proven on PBS only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import testcluster
from launch import wait_for

#: Prints its set and its start and end times; fails (exit 3) where a file fail-LR-BATCH is.
TRAIN = """import argparse, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--lr"); p.add_argument("--batch"); p.add_argument("--sleep", type=float, default=0)
a = p.parse_args()
start = time.time(); time.sleep(a.sleep)
print(f"set={os.environ['HPCDIST_SWEEP_SET']} lr={a.lr} batch={a.batch} start={start:.3f} end={time.time():.3f}", flush=True)
sys.exit(3 if os.path.exists(f"fail-{a.lr}-{a.batch}") else 0)
"""
SWEEP = ["--launcher", "none", "--sweep", "lr=1e-3,3e-4", "--sweep", "batch=16,32,64"]
FINAL = ("COMPLETED", "FAILED", "ENDED", "CANCELLED", "TIMEOUT")


class Slurm:
    def __init__(self, state):
        self.env = testcluster.client_env(state)

    def hpcdist(self, *args, cwd, timeout=300):
        return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def submit(self, *args, cwd):
        return self.hpcdist("submit", "--scheduler", "slurm", "--json", *args, cwd=cwd)


class Pbs:
    def __init__(self, pbs):
        self.pbs = pbs

    def hpcdist(self, *args, cwd, timeout=300, **env):
        return self.pbs.hpcdist(*args, cwd=cwd, timeout=timeout, **env)

    def submit(self, *args, cwd):
        return self.hpcdist("submit", "--scheduler", "pbs", "--venv", sys.prefix, "--json", *args, cwd=cwd)


@pytest.fixture(params=[pytest.param("pbs-history-off", marks=pytest.mark.openpbs_cluster),
                        pytest.param("pbs-history-on", marks=pytest.mark.openpbs_cluster),
                        pytest.param("slurm", marks=pytest.mark.slurm_cluster)])
def where(request):
    if request.param == "slurm":
        yield Slurm(request.getfixturevalue("cluster"))
        return
    pbs = request.getfixturevalue("openpbs_cluster")
    pbs.history(request.param.endswith("on"))
    yield Pbs(pbs)
    pbs.history(False)


def sweep_status(where, job_id, cwd) -> dict:
    """The sweep's rows (`status --json`: one per set, as a list like any job's)."""
    proc = where.hpcdist("status", "--json", job_id, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    return {"sets": rows, "arrays": list(dict.fromkeys(r["job_id"] for r in rows))}


def ended(where, job_id, cwd, timeout=240) -> dict:
    return wait_for(lambda: (s := sweep_status(where, job_id, cwd)) and all(r["state"] in FINAL for r in s["sets"]) and s,
                    timeout, f"the end of sweep {job_id}")


def test_a_failed_set_shows_in_status_and_runs_again_alone(where, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "fail-3e-4-32").write_text("")
    proc = where.submit(*SWEEP, "--max-running", "2", "train.py", "--sleep", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["job_id"]
    sweep = ended(where, job_id, tmp_path)
    states = [(r["params"]["lr"], r["params"]["batch"], r["state"], r["exit_code"]) for r in sweep["sets"]]
    assert states == [("1e-3", "16", "COMPLETED", 0), ("1e-3", "32", "COMPLETED", 0), ("1e-3", "64", "COMPLETED", 0),
                      ("3e-4", "16", "COMPLETED", 0), ("3e-4", "32", "FAILED", 3), ("3e-4", "64", "COMPLETED", 0)], sweep
    # Each set's own log holds its own parameters.
    for row in sweep["sets"]:
        with open(row["log"]) as f:
            assert f"set={row['set']} lr={row['params']['lr']} batch={row['params']['batch']} " in f.read()
    # --max-running 2: never more than two sets at once, by their own clocks.
    spans = []
    for row in sweep["sets"]:
        words = dict(w.split("=", 1) for w in open(row["log"]).read().split() if "=" in w)
        spans.append((float(words["start"]), float(words["end"])))
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 2, spans
    table = where.hpcdist("status", job_id, cwd=tmp_path).stdout
    failed = next(line for line in table.splitlines() if line.startswith("4 "))
    assert failed.split()[:3] == ["4", "failed", "3"] and "lr=3e-4 batch=32" in failed, table
    print(table)  # the closing note's picture of a failed sweep
    # Resubmitted alone: one job, no array, part of the same sweep.
    os.unlink(tmp_path / "fail-3e-4-32")
    again = where.hpcdist("submit", "--resubmit", job_id, "--failed", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert answer["sets"] == [4] and len(answer["job_ids"]) == 1
    sweep = ended(where, job_id, tmp_path)
    assert [r["state"] for r in sweep["sets"]] == ["COMPLETED"] * 6, sweep
    assert sweep["sets"][4]["job_id"] == answer["job_id"] and len(sweep["arrays"]) == 2
    nothing = where.hpcdist("submit", "--resubmit", job_id, "--failed", cwd=tmp_path)
    assert nothing.returncode == 1 and "no set of sweep" in nothing.stderr


def test_a_sweep_over_the_servers_array_cap_is_split_and_shown_as_one(openpbs_cluster, tmp_path):
    pbs = Pbs(openpbs_cluster)
    openpbs_cluster.history(False)
    (tmp_path / "train.py").write_text(TRAIN)
    openpbs_cluster.qmgr("set server max_array_size = 3")
    try:
        proc = pbs.submit("--launcher", "none", "--sweep", "lr=1,2,3,4", "--sweep", "batch=1,2", "--max-running", "2",
                          "train.py", cwd=tmp_path)
    finally:
        openpbs_cluster.qmgr("set server max_array_size = 10000")
    assert proc.returncode == 0, proc.stderr
    assert "8 sets in 3 arrays: the site allows 3 in one (qmgr -c 'list server' max_array_size)" in proc.stderr
    answer = json.loads(proc.stdout)
    assert len(answer["job_ids"]) == 3
    sweep = ended(pbs, answer["job_id"], tmp_path)
    assert [r["state"] for r in sweep["sets"]] == ["COMPLETED"] * 8 and sweep["arrays"] == answer["job_ids"]
    assert {r["job_id"] for r in sweep["sets"]} == set(answer["job_ids"])
    # --max-running 2 over three arrays: each after the one before (afterany), never more than two at once.
    spans = []
    for row in sweep["sets"]:
        words = dict(w.split("=", 1) for w in open(row["log"]).read().split() if "=" in w)
        spans.append((float(words["start"]), float(words["end"]), row["job_id"]))
    assert max(sum(1 for s, e, _ in spans if s <= t < e) for t, _, _ in spans) <= 2, spans
    ends = {job: max(e for _, e, j in spans if j == job) for job in answer["job_ids"]}
    starts = {job: min(s for s, _, j in spans if j == job) for job in answer["job_ids"]}
    assert all(ends[a] <= starts[b] for a, b in zip(answer["job_ids"], answer["job_ids"][1:])), spans
    table = pbs.hpcdist("status", answer["job_ids"][-1], cwd=tmp_path).stdout
    assert table.startswith(f"sweep {answer['sweep']}: 8 sets in 3 array(s); 8 completed"), table


def test_a_sweep_waits_for_room_under_the_servers_per_user_cap(openpbs_cluster, tmp_path):
    """max_queued [u:PBS_GENERIC=4] on the real server (each subjob counts: a third array of 4 is
    refused "would exceed complex's per-user limit"): 8 sets go as two arrays of 4, the second
    submitted once the first has left the queue, not refused half-way."""
    pbs = Pbs(openpbs_cluster)
    openpbs_cluster.history(False)
    (tmp_path / "train.py").write_text(TRAIN)
    openpbs_cluster.qmgr("set server max_queued = '[u:PBS_GENERIC=4]'")
    try:
        proc = pbs.hpcdist("submit", "--scheduler", "pbs", "--venv", sys.prefix, "--json", "--launcher", "none",
                           "--sweep", "lr=1,2,3,4", "--sweep", "batch=1,2", "train.py", "--sleep", "2", cwd=tmp_path,
                           HPCDIST_SWEEP_POLL_S="1")
    finally:
        openpbs_cluster.qmgr("unset server max_queued")
    assert proc.returncode == 0, proc.stderr
    assert "8 sets in 2 arrays: the site allows 4 in one (qmgr -c 'list server' max_queued)" in proc.stderr
    assert "waits for room" in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)
    sweep = ended(pbs, answer["job_id"], tmp_path)
    assert [r["state"] for r in sweep["sets"]] == ["COMPLETED"] * 8, sweep
