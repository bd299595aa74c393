"""Issue 31 on the real 2-host test cluster: hangs, stragglers and `hpcdist watch` under Slurm and
its PBS personality, for torchrun, srun, mpirun and DeepSpeed (gloo, 2 nodes of 2 ranks).

The same training and faults as tests/progress/test_watch.py (tests/job_scripts/watch_training.py): rank 1 stops
itself with SIGSTOP at step 20 (node1: the monitor's node), rank 3 (node2) does the same, and
rank 2 waits in a collective of a group whose other rank never reaches it; with
``--hang-timeout 20s`` each job ends within the timeout and a few seconds, its log holding the
hang line, the grouped stacks and the cause. A run with a straggler and a checkpoint longer than
the floor names the straggler once and no hang. On the real OpenPBS: two of the hang rows.

Issue 49: the page of ``hpcdist report`` of a straggler's job and of a hang's on Slurm, and of a
hang's on OpenPBS (tests/report_page.py): opened in headless Chromium, its start-up figure a bar
for each of the 2 nodes, its numbers those of ``status --json`` and ``watch --json``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

import testcluster
from report_page import on_nodes, opened, same_numbers

ROOT = testcluster.ROOT
TRAIN = str(ROOT / "tests" / "job_scripts" / "watch_training.py")
WHERE = {"slurm": ["--scheduler", "slurm"], "pbs-torque": ["--scheduler", "pbs", "--dialect", "torque"]}
LAUNCHERS = {"torchrun": [], "srun": ["--launcher", "srun"], "mpirun": ["--launcher", "mpirun"],
             "deepspeed": ["--launcher", "deepspeed"]}
ROWS = [(w, la) for w in WHERE for la in LAUNCHERS if not (w != "slurm" and la == "srun")]
FAULTS = {"stop-node1": ("stop", "1"), "stop-node2": ("stop", "3"), "collective": ("collective", "2")}
#: The suite's rows (each a 2-node job of about a minute): every launcher, every fault and both
#: schedulers at least once among the hangs; one straggler row (the straggler is the progress
#: files' arithmetic, the same under every launcher; tests/progress/test_watch.py runs it locally too).
#: HPCDIST_WATCH_MATRIX=full runs every launcher x fault x scheduler (28 jobs, about 20 minutes
#: here), and a straggler under each.
FULL = os.environ.get("HPCDIST_WATCH_MATRIX") == "full"
HANGS = [(w, la, f) for w, la in ROWS for f in FAULTS] if FULL else [
    ("slurm", "torchrun", "stop-node2"), ("slurm", "srun", "collective"), ("slurm", "mpirun", "stop-node1"),
    ("slurm", "deepspeed", "stop-node2"), ("pbs-torque", "torchrun", "collective")]
STRAGGLERS = ROWS if FULL else [("slurm", "torchrun")]


def hpcdist(*args, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def submit(tmp_path, env, where, launcher, *flags) -> dict:
    proc = hpcdist("submit", *WHERE[where], *LAUNCHERS[launcher], "--nodes", "2", "--procs-per-node", "2",
                   *flags, "--json", TRAIN, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def wait_end(run, job, timeout) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (row,) = json.loads(run("status", "--json", job["job_id"]).stdout)
        if row["state"] not in ("RUNNING", "PENDING"):
            return row
        time.sleep(1)
    pytest.fail(f"job {job['job_id']} still running after {timeout} s:\n{run('status').stdout}")


def log(job) -> str:
    return open(job["log"], errors="replace").read() if os.path.exists(job["log"]) else ""


@pytest.mark.parametrize("where,launcher,case", HANGS, ids=[f"{w}-{la}-{f}" for w, la, f in HANGS])
def test_a_hang_is_named_with_grouped_stacks_and_ended_at_the_timeout(where, launcher, case, cluster, tmp_path):
    env = testcluster.client_env(cluster)

    def run(*args, timeout=300):
        return hpcdist(*args, cwd=tmp_path, env=env, timeout=timeout)
    a_hang_is_named_and_ended(run, tmp_path, WHERE[where], launcher, case, PAGES.get((where, launcher, case)))


#: The real OpenPBS (tests/openpbs.py): a rank of node 2 stopped, and one waiting in a collective.
PBS_HANGS = [("torchrun", "stop-node2"), ("mpirun", "collective")]
#: The hang rows whose job's `hpcdist report` page is checked (one per cluster: a page is ~10 s).
PAGES = {("slurm", "torchrun", "stop-node2"): ("node1", "node2"), ("pbs", "torchrun", "stop-node2"): ("pbsn1", "pbsn2")}


@pytest.mark.parametrize("launcher,case", PBS_HANGS, ids=[f"{la}-{f}" for la, f in PBS_HANGS])
def test_a_hang_on_the_real_openpbs_is_named_and_ended(launcher, case, openpbs_cluster, tmp_path):
    """The same on a real PBS server: its moms start the job's processes (no Slurm wrapper), the
    monitor runs in the MOM's batch shell, `watch` on the head reads the job folder."""
    def run(*args, timeout=300):
        return openpbs_cluster.hpcdist(*args, cwd=tmp_path, timeout=timeout)
    a_hang_is_named_and_ended(run, tmp_path, ["--scheduler", "pbs", "--venv", sys.prefix], launcher, case,
                              PAGES.get(("pbs", launcher, case)))


