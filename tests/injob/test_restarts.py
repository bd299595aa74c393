"""hpcdist's own restarts of a failed launch (issue 51, ``--max-restarts``), on the local backend:
a rank killed mid-training is restarted and the training goes on; a fault in the training's code,
a training that asks for no restart, a launch that makes no step twice, and the last restart used
up all end the job at once, naming why. What the job script and the scheduler's request say
(spares, --no-kill, tolerate_node_failures, srun's node list) is read from rendered scripts; the
lost node itself is tests/injob/test_restarts_cluster.py's, on the real clusters.

The "node" killed here is a rank's process (the local backend's nodes are this host): what a
lost node adds (a node that does not answer, a spare in its place) needs the clusters."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from launch import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: A training that records its steps (hpcdist.env.step) and fails as its argument says, on the
#: launch given (--on N: HPCDIST_RESTART == N; -1: every launch).
TRAINING = r"""
import os, sys, time
import hpcdist.env
HOLDERS
if sys.argv[1] == "killed-slow" and hpcdist.env.restart_count():
    time.sleep(20)  # the next launch slow to start: `hpcdist watch` meanwhile
env = hpcdist.env.init_distributed()
import torch, torch.distributed as dist
how, on = sys.argv[1], int(sys.argv[2])
restart = hpcdist.env.restart_count()
if env.rank == 0:  # the processes that hold torchrun's store for this job (hpcdist.injob.store)
    print(f"holders at restart {restart}: {len(holders(os.path.dirname(os.environ['HPCDIST_NODEFILE'])))}", flush=True)
assert restart == int(os.environ.get("HPCDIST_RESTART", "0"))
failing = on in (-1, restart) and env.rank == 1
if how == "dies-at-start" and failing:
    os.kill(os.getpid(), 9)
for step in range(6):
    t = torch.ones(1)
    dist.all_reduce(t)
    hpcdist.env.step()
    if step == 3 and failing:
        if how in ("killed", "killed-slow"):
            os.kill(os.getpid(), 9)
        if how == "raises":
            raise ValueError("a bad batch")
        if how == "no-restart":
            sys.exit(hpcdist.env.NO_RESTART)
    time.sleep(0.1)
if how == "holds-gil" and on in (-1, restart):
    import ctypes
    ctypes.PyDLL(None).sleep(14)  # a C call that keeps the GIL: the progress thread writes nothing
print(f"rank {env.rank} done, restart {restart}", flush=True)
dist.destroy_process_group()
"""


def holders(run_dir: str) -> list:
    """The pids of the processes left by hpcdist job-setup or restart (each holder of torchrun's
    store is one) whose arguments name ``run_dir`` or a path in it."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if any(w.startswith(run_dir.encode()) for w in words) and (
                b"job-setup" in words or b"restart" in words):
            found.append(int(pid))
    return found


TRAINING = TRAINING.replace("HOLDERS", f"{inspect.getsource(holders)}")


