"""The master port of a local job, as another user on the same host and a second job with the
same id would meet it (issue 29 items 2 and 7). Everything is real: local torchrun jobs, a second
Unix user (``useradd``, as root) listening with a plain socket, two jobs in pid namespaces of
their own (``unshare --pid``) whose runners get the same pid."""

from __future__ import annotations

import json
import os
import pathlib
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from test_submit import hpcdist

from launch import clean_env

RIVAL = "hpcdist-rival"
#: Another user's program: listens on the port given, writes "ready" once it does, and a line
#: for each connection it is offered (what torchrun's agents would send their rendezvous to).
LISTENER = r"""
import socket, sys
port, folder = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(16)
open(folder + "/ready", "w").close()
while True:
    conn, peer = s.accept()
    with open(folder + "/connections", "a") as f:
        f.write(f"{peer}\n")
    conn.close()
"""
#: A training that meets its peers for real (gloo) and says where it met them.
TRAINING = """
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
time.sleep(float(os.environ.get("HOLD_S", "0")))
print(f"rank {dist.get_rank()} of {dist.get_world_size()} met", flush=True)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def rival():
    """A second user of this host (created here when missing: the tests run as root)."""
    if os.geteuid() != 0:
        pytest.fail("these tests create a second user: run them as root")
    try:
        pwd.getpwnam(RIVAL)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", RIVAL], check=True)
    return RIVAL


@pytest.fixture
def rival_folder(rival):
    """A folder of the rival's own, outside root's private test folders."""
    folder = tempfile.mkdtemp(prefix="hpcdist-rival-")
    os.chmod(folder, 0o755)
    shutil.chown(folder, rival)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


class Listener:
    """The rival's listener on ``port``, started as that user; ``connections()`` it was offered."""

    def __init__(self, user: str, port: int, folder: str):
        self.folder = folder
        script = os.path.join(self.folder, "listen.py")
        with open(script, "w") as f:
            f.write(LISTENER)
        self.process = subprocess.Popen(["runuser", "-u", user, "--", "/usr/bin/python3", script, str(port),
                                         self.folder], start_new_session=True)
        for _ in range(100):
            if os.path.exists(os.path.join(self.folder, "ready")):
                return
            assert self.process.poll() is None, f"the rival's listener could not listen on {port}"
            time.sleep(0.05)
        raise AssertionError("the rival's listener did not start")

    def connections(self) -> list:
        path = os.path.join(self.folder, "connections")
        return open(path).read().splitlines() if os.path.exists(path) else []

    def stop(self):
        os.killpg(self.process.pid, 9)
        self.process.wait()


def _master_port(log: str) -> int:
    found = re.search(r"^hpcdist: nodes: .*; master: \S+:(\d+)$", log, re.M)
    assert found, f"no master line in the log:\n{log}"
    return int(found[1])


