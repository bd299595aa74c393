"""Issue 39, items 14-17, 12 and 6: progress files, `watch`, `stacks`, `monitor` and `status`
against odd numbers, odd files, many ranks and two requests at once.

Fast: no job is submitted. A "running job" here is a local job's folder whose runner is a
``sleep`` (hpcdist's own records, as ``hpcdist submit --scheduler local`` writes them), its rank
files written by the test; a rank, where one is needed, is ``python -m hpcdist.rank`` as the
launchers start it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from launch import clean_env, wait_for


def hpcdist(*args, cwd, timeout=60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout, **kwargs)


@pytest.fixture
def job(tmp_path):
    """A running local job with an empty ``progress/`` folder: ``id``, ``progress``, ``cwd``."""
    from hpcdist import jobs
    from hpcdist.schedulers.local.submit import process_start, this_host

    runner = subprocess.Popen(["sleep", "600"], start_new_session=True)
    draft = jobs.Draft(str(tmp_path / ".hpcdist" / "jobs"), "train")
    draft.commit({"job_id": str(runner.pid), "cluster": None, "scheduler": "local", "dialect": None,
                  "job_name": "train", "workdir": str(tmp_path), "log": draft.default_log,
                  "submitted_at": time.time(), "command_line": "hpcdist submit --scheduler local train.py"})
    jobs.write_runner(draft.path, runner.pid, process_start(runner.pid), *this_host())
    progress = os.path.join(draft.path, jobs.PROGRESS)
    os.mkdir(progress, 0o700)
    yield SimpleNamespace(id=str(runner.pid), progress=progress, cwd=tmp_path, runner=runner)
    runner.kill()
    runner.wait()


def write_rank(folder, number, text=None, **state) -> None:
    """``rank-N.json``: ``text`` as it is, or ``state`` as Python's json writes it (NaN allowed)."""
    with open(os.path.join(folder, f"rank-{number}.json"), "w") as f:
        f.write(text if text is not None else json.dumps(state))


def healthy(rank, now, **more) -> dict:
    return {"rank": rank, "local_rank": rank, "node": "n1", "pid": 1000 + rank, "step": 50, "first_step": now - 60,
            "last_step": now - 1, "phase": "training", "rate": 10.0, "work": 0.05, "started": now - 70,
            "written": now, "interval": 2.0, **more}


def rows(screen: str) -> dict[int, str]:
    """``watch``'s rank rows by rank."""
    out = {}
    for line in screen.splitlines():
        words = line.split()
        if len(words) > 2 and words[1].isdigit() and not line.startswith("job "):
            out[int(words[1])] = line
    return out


# ------------------------------------------------------------------ 14: a rank file is always JSON


def run_rank(tmp_path, body: str, **env) -> tuple[subprocess.CompletedProcess, str]:
    script = tmp_path / "train.py"
    script.write_text("import decimal\nimport numpy\nimport hpcdist.env as h\n" + body)
    folder = tmp_path / "p"
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "HPCDIST_PROGRESS_DIR": str(folder),
           "HPCDIST_PROGRESS_INTERVAL": "0.2", **env}
    proc = subprocess.run([sys.executable, "-m", "hpcdist.rank", str(script)], capture_output=True, text=True,
                          timeout=120, env=clean_env(**env))
    path = folder / "rank-0.json"
    return proc, path.read_text() if path.exists() else ""


