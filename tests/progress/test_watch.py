"""Issue 31: each rank's progress, `hpcdist watch`, `stacks`, hangs and stragglers.

On this host: a rank started as the launchers start it (``python -m hpcdist.rank``), and whole
jobs on the local backend (2 "nodes" of 2 ranks, gloo, the real mpirun and torchrun) with the
three faults of the issue: a rank stopped with SIGSTOP at step 20, a rank that sleeps before each
step (a straggler), a rank that enters a collective the others never reach; and a run with no
fault, with a checkpoint longer than the hang floor. Slurm's and PBS's rows are in
tests/progress/test_cluster_watch.py (the 2-host test cluster).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from launch import clean_env, wait_for

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The training of the job rows: FAULT (stop, slow, collective) at FAULT_RANK; a checkpoint phase
#: of CHECKPOINT_S at step 30.
TRAIN = os.path.join(HERE, "job_scripts", "watch_training.py")


def hpcdist(*args, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def rank_env(folder, **extra) -> dict:
    """A single rank's variables, as torchrun gives them, and a progress folder."""
    return clean_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT="29999", TORCHELASTIC_RUN_ID="x", HPCDIST_PROGRESS_DIR=str(folder),
                     HPCDIST_PROGRESS_INTERVAL="0.2", **extra)


def rank_state(folder) -> dict:
    with open(os.path.join(folder, "rank-0.json")) as f:
        return json.load(f)


# ------------------------------------------------------------------------------ one rank, by hand


