"""``python -m hpcdist.rank``, the way srun and mpirun start each rank, and MPI after hpcdist's discovery.

Run under the real Open MPI on this host (2 processes); the 2-host runs with
the frameworks themselves are tests/launchers/test_frameworks.py.
"""

from __future__ import annotations

import json
import pathlib
import re
import socket
import subprocess
import sys
import time
from unittest import mock

import pytest

from hpcdist.env import resolve
from hpcdist.rank import prepare
from launch import HIDE_OPENMPI_RANKS, clean_env, framework_views, openmpi_run, run

#: What the batch step of `sbatch --nodes=1 --ntasks-per-node=2` leaves to every rank mpirun forks there,
#: as the issue found it on node2 (SLURM_NTASKS=1 from the step that started Open MPI's daemon).
BATCH_STEP = dict(SLURM_JOB_ID="812", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_NTASKS="1",
                  SLURM_NPROCS="1", SLURM_NTASKS_PER_NODE="1", SLURM_STEP_ID="0", SLURM_STEP_NUM_TASKS="1",
                  SLURM_JOB_NODELIST="localhost", SLURM_TASKS_PER_NODE="2", SLURM_NNODES="1", SLURM_JOB_NAME="x")
#: Keep Open MPI from taking the Slurm variables as its own allocation.
NO_SLURM_MPI = dict(OMPI_MCA_ras="^slurm", OMPI_MCA_plm="^slurm")


def test_prepare_exports_torchruns_variables_and_drops_a_batch_steps():
    environ = dict(BATCH_STEP, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK="1",
                   OMPI_COMM_WORLD_LOCAL_SIZE="2", MASTER_ADDR="node1", MASTER_PORT="20812")
    assert prepare(environ) == []
    assert {k: environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
                                    "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")} == dict(
        RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2", NODE_RANK="0", GROUP_RANK="0",
        MASTER_ADDR="node1", MASTER_PORT="20812")
    assert not [k for k in environ if k in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS",
                                            "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE") or k.startswith("SLURM_STEP_")]
    # The job's own variables stay: they are true for every rank.
    assert (environ["SLURM_JOB_ID"], environ["SLURM_JOB_NODELIST"], environ["SLURM_NNODES"]) == (
        "812", "localhost", "1")


def test_prepare_keeps_an_srun_tasks_own_slurm_variables():
    environ = dict(SLURM_JOB_ID="9", SLURM_STEP_ID="0", SLURM_PROCID="3", SLURM_LOCALID="1", SLURM_NODEID="1",
                   SLURM_NTASKS="4", SLURM_NTASKS_PER_NODE="2", SLURM_STEP_TASKS_PER_NODE="2(x2)",
                   SLURM_JOB_NODELIST="node[1-2]", SLURM_STEP_NODELIST="node[1-2]", MASTER_ADDR="node1")
    before = dict(environ)
    assert prepare(environ) == []
    assert {k: environ[k] for k in before} == before
    assert (environ["RANK"], environ["LOCAL_RANK"], environ["NODE_RANK"], environ["WORLD_SIZE"]) == ("3", "1", "1", "4")


def test_prepare_exports_nothing_when_a_field_is_unknown_and_says_why():
    environ = dict(OMPI_COMM_WORLD_RANK="5", OMPI_COMM_WORLD_SIZE="8", OMPI_COMM_WORLD_LOCAL_RANK="1",
                   OMPI_COMM_WORLD_LOCAL_SIZE="4")
    (said,) = prepare(environ)
    assert said.startswith("hpcdist.rank: exporting no rank variables: torch needs node_rank, master_addr"), said
    assert "RANK" not in environ and "MASTER_ADDR" not in environ


SCRIPT_FACTS = """
import json, os, sys
print(json.dumps(dict(name=__name__, file=__file__, argv=sys.argv, path0=sys.path[0],
                      rank=os.environ.get("RANK"), procid=os.environ.get("SLURM_PROCID"))))
sys.exit(int(sys.argv[1]))
"""


