"""The environments other tools build in their own tests and helpers (tests/peer_envs.py: Lightning,
torchrun, submitit, DeepSpeed, accelerate, Flux, Horovod, Cray PALS, LSF) resolve here to the peer's
own answer, field by field, or to a difference listed below with the reason the peer's answer
would be wrong or a guess. Each environment is resolved as a mapping (never sent to mpi4py)."""

from __future__ import annotations

import re

import pytest
from peer_envs import PEER_ENVS, hpcdist_answer, verdict

from hpcdist.env import DistEnvError

#: Where hpcdist does not give the peer's answer: the verdict (or, for an error, words of its
#: message), and per differing field either the words of the error its getter raises (why the
#: peer's answer would be wrong or a guess) or hpcdist's value where the peer's is wrong.
DIFFERENCES = {
    # Lightning's verbatim test values contradict each other: node 3 of a 2-host node list.
    "lightning-slurm-test-attributes": ("SLURM_NODEID=3 but SLURM_NODELIST=1.1.1.1, 1.1.1.2 lists 2 hosts", {}),
    # Local rank 1 on a host that has one slot in the rank file: Lightning answers node 2 anyway.
    "lightning-lsf-test-attributes": ("local rank 1 (JSM_NAMESPACE_LOCAL_RANK=1) is not below the number of "
                                      "processes on this node 1", {}),
    # LOCAL_RANK alone: Lightning assumes node 0 and localhost (it spawns the other processes itself);
    # nothing here says the run is on one node.
    "lightning-env-local-rank-only": ("differs: node_rank, master_addr", {
        "node_rank": "whether this torchrun run spans nodes is unknown", "master_addr": "set WORLD_SIZE"}),
    # GROUP_RANK=1 and nothing else: Lightning's node 1 is for the processes it would start.
    "lightning-env-group-rank-only": ("differs: node_rank", {
        "node_rank": "GROUP_RANK=1 says node 1, but no launcher started this process"}),
    # submitit divides SLURM_NTASKS=8 by SLURM_JOB_NUM_NODES=2: a guess.
    "submitit-slurm-2x4": ("differs: local_world_size", {
        "local_world_size": "need not be even (Slurm places tasks by free CPUs)"}),
    # submitit's 3 // 2 = 1 is wrong: node 0 runs 2 tasks (SLURM_TASKS_PER_NODE=2,1), this one local rank 1.
    "submitit-slurm-uneven": ("differs: local_world_size", {"local_world_size": 2}),
    # accelerate reads no Flux variable: every task local rank 0 of 1. FLUX_TASK_LOCAL_ID=1 is this
    # task's local rank; Flux says no per-node count.
    "accelerate-under-flux": ("differs: local_rank, local_world_size", {
        "local_rank": 1, "local_world_size": "nor is a local size of 1 right"}),
}


@pytest.mark.parametrize("vector", PEER_ENVS, ids=[v["name"] for v in PEER_ENVS])
def test_a_peers_environment_gives_the_peers_answer_or_a_listed_difference(vector, tmp_path):
    answer = hpcdist_answer(vector, str(tmp_path))
    if vector["name"] not in DIFFERENCES:
        assert verdict(vector, answer) in ("same", "same (port: own rule)", "answers (peer errs)"), answer
        return
    expected, fields = DIFFERENCES[vector["name"]]
    if isinstance(answer, str):
        assert expected in answer
        return
    assert verdict(vector, answer) == expected, answer
    env = resolve_vector(vector, tmp_path)
    for field, wanted in fields.items():
        if isinstance(wanted, str):  # unknown: its getter's error says why the peer's value is a guess
            with pytest.raises(DistEnvError, match=re.escape(wanted)):
                env.value(field)
        else:
            assert env.value(field) == wanted


def resolve_vector(vector: dict, tmp_path):
    """The DistEnv itself (hpcdist_answer gives its fields)."""
    from hpcdist.env import resolve

    assert not vector.get("files") and "hostname" not in vector  # none of the differing vectors has them
    return resolve(vector["environ"])


def test_the_differences_name_only_vectors_that_exist():
    assert set(DIFFERENCES) <= {v["name"] for v in PEER_ENVS}


def test_no_rank_is_computed_from_node_rank_and_local_size(tmp_path):
    """Cyclic placement (Flux, torchrun --virtual-local-rank): the rank is the launcher's."""
    for name in ("flux-cyclic-2nodes", "torchrun-virtual-local-rank"):
        (vector,) = [v for v in PEER_ENVS if v["name"] == name]
        assert hpcdist_answer(vector, str(tmp_path))["rank"] == vector["peer_answer"]["rank"]


def test_submitits_even_split_is_not_guessed_and_the_reason_says_how_to_supply_it():
    from hpcdist.env import resolve

    (vector,) = [v for v in PEER_ENVS if v["name"] == "submitit-slurm-2x4"]
    env = resolve(vector["environ"])
    assert env.local_world_size is None
    assert "--ntasks-per-node" in env.unknown["local_world_size"]
    assert "Slurm places tasks by free CPUs" in env.unknown["local_world_size"]
