"""Sweeps on the real clusters: the real OpenPBS 23.06 (tests/openpbs.py; history off and on) and
the 2-host Slurm test cluster (tests/testcluster.py). Few rows, sharing jobs:

- a sweep of 2x3 sets with one set failing: its status row says so; resubmitted alone
  (`--resubmit JOB --failed`) it passes, and the sweep reads all completed;
- `--max-running 2`: at most two of the sweep's subjobs run at once (their own start and end times);
- a sweep over a lowered array cap split into several arrays that `hpcdist status` shows as one sweep:
  on OpenPBS (`qmgr set server max_array_size`, restored after) with `--max-running 2` chaining them;
  on Slurm (MaxArraySize in the cluster's slurm.conf and `scontrol reconfigure`, restored after) with
  `--resubmit JOB --failed` taking a failed set of each array as one new array;
- `hpcdist.submit(array=..., max_running=2)` from Python: the server holds the throttle;
- the failed sweep's `hpcdist report` page (issue 49), opened in headless Chromium.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import testcluster
from launch import wait_for
from report_page import opened

#: Prints its set and its start and end times; fails (exit 3) where a file fail-LR-BATCH is.
TRAIN = """import argparse, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--lr"); p.add_argument("--batch"); p.add_argument("--sleep", type=float, default=0)
a = p.parse_args()
start = time.time(); time.sleep(a.sleep)
print(f"set={os.environ['HPCDIST_SWEEP_SET']} lr={a.lr} batch={a.batch} start={start:.3f} "
      f"end={time.time():.3f}", flush=True)
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
    return wait_for(lambda: (s := sweep_status(where, job_id, cwd))
                    and all(r["state"] in FINAL for r in s["sets"]) and s,
                    timeout, f"the end of sweep {job_id}")


