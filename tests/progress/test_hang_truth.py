"""Issues 37.3-4, 39.1, 39.11, 39.13: what hpcdist says after it ended a hung job, and which hangs
it sees. The hang that --hang-timeout ends, told everywhere, is tests/progress/test_watch.py's stopped rank
(the_true_cause_is_said_everywhere); here: a start that never reaches its first step
(--start-timeout, a job on the local backend), a re-run judged by its own ranks (the monitor over
an earlier run's files), a silent rank's state on its own node, and the lines of the view.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

from launch import clean_env, wait_for
from test_watch import ended, hpcdist, job_env, log

#: Rank 3 never reaches init_distributed (a data set it loads for ever); the others wait for it there.
NEVER_STARTS = """\
import time

import hpcdist.env as henv

if henv.get_rank() == 3:
    time.sleep(600)
henv.init_distributed()
"""


def test_a_start_that_never_reaches_its_first_step_is_ended_and_its_ranks_named(tmp_path):
    script = tmp_path / "never_starts.py"
    script.write_text(NEVER_STARTS)
    env = job_env()
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2", "--procs-per-node", "2", "--launcher", "mpirun",
                   "--hang-timeout", "20s", "--hang-floor", "5s", "--start-timeout", "40s", "--json", str(script),
                   cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = json.loads(proc.stdout)
    row = ended(job, tmp_path, env, 240)
    cause = row["reason"]
    assert row["state"] == "FAILED", row
    assert re.fullmatch(r"ended by --start-timeout after \d+ s without a first step; ranks 0-2 in the rendezvous "
                        r"\(init_distributed\); rank 3 still starting \(before init_distributed\)", cause), row
    text = log(job).splitlines()
    assert any(re.fullmatch(r"hpcdist: no rank has made its first step \d+ s after the job's start: ranks 0-2 in "
                            r"the rendezvous \(init_distributed\); rank 3 still starting \(before init_distributed\); "
                            r"every rank's stack:", line) for line in text), text
    assert "hpcdist:   rank 3 in <module> at never_starts.py:6" in text, text
    assert any(re.fullmatch(r"hpcdist: ending the job: no rank has made its first step \d+ s after the job's start "
                            r"\(--start-timeout 40 s\)", line) for line in text), text
    logs = hpcdist("logs", job["job_id"], cwd=tmp_path, env=env)
    assert f"hpcdist: job {job['job_id']} was {cause}" in logs.stderr.splitlines(), logs.stderr


# ------------------------------------------------------------------ the monitor over a re-run's folder


def rank_file(folder, rank, **state) -> None:
    with open(os.path.join(folder, f"rank-{rank}.json"), "w") as f:
        json.dump({"rank": rank, "node": "n1", "interval": 0.2, "phase": "training", **state}, f)


def monitor(progress, pid: int, run: str) -> subprocess.Popen:
    env = clean_env(HPCDIST_NODEFILE=os.path.join(os.path.dirname(progress), run, "nodes"))
    return subprocess.Popen([sys.executable, "-m", "hpcdist", "monitor", "--dir", str(progress), "--pid", str(pid),
                             "--hang-floor", "1", "--hang-timeout", "2", "--interval", "0.5"],
                            env=env, stderr=subprocess.PIPE, text=True)


def test_a_rerun_is_judged_by_its_own_ranks_not_by_an_earlier_run_s_files(tmp_path):
    progress = tmp_path / "progress"
    progress.mkdir()
    now = time.time()
    old = dict(run=".hpcdist-run.old", started=now - 900, first_step=now - 890)
    # The earlier run: its ranks finished (the monitor printed their progress line and quit) ...
    for rank in (0, 1):
        rank_file(progress, rank, step=30, last_step=now - 860, written=now - 860, phase="finished", pid=10 + rank,
                  **old)
    shell = subprocess.Popen(["sleep", "3"])
    watcher = monitor(progress, shell.pid, ".hpcdist-run.new")
    said = watcher.communicate(timeout=60)[1]
    assert shell.poll() is not None and said == "", said  # it ran until its batch shell ended, and said nothing
    # ... or one of them stopped (a node that failed): its old pid "not answering" ended the re-run.
    rank_file(progress, 1, step=12, last_step=now - 860, written=now - 860, pid=11, **old)
    # This run's rank 2, stuck for 100 s and answering its writes: the one the re-run's monitor judges.
    rank_file(progress, 2, step=5, rate=10.0, last_step=now - 100, written=now + 3600, pid=12, run=".hpcdist-run.new",
              started=now - 110, first_step=now - 109)
    shell = subprocess.Popen(["sleep", "60"])
    try:
        said = monitor(progress, shell.pid, ".hpcdist-run.new").communicate(timeout=60)[1].splitlines()
    finally:
        shell.kill()
    assert re.fullmatch(r"hpcdist: looks hung: no rank has made a step for 1\d\d s \(threshold 1 s: 10x the recent "
                        r"step time 0.10 s, floor 1 s\); every rank's stack:", said[0]), said
    assert said[1:3] == ["hpcdist:   rank 2: no answer (stopped, or gone)",
                         "hpcdist: ending the job: no rank has made a step for " + said[0].split()[10] +
                         " s (--hang-timeout 2 s)"], said
    from hpcdist.jobs import ending

    assert re.fullmatch(r"ended by --hang-timeout after 1\d\d s without a step; rank 2: no answer \(stopped, or "
                        r"gone\)", ending.cause(str(tmp_path))), said


# ------------------------------------------------------------------------- a silent rank's state


def test_a_silent_rank_on_this_node_is_named_by_its_process_state_and_elsewhere_as_unknown():
    from hpcdist.progress import watch

    here, now = os.uname().nodename, time.time()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    asleep = subprocess.Popen(["sleep", "60"])
    stopped = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        # Each process in its state first: on a loaded machine a just-started one may not be yet.
        for p, state in ((stopped, "T"), (asleep, "S"), (busy, "R")):
            wait_for(lambda: watch.process_state({"node": here, "pid": p.pid, "started": now})
                     == watch.PROCESS_STATES[state], 10, f"the state {state} of pid {p.pid}")
        ranks = [{"rank": r, "node": here, "pid": p.pid, "started": now, "silent": 30.0}
                 for r, p in enumerate([busy, asleep, stopped, gone])]
        ranks.append({"rank": 4, "node": "elsewhere", "pid": 1234, "started": now, "silent": 30.0})
        line = watch.silent_line(ranks)
        words = watch.not_answering_words(ranks[2:])
    finally:
        for p in (busy, asleep, stopped):
            p.kill()
            p.wait()
    assert line == (
        f"rank 0 on {here} (pid {busy.pid}) has not answered for 30 s (busy: running but not writing, as in a long "
        f"call that holds the GIL), "
        f"rank 1 on {here} (pid {asleep.pid}) has not answered for 30 s (sleeping, its progress not written: a full "
        f"disk, or a file system that refuses writes?), "
        f"rank 2 on {here} (pid {stopped.pid}) has not answered for 30 s (stopped), "
        f"rank 3 on {here} (pid {gone.pid}) has not answered for 30 s (its process is gone), "
        f"rank 4 on elsewhere (pid 1234) has not answered for 30 s (busy, stopped or gone)")
    assert words == (f"rank 2 on {here} not answering (stopped), rank 3 on {here} not "
                                                    f"answering (its process is gone), rank 4 on elsewhere not "
                                                    f"answering (busy, stopped or gone)")


# --------------------------------------------------------------------------------- the view's lines


def test_a_hang_before_any_step_time_says_the_floor_not_a_step_time_of_0_00_s():
    from hpcdist.progress import watch

    now = 1000.0
    ranks = [{"rank": r, "node": "n", "step": 1, "last_step": now - 30, "written": now, "phase": "training"}
             for r in range(2)]
    assert watch.analyse(ranks, now, floor=20).hung == (
        "looks hung: no rank has made a step for 30 s (threshold 20 s: the floor 20 s; no step time measured yet)")


def test_the_end_line_names_no_slowest_rank_where_none_trails_the_median():
    from hpcdist.progress import watch

    ranks = [{"rank": r, "node": "vm", "step": 121, "first_step": 10.0, "last_step": 50.0, "work": 0.052}
             for r in range(4)]
    ranks[1]["work"] = 0.06  # a little more work: no straggler (watch's factor is 1.5)
    assert watch.end_line(ranks) == ("hpcdist: progress: 4 rank(s), 121-121 steps, 3.00 steps/s (the median rank); "
                                     "slowest: none trails the median")
    ranks[3]["work"] = 0.252
    assert watch.end_line(ranks).endswith("slowest: rank 3 on vm at 3.00 steps/s, 252 ms of its own work per step "
                                          "(median 56 ms)")


def test_the_ranks_before_their_first_step_are_named_with_where_they_wait_and_those_never_started():
    from hpcdist.progress import watch

    ranks = [{"rank": 0, "phase": "rendezvous", "step": 0, "world": 6}, {"rank": 1, "phase": "rendezvous", "world": 6},
             {"rank": 2, "phase": "starting", "world": 6}]
    assert watch.not_started(ranks) == ["ranks 0-1 in the rendezvous (init_distributed)",
                                        "rank 2 still starting (before init_distributed)",
                                        "ranks 3-5 never started (no progress file)"]
    assert watch.not_started([]) == ["no rank has started (no progress file)"]


def test_a_rank_s_first_step_is_written_at_once_not_at_its_next_interval(tmp_path):
    script = tmp_path / "one_step.py"
    script.write_text("import time, hpcdist.env as h\ntime.sleep(1)\nh.step()\ntime.sleep(60)\n")
    folder = tmp_path / "p"
    env = clean_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT="29999", TORCHELASTIC_RUN_ID="x", HPCDIST_PROGRESS_DIR=str(folder),
                    HPCDIST_PROGRESS_INTERVAL="3600")
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist.rank", str(script)], env=env)

    def state():
        try:
            return json.loads((folder / "rank-0.json").read_text())
        except (OSError, ValueError):
            return None
    try:
        seen = wait_for(lambda: (s := state()) and s["phase"] != "starting" and s, 30, "the first step's write")
    finally:
        proc.kill()
        proc.wait()
    assert (seen["phase"], seen["step"], seen["world"]) == ("training", 1, 1), seen


# --------------------------------------------------------------------------- watch on a cancelled job

STEPS_THEN_WAITS = "import time\nimport hpcdist.env as h\n\nfor _ in range(5):\n    h.step()\ntime.sleep(600)\n"


def test_watch_on_a_cancelled_job_says_how_it_ended_and_exits_as_wait_does(tmp_path):
    """Issue 40.7: the view of a cancelled job said `failed`, or its ranks silent, and exited 0."""
    script = tmp_path / "waits.py"
    script.write_text(STEPS_THEN_WAITS)
    env = job_env()
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "1", "--procs-per-node", "2", "--launcher", "mpirun",
                   "--json", str(script), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = json.loads(proc.stdout)
    progress = os.path.join(job["folder"], "progress")
    wait_for(lambda: all(os.path.exists(os.path.join(progress, f"rank-{r}.json")) and
                         json.loads(open(os.path.join(progress, f"rank-{r}.json")).read())["step"] == 5
                         for r in (0, 1)), 120, "both ranks' steps")
    assert hpcdist("cancel", job["job_id"], cwd=tmp_path, env=env).returncode == 0
    row = ended(job, tmp_path, env, 60)
    assert row["state"] == "CANCELLED", row
    for mode in (["--once"], []):
        seen = hpcdist("watch", *mode, job["job_id"], cwd=tmp_path, env=env)
        lines = seen.stdout.rstrip("\n").splitlines()
        assert lines[0].startswith(f"job {job['job_id']} (local, cancelled): 2 rank(s) on 1 node(s), "), seen.stdout
        assert lines[-1] == (f"the job has ended: cancelled, exit {row['exit_code']}: {row['reason']}; the figures "
                             f"above are the ranks' last"), seen.stdout
        assert "silent" not in seen.stdout and "has not answered" not in seen.stdout, seen.stdout
        assert seen.returncode == row["exit_code"] == 143, (seen.returncode, seen.stdout, seen.stderr)
