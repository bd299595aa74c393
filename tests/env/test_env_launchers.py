"""hpcdist.env under the real launchers: torchrun, Open MPI's mpirun, MPICH's mpiexec.

Each launcher starts 2 processes on this host; each runs ``hpcdist env --json``.
Every process must report a distinct rank, the right local rank and world size.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from launch import HIDE_OPENMPI_RANKS, clean_env, env_json_per_process, mpich_run, openmpi_run, run, torchrun


def assert_two_local_ranks(results: list[dict], launcher: str) -> None:
    assert len(results) == 2, results
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert sorted(r["local_rank"] for r in results) == [0, 1]
    for r in results:
        assert (r["world_size"], r["local_world_size"], r["node_rank"]) == (2, 2, 0), r
        assert r["launcher"] == launcher, r
    # Every rank agrees on where to meet.
    assert len({(r["master_addr"], r["master_port"]) for r in results}) == 1


def test_torchrun(tmp_path):
    results = env_json_per_process(torchrun(2), tmp_path, clean_env())
    assert_two_local_ranks(results, "torchrun")
    assert all(r["sources"]["rank"].startswith("RANK=") for r in results)


def test_openmpi_mpirun(tmp_path):
    results = env_json_per_process(openmpi_run(2), tmp_path, clean_env())
    assert_two_local_ranks(results, "openmpi")
    assert {r["sources"]["rank"] for r in results} == {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_RANK=1"}


def test_mpich_mpiexec(tmp_path):
    results = env_json_per_process(mpich_run(2), tmp_path, clean_env())
    assert_two_local_ranks(results, "mpich")
    assert {r["sources"]["rank"] for r in results} == {"PMI_RANK=0", "PMI_RANK=1"}


def test_mpirun_inside_a_slurm_batch_step_uses_mpi_values(tmp_path):
    # The batch step's SLURM_PROCID=0 is inherited by every MPI rank.
    batch = dict(SLURM_JOB_ID="812", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0",
                 SLURM_NTASKS="2", SLURM_JOB_NODELIST="localhost", SLURM_TASKS_PER_NODE="2")
    env = clean_env(**batch)
    # Keep Open MPI from taking the Slurm variables as its own allocation.
    env["OMPI_MCA_ras"] = "^slurm"
    env["OMPI_MCA_plm"] = "^slurm"
    results = env_json_per_process(openmpi_run(2), tmp_path, env)
    assert_two_local_ranks(results, "openmpi")
    assert {r["master_port"] for r in results} == {20812}


def test_mpi4py_discovery_when_only_pmix_is_left(tmp_path):
    """An MPI launch with no usable rank variables: ranks come from MPI itself."""
    pytest.importorskip("mpi4py")
    strip = "env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_LOCAL_RANK " \
            "-u OMPI_COMM_WORLD_LOCAL_SIZE "
    results = env_json_per_process(openmpi_run(2), tmp_path, clean_env(), shell_prefix=strip)
    assert_two_local_ranks(results, "mpi4py")
    for r in results:
        assert "mpi4py" in r["sources"]["local_rank"]
        assert "mpi4py" in r["sources"]["node_rank"]


#: PALS's PMIx mode (Aurora's mpiexec --pmi=pmix) stood in for by Open MPI's mpirun, a real PMIx
#: server on this host: each rank gets the PALS variables of that mode from Open MPI's own values
#: (PALS_RANKID, PALS_LOCAL_RANKID, PALS_LOCAL_SIZE, PALS_NODEID; tests/launcher_envs.py), and loses
#: OMPI_COMM_WORLD_*: PMIX_RANK and no PMI_*, as under PALS.
AS_PALS_PMIX = ("PALS_APID=test PALS_NODEID=0 PALS_RANKID=$OMPI_COMM_WORLD_RANK "
                "PALS_LOCAL_RANKID=$OMPI_COMM_WORLD_LOCAL_RANK PALS_LOCAL_SIZE=$OMPI_COMM_WORLD_LOCAL_SIZE env "
                "-u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_LOCAL_RANK "
                "-u OMPI_COMM_WORLD_LOCAL_SIZE ")


def test_pals_pmix_mode_asks_mpi_for_the_world_size_alone(tmp_path):
    """The world size is all the variables do not say: with mpi4py MPI says it; without (a
    mpi4py package that fails to import stands in for a machine without it), it stays unknown,
    saying what to install, and the rest is still answered."""
    pytest.importorskip("mpi4py")
    for folder in ("with", "without", "hidden/mpi4py"):
        (tmp_path / folder).mkdir(parents=True)
    results = env_json_per_process(openmpi_run(2), tmp_path / "with", clean_env(), shell_prefix=AS_PALS_PMIX)
    assert_two_local_ranks(results, "pals")
    for r in results:
        assert r["sources"]["world_size"] == "MPI COMM_WORLD (mpi4py)"
        assert r["sources"]["rank"].startswith("PALS_RANKID=") and r["sources"]["node_rank"] == "PALS_NODEID=0"
    hidden = tmp_path / "hidden"
    (hidden / "mpi4py" / "__init__.py").write_text("raise ImportError('no mpi4py on this machine')\n")
    results = env_json_per_process(openmpi_run(2), tmp_path / "without", clean_env(PYTHONPATH=str(hidden)),
                                   shell_prefix=AS_PALS_PMIX)
    assert sorted((r["rank"], r["local_rank"], r["local_world_size"], r["node_rank"]) for r in results) == [
        (0, 0, 2, 0), (1, 1, 2, 0)]
    for r in results:
        assert r["world_size"] is None and r["master_addr"] is None
        why = r["sources"]["world_size"]
        assert "PMIx mode" in why and "pip install 'hpcdist[mpi]'" in why and "WORLD_SIZE" in why, why


TRAIN_STEP = """
import torch, torch.distributed as dist
import hpcdist.env as henv
env = henv.init_distributed(timeout=60)
t = torch.tensor([float(env.rank + 1)])
dist.all_reduce(t)
print(f"rank={env.rank} launcher={env.launcher} backend={dist.get_backend()} sum={t.item()}", flush=True)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.parametrize("launch", ["torchrun", "openmpi", "mpich"])
def test_init_distributed_all_reduce(launch, tmp_path):
    """init_distributed() sets up gloo under every launcher; an all_reduce really sums."""
    pytest.importorskip("torch")
    script = tmp_path / "step.py"
    script.write_text(TRAIN_STEP)
    argv = {"torchrun": lambda: torchrun(2, no_python=False),
            "openmpi": lambda: openmpi_run(2) + [sys.executable],
            "mpich": lambda: mpich_run(2) + [sys.executable]}[launch]()
    proc = run(argv + [str(script)], clean_env())
    # Two processes share one pipe: lines may run into each other.
    lines = sorted(re.findall(r"rank=\d+ launcher=\S+ backend=\S+ sum=[\d.]+", proc.stdout))
    expected_launcher = {"torchrun": "torchrun", "openmpi": "openmpi", "mpich": "mpich"}[launch]
    assert lines == [f"rank={r} launcher={expected_launcher} backend=gloo sum=3.0" for r in (0, 1)]


