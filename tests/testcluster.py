"""The real multi-host test cluster, for the tests that submit to it.

``tests/cluster/cluster.sh`` brings up N hosts (network namespaces on a
bridge, each with its own name, slurmd and sshd; one slurmctld; a PBS
personality through Slurm's qsub/qstat and a task prolog). The ``cluster``
fixture (tests/conftest.py) starts it once per test session and tears it
down at the end. Where it cannot run (not root, no namespaces) the tests
that need it are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLUSTER_SH = ROOT / "tests" / "cluster" / "cluster.sh"
#: Where a failed cluster test leaves the daemons' logs (ignored by git).
ARTIFACTS = ROOT / "test-output"


#: True while the session's cluster is up: a failing test then saves the daemons' logs.
is_up = False


def state_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("HPCDIST_CLUSTER_DIR", "/tmp/hpcdist-cluster"))


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "the test cluster needs root (network namespaces, slurmd, sshd)"
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        return "the test cluster needs iproute2 and util-linux (ip, nsenter)"
    return None


@contextlib.contextmanager
def exclusive(path: str = "/tmp/hpcdist-cluster.lock"):
    """Hold the cluster for this process: another test session waits here until it is free."""
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def up(nodes: int = 2) -> pathlib.Path:
    state = state_dir()
    env = dict(os.environ, HPCDIST_CLUSTER_DIR=str(state))
    proc = subprocess.run(["bash", str(CLUSTER_SH), "up", str(nodes)], env=env, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"cluster up failed:\n{proc.stdout}\n{proc.stderr}")
    global is_up
    is_up = True
    return state


def down() -> None:
    global is_up
    is_up = False
    env = dict(os.environ, HPCDIST_CLUSTER_DIR=str(state_dir()))
    proc = subprocess.run(["bash", str(CLUSTER_SH), "down"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def client_env(state: pathlib.Path, **extra: str) -> dict[str, str]:
    """The environment of a user on the cluster's head: Slurm's config, its ssh, pdsh over ssh."""
    env = clean_env(SLURM_CONF=f"{state}/slurm.conf", PDSH_RCMD_TYPE="ssh",
                    OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
    env["PATH"] = f"{state}/bin{os.pathsep}{env['PATH']}"  # the cluster's ssh (its key)
    return env


def daemon_logs(state: pathlib.Path, lines: int = 30) -> str:
    """The last lines of each daemon's log, for an assertion message."""
    out = []
    log_dir = state / "log"
    for name in sorted(os.listdir(log_dir)) if log_dir.is_dir() else []:
        with open(log_dir / name, errors="replace") as f:
            out.append(f"--- {name}\n" + "".join(f.readlines()[-lines:]))
    return "\n".join(out)


def save_daemon_logs(test_name: str) -> pathlib.Path | None:
    """Copy the daemons' logs into test-output/<test>/ (CI keeps that folder)."""
    log_dir = state_dir() / "log"
    if not log_dir.is_dir():
        return None
    safe = "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in test_name)[:150]
    target = ARTIFACTS / safe
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(log_dir, target)
    return target


def leftover_processes(pattern: str, settle: float = 10.0) -> str:
    """Processes of a finished job still running anywhere on the cluster (the namespaces share one pid space),
    after ``settle`` seconds for those already on their way out (a launcher ends its ranks, then itself)."""
    deadline = time.monotonic() + settle
    while True:
        proc = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
        found = "\n".join(line for line in proc.stdout.splitlines() if "pgrep" not in line)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def wait_idle(state: pathlib.Path, timeout: float = 120) -> None:
    """Until every node is idle again (after a test took one down and resumed it)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=client_env(state), capture_output=True,
                              text=True, timeout=30)
        states = dict(line.split() for line in proc.stdout.splitlines() if len(line.split()) == 2)
        if states and all(s == "idle" for s in states.values()):
            return
        assert time.monotonic() < deadline, f"nodes not idle after {timeout} s: {states}"
        time.sleep(1)


def queue(state: pathlib.Path) -> str:
    proc = subprocess.run(["squeue", "-h"], env=client_env(state), capture_output=True, text=True, timeout=30)
    return proc.stdout.strip()


#: Lines that say nothing about a failure: DeepSpeed's and torch's INFO chatter.
_NOISE = re.compile(r"\[INFO\]|\bINFO\b|\[(?:default|RANK)\d*\]:?\s*$")
#: The first line of a failure's story.
_TROUBLE = re.compile(r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b|\berror:|\bFAILED\b|"
                      r"\bKilled\b|Segmentation fault|\bexit(?:ed with| code| status) [1-9]|\btimed? ?out\b", re.I)
#: hpcdist's own lines (DeepSpeed over pdsh puts "node1: " before its nodes' lines).
_OWN = re.compile(r"^(?:[\w.-]+: )?hpcdist\b")
#: Where ``hpcdist logs`` starts each run's log.
_RUN = re.compile(r"^(==> hpcdist: job \d+, log .+ <==)$", re.M)


def log_excerpt(text: str, name: str = "the job's log", tail: int = 25, width: int = 300) -> str:
    """What a failing test shows of a job's log: for each run's log (named), hpcdist's own lines,
    the first error with the lines around it, and the last lines that are not INFO chatter.
    Whole lines, never a cut in the middle of a word."""
    parts = _RUN.split(text)
    sections = [(name, text)] if len(parts) == 1 else list(zip(parts[1::2], parts[2::2]))
    out = []
    for title, body in sections:
        lines = body.strip("\n").splitlines()
        out.append(f"----- {title} ({len(lines)} lines)")
        own = [line for line in lines if _OWN.match(line)]
        if own:
            out.append("hpcdist's lines:")
            out += ["  " + line[:width] for line in own[-30:]]
        first = next((i for i, line in enumerate(lines) if _TROUBLE.search(line) and not _NOISE.search(line)), None)
        if first is not None:
            out.append(f"the first error, line {first + 1}:")
            around = [line for line in lines[max(0, first - 3):first + 40] if not _NOISE.search(line)]
            out += ["  " + line[:width] for line in around[:18]]
        quiet = [line for line in lines if not _NOISE.search(line)]
        out.append(f"the last {min(tail, len(quiet))} lines (INFO lines left out):")
        out += ["  " + line[:width] for line in quiet[-tail:]]
    return "\n".join(out)
