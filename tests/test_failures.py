"""Naming the rank that failed first (hpcdist.failures) and ending a pdsh launch (hpcdist supervise).

The launcher excerpts below are copies of what the real launchers printed
on the test cluster (torchrun 2.13, srun 22.05, Open MPI 4.1, DeepSpeed
0.19) and here (MPICH 4.0); the end-to-end proof, real jobs on every
launcher, is tests/launchers/test_matrix.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hpcdist.failures import first_failure
from launch import clean_env

TORCHRUN_KILLED = """\
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_13:52:59
  host      : node2
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 30884)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 30884
"""
SRUN_KILLED = """\
srun: error: node2: task 3: Killed
srun: error: node2: task 2: Terminated
srun: error: node1: tasks 0-1: Terminated
"""
OPENMPI_KILLED = """\
--------------------------------------------------------------------------
mpirun noticed that process rank 3 with PID 32082 on node node2 exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""
OPENMPI_EXIT = """\
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[13604,1],3]
  Exit code:    3
--------------------------------------------------------------------------
"""
MPICH_KILLED = """\
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 20975 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
"""
#: HPE Cray PALS's mpiexec: as Aurora printed it (pmodels/mpich#7605), and as the test cluster's
#: PALS stand-in (tests/cluster/pals-mpiexec) prints a rank's exit.
PALS_SIGNAL = "x4213c4s7b0n0.hsn.cm.aurora.alcf.anl.gov: rank 27 died from signal 6\n"
PALS_EXIT = "node2: rank 3 exited with code 1\n"
DEEPSPEED_KILLED = """\
node2: [2026-11-22 13:55:37,697] [INFO] [launch.py:169:main] global_rank_mapping=defaultdict(\
<class 'list'>, {'node1': [0, 1], 'node2': [2, 3]})
node2: [2026-11-22 13:55:47,763] [ERROR] [launch.py:259:sigkill_handler] \
['/work/main/.venv/bin/python3', '-u', 'failing_training.py', '--local_rank=1', \
'--fail-rank', '3'] exits with return code = -9
"""
#: Open MPI 4.1's refusal as root (a job submitted without the two variables), as the local backend logged it.
OPENMPI_ROOT = """\
hpcdist: nodes: vm; master: 127.0.0.1:27716
--------------------------------------------------------------------------
mpirun has detected an attempt to run as root.

Running as root is *strongly* discouraged as any mistake (e.g., in
defining TMPDIR) or bug can result in catastrophic damage to the OS
file system, leaving your system in an unusable state.

We strongly suggest that you run mpirun as a non-root user.
--------------------------------------------------------------------------
"""
#: A job whose python has no hpcdist: python's own line, then the job script's (its set-up's check).
NO_HPCDIST = """\
/usr/bin/python3: No module named hpcdist
hpcdist: /usr/bin/python3 on node1 cannot import hpcdist; give the job a python that has it: --venv PATH, \
--conda ENV, --module NAME or --python PATH
"""
REPORTS = """\
node1: hpcdist: rank 0/4 (local rank 0 on node1) failed at 2026-11-22T13:55:24.930+00:00: \
RuntimeError: [pair.cc:553] Connection closed by peer [10.213.0.12]:19128
node2: hpcdist: rank 3/4 (local rank 1 on node2) failed at 2026-11-22T13:55:24.020+00:00: \
ValueError: injected failure at step 5
node1: hpcdist: rank 1/4 (local rank 1 on node1) failed at 2026-11-22T13:55:24.001+00:00: \
RuntimeError: Connection reset by peer
"""