def submit(tmp_path, *args, restarts: int = 2) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(TRAINING)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hpcdist",
            "submit",
            "--scheduler",
            "local",
            "--nodes",
            "2",
            "--max-restarts",
            str(restarts),
            "--wait",
            "train.py",
            *args,
        ],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def status(tmp_path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "hpcdist", "status", "--json"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(proc.stdout)[-1]


def said(proc) -> list:
    return [
        line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("hpcdist: ")
    ]


def test_a_killed_rank_is_restarted_and_the_training_goes_on(tmp_path):
    proc = submit(tmp_path, "killed", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    restarts = [line for line in said(proc) if line.startswith("hpcdist: restart ")]
    assert len(restarts) == 1, said(proc)
    assert (
        "restart 1 of 2" in restarts[0]
        and "rank 1 on" in restarts[0]
        and "(exit 1, at step 4)" in restarts[0]
    )
    # Every rank of the second launch knows it is one (hpcdist.env.restart_count, HPCDIST_RESTART).
    assert sorted(line for line in proc.stdout.splitlines() if " done, " in line) == [
        "rank 0 done, restart 1",
        "rank 1 done, restart 1",
    ]
    row = status(tmp_path)
    assert (row["state"], row["exit_code"], row["reason"]) == ("COMPLETED", 0, "restart 1 of 2")
    assert [r["restart"] for r in row["launch_restarts"]] == [1]
    # One holder of torchrun's store for each launch (the first one's ended by the restart), and
    # none once the job has ended.
    assert re.findall(r"^holders at restart \d: \d+$", proc.stdout, re.M) == [
        "holders at restart 0: 1", "holders at restart 1: 1"], proc.stdout
    assert holders(str(tmp_path)) == [] or (time.sleep(1) or holders(str(tmp_path)) == [])


def test_ranks_this_node_sees_alive_but_silent_after_their_last_step_are_not_a_lost_node(tmp_path):
    """Both ranks hold the GIL for 14 s after their last step (their progress unwritten, no step):
    with --max-restarts the monitor took that for a lost node and restarted a training that had
    finished (CI of 92f9984, at the end of a DDP run under load). Ranks whose processes the
    monitor's own node sees alive are busy, not lost: no restart."""
    proc = submit(tmp_path, "holds-gil", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [line for line in said(proc) if "restart" in line], said(proc)
    row = status(tmp_path)
    assert (row["state"], row["reason"]) == ("COMPLETED", None)


def watch_once(tmp_path) -> str:
    job = status(tmp_path)["job_id"]
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "watch", "--once", job], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr


def test_watch_shows_the_restart_and_then_only_the_next_launch_s_ranks(tmp_path):
    """While the next launch starts, `watch` names the restart and shows none of the last
    launch's ranks as if they ran; after the end, the restart stays and the ranks are the new
    launch's."""
    (tmp_path / "train.py").write_text(TRAINING)
    submitted = time.time()
    job = subprocess.Popen(
        [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--nodes", "2",
         "--max-restarts", "2", "--wait", "train.py", "killed-slow", "0"],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            (tmp_path / ".hpcdist").exists() and status(tmp_path).get("launch_restarts")
        ):
            time.sleep(0.3)
        during = watch_once(tmp_path)
    finally:
        out, _ = job.communicate(timeout=240)
    assert job.returncode == 0, out
    assert re.search(r"^restart 1 of 2 at \d\d:\d\d:\d\d \(step 4\): .*rank 1 on", during, re.M), during
    assert "no rank has recorded its progress yet" in during, during  # the killed launch's: gone
    after = watch_once(tmp_path)
    assert re.search(r"^restart 1 of 2 at ", after, re.M) and "RESTARTING" not in after, after
    steps = re.findall(r"^\S+\s+[01]\s+(\d+) ", after, re.M)
    assert steps == ["6", "6"], after
    # The start-up the job's end says is the first launch's, not one that folds the restart in
    # (the next launch's ranks, 20 s slow to start, measured from the job's start).
    (total,) = re.findall(r"start-up: ([\d.]+) s from the job's start", out)
    restarted = status(tmp_path)["launch_restarts"][0]["time"]
    assert float(total) < restarted - submitted, (total, restarted - submitted, out)


def test_a_fault_in_the_training_s_code_is_not_restarted(tmp_path):
    proc = submit(tmp_path, "raises", "-1")
    assert proc.returncode == 1
    assert not [line for line in said(proc) if line.startswith("hpcdist: restart ")], said(proc)
    ended = [line for line in said(proc) if "the launch failed" in line]
    assert len(ended) == 1 and "rank 1 on" in ended[0] and "ValueError: a bad batch" in ended[0]
    assert "a fault in the training's code" in ended[0], ended
    assert status(tmp_path)["launch_restarts"] == []


def test_a_training_that_asks_for_no_restart_gets_none(tmp_path):
    proc = submit(tmp_path, "no-restart", "-1")
    assert proc.returncode == 1
    assert any("rank 1 asked for no restart (exit 78)" in line for line in said(proc)), said(proc)
    assert not [line for line in said(proc) if line.startswith("hpcdist: restart ")]


def test_a_launch_that_never_makes_a_step_stops_after_two_restarts(tmp_path):
    proc = submit(tmp_path, "dies-at-start", "-1", restarts=5)
    assert proc.returncode == 1
    restarts = [line for line in said(proc) if line.startswith("hpcdist: restart ")]
    assert [line.split()[2] for line in restarts] == ["1", "2"], said(proc)
    assert any("no step since the last 2 restarts" in line for line in said(proc)), said(proc)


def test_the_last_restart_used_the_job_ends_saying_so(tmp_path):
    proc = submit(tmp_path, "killed", "-1", restarts=1)
    assert proc.returncode == 1
    assert [line.split()[2] for line in said(proc) if line.startswith("hpcdist: restart ")] == ["1"]
    assert any("no restart left: --max-restarts 1" in line for line in said(proc)), said(proc)
    assert status(tmp_path)["reason"].startswith("restart 1 of 1")


def rendering(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpcdist", "render", *args, "examples/quickstart.py"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def render(*args) -> str:
    proc = rendering(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_slurm_asks_for_spares_keeps_the_job_when_a_node_fails_and_srun_on_the_launch_s_nodes():
    script = render(
        "--scheduler",
        "slurm",
        "--nodes",
        "2",
        "--spare-nodes",
        "1",
        "--max-restarts",
        "2",
        "--launcher",
        "srun",
    )
    assert "#SBATCH --nodes=3\n" in script and "#SBATCH --no-kill\n" in script
    assert "job-setup --scheduler slurm --nodes 2 " in script
    assert 'srun --nodes=2 --ntasks-per-node=1 --overlap --nodelist="$HPCDIST_NODEFILE"' in script
    assert (
        '[ "$status" != 0 ] && python -m hpcdist restart --dir "$run_dir" --status "$status" --max 2 || break'
        in script
    )


@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_pbs_asks_for_the_spares_and_to_tolerate_a_failed_node(launcher):
    script = render(
        "--scheduler",
        "pbs",
        "--nodes",
        "2",
        "--spare-nodes",
        "1",
        "--max-restarts",
        "2",
        "--launcher",
        launcher,
    )
    assert "#PBS -l select=3:ncpus=1:mpiprocs=1\n" in script
    assert "#PBS -W tolerate_node_failures=all\n" in script
    assert "--max-restarts=" not in script  # torchrun's own restarts: none
    torque = render(
        "--scheduler",
        "pbs",
        "--dialect",
        "torque",
        "--nodes",
        "2",
        "--spare-nodes",
        "1",
        "--max-restarts",
        "2",
        "--launcher",
        launcher,
    )
    assert "#PBS -l nodes=3:ppn=1\n" in torque and "tolerate_node_failures" not in torque


def pbs_job_setup(tmp_path, nodefile) -> tuple:
    """A PBS job's environment with ``nodefile``, and the set-up's command for a launch of 2."""
    env = dict(clean_env(), PBS_NODEFILE=str(nodefile), PBS_JOBID="7.server")
    setup = [sys.executable, "-m", "hpcdist", "job-setup", "--scheduler", "pbs", "--nodes", "2",
             "--dir", str(tmp_path), "--master-port", "29999", "--port-unchecked"]
    return env, setup


def test_a_restart_s_set_up_leaves_out_the_bad_nodes_and_a_spare_takes_their_place(tmp_path):
    """job-setup with a node list of three for a launch of two: the first two; after a restart
    that left node2 out, node1 and node3, a new port and HPCDIST_RESTART."""
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("node1\nnode2\nnode3\n")
    env, setup = pbs_job_setup(tmp_path, nodefile)
    first = subprocess.run(setup, env=env, capture_output=True, text=True, timeout=60)
    assert first.stderr.strip() == "hpcdist: nodes: node1 node2; master: node1:29999", first.stderr
    assert (tmp_path / "setup.argv").read_text().split("\0") == setup[4:]
    (tmp_path / "bad_nodes").write_text("node2\n")
    again = subprocess.run(
        setup + ["--restart", "1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert again.stderr.strip() == "hpcdist: nodes: node1 node3; master: node1:29999", again.stderr
    assert (tmp_path / "nodes").read_text() == "node1\nnode3\n"
    assert "export HPCDIST_RESTART=1\n" in (tmp_path / "job.env").read_text()


def _wait_for(path, proc) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def _served(port: int) -> str:
    """What a client of torch's store on ``port`` of this host reads back from it."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=20))
    store.set("asked", f"on {port}")
    return store.get("asked").decode()


def test_the_set_up_holds_torchrun_s_store_and_a_restart_s_the_next_launch_s_in_its_place(tmp_path):
    """A job script's set-up with --hold-store (torchrun on 2 nodes): its node is the master (not
    the node list's first), torch's store serves on the port and its holder's pid is in the run
    folder. A restart's set-up (without node0) ends that holder and holds the next launch's
    store on a new port; once the script has ended, no holder is left."""
    import socket

    from hpcdist.ports import bind_problem
    from hpcdist.progress.monitor import alive

    here = socket.gethostname()
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(f"node0.invalid\n{here}\nnode2.invalid\nspare.invalid\n")
    env, setup = pbs_job_setup(tmp_path, nodefile)
    setup = [w for w in setup if w not in ("--master-port", "29999", "--port-unchecked")]
    restart = ("from hpcdist.injob.restart import set_up_without; import os, sys; "
               "print(set_up_without(sys.argv[1], ['node0.invalid'], os.environ, 1), "
               "file=sys.stderr)")
    script = (f"set -e; {shlex.join(setup)} --hold-store; touch first\n"
              f"while [ ! -e go ]; do sleep 0.1; done; {shlex.join([sys.executable, '-c', restart, str(tmp_path)])}\n"
              f"touch second; while [ ! -e end ]; do sleep 0.1; done\n")
    job = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(tmp_path / "first", job)
        first = int((tmp_path / "store.pid").read_text())
        env_file = (tmp_path / "job.env").read_text()
        assert f"export MASTER_ADDR={here}\n" in env_file
        port = int(re.search(r"^export MASTER_PORT=(\d+)$", env_file, re.M)[1])
        assert _served(port) == f"on {port}"
        (tmp_path / "go").touch()
        _wait_for(tmp_path / "second", job)
        assert not alive(first), "the last launch's holder outlived it"
        env_file = (tmp_path / "job.env").read_text()
        assert f"export MASTER_ADDR={here}\n" in env_file
        new_port = int(re.search(r"^export MASTER_PORT=(\d+)$", env_file, re.M)[1])
        assert bind_problem(port) is None or new_port == port
        second = int((tmp_path / "store.pid").read_text())
        assert second != first and _served(new_port) == f"on {new_port}"
        (tmp_path / "end").touch()
        assert job.wait(timeout=30) == 0, job.stderr.read()
        deadline = time.monotonic() + 5
        while alive(second) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(second), "a holder outlived the job's script"
    finally:
        job.kill()
        job.wait()
    said_lines = job.stderr.read().splitlines()
    assert said_lines[0] == f"hpcdist: nodes: node0.invalid {here}; master: {here}:{port}", said_lines
    assert said_lines[1] == f"hpcdist: nodes: {here} node2.invalid; master: {here}:{new_port}", said_lines


@pytest.mark.parametrize(
    "ranks,problems,verdict",
    [
        # Every rank of a launch that lost a peer sees its connection go: not a fault of the code.
        (
            [
                {
                    "rank": 0,
                    "phase": "failed",
                    "error": "DistBackendError: Connection closed by peer",
                }
            ],
            {},
            (True, "the launch"),
        ),
        (
            [{"rank": 1, "node": "n2", "phase": "failed", "error": "ValueError: x"}],
            {},
            (False, "training's code"),
        ),
        (
            [{"rank": 1, "node": "n2", "phase": "failed", "error": "ValueError: x"}],
            {"n3": "did not answer"},
            (True, "n3 did not answer"),
        ),
        (
            [{"rank": 2, "phase": "failed", "exit": 78, "error": "SystemExit: 78"}],
            {"n3": "did not answer"},
            (False, "asked for no restart"),
        ),
        (
            [{"rank": 1, "node": "n2", "phase": "training"}],
            {},
            (True, "rank 1 on n2 ended without a word"),
        ),
    ],
)
def test_the_verdict_on_a_failed_launch(ranks, problems, verdict):
    from hpcdist.injob.restart import judge

    again, why, spent = judge(1, ranks, problems, {"count": 0, "stalled": 0}, 2)
    assert again == verdict[0] and verdict[1] in why, why
    assert not spent


@pytest.mark.parametrize(
    "ranks,problems,spent",
    [
        # A node named like a verdict's words: "no restart left" is judge's to say, not its text's.
        ([], {"code-7": "did not answer"}, True),
        ([{"rank": 1, "node": "asked-1", "phase": "training"}], {}, True),
        ([{"rank": 1, "node": "n2", "phase": "failed", "error": "ValueError: x"}], {}, False),
        ([{"rank": 2, "phase": "failed", "exit": 78, "error": "SystemExit: 78"}], {}, False),
    ],
)
def test_the_verdict_says_whether_the_restarts_are_used_up(ranks, problems, spent):
    from hpcdist.injob.restart import judge

    verdict = judge(1, ranks, problems, {"count": 2, "stalled": 0}, 2)
    assert not verdict.again and verdict.spent == spent, verdict


def preflight_after_set_up(tmp_path, nodefile, *args) -> tuple:
    """A PBS job's set-up on ``nodefile`` (:func:`pbs_job_setup`), then ``hpcdist restart
    --preflight ARGS``: its environment, the set-up's and the check's commands, the check's run."""
    env, setup = pbs_job_setup(tmp_path, nodefile)
    assert subprocess.run(setup, env=env, capture_output=True, timeout=60).returncode == 0
    env["HPCDIST_NODEFILE"] = str(tmp_path / "nodes")
    check = [sys.executable, "-m", "hpcdist", "restart", "--preflight", "--dir", str(tmp_path), *args]
    return env, setup, check, subprocess.run(check, env=env, capture_output=True, text=True, timeout=120)


def test_preflight_leaves_out_a_node_that_does_not_answer_and_a_spare_takes_its_place(tmp_path):
    """hpcdist restart --preflight on a node list of this host, a host that cannot be reached and
    a spare: the second is left out before any launch. (The unreachable host is a name that does
    not resolve, ssh's quickest failure; a node whose link is down is
    tests/injob/test_restarts_cluster.py's.)"""
    import socket

    here = socket.gethostname()
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(f"{here}\nnode-gone.invalid\nspare.invalid\n")
    env, setup, check, proc = preflight_after_set_up(tmp_path, nodefile)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("hpcdist: preflight: node-gone.invalid did not answer (")
    assert proc.stderr.rstrip().endswith(
        f"left out: node-gone.invalid; nodes: {here} spare.invalid; master: {here}:29999"
    )
    assert (tmp_path / "nodes").read_text() == f"{here}\nspare.invalid\n"
    # No spare left: the job ends, naming the node.
    (tmp_path / "bad_nodes").unlink()
    nodefile.write_text(f"{here}\nnode-gone.invalid\n")
    assert subprocess.run(setup, env=env, capture_output=True, timeout=60).returncode == 0
    proc = subprocess.run(check, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert (
        "no node left to take the place of node-gone.invalid (give --spare-nodes): the job ends."
        in proc.stderr
    )


def test_preflight_is_a_line_of_the_script_before_the_launch():
    script = render(
        "--scheduler",
        "slurm",
        "--nodes",
        "2",
        "--spare-nodes",
        "1",
        "--max-restarts",
        "1",
        "--preflight",
    )
    block = script.split("# Before the launch every node is asked to answer (--preflight)")[1]
    assert block.split("\n")[2:5] == [
        "# left, the job ends naming it.",
        'python -m hpcdist restart --preflight --dir "$run_dir"',
        'source "$run_dir/job.env"',
    ], block[:300]
    assert "--preflight" not in render("--scheduler", "slurm", "--nodes", "2").split("#SBATCH")[-1]


def test_the_restart_and_preflight_lines_carry_the_stage_folder_to_check(tmp_path):
    """With --stage-env, both health checks are told the nodes' stage folder, as written (a
    variable in it expanded on each node)."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    script = render("--scheduler", "slurm", "--nodes", "2", "--max-restarts", "1", "--preflight",
                    "--venv", str(env), "--stage-env", "--stage-dir", "$TMPDIR/stage")
    flat = script.replace("\\\n", " ")
    preflight = r"hpcdist restart --preflight --dir \"\$run_dir\" +--stage-dir '\$TMPDIR/stage'"
    assert re.search(preflight, flat), flat
    assert re.search(r"hpcdist restart --dir .* +--stage-dir '\$TMPDIR/stage'", flat), flat


def test_a_node_whose_stage_folder_cannot_be_written_is_named_with_the_path_and_the_fix(tmp_path):
    """The stage folder is tried by making a file in it (as root, as here, the permission bits
    would not tell): a folder that is a file's path is one no node can write. The preflight
    names this host and leaves it out; with no spare, the job ends naming it."""
    import socket

    from hpcdist.injob.doctor import stage_problem

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert stage_problem(str(tmp_path / "not-yet" / "there")) is None  # the stage makes it
    assert stage_problem("$HPCDIST_NOT_SET_HERE/x") is None  # not judged: ssh lacks the job's
    assert stage_problem(str(blocked / "stage")) == f"{blocked}/stage: {blocked} is not a folder"
    here = socket.gethostname()
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(f"{here}\nnode-gone.invalid\n")
    proc = preflight_after_set_up(tmp_path, nodefile, "--stage-dir", str(blocked / "stage"))[3]
    assert proc.returncode == 1, proc.stderr
    assert (f"{here} cannot write its stage folder ({blocked}/stage: {blocked} is not a folder): "
            "give --stage-dir local storage the job may write on every node (/tmp, $TMPDIR), or "
            "free this one's") in proc.stderr, proc.stderr
    left_out = ", ".join(sorted([here, "node-gone.invalid"]))
    assert f"no node left to take the place of {left_out} (give --spare-nodes)" in proc.stderr


# ------------------------------------------------------------------ --exclude-nodes


def refused(*args) -> str:
    proc = rendering(*args)
    assert proc.returncode != 0 and not proc.stdout, proc.stdout
    return proc.stderr


def test_slurm_is_told_the_nodes_to_leave_out_by_name_or_from_a_job_s_bad_nodes(tmp_path):
    """A follow-up job passes back the bad_nodes file a job with restarts wrote in its folder."""
    script = render("--scheduler", "slurm", "--nodes", "2", "--exclude-nodes", "node[2-3],gpu7")
    assert "#SBATCH --exclude=node2,node3,gpu7\n" in script
    assert "--exclude node" not in script  # Slurm never gives them: the set-up has nothing to do
    bad = tmp_path / "bad_nodes"
    bad.write_text("node2\nnode5  # its GPU 3 fell off the bus\n")
    script = render("--scheduler", "slurm", "--nodes", "2", "--exclude-nodes", f"@{bad}")
    assert "#SBATCH --exclude=node2,node5\n" in script


def test_pbs_cannot_be_told_so_the_job_s_set_up_leaves_them_out_and_a_spare_comes_in(tmp_path):
    script = render("--scheduler", "pbs", "--nodes", "2", "--spare-nodes", "1",
                    "--exclude-nodes", "node2")
    assert "#PBS -l select=3:" in script
    assert "job-setup --scheduler pbs --nodes 2 --dir \"$run_dir\" --exclude node2" in script
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("node1\nnode2\nnode3\n")
    env, setup = pbs_job_setup(tmp_path, nodefile)
    given = subprocess.run(setup + ["--exclude", "node2"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert given.stderr.strip() == (
        "hpcdist: nodes: node1 node3; master: node1:29999; left out (--exclude-nodes): node2"
    ), given.stderr
    nodefile.write_text("node1\nnode2\n")  # no spare asked for
    short = subprocess.run(setup + ["--exclude", "node2"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert short.returncode == 2
    assert "pbs gave the job node2, which --exclude-nodes leaves out" in short.stderr
    assert "--spare-nodes 1" in short.stderr, short.stderr


@pytest.mark.parametrize(
    "value,said",
    [
        ("@/nonexistent/bad_nodes", "cannot be read: No such file or directory"),
        ("node[1-", "is not a node list"),
        (",", "names no node"),
        ("node$(id)", "--exclude-nodes"),
    ],
)
def test_a_wrong_exclude_nodes_is_refused_naming_it_and_the_fix(value, said):
    err = refused("--scheduler", "slurm", "--exclude-nodes", value)
    assert said in err and value in err, err
    assert "node names" in err or "names" in err, err


def test_a_local_job_has_no_node_to_leave_out():
    err = refused("--exclude-nodes", "node2")
    assert "--exclude-nodes" in err and "every node of a local job is this host" in err, err


# ------------------------------------------------------------------ the health check's GPUs

LOST_GPU = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"


@pytest.mark.parametrize(
    "there,here,said",
    [
        (["H100"] * 4, ["H100"] * 4, None),
        (["H100"] * 3, ["H100"] * 4, "has 3 GPU(s) (this node's: 4)"),
        (LOST_GPU, ["H100"] * 4, f"has GPUs nvidia-smi cannot list ({LOST_GPU})"),
        (None, ["H100"], "has no nvidia-smi (this node's lists its GPUs)"),
        (None, None, None),  # a CPU cluster
    ],
)
def test_a_node_whose_gpus_are_not_this_node_s_is_left_out(there, here, said):
    from hpcdist.injob.restart import gpu_problem

    assert gpu_problem(there, here) == said


def test_the_probe_lists_a_node_s_gpus_as_nvidia_smi_does(tmp_path):
    """A stand-in: no GPU here. nvidia-smi is a script that prints what it prints on a node
    whose fourth GPU fell off the bus (three names), and then one that fails as a driver does."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf 'NVIDIA H100\\nNVIDIA H100\\nNVIDIA H100\\n'\n")
    fake.chmod(0o755)
    probe = [sys.executable, "-m", "hpcdist", "doctor", "--probe"]
    env = dict(clean_env(), PATH=f"{tmp_path}:{os.environ['PATH']}")
    said = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(said.stdout.splitlines()[-1])["gpus"] == ["NVIDIA H100"] * 3, said.stdout
    fake.write_text(f"#!/bin/sh\necho '{LOST_GPU}' >&2\nexit 255\n")
    said = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(said.stdout.splitlines()[-1])["gpus"] == LOST_GPU, said.stdout


# ------------------------------------------------------------------ the preflight's all-reduce


def all_reduce_ranks(port: int, world: int, started: int, seconds: str = "8") -> list:
    """``python -m hpcdist.injob.allreduce`` as the preflight starts it, ``started`` of ``world``
    ranks on this host (the others never come): each rank's JSON line."""
    procs = [subprocess.Popen([sys.executable, "-m", "hpcdist.injob.allreduce", f"127.0.0.1:{port}",
                               str(rank), str(world), seconds], stdout=subprocess.PIPE,
                              env=clean_env(), text=True) for rank in range(started)]
    return [json.loads(proc.communicate(timeout=120)[0].splitlines()[-1]) for proc in procs]


def test_the_preflight_s_all_reduce_sums_over_every_node_and_names_one_that_never_joined():
    from hpcdist.ports import choose_port

    every = all_reduce_ranks(choose_port("127.0.0.1"), 2, 2)
    assert [(r["rank"], r["ok"]) for r in every] == [(0, True), (1, True)], every
    short = all_reduce_ranks(choose_port("127.0.0.1"), 3, 2)
    assert not short[0]["ok"] and short[0]["missing"] == [2], short


def test_a_fanned_out_all_reduce_s_spare_and_second_process_on_a_host_take_no_part(tmp_path):
    """One launch on every node (srun's step, pbsdsh's one per slot): a rank is its host's line of
    the order; a host not in it (a spare) and a second process on a host leave at once, silent."""
    import socket

    order = tmp_path / "order"
    order.write_text("spare.invalid\n")
    run = [sys.executable, "-m", "hpcdist.injob.allreduce", "127.0.0.1:1", f"@{order}", "1", "5",
           str(tmp_path)]
    spare = subprocess.run(run, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert (spare.returncode, spare.stdout, os.listdir(tmp_path)) == (0, "", ["order"])
    order.write_text(f"{socket.gethostname()}\n")
    (tmp_path / "0.json").write_text("")  # claimed by the first process on this host
    second = subprocess.run(run, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert (second.returncode, second.stdout) == (0, "")
    (tmp_path / "0.json").unlink()
    from hpcdist.ports import choose_port

    run[3] = f"127.0.0.1:{choose_port('127.0.0.1')}"
    first = subprocess.run(run, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert json.loads((tmp_path / "0.json").read_text())["ok"] is True