def strict(text: str) -> dict:
    """JSON as the standard has it: no NaN, no Infinity."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("steps", ["numpy.int64(3)", "decimal.Decimal(3)", "numpy.float32(3.0)"])
def test_a_step_count_of_numpy_or_decimal_is_recorded_as_a_plain_number(tmp_path, steps):
    proc, text = run_rank(tmp_path, f"h.step({steps})\nh.step(numpy.int32(2))\n")
    assert proc.returncode == 0, proc.stderr
    assert (strict(text)["step"], strict(text)["phase"]) == (5, "finished"), text


def test_an_infinite_interval_is_the_default_and_the_file_stays_json(tmp_path):
    proc, text = run_rank(tmp_path, "h.step(3)\n", HPCDIST_PROGRESS_INTERVAL="inf")
    assert proc.returncode == 0, proc.stderr
    assert (strict(text)["step"], strict(text)["interval"]) == (3, 2.0), text


def test_a_step_count_that_is_no_whole_number_is_refused_where_it_is_given(tmp_path):
    proc, text = run_rank(tmp_path, "h.step(3)\nh.step(1.5)\n")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == ("ValueError: hpcdist.env.step(1.5): expected a whole number of steps, "
                                            "0 or more (as step(1))"), proc.stderr
    assert (strict(text)["step"], strict(text)["phase"]) == (3, "failed"), text


def test_a_loop_started_directly_leaves_its_last_step_in_its_file(tmp_path):
    """A 40-step loop that counts with hpcdist.env.step() and is started as ``python train.py``
    (--launcher none: no hpcdist.rank to say when it ends), in well under the interval (2 s): its
    file ends at step 40, written at the interpreter's exit, not at the write before."""
    script = tmp_path / "train.py"
    script.write_text("import time\nimport hpcdist.env as h\n"
                      "for i in range(40):\n    h.step()\n    time.sleep(0.01)\n")
    folder = tmp_path / "p"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env=clean_env(RANK="0", HPCDIST_PROGRESS_DIR=str(folder)))
    assert proc.returncode == 0, proc.stderr
    state = strict((folder / "rank-0.json").read_text())
    # The phase stays: how the script ended is not known at exit.
    assert (state["step"], state["phase"]) == (40, "training"), state


def test_the_recorder_writes_null_for_a_number_json_cannot_hold():
    from hpcdist.progress import _json

    assert strict(_json({"rank": 0, "rate": float("nan"), "work": float("inf"), "node": 'a"b', "x": object()})) == {
        "rank": 0, "rate": None, "work": None, "node": 'a"b', "x": None}


# --------------------------------------------------------- 15: odd rank files: no crash, no hang


def test_odd_values_in_rank_files_do_not_crash_watch(job):
    now = time.time()
    write_rank(job.progress, 0, **healthy(0, now))
    write_rank(job.progress, 1, rank=1, node=["n2"], pid="x", step=None, first_step={"a": 1}, last_step=[now],
               phase=7, rate=float("nan"), work="fast", started=None, written="soon", interval="2")
    write_rank(job.progress, 2, "null")
    write_rank(job.progress, 3, '"text"')
    write_rank(job.progress, 4, "[1, 2]")
    write_rank(job.progress, 5, '{"rank": "5"}')
    write_rank(job.progress, 6, "[" * 100000)  # nested deeper than Python's json can go
    write_rank(job.progress, 9, '{"rank": true, "step": 1e999}')
    proc = hpcdist("watch", "--once", job.id, cwd=job.cwd)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert f"job {job.id} (local, running): 2 rank(s) on 2 node(s)" in proc.stdout, proc.stdout
    found = rows(proc.stdout)
    assert sorted(found) == [0, 1], proc.stdout
    assert found[0].startswith("n1                   0       50    10.00      50 ms "), proc.stdout
    # Nothing it wrote is a number or a word where one belongs: as if it had written nothing yet.
    assert found[1] == "?                    1        0        -          -      0.0 s  ?", proc.stdout
    as_json = json.loads(hpcdist("watch", "--json", job.id, cwd=job.cwd).stdout)
    assert as_json["ranks"][1] == {"rank": 1, "since": 0.0, "silent": 0.0}, as_json