def a_hang_is_named_and_ended(run, tmp_path, where: list, launcher: str, case: str, page_nodes=None) -> None:
    """A fault at step 20 (FAULTS[case]); ``watch --once`` until it says LOOKS HUNG (printed, with
    the seconds from the fault: pytest -s shows them), then the job's end and its log; with
    ``page_nodes``, its report's page (on those nodes) too."""
    fault, rank = FAULTS[case]
    fault_file = tmp_path / "fault"
    run_id = f"run-{uuid.uuid4().hex}"  # on every rank's command line (the script ignores it): its leftovers
    proc = run("submit", *where, *LAUNCHERS[launcher], "--nodes", "2", "--procs-per-node", "2",
               "--hang-floor", "5s", "--hang-timeout", "20s",
               "--env", f"FAULT={fault}", "--env", f"FAULT_RANK={rank}", "--env", f"FAULT_FILE={fault_file}",
               "--env", "HPCDIST_PROGRESS_INTERVAL=1", "--json", TRAIN, run_id)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = json.loads(proc.stdout)
    deadline = time.monotonic() + 240
    while not fault_file.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert fault_file.exists(), log(job)
    fault_at = float(fault_file.read_text())
    screen, first_hang = "", None
    while time.monotonic() < deadline:
        screen = run("watch", "--once", job["job_id"]).stdout
        if "LOOKS HUNG" in screen or "job " in screen and "running" not in screen.splitlines()[0]:
            first_hang = time.time() - fault_at
            # The REASON column: HUNG, not PBS's comment. `status` reads the monitor's summary,
            # written at its next look (watch judged the ranks itself): a few seconds after.
            for _ in range(20):
                table = run("status", job["job_id"]).stdout
                if "HUNG " in table or " running " not in table:
                    break
                time.sleep(1)
            break
        time.sleep(1)
    row = wait_end(run, job, 120)
    text = log(job)
    print(f"{' '.join(where)} {launcher} {fault} rank {rank}: first hang line in watch after {first_hang} s\n{screen}")
    assert "LOOKS HUNG" in screen, screen + text[-3000:]
    assert " running " not in table or "HUNG " in table, table
    assert row["state"] != "COMPLETED", row
    assert "hpcdist: looks hung: no rank has made a step for" in text, text[-3000:]
    assert "hpcdist: ending the job: no rank has made a step for" in text, text[-3000:]
    if fault == "stop":
        assert f"hpcdist:   rank {rank}: no answer (stopped, or gone)" in text, text[-3000:]
    else:
        assert "hpcdist:   rank 2 in all_reduce at watch_training.py:" in text, text[-3000:]
    # The record tells the truth (issue 37 item 3): not "killed by SIGKILL (out of memory ...)" on
    # Slurm nor a bare "failed 1" on PBS, but the hang and its rank, in status and in logs.
    said = f"rank {rank} on node1 not answering (stopped)" if case == "stop-node1" else \
        f"rank {rank} on {'pbsn2' if 'pbsn1' in text else 'node2'} not answering (busy, stopped or gone)" \
        if fault == "stop" else "rank 2 in all_reduce"
    assert row["reason"].startswith("ended by --hang-timeout after ") and said in row["reason"], row
    assert row["state"] == "FAILED", row
    logs = run("logs", job["job_id"])
    assert f"hpcdist: job {job['job_id']} was {row['reason']}" in logs.stderr.splitlines(), logs.stderr
    ended_after = os.path.getmtime(os.path.join(row["folder"], "exit_code")) - fault_at
    print(f"ended {ended_after:.1f} s after the fault (--hang-timeout 20s)")
    assert ended_after < 20 + 20, ended_after
    # Nothing of the job is left on any node, the stopped rank included (the clusters' hosts share
    # one pid space: one look sees every node).
    left = testcluster.leftover_processes(run_id)
    assert left == "", f"left after the job on the nodes:\n{left}"
    if page_nodes:
        from html import escape

        text = the_page(run, tmp_path, job["job_id"], page_nodes, "hang")
        assert f"hpcdist ended this job: {escape(row['reason'])}" in text, text[-3000:]
        assert "Shaded: the job looked hung" in text and f"The dashed line: {escape(row['reason'])}" in text