@pytest.mark.parametrize("log,agents,expected", [
    (TORCHRUN_KILLED, True, "rank 3 (local rank 1) on node2: killed by signal 9 (SIGKILL) [from torchrun]"),
    (SRUN_KILLED, False, "rank 3 on node2: Killed [from srun]"),
    (OPENMPI_KILLED, False, "rank 3 on node2: signal 9 (Killed) [from mpirun]"),
    (OPENMPI_EXIT, False, "rank 3: exit code 3 [from mpirun]"),
    (MPICH_KILLED, False, "a rank on vm: Killed (signal 9) [from mpiexec]"),
    (DEEPSPEED_KILLED, False, "rank 3 (local rank 1) on node2: killed by signal 9 (SIGKILL) [from deepspeed]"),
    # One launcher per node under srun: "task 1" is node2's agent, not rank 1.
    ("hpcdist: nodes: node1 node2; master: node1:20017\n" + SRUN_KILLED.replace("task 3", "task 1")
     + DEEPSPEED_KILLED.replace("node2: ", "", 2), True,
     "rank 3 (local rank 1) on node2: killed by signal 9 (SIGKILL) [from deepspeed]"),
    # torchrun agents spread by mpirun (PBS): mpirun's "rank" 1 is the agent on the second host of the
    # line a torchrun job writes (its MASTER_ADDR:MASTER_PORT is the rendezvous, not the ranks' master).
    ("hpcdist: nodes: node1 node2; torchrun rendezvous: node1:20017 (torchrun gives the ranks their own master)\n"
     + OPENMPI_EXIT.replace("1],3]", "1],1]"), True, "a rank on node2: exit code 3 [from mpirun]"),
    # One host, no pdsh prefix (a local DeepSpeed launch): the mapping's one host.
    (DEEPSPEED_KILLED.replace("node2: ", "").replace("'node1': [0, 1], 'node2': [2, 3]", "'localhost': [0, 1, 2, 3]"),
     False, "rank 1 (local rank 1) on localhost: killed by signal 9 (SIGKILL) [from deepspeed]"),
    (PALS_SIGNAL, False, "rank 27 on x4213c4s7b0n0.hsn.cm.aurora.alcf.anl.gov: signal 6 [from mpiexec (PALS)]"),
    (PALS_EXIT, False, "rank 3 on node2: exit code 1 [from mpiexec (PALS)]"),
    # Agents spread by PALS (--ppn 1): its "rank" 1 is the second node's agent.
    (PALS_EXIT.replace("rank 3", "rank 1"), True, "a rank on node2: exit code 1 [from mpiexec (PALS)]"),
    (OPENMPI_ROOT, False, "Open MPI's mpirun: it refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT=1 and "
                          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; set both, e.g. --env OMPI_ALLOW_RUN_AS_ROOT=1 --env "
                          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, or submit as another user [from mpirun]"),
    # The same refusal where mpirun spreads torchrun's agents (PBS).
    (OPENMPI_ROOT, True, "Open MPI's mpirun: it refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT=1 and "
                         "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; set both, e.g. --env OMPI_ALLOW_RUN_AS_ROOT=1 --env "
                         "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, or submit as another user [from mpirun]"),
    (NO_HPCDIST, False, "the job's set-up on node1: /usr/bin/python3 cannot import hpcdist; give "
                        "the job a python that has it: --venv PATH, --conda ENV, --module NAME or "
                        "--python PATH [from the job script's check]"),
    ("nothing went wrong\n", False, None),
], ids=["torchrun", "srun", "openmpi-signal", "openmpi-exit", "mpich", "deepspeed", "agents", "agents-torchrun",
         "deepspeed-one-host", "pals-signal", "pals-exit", "pals-agents", "openmpi-root", "openmpi-root-agents",
        "no-hpcdist", "none"])
def test_launcher_lines_name_the_rank(log, agents, expected):
    found = first_failure(log, agents)
    assert (str(found) if found else None) == expected


def test_the_earliest_report_of_a_cause_wins_over_symptoms():
    # Rank 1's "connection reset" came first in time, but it is a peer's death seen from outside.
    assert str(first_failure(REPORTS)).startswith(
        "rank 3 (local rank 1) on node2 at 2026-11-22T13:55:24.020+00:00: ValueError: injected failure at step 5")


def test_a_killed_rank_beats_the_symptoms_it_caused():
    found = first_failure(REPORTS.splitlines()[0] + "\n" + SRUN_KILLED)
    assert str(found) == "rank 3 on node2: Killed [from srun]"


def test_a_rank_reports_its_own_uncaught_exception():
    code = textwrap.dedent("""
        import hpcdist.env, hpcdist.failures
        hpcdist.failures.report_failures(hpcdist.env.resolve())
        raise KeyError("no such column: 'label'")
    """)
    env = clean_env(RANK="2", WORLD_SIZE="4", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2", NODE_RANK="1",
                    MASTER_ADDR="n1", MASTER_PORT="29500")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[-2] == "KeyError: \"no such column: 'label'\""  # Python's own traceback is kept, first
    found = first_failure(proc.stderr)
    assert (found.rank, found.local_rank, found.why) == (2, 0, "KeyError: \"no such column: 'label'\"")


def supervise(script: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "supervise", "--", "bash", "-c", script],
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - started


# pdsh's failed-node line is FAKED here with echo: making a real pdsh node
# fail needs the test cluster, where tests/launchers/test_matrix.py does it for real.
def test_supervise_ends_the_launch_when_pdsh_reports_a_failed_node():
    proc, took = supervise('trap "echo launcher got TERM; exit 1" TERM; '
                           'echo "pdsh@node1: node2: ssh exited with exit code 3" >&2; '
                           'sleep 50 & wait')
    assert took < 20
    assert proc.returncode == 1
    assert "pdsh@node1: node2: ssh exited with exit code 3" in proc.stderr  # passed through
    assert "the launcher on node2 exited with code 3; ending the launch on every node" in proc.stderr
    assert "launcher got TERM" in proc.stdout


def test_supervise_ends_what_the_launcher_started_in_a_session_of_its_own(tmp_path):
    """pdsh starts each ssh with setsid(): out of the launcher's process group. Left running, an
    ssh kept its node's ranks attached after the job's end (the real OpenPBS's DeepSpeed row).
    supervise returns only once what it killed has ended: a killed process runs on until the
    kernel schedules it, and under load the job's clean-up looked before that (the state was R).
    The child's start time tells it from a process that took its pid since."""
    pid_file = tmp_path / "pid"
    proc, took = supervise(f"setsid sleep 300 >/dev/null 2>&1 & echo $! $(cut -d' ' -f22 /proc/$!/stat) > {pid_file}; "
                           'echo "pdsh@node1: node2: ssh exited with exit code 1" >&2; sleep 50 & wait')
    pid, started = pid_file.read_text().split()
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        state = fields[0] if fields[19] == started else "gone"
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z"), f"the launcher's setsid child {pid} is still running ({state})"
    assert took < 20 and proc.returncode == 128 + signal.SIGTERM


def test_supervise_kills_a_launcher_that_ignores_the_request():
    from hpcdist.injob.supervise import supervise as run

    started = time.monotonic()
    code = run(["bash", "-c", 'trap "" TERM; echo "pdsh@a: b: ssh exited with exit code 1" >&2; sleep 60'],
               grace=1)
    assert time.monotonic() - started < 15
    assert code == 128 + signal.SIGKILL


def test_supervise_passes_the_exit_code_and_leaves_success_alone():
    proc, _ = supervise('echo "pdsh@a: b: ssh exited with exit code 0" >&2; echo done; exit 0')
    assert (proc.returncode, proc.stdout) == (0, "done\n")
    assert supervise("exit 7")[0].returncode == 7


def test_supervise_forwards_scancel_to_the_launcher():
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist", "supervise", "--", "bash", "-c",
                             'trap "echo launcher got TERM; exit 143" TERM; echo ready; sleep 60 >/dev/null & wait'],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143
    assert proc.stdout.read() == "launcher got TERM\n"