def test_nan_in_one_rank_file_does_not_turn_hang_detection_off(job):
    now = time.time()
    write_rank(job.progress, 0, **healthy(0, now, rate=float("nan"), last_step=float("nan")))
    for rank in (1, 2, 3):
        write_rank(job.progress, rank, **healthy(rank, now, last_step=now - 300))
    screen = hpcdist("watch", "--once", job.id, cwd=job.cwd).stdout
    hung = [line for line in screen.splitlines() if line.startswith("LOOKS HUNG")]
    assert len(hung) == 1 and hung[0].startswith("LOOKS HUNG: no rank has made a step for 30"), screen
    assert "(threshold 120 s: 10x the recent step time 0.10 s, floor 120 s)" in hung[0], screen


def limited_memory():
    # the link to /dev/zero: a MemoryError, not the machine's
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link to a rank file"])
def test_a_fifo_or_a_link_in_the_progress_folder_is_skipped(job, kind):
    now = time.time()
    write_rank(job.progress, 0, **healthy(0, now))
    path = os.path.join(job.progress, "rank-7.json")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to a rank file":  # whoever can put a link there can point it anywhere
        write_rank(job.cwd, 7, **healthy(7, now))
        os.symlink(job.cwd / "rank-7.json", path)
    else:
        os.symlink("/dev/zero", path)
    proc = hpcdist("watch", "--once", job.id, cwd=job.cwd, timeout=30, preexec_fn=limited_memory)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert sorted(rows(proc.stdout)) == [0], proc.stdout


def test_the_monitor_reads_past_odd_rank_files_and_names_the_hang(job, tmp_path):
    now = time.time()
    write_rank(job.progress, 0, **healthy(0, now, last_step=now - 60, interval=0.2))
    write_rank(job.progress, 1, rank=1, step="x", written=None, interval="2", last_step=float("nan"))
    write_rank(job.progress, 2, "[" * 100000)
    os.mkfifo(os.path.join(job.progress, "rank-3.json"))
    log = open(tmp_path / "monitor.log", "w+")
    monitor = subprocess.Popen([sys.executable, "-m", "hpcdist", "monitor", "--dir", job.progress, "--pid", job.id,
                                "--hang-floor", "5", "--interval", "0.5"], stderr=log, env=clean_env())
    try:
        wait_for(lambda: "every rank's stack" in (tmp_path / "monitor.log").read_text(), 60, "the monitor's hang line")
    finally:
        job.runner.kill()  # the batch shell ends: so does the monitor
        assert monitor.wait(30) == 0
    text = (tmp_path / "monitor.log").read_text()
    first = text.splitlines()[0]
    assert first.startswith("hpcdist: looks hung: no rank has made a step for ") and "(threshold 5 s: " in first, text
    assert "Traceback" not in text and "cannot read" not in text, text


# --------------------------------------------------------- 16: many silent ranks, no quadratic cost


class Counted(dict):
    """A rank's state that counts how often it is compared with another."""
    compared = 0

    def __eq__(self, other):
        Counted.compared += 1
        return dict.__eq__(self, other)

    __hash__ = None


def test_the_monitor_lives_through_the_warning_signals(job, tmp_path):
    """A ``qsig -s USR2`` reaches every process of a job (on a real mom it also ends the job:
    tests/schedulers/test_pbs_stop_by_hand.py): the monitor takes it, and USR1, and goes on to name the hang,
    and ends with the batch shell."""
    from hpcdist.progress.monitor import SUMMARY

    now = time.time()
    write_rank(job.progress, 0, **healthy(0, now, last_step=now - 60, interval=0.2))
    log = open(tmp_path / "monitor.log", "w+")
    monitor = subprocess.Popen([sys.executable, "-m", "hpcdist", "monitor", "--dir", job.progress, "--pid", job.id,
                                "--hang-floor", "5", "--interval", "0.5"], stderr=log, env=clean_env())
    try:
        wait_for(lambda: os.path.exists(os.path.join(job.progress, SUMMARY)), 60, "the monitor's first summary")
        for warning in (signal.SIGUSR2, signal.SIGUSR1):
            monitor.send_signal(warning)
        wait_for(lambda: "every rank's stack" in (tmp_path / "monitor.log").read_text(), 60, "the monitor's hang line")
        assert monitor.poll() is None, (tmp_path / "monitor.log").read_text()
    finally:
        job.runner.kill()  # the batch shell ends: so does the monitor
        assert monitor.wait(30) == 0, (tmp_path / "monitor.log").read_text()


