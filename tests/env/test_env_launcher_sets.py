"""Issue 14: rank resolution under the launchers of real PBS sites and PMIx launches, from their
real variable sets (tests/launcher_envs.py says where each comes from), without mpi4py.

Each vector is resolved as the rank's own environment (``os.environ``) with mpi4py hidden, as on
a machine without it: discovery is tried and cannot run, so what is answered comes from the
variables and the node file alone, and what is not says what to install or set.
"""

from __future__ import annotations

import os
import socket
import sys

import pytest
from launcher_envs import LAUNCHER_ENVS

import hpcdist.env as henv
from hpcdist.env import DistEnvError


def as_the_process_environment(vector: dict, tmp_path, monkeypatch) -> dict:
    """The vector's variables as os.environ (its files written), its host name, no mpi4py."""
    environ = dict(vector["environ"])
    for variable, text in vector.get("files", {}).items():
        path = tmp_path / variable
        path.write_text(text)
        environ[variable] = str(path)
    monkeypatch.setattr(os, "environ", environ)
    monkeypatch.setattr(socket, "gethostname", lambda: vector["hostname"])
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    henv._reset()
    return environ


@pytest.fixture(autouse=True)
def _forget_the_answer():
    yield
    henv._reset()


@pytest.mark.parametrize("vector", LAUNCHER_ENVS, ids=[v["name"] for v in LAUNCHER_ENVS])
def test_a_launchers_real_variables_resolve_without_mpi4py(vector, tmp_path, monkeypatch):
    as_the_process_environment(vector, tmp_path, monkeypatch)
    env = henv.current()
    got = {field: getattr(env, field) for field in vector["answer"]}
    assert got == vector["answer"], env.sources
    assert set(env.unknown) == set(vector["unknown"]), env.unknown
    for field, needles in vector["unknown"].items():
        with pytest.raises(DistEnvError) as info:  # what the user's getter says
            getattr(henv, f"get_{field}")()
        for needle in needles:
            assert needle in str(info.value), f"{needle!r} not in: {info.value}"


def test_hpcdists_torque_mpich_ranks_export_every_field_without_mpi4py(tmp_path, monkeypatch):
    """python -m hpcdist.rank, as hpcdist's Torque + MPICH script starts each rank: every rank gets
    RANK ... MASTER_PORT, its node rank from its host's place in $PBS_NODEFILE."""
    from hpcdist.rank import prepare

    seen = []
    for vector in [v for v in LAUNCHER_ENVS if v["name"].startswith("hpcdist-torque-mpich-")]:
        environ = as_the_process_environment(vector, tmp_path, monkeypatch)
        assert prepare(environ) == []  # no "exporting no rank variables: ..."
        seen.append((environ["RANK"], environ["LOCAL_RANK"], environ["NODE_RANK"], environ["GROUP_RANK"],
                     environ["WORLD_SIZE"], environ["MASTER_ADDR"], environ["MASTER_PORT"]))
    assert seen == [("0", "0", "0", "0", "4", "node1", "20001"), ("1", "1", "0", "0", "4", "node1", "20001"),
                    ("2", "0", "1", "1", "4", "node1", "20001"), ("3", "1", "1", "1", "4", "node1", "20001")]


def test_pals_pmix_mode_names_how_to_get_the_world_size_and_gives_the_rest(tmp_path, monkeypatch):
    """Aurora's --pmi=pmix: one field unknown, with its three remedies; torch's error names it alone."""
    (vector,) = [v for v in LAUNCHER_ENVS if v["name"] == "aurora-pals-pmix-rank13"]
    as_the_process_environment(vector, tmp_path, monkeypatch)
    env = henv.current()
    assert env.sources["master_addr"].startswith("first host of PBS_NODEFILE=")
    assert env.sources["node_rank"] == "PALS_NODEID=1"
    with pytest.raises(DistEnvError, match="torch needs world_size, which") as info:
        env.torch_env()
    assert "master_addr" not in str(info.value)
    # Passed to every rank, WORLD_SIZE completes it.
    monkeypatch.setitem(os.environ, "WORLD_SIZE", "24")
    henv._reset()
    assert henv.current().torch_env()["WORLD_SIZE"] == "24"