DIES = HIDE_OPENMPI_RANKS + """
import sys, time
import hpcdist.env
env = hpcdist.env.resolve()
assert "mpi4py" in env.sources["world_size"], env.sources  # discovery started MPI
if env.rank == 1:
    time.sleep(1)
    sys.exit("rank 1 gives up")
time.sleep(120)
"""


def test_a_dead_rank_ends_mpirun_after_mpi4py_discovery(tmp_path):
    """Discovery initialised MPI; a rank that then dies must still end the whole job."""
    pytest.importorskip("mpi4py")
    import time

    script = tmp_path / "dies.py"
    script.write_text(DIES)
    started = time.monotonic()
    proc = subprocess.run(openmpi_run(2) + ["-x", "HPCDIST_LAUNCHER=mpi4py", sys.executable, str(script)],
                          env=clean_env(), capture_output=True, text=True, timeout=100)
    assert proc.returncode != 0 and "rank 1 gives up" in proc.stderr
    assert time.monotonic() - started < 60


def test_user_code_keeps_its_own_mpi4py(tmp_path):
    """Code that imported mpi4py first can still use MPI after hpcdist's discovery."""
    pytest.importorskip("mpi4py")
    script = tmp_path / "own.py"
    script.write_text(HIDE_OPENMPI_RANKS + "from mpi4py import MPI\nimport hpcdist.env\nenv = hpcdist.env.resolve()\n"
                      "assert 'mpi4py' in env.sources['world_size'], env.sources\n"
                      "import sys\nsys.stdout.write(f'sum={MPI.COMM_WORLD.allreduce(env.rank)}\\n')\n")
    proc = run(openmpi_run(2) + ["-x", "HPCDIST_LAUNCHER=mpi4py", sys.executable, str(script)], clean_env())
    # One write per rank, but the two ranks share a pipe: their lines may still run into each other.
    assert re.findall(r"sum=\d+", proc.stdout) == ["sum=1", "sum=1"], proc.stdout