def _wait(tmp_path, job_id: str, timeout: float = 180) -> dict:
    """The job's status once it has ended (cancelled if it has not within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (status,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)
        if status["state"] != "RUNNING":
            return status
        time.sleep(0.5)
    hpcdist("cancel", job_id, cwd=tmp_path)
    raise AssertionError(f"job {job_id} still ran after {timeout} s")


def _log(tmp_path) -> str:
    (name,) = os.listdir(tmp_path / ".hpcdist" / "jobs")
    record = json.loads((tmp_path / ".hpcdist" / "jobs" / name / "record.json").read_text())
    return open(record["log"]).read()


def test_another_user_listening_on_the_port_the_job_id_names_gets_no_agent(tmp_path, rival, rival_folder):
    """The rival listens on 20000 + pid % 10000 (the old rule) before the launch: the job runs on
    a port of its own and completes; the rival is offered nothing."""
    (tmp_path / "train.py").write_text(TRAINING)
    # The setup line holds the job before its set-up, so the rival is listening first.
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2", "--setup", "sleep 3",
                   "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.split()[0]
    listener = Listener(rival, 20000 + int(job_id) % 10000, rival_folder)
    try:
        status = _wait(tmp_path, job_id)
        log = _log(tmp_path)
        assert listener.connections() == [], f"another user's listener received the job's agents:\n{log}"
        assert (status["state"], status["exit_code"]) == ("COMPLETED", 0), log
        assert log.count("of 2 met") == 2
        assert _master_port(log) != 20000 + int(job_id) % 10000
    finally:
        listener.stop()


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_master_port_taken_after_it_was_chosen_ends_the_job_instead_of_joining(nodes, tmp_path, rival, rival_folder):
    """The rival tries to take the job's port between its choice and the launch (here: the user's
    own setup line starts the rival's listener on $MASTER_PORT). On one node it does, and the agent
    cannot host the rendezvous there: the job fails, saying so. On two it cannot: the set-up took
    the port as it chose it, to hold the agents' store there (so that it outlives every agent),
    and the job completes. Either way no agent becomes a client of the rival's listener."""
    (tmp_path / "train.py").write_text(TRAINING)
    listen = pathlib.Path(rival_folder)
    (listen / "listen.py").write_text(LISTENER)
    start = (f'runuser -u {rival} -- /usr/bin/python3 {listen}/listen.py "$MASTER_PORT" {listen} '
             f'</dev/null >/dev/null 2>&1 & rival=$!; '
             f'while [ ! -e {listen}/ready ] && kill -0 "$rival"; do sleep 0.1; done')
    proc = hpcdist("submit", "--scheduler", "local", "--nodes", str(nodes), "--setup", start,
                   "--setup-on", "every-node", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.split()[0]
    try:
        status = _wait(tmp_path, job_id)
        log = _log(tmp_path)
        port = _master_port(log)
        connections = (listen / "connections").read_text().splitlines() if (listen / "connections").exists() else []
        assert connections == [], f"the job's agent joined another user's listener on {port}:\n{log}"
        if nodes == 1:
            assert status["state"] == "FAILED", log
            assert " met" not in log
            assert f"port: {port}" in log and "EADDRINUSE" in log, log
        else:
            assert not (listen / "ready").exists(), "the rival listened on the port the job holds"
            assert (status["state"], status["exit_code"]) == ("COMPLETED", 0), log
            assert log.count("of 2 met") == 2, log
    finally:
        subprocess.run(["pkill", "-9", "-u", rival, "-f", f"{listen}/listen.py"])


def test_a_store_whose_port_another_user_took_ends_the_set_up_in_one_line(tmp_path, rival, rival_folder):
    """The set-up that holds torchrun's store (``--hold-store``) on a port the rival took since it
    was chosen (``--port-unchecked`` skips the choice's own check: the moment between the two is
    too short to hit from a job): exit 1, one line naming the port, and nothing left holding."""
    import socket

    with socket.socket() as probe:  # a port free now, for the rival to take
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    listener = Listener(rival, port, rival_folder)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hpcdist", "job-setup", "--scheduler", "local", "--nodes", "2",
             "--dir", str(tmp_path), "--master-port", str(port), "--port-unchecked", "--hold-store"],
            env=dict(clean_env(), HPCDIST_JOB_ID="7"), capture_output=True, text=True, timeout=60)
        assert listener.connections() == []
    finally:
        listener.stop()
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (f"hpcdist: torchrun's rendezvous store cannot listen on port {port} of this "
                           f"node: Address already in use\n")
    assert not (tmp_path / "store.pid").exists()


def test_a_master_port_given_with_env_that_another_user_holds_is_refused_in_one_line(tmp_path, rival, rival_folder):
    """``--env MASTER_PORT=P`` while another user listens on P: the job stops before the launch,
    with one line naming the port and the fix; the rival is offered nothing."""
    (tmp_path / "train.py").write_text(TRAINING)
    import socket

    with socket.socket() as probe:  # a port free now, for the rival to take
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    listener = Listener(rival, port, rival_folder)
    try:
        proc = hpcdist("submit", "--scheduler", "local", "--nodes", "2",
                       "--env", f"MASTER_PORT={port}", "train.py", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        status = _wait(tmp_path, proc.stdout.split()[0])
        log = _log(tmp_path)
        assert listener.connections() == [], log
        assert status["state"] == "FAILED" and status["exit_code"] == 2, log
        assert (f"hpcdist job-setup: error: MASTER_PORT {port} (the job's --env) cannot be listened on at "
                f"127.0.0.1 (Address already in use)") in log
        assert "Leave MASTER_PORT out (hpcdist picks a free port) or give another" in log
    finally:
        listener.stop()


def test_two_local_jobs_with_the_same_id_each_meet_on_their_own_port(tmp_path):
    """Two local jobs whose runners have the same pid (each submitted in a pid namespace of its
    own, as two containers would: their job ids are equal, as ids 10,000 apart were equal modulo
    the old rule's 10,000) and run at the same time: each job's two agents meet each other."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("this test needs root and unshare (util-linux) for its pid namespaces")
    jobs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "train.py").write_text(TRAINING)
        env = clean_env(HOLD_S="8")
        # --mount-proc: /proc of the namespace, so that hpcdist sees its runner by its pid there.
        jobs.append((folder, subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "hpcdist", "submit", "--json",
             "--scheduler", "local", "--nodes", "2", "--wait", "train.py"], cwd=folder, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        time.sleep(1)
    ids, logs = [], []
    for folder, process in jobs:
        try:
            out, err = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        ids.append(json.loads(out.splitlines()[0])["job_id"] if out.strip() else None)
        logs.append(_log(folder))
        assert process.returncode == 0, f"job in {folder.name} failed:\n{logs[-1]}\n{err}"
    assert ids[0] == ids[1], f"the namespaces gave the runners different pids ({ids}): no collision to test"
    ports = [_master_port(log) for log in logs]
    assert ports[0] != ports[1], logs
    for log in logs:
        assert log.count("of 2 met") == 2, log