def test_a_failed_set_shows_in_status_and_runs_again_alone(where, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "fail-3e-4-32").write_text("")
    proc = where.submit(*SWEEP, "--max-running", "2", "train.py", "--sleep", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["job_id"]
    sweep = ended(where, job_id, tmp_path)
    states = [(r["params"]["lr"], r["params"]["batch"], r["state"], r["exit_code"]) for r in sweep["sets"]]
    assert states == [("1e-3", "16", "COMPLETED", 0), ("1e-3", "32", "COMPLETED", 0),
                      ("1e-3", "64", "COMPLETED", 0), ("3e-4", "16", "COMPLETED", 0),
                      ("3e-4", "32", "FAILED", 3), ("3e-4", "64", "COMPLETED", 0)], sweep
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
    the_page_shows_it(where, job_id, sweep, tmp_path)
    # Resubmitted alone: one job, no array, part of the same sweep.
    os.unlink(tmp_path / "fail-3e-4-32")
    again = where.hpcdist("submit", "--resubmit", job_id, "--failed", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert answer["sets"] == [4] and len(answer["job_ids"]) == 1
    sweep = ended(where, job_id, tmp_path)
    assert [r["state"] for r in sweep["sets"]] == ["COMPLETED"] * 6, sweep
    assert sweep["sets"][4]["job_id"] == answer["job_id"] and len(sweep["arrays"]) == 2
    # The new job wrote a log of its own: every set's still holds its own run (the resubmission once
    # took the first array's log path and overwrote its subjobs' logs).
    for row in sweep["sets"]:
        with open(row["log"]) as f:
            assert f"set={row['set']} lr={row['params']['lr']} batch={row['params']['batch']} " in f.read(), row
    nothing = where.hpcdist("submit", "--resubmit", job_id, "--failed", cwd=tmp_path)
    assert nothing.returncode == 1 and "no set of sweep" in nothing.stderr


def the_page_shows_it(where, job_id: str, sweep: dict, tmp_path) -> None:
    """Issue 49: the sweep's `hpcdist report` page, opened in Chromium: its sets by state, with
    the states, exit codes and parameters of `status --json`."""
    out = tmp_path / "sweep.html"
    done = where.hpcdist("report", job_id, "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    text, cells = opened(out)
    print(f"the sweep's page: {out}, its screenshot {out.with_suffix('.png')}")
    rows = sweep["sets"]
    assert cells["set"] == [str(r["set"]) for r in rows], cells
    assert [state.upper() for state in cells["state"]] == [r["state"] for r in rows], cells
    assert cells["exit_code"] == [str(r["exit_code"]) for r in rows], cells
    assert text.count("<svg") == 1 and "lr=3e-4 batch=32" in text, text[-3000:]
    assert "6 sets in 1 array(s); 5 completed, 1 failed" in text, text[-3000:]


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


#: The line a test adds to the Slurm cluster's slurm.conf, after this marker; a leftover of a killed run is removed too.
MARK = "# lowered by tests/sweeps/test_sweeps_cluster.py for one test, removed after"


def _without_ours(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(line for k, line in enumerate(lines)
                   if MARK not in line and not (k and MARK in lines[k - 1] and line.startswith("MaxArraySize=")))


@contextlib.contextmanager
def slurm_max_array_size(state, size: int):
    """MaxArraySize lowered on the running test cluster, restored after whatever happens. `scontrol
    reconfigure` takes it (Slurm 22.05: no restart, running jobs and idle nodes stay as they are), so
    the other Slurm rows, run before or after in the same process (the cluster's group), see 1001."""
    conf = state / "slurm.conf"
    original = _without_ours(conf.read_text())
    env = testcluster.client_env(state)

    def apply(text: str) -> str:
        conf.write_text(text)
        subprocess.run(["scontrol", "reconfigure"], env=env, check=True, capture_output=True, timeout=60)
        return subprocess.run(["scontrol", "show", "config"], env=env, check=True, capture_output=True, text=True,
                              timeout=60).stdout

    try:
        config = apply(f"{original}{MARK}\nMaxArraySize={size}\n")
        assert any(line.split() == ["MaxArraySize", "=", str(size)] for line in config.splitlines()), config
        yield
    finally:
        apply(original)


def test_a_sweep_over_slurms_max_array_size_is_split_shown_as_one_and_resubmitted_across_arrays(cluster, tmp_path):
    """MaxArraySize=4 (indices 0..3): 8 sets go as two arrays of 4, read from `scontrol show config`;
    set 1 (first array) and set 6 (second) fail; `status` shows one sweep of 8 sets; `--resubmit
    --failed` runs the two as one new array, and the sweep reads all completed; no set's log is
    overwritten. About 6 s here (the cluster's start aside)."""
    slurm = Slurm(cluster)
    (tmp_path / "train.py").write_text(TRAIN)
    for name in ("fail-1-2", "fail-4-1"):
        (tmp_path / name).write_text("")
    with slurm_max_array_size(cluster, 4):
        proc = slurm.submit("--launcher", "none", "--sweep", "lr=1,2,3,4", "--sweep", "batch=1,2", "train.py",
                            cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "8 sets in 2 arrays: the site allows 4 in one (scontrol show config MaxArraySize)" in proc.stderr
        answer = json.loads(proc.stdout)
        assert len(answer["job_ids"]) == 2
        sweep = ended(slurm, answer["job_id"], tmp_path)
        states = [(r["set"], r["state"], r["exit_code"], r["job_id"]) for r in sweep["sets"]]
        first, second = answer["job_ids"]
        assert states == [(0, "COMPLETED", 0, first), (1, "FAILED", 3, first), (2, "COMPLETED", 0, first),
                          (3, "COMPLETED", 0, first), (4, "COMPLETED", 0, second), (5, "COMPLETED", 0, second),
                          (6, "FAILED", 3, second), (7, "COMPLETED", 0, second)], sweep
        # What a person reads, asked with the second array's id: the one sweep, each set's own row.
        table = slurm.hpcdist("status", second, cwd=tmp_path).stdout
        assert table.startswith(f"sweep {answer['sweep']}: 8 sets in 2 array(s); 6 completed, 2 failed"), table
        rows = {line.split()[0]: line for line in table.splitlines()[2:]}
        assert rows["1"].split()[:3] == ["1", "failed", "3"] and "lr=1 batch=2" in rows["1"], table
        assert rows["6"].split()[:3] == ["6", "failed", "3"] and "lr=4 batch=1" in rows["6"], table
        print(table)
        for name in ("fail-1-2", "fail-4-1"):
            os.unlink(tmp_path / name)
        again = slurm.hpcdist("submit", "--resubmit", first, "--failed", "--json", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        redo = json.loads(again.stdout)
        assert redo["sets"] == [1, 6] and len(redo["job_ids"]) == 1, redo
        sweep = ended(slurm, first, tmp_path)
    assert [r["state"] for r in sweep["sets"]] == ["COMPLETED"] * 8, sweep
    assert [r["job_id"] for r in sweep["sets"]] == [first, redo["job_id"], first, first, second, second,
                                                    redo["job_id"], second]
    for row in sweep["sets"]:  # each set's newest log holds its own parameters: none was overwritten
        with open(row["log"]) as f:
            assert f"set={row['set']} lr={row['params']['lr']} batch={row['params']['batch']} " in f.read()
    table = slurm.hpcdist("status", first, cwd=tmp_path).stdout
    assert table.startswith(f"sweep {answer['sweep']}: 8 sets in 3 array(s); 8 completed"), table


API_ARRAY = ("import hpcdist\njob = hpcdist.submit('train.py', scheduler=SCHEDULER, launcher='none', array='0-3', "
             "max_running=2, **EXTRA)\nprint(job.job_id)\n")


@pytest.mark.parametrize("where", [pytest.param("pbs-history-off", marks=pytest.mark.openpbs_cluster),
                                   pytest.param("slurm", marks=pytest.mark.slurm_cluster)], indirect=True)
def test_max_running_from_python_reaches_the_scheduler(where, tmp_path):
    """`hpcdist.submit(array='0-3', max_running=2)` (the API once dropped N): Slurm's
    ArrayTaskThrottle, OpenPBS's max_run_subjobs. About 4 s a row here."""
    (tmp_path / "train.py").write_text(TRAIN)
    slurm = isinstance(where, Slurm)
    extra = {} if slurm else {"venv": sys.prefix}
    code = API_ARRAY.replace("SCHEDULER", repr("slurm" if slurm else "pbs")).replace("EXTRA", repr(extra))
    if slurm:
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=where.env, capture_output=True,
                              text=True, timeout=120)
    else:
        proc = where.pbs.on(where.pbs.HEAD, f"{sys.executable} -c {shlex.quote(code)}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.split()[-1]
    if slurm:
        shown = subprocess.run(["scontrol", "show", "job", job_id.split("_")[0]], env=where.env, capture_output=True,
                               text=True, timeout=60).stdout
        assert "ArrayTaskThrottle=2" in shown, shown
    else:
        shown = where.pbs.qstat("-f", job_id)
        assert "max_run_subjobs = 2" in shown, shown
    wait_for(lambda: all(r["state"] in FINAL for r in json.loads(
        where.hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)), 180, f"the end of {job_id}")


def test_a_queues_array_cap_is_met_by_the_hint_and_the_flag_below_the_servers(openpbs_cluster, tmp_path):
    """The default queue's max_array_size = 3 under the server's 10,000 (hpcdist reads the server's):
    qsub refuses the array of 4 ("Array job exceeds server or queue size limit"), and hpcdist names
    --max-array-size (its recovery once read only the first line of its own error, "qsub did not
    submit the job: ...", and never knew the refusal). With --max-array-size 3, the lower cap
    wins over the server's answer (once ignored whenever the server answered): two arrays, dry
    and for real."""
    pbs = Pbs(openpbs_cluster)
    openpbs_cluster.history(False)
    (tmp_path / "train.py").write_text(TRAIN)
    sweep = ["--launcher", "none", "--sweep", "lr=1,2", "--sweep", "batch=1,2", "train.py"]
    openpbs_cluster.qmgr("set queue workq max_array_size = 3")
    try:
        refused = pbs.submit(*sweep, cwd=tmp_path)
        dry = pbs.hpcdist("submit", "--scheduler", "pbs", "--max-array-size", "2", "--dry-run", *sweep, cwd=tmp_path)
        proc = pbs.submit("--max-array-size", "3", *sweep, cwd=tmp_path)
    finally:
        openpbs_cluster.qmgr("unset queue workq max_array_size")
    assert refused.returncode == 1, refused.stderr
    assert "qsub did not submit the job" in refused.stderr and "Array job exceeds" in refused.stderr, refused.stderr
    assert "The array of 4 sets was refused for its size" in refused.stderr, refused.stderr
    assert "Give --max-array-size N" in refused.stderr, refused.stderr
    assert dry.returncode == 0 and "4 set(s) in 2 array(s) (the array cap: 2 " in dry.stderr, dry.stderr
    assert "#PBS -J 0-1" in dry.stdout, dry.stdout
    assert proc.returncode == 0, proc.stderr
    assert "4 sets in 2 arrays: the site allows 3 in one" in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)
    sweep_rows = ended(pbs, answer["job_id"], tmp_path)
    assert [r["state"] for r in sweep_rows["sets"]] == ["COMPLETED"] * 4, sweep_rows


def test_a_per_user_limit_hpcdist_cannot_read_is_waited_out(openpbs_cluster, tmp_path):
    """The default queue's max_queued [u:PBS_GENERIC=4], which hpcdist does not read (no --queue),
    and one job of the user's queued: qsub refuses the sweep's array of 4 "would exceed ... per-user
    limit"; the sweep waits for room and goes in once the job has ended (it once stopped at once:
    the refusal was read from hpcdist's own first line). The first job runs until the sweep has
    said it waits (a fixed sleep once ended first under load, and qsub took the array at once)."""
    pbs = Pbs(openpbs_cluster)
    openpbs_cluster.history(False)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "first.py").write_text("import os, time\nend = time.time() + 240\n"
                                      "while not os.path.exists('go') and time.time() < end:\n"
                                      "    time.sleep(0.2)\n")
    words = [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "pbs", "--venv", sys.prefix,
             "--json", "--launcher", "none", "--sweep", "lr=1,2", "--sweep", "batch=1,2", "train.py"]
    line = " ".join(map(shlex.quote, words)) + " 2>sweep.err"
    openpbs_cluster.qmgr("set queue workq max_queued = '[u:PBS_GENERIC=4]'")
    try:
        first = pbs.submit("--launcher", "none", "first.py", cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        with ThreadPoolExecutor(1) as pool:
            sweeping = pool.submit(openpbs_cluster.on, openpbs_cluster.HEAD, line, cwd=tmp_path,
                                   HPCDIST_SWEEP_POLL_S="1")
            said = tmp_path / "sweep.err"
            try:
                wait_for(lambda: "per-user limit" in (said.read_text() if said.exists() else ""),
                         120, "refusal the sweep waits out")
            finally:
                (tmp_path / "go").write_text("")
            proc = sweeping.result()
    finally:
        openpbs_cluster.qmgr("unset queue workq max_queued")
    stderr = said.read_text()
    assert proc.returncode == 0, stderr
    assert "the scheduler holds no more of your jobs now" in stderr, stderr
    assert "waits 1 s for room" in stderr, stderr
    answer = json.loads(proc.stdout)
    sweep = ended(pbs, answer["job_id"], tmp_path)
    assert [r["state"] for r in sweep["sets"]] == ["COMPLETED"] * 4, sweep


def test_max_array_size_below_slurms_is_honoured(cluster, tmp_path):
    """`--max-array-size 2` under Slurm's MaxArraySize 1001 (read from `scontrol show config`): the
    flag's cap wins, dry (once the dry run planned one array of 4) and for real."""
    slurm = Slurm(cluster)
    (tmp_path / "train.py").write_text(TRAIN)
    sweep = ["--max-array-size", "2", "--launcher", "none", "--sweep", "lr=1,2", "--sweep", "batch=1,2", "train.py"]
    dry = slurm.hpcdist("submit", "--scheduler", "slurm", "--dry-run", *sweep, cwd=tmp_path)
    assert dry.returncode == 0 and "4 set(s) in 2 array(s) (the array cap: 2 " in dry.stderr, dry.stderr
    assert "#SBATCH --array=0-1" in dry.stdout, dry.stdout
    proc = slurm.submit(*sweep, cwd=tmp_path)
    assert proc.returncode == 0 and "4 sets in 2 arrays: the site allows 2 in one" in proc.stderr, proc.stderr
    sweep_rows = ended(slurm, json.loads(proc.stdout)["job_id"], tmp_path)
    assert [r["state"] for r in sweep_rows["sets"]] == ["COMPLETED"] * 4, sweep_rows