def test_the_script_runs_as_python_would_run_it(tmp_path):
    script = tmp_path / "facts.py"
    script.write_text(SCRIPT_FACTS)
    proc = subprocess.run([sys.executable, "-m", "hpcdist.rank", str(script), "3", "--lr", "-1"],
                          env=clean_env(), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts == dict(name="__main__", file=str(script), argv=[str(script), "3", "--lr", "-1"],
                         path0=str(tmp_path), rank="0", procid=None)


def test_an_exception_shows_the_scripts_traceback_and_exits_1(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("def f():\n    raise RuntimeError('out of data')\nf()\n")
    proc = subprocess.run([sys.executable, "-m", "hpcdist.rank", str(script)], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Traceback (most recent call last):\n  File \"" + str(script)), proc.stderr
    assert proc.stderr.rstrip().endswith("RuntimeError: out of data") and "runpy" not in proc.stderr


#: Standard modules that cost a rank milliseconds each (``re`` and ``socket`` each about half of
#: Python's start); a rank that starts well needs none of them, nor MPI's abort.
SLOW_FOR_A_RANK = ("dataclasses", "inspect", "typing", "re", "enum", "socket", "selectors", "json", "__future__",
                   "hpcdist.env.mpi_discovery")


@pytest.mark.parametrize("ending", ["well", "badly"])
def test_a_rank_imports_nothing_slow(ending, tmp_path):
    """Rank 1 of 4 under Open MPI on 2 nodes of a Slurm job (bench/bench_rank_start.py's): its node
    rank comes from the job's node list and this host's name. MPI's abort loads only when the script
    ends badly, and then without socket or dataclasses."""
    script = tmp_path / "script.py"
    script.write_text("" if ending == "well" else "raise SystemExit(3)\n")
    env = clean_env(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_RANK="1",
                    OMPI_COMM_WORLD_LOCAL_SIZE="2", SLURM_JOB_ID="4242",
                    SLURM_JOB_NODELIST=f"{socket.gethostname()},node2",
                    SLURM_PROCID="0", SLURM_NTASKS="4", SLURM_STEP_ID="4294967291", MASTER_ADDR="node1")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "hpcdist.rank", str(script)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == (0 if ending == "well" else 3), proc.stderr
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "hpcdist.env.derive" in modules  # the node rank was looked for in the node list
    slow = sorted(m for m in modules if m in SLOW_FOR_A_RANK and (ending == "well" or m != "hpcdist.env.mpi_discovery"))
    assert slow == []


def test_lightning_under_mpirun_in_a_slurm_batch_step_sees_the_mpi_ranks(tmp_path):
    """The issue's failing case on one host: every rank inherits the batch step's SLURM_*."""
    pytest.importorskip("lightning")
    view = [str(pathlib.Path(__file__).parent / "job_scripts" / "framework_view.py"),
            "--framework", "fabric", "--nodes", "1", "--steps", "2"]
    env = clean_env(**BATCH_STEP, **NO_SLURM_MPI)
    plain = subprocess.run(openmpi_run(2) + [sys.executable] + view, env=env, capture_output=True, text=True,
                           timeout=120)
    # Without hpcdist.rank Lightning takes its Slurm environment and refuses (what the issue saw on node2).
    assert plain.returncode != 0 and "number of tasks per node configured in SLURM" in plain.stdout + plain.stderr
    proc = run(openmpi_run(2) + [sys.executable, "-m", "hpcdist.rank"] + view, env)
    views = framework_views(proc.stdout)
    assert sorted(v["theirs"]["rank"] for v in views) == [0, 1], proc.stdout
    for v in views:
        assert {k: v["theirs"][k] for k in ("rank", "local_rank", "node_rank", "world_size")} == \
            {k: v["ours"][k] for k in ("rank", "local_rank", "node_rank", "world_size")}
        assert v["same_on_all"] and v["slurm_ntasks"] is None


AFTER_DISCOVERY = HIDE_OPENMPI_RANKS + """
import hpcdist.env
env = hpcdist.env.resolve()          # discovery: hpcdist starts MPI
from mpi4py import MPI               # what Lightning's MPIEnvironment and DeepSpeed do next
import sys
sys.stdout.write(f"{env.sources['world_size']}: size={MPI.COMM_WORLD.Get_size()} "
                 f"sum={MPI.COMM_WORLD.allreduce(env.rank)}\\n")
"""


def test_mpi_stays_usable_after_hpcdists_discovery(tmp_path):
    """The issue's second failure: discovery used to finalize MPI, and Lightning's MPI environment
    then aborted every process ("MPI_Comm_size() function was called after MPI_FINALIZE")."""
    pytest.importorskip("mpi4py")
    script = tmp_path / "after.py"
    script.write_text(AFTER_DISCOVERY)
    proc = run(openmpi_run(2) + ["-x", "HPCDIST_LAUNCHER=mpi4py", sys.executable, str(script)], clean_env())
    assert re.findall(r"[^\n]*: size=\d+ sum=\d+", proc.stdout) == ["MPI COMM_WORLD (mpi4py): size=2 sum=1"] * 2, \
        proc.stdout + proc.stderr


RAISES_IN_COLLECTIVE = HIDE_OPENMPI_RANKS + """
import sys, time
import hpcdist.env
env = hpcdist.env.resolve()          # discovery under python (hpcdist starts MPI); RANK under hpcdist.rank
sys.stderr.write(f"world size from {env.sources['world_size']}\\n")  # one write: ranks' lines stay whole
from mpi4py import MPI               # under hpcdist.rank: the script starts MPI itself
if env.rank == 1:
    time.sleep(1)
    raise RuntimeError("rank 1 ran out of data")
MPI.COMM_WORLD.barrier()             # rank 0 waits for rank 1, which never comes
"""


@pytest.mark.parametrize("start", ["python", "hpcdist.rank"])
def test_an_exception_with_mpi_running_ends_every_rank(start, tmp_path):
    """mpi4py finalizes MPI at exit, which waits for the other ranks: an exception must abort instead."""
    pytest.importorskip("mpi4py")
    script = tmp_path / "raises.py"
    script.write_text(RAISES_IN_COLLECTIVE)
    prefix = [sys.executable] if start == "python" else [sys.executable, "-m", "hpcdist.rank"]
    started = time.monotonic()
    proc = subprocess.run(openmpi_run(2) + ["-x", "HPCDIST_LAUNCHER=mpi4py"] + prefix + [str(script)],
                          env=clean_env(), capture_output=True, text=True, timeout=100)
    assert proc.returncode != 0
    assert "RuntimeError: rank 1 ran out of data" in proc.stderr and "aborting MPI" in proc.stderr, proc.stderr
    assert ("world size from MPI COMM_WORLD (mpi4py)" if start == "python"
            else "world size from WORLD_SIZE=") in proc.stderr, proc.stderr
    assert time.monotonic() - started < 60


def test_a_rank_on_the_second_node_under_mpirun_in_slurm_is_node_1():
    """Open MPI starts its daemon on node2 as a one-node Slurm step: the rank there inherits that
    step's node list (node2 alone) and SLURM_NODEID=0, which are not its run's."""
    environ = dict(SLURM_JOB_ID="7", SLURM_JOB_NODELIST="node[1-2]", SLURM_STEP_NODELIST="node2",
                   SLURM_NODELIST="node2", SLURM_NODEID="0", SLURM_PROCID="0", SLURM_NTASKS="1", SLURM_STEP_ID="1",
                   SLURM_STEP_NUM_NODES="1", OMPI_COMM_WORLD_RANK="2", OMPI_COMM_WORLD_SIZE="4",
                   OMPI_COMM_WORLD_LOCAL_RANK="0", OMPI_COMM_WORLD_LOCAL_SIZE="2")
    with mock.patch.object(socket, "gethostname", return_value="node2"):
        env = resolve(environ)
    assert (env.node_rank, env.master_addr) == (1, "node1"), env.sources


def test_a_job_whose_python_lacks_hpcdist_stops_before_the_launch_saying_so(tmp_path):
    """The hpcdist command can come from elsewhere (pipx); the ranks need the module in their python."""
    bare = tmp_path / "bare-python"
    # The same interpreter without site-packages: no hpcdist (nor anything else installed).
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    (tmp_path / "train.py").write_text("print('the training ran')\n")
    env = clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--launcher", "mpirun",
                           "--procs-per-node", "2", "--python", str(bare), "--wait", "train.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    # The job's set-up runs with the training's python (python -m hpcdist job-setup), before the
    # launch: python itself says the module is missing, and the job ends there.
    assert proc.returncode != 0
    assert ": No module named hpcdist\n" in proc.stdout + proc.stderr
    assert "the training ran" not in proc.stdout
