"""What a node's launcher started is ended with it (``hpcdist agents --reap``), here on one host.

PBS tracks nothing a job starts on its other nodes: a rank there that a hang had stopped, whose
torchrun was killed by the MPI's launcher before its own SIGKILL, outlived the job (stopped, parent
1, a SIGTERM pending) on the real OpenPBS. The job's PBS spread runs each node's launcher under
``hpcdist agents --reap``; tests/progress/test_cluster_watch.py's hang rows look for leftovers on every node
of both clusters. Here, the mechanism alone: a "rank" in a session of its own (as torchrun starts
its workers) that stops itself, and its launcher killed with SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

RANK = ("import os, signal, sys, time\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
        "time.sleep(600)\n")


def state(pid: int) -> str:
    """R, S, T, Z ... or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def launch(tmp_path, reap: bool):
    pidfile = tmp_path / "rank.pid"
    (tmp_path / "rank.py").write_text(RANK)
    # setsid: out of the launcher's process group and session, as torchrun's workers are.
    launcher = ["bash", "-c", f"setsid {sys.executable} {tmp_path / 'rank.py'} {pidfile} & wait"]
    argv = [sys.executable, "-m", "hpcdist", "agents", "--reap", "--", *launcher] if reap else launcher
    proc = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    rank = int(pidfile.read_text())
    while state(rank) != "T" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state(rank) == "T", state(rank)
    return proc, rank


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while state(pid) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.2)
    return state(pid) in ("", "Z")


@pytest.mark.parametrize("reap", [False, True], ids=["without-reap", "reaped"])
def test_a_killed_launchers_stopped_rank_is_ended_with_it(reap, tmp_path):
    """Without --reap the stopped rank outlives its killed launcher (the defect, as on PBS); with it,
    it is ended within the grace (SIGCONT, SIGTERM, then SIGKILL)."""
    proc, rank = launch(tmp_path, reap)
    try:
        proc.kill()  # as an MPI's launcher kills a node's task: no time for its own clean-up
        proc.wait()
        if reap:
            assert gone_within(rank, 15), f"rank {rank} is still there ({state(rank)})"
        else:
            assert not gone_within(rank, 3), "the stopped rank ended by itself: the test shows nothing"
    finally:
        if state(rank) not in ("", "Z"):
            os.kill(rank, 9)


def test_the_launchers_own_status_is_the_starters_to_read(tmp_path):
    """--reap becomes the command: its exit status, and nothing is left of a launch that ended well."""
    done = subprocess.run([sys.executable, "-m", "hpcdist", "agents", "--reap", "--", "bash", "-c", "exit 7"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (7, "", "")