def test_watch_compares_no_rank_with_another_and_names_a_few_silent_ranks(tmp_path):
    from hpcdist.cli.watch import screen
    from hpcdist.progress import watch

    now = 10000.0
    ranks = [Counted(rank=r, node=f"n{r // 4}", pid=100 + r, step=50, rate=10.0, work=0.05, last_step=now - 1,
                     started=now - 70, written=now - (100 if r % 2 else 0), interval=2.0, phase="training")
             for r in range(400)]
    Counted.compared = 0
    view = watch.analyse(ranks, now)
    job = SimpleNamespace(job_id="7", record={"scheduler": "local"}, path=str(tmp_path))  # no restart
    text = screen(job, view, "RUNNING")
    assert Counted.compared == 0
    assert len(view.not_answering) == 200 and text.count("(silent 100 s)") == 200
    assert text.splitlines()[-1] == (
        "rank 1 on n0 (pid 101) has not answered for 100 s, rank 3 on n0 (pid 103) has not answered for 100 s, "
        "rank 5 on n1 (pid 105) has not answered for 100 s, rank 7 on n1 (pid 107) has not answered for 100 s, "
        "rank 9 on n2 (pid 109) has not answered for 100 s, rank 11 on n2 (pid 111) has not answered for 100 s, "
        "rank 13 on n3 (pid 113) has not answered for 100 s, rank 15 on n3 (pid 115) has not answered for 100 s, "
        "and 192 more (ranks " + ",".join(str(r) for r in range(17, 400, 2)) + ") for 100 s or more "
        "(busy, stopped or gone)")
    assert "node n99: 4 rank(s), steps 50-50" in text


# ----------------------------------------------------------------- 17: bad numbers: one-line refusals

WATCH_INTERVAL = "expected the seconds between refreshes, 0.5 or more and at most 86400 (as --interval 2)"
STACKS_TIMEOUT = "expected the seconds to wait for the ranks' answers, above 0 and at most 3600 (as --timeout 10)"


@pytest.mark.parametrize("command, flag, value, expected", [
    ("watch", "--interval", "-1", f"--interval -1: {WATCH_INTERVAL}"),
    ("watch", "--interval", "nan", f"--interval nan: {WATCH_INTERVAL}"),
    ("watch", "--interval", "0", f"--interval 0: {WATCH_INTERVAL}"),
    ("watch", "--interval", "inf", f"--interval inf: {WATCH_INTERVAL}"),
    ("stacks", "--timeout", "-3", f"--timeout -3: {STACKS_TIMEOUT}"),
    ("stacks", "--timeout", "nan", f"--timeout nan: {STACKS_TIMEOUT}"),
    ("stacks", "--timeout", "0", f"--timeout 0: {STACKS_TIMEOUT}"),
])
def test_a_bad_number_for_watch_or_stacks_is_refused_in_one_line(job, command, flag, value, expected):
    write_rank(job.progress, 0, **healthy(0, time.time()))
    proc = hpcdist(command, job.id, f"{flag}={value}", cwd=job.cwd, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"hpcdist {command}: error: {expected}\n")