def the_page(run, tmp_path, job_id: str, nodes: tuple, name: str) -> str:
    """``hpcdist report JOB`` on the cluster's head, its page opened in Chromium (its screenshot
    NAME.png beside it: printed, pytest -s); its numbers those of status and watch --json."""
    out = tmp_path / f"{name}.html"
    done = run("report", job_id, "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    text, cells = opened(out)
    print(f"the page: {out}, its screenshot {out.with_suffix('.png')}")
    (row,) = json.loads(run("status", "--json", job_id).stdout)
    same_numbers(cells, row, json.loads(run("watch", "--json", job_id).stdout))
    on_nodes(text, cells, row, nodes)
    return text


@pytest.mark.parametrize("where,launcher", STRAGGLERS, ids=[f"{w}-{la}" for w, la in STRAGGLERS])
def test_a_straggler_on_node2_is_named_once_and_a_long_checkpoint_is_no_hang(where, launcher, cluster, tmp_path):
    env = testcluster.client_env(cluster)
    job = submit(tmp_path, env, where, launcher, "--hang-floor", "5s", "--env", "FAULT=slow", "--env",
                 "FAULT_RANK=3", "--env", "STEPS=120", "--env", "CHECKPOINT_S=12", "--env",
                 "HPCDIST_PROGRESS_INTERVAL=1")
    named = ""  # the first screen of `watch` that names the straggler (printed: pytest -s)

    def run(*args):
        nonlocal named
        if not named:
            screen = hpcdist("watch", "--once", job["job_id"], cwd=tmp_path, env=env).stdout
            named = screen if "slowest: rank 3 on node2" in screen else ""
        return hpcdist(*args, cwd=tmp_path, env=env)
    row = wait_end(run, job, 400)
    text = log(job)
    print(f"{where} {launcher} straggler (rank 3 sleeps in its data loader):\n{named}")
    assert row["state"] == "COMPLETED", text[-3000:]
    assert named, "no screen of `hpcdist watch` named rank 3 on node2 as the slowest"
    stragglers = [line for line in text.splitlines() if line.startswith("hpcdist: straggler:")]
    assert len(stragglers) == 1 and stragglers[0].startswith("hpcdist: straggler: rank 3 on node2"), text[-3000:]
    assert "looks hung" not in text, text[-3000:]
    logs = hpcdist("logs", job["job_id"], cwd=tmp_path, env=env)
    assert "hpcdist: progress: 4 rank(s), 120-120 steps" in logs.stdout + logs.stderr
    assert "slowest: rank 3 on node2" in logs.stdout + logs.stderr
    if where == "slurm" and launcher == "torchrun":
        text = the_page(lambda *args: hpcdist(*args, cwd=tmp_path, env=env), tmp_path, job["job_id"],
                        ("node1", "node2"), "straggler")
        # Rank 3 among the ranks the monitor's looks marked (during the checkpoint others may trail).
        assert re.search(r"Marked x: the monitor's looks named rank\(s\) [\d,-]*\b3\b", text), text[-3000:]
        assert "slowest: rank 3 on node2" in text, text[-3000:]