def test_supervise_ends_a_pdsh_launch_on_scancel_without_the_runners_own_pkill():
    """SIGTERM to a DeepSpeed pdsh launch: the runner is not asked (its handler pkills every
    `python -u -m deepspeed.launcher.launch` of its Python on the nodes: another job's too).
    supervise ends the runner, its pdsh and their processes here, and pkills over pdsh only this
    launch's launchers (matched by --world_info and --master_port). The "pdsh" is a stand-in
    process with pdsh's name and command line (reaching nodes needs the test cluster: there
    tests/schedulers/test_cluster.py's decoy launcher, of the same world_info, must survive)."""
    stand_in = (f'exec -a pdsh {sys.executable} -c "import time; time.sleep(300)" -w n1 '
                '"python -u -m deepspeed.launcher.launch --world_info=e30= --node_rank=%n --master_port=29999"')
    proc = subprocess.Popen([sys.executable, "-m", "hpcdist", "supervise", "--", "bash", "-c",
                             f'trap "echo launcher got TERM; exit 143" TERM; ({stand_in}) & echo ready; wait'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 10
    while not subprocess.run(["pgrep", "-f", "world_info=e30= --node_rank"], capture_output=True).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert "launcher got TERM" not in out, err
    assert proc.returncode == 128 + signal.SIGKILL, err
    left = subprocess.run(["pgrep", "-af", "world_info=e30= --node_rank"], capture_output=True, text=True).stdout
    assert not left, left