@pytest.mark.parametrize("flag, value, expected", [
    ("--interval", "abc", "--interval abc: expected the seconds between checks, 0.5 or more and at most 3600 "
                          "(as --interval 2)"),
    ("--interval", "0", "--interval 0: expected the seconds between checks, 0.5 or more and at most 3600 "
                        "(as --interval 2)"),
    ("--hang-timeout", "nan", "--hang-timeout nan: expected the seconds without a step that end the job, above 0 "
                              "and at most 1e+07 (as --hang-timeout 900)"),
    ("--hang-floor", "-1", "--hang-floor -1: expected the least seconds without a step called a hang, 0 or more "
                           "and at most 1e+07 (as --hang-floor 120)"),
    ("--pid", "x1", "--pid x1: expected the batch shell's process id, a whole number above 1 (as --pid $$)"),
])
def test_a_bad_number_for_the_monitor_is_refused_in_one_line(tmp_path, flag, value, expected):
    args = {"--dir": str(tmp_path / "p"), "--pid": str(os.getpid()), flag: value}
    proc = hpcdist("monitor", *[word for pair in args.items() for word in pair], cwd=tmp_path, timeout=30)
    assert (proc.returncode, proc.stderr) == (1, f"hpcdist monitor: error: {expected}\n")


# ----------------------------------------------------------------- 12: a dead monitor's figures


@pytest.mark.parametrize("age, column", [(1, "step 120 3.1/s"), (300, "stale 5m: step 120 3.1/s (its monitor stopped)"),
                                         (7300, "stale 2h: HUNG 600s (its monitor stopped)")])
def test_status_says_how_old_a_stopped_monitor_s_figures_are(job, age, column):
    summary = {"time": time.time() - age, "stale_after": 30.0, "ranks": 4, "step_min": 120, "step_max": 121,
               "median_rate": 3.1, "stalled_s": 600.0 if age > 7000 else 0.5,
               "hung": "looks hung: ..." if age > 7000 else None, "slowest": [], "not_answering": []}
    with open(os.path.join(job.progress, "summary.json"), "w") as f:
        json.dump(summary, f)
    table = hpcdist("status", cwd=job.cwd).stdout
    (row,) = [line for line in table.splitlines() if line.startswith(job.id)]
    assert row.split("running", 1)[1].strip() == column, table


# ----------------------------------------------------------------- 6: two stacks requests at once


def test_two_stacks_requests_at_once_both_get_every_healthy_rank_s_answer(tmp_path):
    from hpcdist.progress import watch

    script = tmp_path / "waits.py"
    script.write_text("import time\n\ndef load_batch():\n    time.sleep(120)\n\nload_batch()\n")
    folder = tmp_path / "p"
    rank = subprocess.Popen([sys.executable, "-m", "hpcdist.rank", str(script)],
                            env=clean_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", HPCDIST_PROGRESS_DIR=str(folder),
                                          HPCDIST_PROGRESS_INTERVAL="0.2"))
    try:
        wait_for(lambda: os.path.exists(folder / "rank-0.json"), 60, "the rank's progress file")
        # Held still while both ask (the monitor's request and a user's, a moment apart): it
        # then reads only the second.
        os.kill(rank.pid, signal.SIGSTOP)
        results = {}
        asking = [threading.Thread(target=lambda who=who: results.__setitem__(
            who, watch.group_stacks(watch.request_stacks(str(folder), [0], wait_s=8)))) for who in ("monitor", "user")]
        for thread in asking:
            thread.start()
            time.sleep(0.5)
        os.kill(rank.pid, signal.SIGCONT)
        for thread in asking:
            thread.join(30)
        assert results["monitor"] == results["user"], results
        assert results["user"][0] == "rank 0 in load_batch at waits.py:4", results
    finally:
        rank.kill()
        rank.wait()


def test_a_stacks_answer_to_an_older_request_is_not_taken(tmp_path):
    from hpcdist.progress import watch

    with open(tmp_path / "stacks-0.txt", "w") as f:
        f.write("request 5\n/w/train.py:4 old\n")
    assert watch.group_stacks(watch.request_stacks(str(tmp_path), [0], wait_s=0.5)) == [
        "rank 0: no answer (stopped, or gone)"]


def test_an_interval_out_of_the_recorder_s_range_a_bool_and_a_huge_int_are_left_out():
    from hpcdist.progress import watch

    assert watch.clean({"rank": 2, "interval": 1e300, "step": True, "rate": 2, "node": "n", "written": 10 ** 400}) == {
        "rank": 2, "rate": 2, "node": "n"}