def test_a_plain_script_s_optimizer_steps_are_counted_with_no_change_to_it(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import torch\nm = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "import time\ntime.sleep(0.5)\n"  # the hook is installed once torch has been imported
                      "for _ in range(30):\n    m(torch.ones(1, 2)).sum().backward(); opt.step()\n")
    proc = subprocess.run([sys.executable, "-m", "hpcdist.rank", str(script)], env=rank_env(tmp_path / "p"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    state = rank_state(tmp_path / "p")
    assert (state["step"], state["phase"], state["rank"]) == (30, "finished", 0)
    assert state["first_step"] <= state["last_step"]


def test_explicit_steps_count_once_beside_the_optimizer_and_a_failed_script_says_so(tmp_path):
    script = tmp_path / "explicit.py"
    script.write_text("import time, torch, hpcdist.env as h\nm = torch.nn.Linear(2, 1)\n"
                      "opt = torch.optim.SGD(m.parameters(), lr=0.1)\ntime.sleep(0.5)\n"
                      "for _ in range(12):\n    opt.step(); h.step()\n"
                      "with h.phase('checkpointing'):\n    time.sleep(3)\n"
                      "raise SystemExit(3)\n")
    folder = tmp_path / "p"
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist.rank", str(script)], env=rank_env(folder))
    seen = wait_for(lambda: os.path.exists(folder / "rank-0.json") and rank_state(folder)["phase"] == "checkpointing"
                    and rank_state(folder), 120, "the checkpointing phase")
    assert proc.wait(60) == 3
    # The first step counted by the hook before h.step() took over is that same step: counted once
    # (it once read 13).
    assert seen["step"] == 12 and rank_state(folder)["phase"] == "failed"


def test_a_rank_that_waits_in_c_answers_for_its_stack(tmp_path):
    from hpcdist.progress import watch

    script = tmp_path / "waits.py"
    script.write_text("import time\n\ndef load_batch():\n    time.sleep(120)\n\nload_batch()\n")
    folder = tmp_path / "p"
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist.rank", str(script)], env=rank_env(folder))
    try:
        wait_for(lambda: os.path.exists(folder / "rank-0.json"), 60, "the rank's progress file")
        answers = watch.request_stacks(str(folder), [0], wait_s=10)
        assert answers[0][-1] == f"{script}:4 load_batch", answers
        assert watch.group_stacks(answers)[0] == "rank 0 in load_batch at waits.py:4"
        # Stopped, it cannot answer: the group says so.
        os.kill(proc.pid, signal.SIGSTOP)
        assert watch.group_stacks(watch.request_stacks(str(folder), [0], wait_s=1.5)) == [
            "rank 0: no answer (stopped, or gone)"]
    finally:
        proc.kill()
        proc.wait()


def test_identical_stacks_are_grouped_by_rank_ranges():
    from hpcdist.progress import watch

    wait = ["/w/train.py:88 <module>", "/v/site-packages/torch/distributed/distributed_c10d.py:3252 all_reduce"]
    loader = ["/w/train.py:51 <module>", "/w/data.py:12 next_batch"]
    answers = {0: wait, 1: wait, 2: wait, 3: loader, 4: wait, 5: wait, 6: None}
    lines = [line for line in watch.group_stacks(answers) if not line.startswith("    ")]
    assert lines == ["ranks 0-2,4-5 in all_reduce at train.py:88", "rank 3 in next_batch at data.py:12",
                     "rank 6: no answer (stopped, or gone)"]


def test_a_checkpointing_rank_is_never_a_hang_and_a_stall_over_the_floor_is():
    from hpcdist.progress import watch

    now = 1000.0
    ranks = [{"rank": r, "node": "n", "step": 50, "rate": 10.0, "last_step": now - 30, "written": now,
              "phase": "training"} for r in range(4)]
    assert watch.analyse(ranks, now, floor=20).hung.startswith("looks hung: no rank has made a step for 30 s")
    assert watch.analyse(ranks, now, floor=40).hung is None
    ranks[2]["phase"] = "checkpointing"
    assert watch.analyse(ranks, now, floor=20).hung is None


def test_an_ended_job_keeps_its_ranks_last_figures():
    """watch --json after the end (and the report): the median rate and the straggler of the
    ranks' last figures, not 0 and none because no rank runs any more."""
    from hpcdist.progress import watch

    now = 1000.0
    ranks = [{"rank": r, "node": "n", "step": 120, "rate": 2.0 if r == 3 else 4.0, "work": 0.2 if r == 3 else 0.01,
              "last_step": now - 5, "written": now - 5, "phase": "finished"} for r in range(4)]
    running = watch.analyse([dict(r) for r in ranks], now).summary()
    assert (running["median_rate"], running["slowest"]) == (0.0, [])  # still running: a finished rank steps no more
    ended = watch.analyse(ranks, now, ended=True).summary()
    assert (ended["median_rate"], ended["slowest"], ended["hung"], ended["not_answering"]) == (4.0, [3], None, [])


# -------------------------------------------------------------------------- jobs on the local backend


def submit(tmp_path, env, launcher, *flags) -> dict:
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2", "--procs-per-node", "2", "--launcher",
                   launcher, *flags, "--json", TRAIN, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def job_env(**fault) -> dict:
    return clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HPCDIST_PROGRESS_INTERVAL="1",
                     **fault)


def log(job) -> str:
    return open(job["log"], errors="replace").read() if os.path.exists(job["log"]) else ""


def ended(job, tmp_path, env, timeout) -> dict:
    def row():
        (found,) = json.loads(hpcdist("status", "--json", job["job_id"], cwd=tmp_path, env=env).stdout)
        return found["state"] not in ("RUNNING", "PENDING") and found
    return wait_for(row, timeout, f"the end of job {job['job_id']}")


def fault_time(tmp_path) -> float:
    return wait_for(lambda: os.path.exists(tmp_path / "fault") and float((tmp_path / "fault").read_text()), 240,
                    "the fault")


@pytest.mark.parametrize("launcher", ["mpirun", "torchrun"])
def test_a_stopped_rank_is_a_hang_named_with_grouped_stacks_and_the_job_ends_at_the_timeout(tmp_path, launcher):
    env = job_env(FAULT="stop", FAULT_RANK="1", FAULT_FILE=str(tmp_path / "fault"))
    job = submit(tmp_path, env, launcher, "--hang-floor", "5s", "--hang-timeout", "20s")
    fault = fault_time(tmp_path)
    screen = wait_for(lambda: "LOOKS HUNG" in (out := hpcdist("watch", "--once", job["job_id"], cwd=tmp_path,
                                                              env=env).stdout) and out, 60, "a hang in watch")
    first_hang = time.time() - fault
    assert "rank 1 on " in screen and "has not answered" in screen, screen
    # Its state, read on its own node (issue 39.13); its row says where it was, not "0 ... starting".
    hung = next(line for line in screen.splitlines() if line.startswith("LOOKS HUNG"))
    assert re.search(r"rank 1 on \S+ \(pid \d+\) has not answered for \d+ s \(stopped\)", hung), screen
    rank_1 = next(line for line in screen.splitlines() if re.match(r"\S+ +1 ", line))
    assert re.search(r"  training  \(silent \d+ s\)$", rank_1) and " starting" not in rank_1, screen
    # `hpcdist status`: the progress column of a running job (the monitor's summary) says so too.
    wait_for(lambda: "running          HUNG " in hpcdist("status", cwd=tmp_path, env=env).stdout, 20,
             "HUNG in hpcdist status")
    row = ended(job, tmp_path, env, 60)
    text = log(job)
    assert row["state"] == "FAILED", row
    assert "hpcdist: looks hung: no rank has made a step for" in text, text
    assert "hpcdist:   ranks 0,2-3 in all_reduce at watch_training.py:" in text, text
    assert "hpcdist:   rank 1: no answer (stopped, or gone)" in text, text
    assert "hpcdist: ending the job: no rank has made a step for" in text, text
    # Issue 50 §5: the log ends with the cause and the start-up, after the launcher's shutdown lines.
    before, cause, after = text.rpartition(f"hpcdist: the job was {row['reason']}\n")
    assert cause and before and all(line.startswith("hpcdist: ") for line in after.splitlines()), text[-3000:]
    assert "hpcdist: start-up: " in after, text[-3000:]
    ended_after = os.path.getmtime(os.path.join(row["folder"], "exit_code")) - fault
    print(f"{launcher}: fault to first hang line in watch {first_hang:.1f} s, to the job's end {ended_after:.1f} s")
    assert ended_after < 20 + 15, ended_after
    the_true_cause_is_said_everywhere(job, row, tmp_path, env)


def the_true_cause_is_said_everywhere(job, row, tmp_path, env) -> None:
    """Issues 37.3, 39.11, 40.7: the record, status (table and --json), logs and watch say that
    --hang-timeout ended the job and which rank did not answer, not a signal or a healthy rank."""
    cause = row["reason"]
    assert re.fullmatch(r"ended by --hang-timeout after \d+ s without a step; rank 1 on \S+ not answering "
                        r"\(stopped\)", cause), row
    code = row["exit_code"]
    table = hpcdist("status", job["job_id"], cwd=tmp_path, env=env).stdout.splitlines()
    assert table[1] == f"{job['job_id']:<12} {row['name'][:24]:<24} local     failed     {code:<5} {cause}", table
    logs = hpcdist("logs", job["job_id"], cwd=tmp_path, env=env)
    said = logs.stderr.splitlines()
    assert f"hpcdist: job {job['job_id']} was {cause}" in said, logs.stderr
    assert not any("the first to fail" in line for line in said), logs.stderr
    progress = [line for line in said if line.startswith("hpcdist: progress: 4 rank(s)")]
    assert len(progress) == 1 and progress[0].endswith("; slowest: none trails the median"), logs.stderr
    # watch on the ended job: how it ended, in status's words; no rank silent; exit status as --wait's.
    expected = 1 if code in (None, 0) or code > 255 else code
    for mode in (["--once"], []):
        seen = hpcdist("watch", *mode, job["job_id"], cwd=tmp_path, env=env)
        lines = seen.stdout.rstrip("\n").splitlines()
        assert lines[0].startswith(f"job {job['job_id']} (local, failed): 4 rank(s) on 1 node(s), "), seen.stdout
        assert lines[-1] == (f"the job has ended: failed, exit {code}: {cause}; the figures above are the "
                             f"ranks' last"), seen.stdout
        assert "silent" not in seen.stdout and "has not answered" not in seen.stdout, seen.stdout
        assert seen.returncode == expected, (seen.returncode, seen.stdout, seen.stderr)


def test_a_rank_in_a_collective_the_others_never_reach_is_grouped_apart(tmp_path):
    env = job_env(FAULT="collective", FAULT_RANK="2", FAULT_FILE=str(tmp_path / "fault"))
    job = submit(tmp_path, env, "mpirun", "--hang-floor", "5s", "--hang-timeout", "15s")
    ended(job, tmp_path, env, 240)
    text = log(job)
    assert "hpcdist: looks hung" in text, text
    # Rank 2 waits in its extra all_reduce; the others in the step's.
    extra = next(line for line in text.splitlines() if line.startswith("hpcdist:   rank 2 in all_reduce"))
    others = next(line for line in text.splitlines() if line.startswith("hpcdist:   ranks 0-1,3 in all_reduce"))
    assert extra.rsplit(":", 1)[1] != others.rsplit(":", 1)[1], text


def test_a_straggler_is_named_once_and_a_run_with_a_long_checkpoint_is_no_hang(tmp_path):
    env = job_env(FAULT="slow", FAULT_RANK="3", STEPS="120", CHECKPOINT_S="12")
    job = submit(tmp_path, env, "mpirun", "--hang-floor", "5s")
    row = ended(job, tmp_path, env, 300)
    text = log(job)
    assert row["state"] == "COMPLETED", text
    stragglers = [line for line in text.splitlines() if line.startswith("hpcdist: straggler:")]
    assert len(stragglers) == 1 and stragglers[0].startswith("hpcdist: straggler: rank 3 on "), text
    assert "looks hung" not in text, text
    # The end of the log: the step rate and the slowest rank.
    logs = hpcdist("logs", job["job_id"], cwd=tmp_path, env=env)
    assert "hpcdist: progress: 4 rank(s), 120-120 steps" in logs.stdout + logs.stderr, logs.stdout + logs.stderr
