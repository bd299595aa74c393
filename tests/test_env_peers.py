"""The environments other tools build in their own tests and helpers (tests/peer_envs.py: Lightning,
torchrun, submitit, DeepSpeed, accelerate, Flux, Horovod, Cray PALS, LSF) resolve here to the peer's
own answer, field by field, or to a difference listed below with the reason the peer's answer
would be wrong or a guess. Each environment is resolved as a mapping (never sent to mpi4py)."""

from __future__ import annotations

import pytest
from peer_envs import PEER_ENVS, hpcdist_answer, verdict

#: Where hpcdist does not give the peer's answer: the verdict (or, for an error, words of its
#: message), and why.
DIFFERENCES = {
    # Lightning's verbatim test values contradict each other: node 3 of a 2-host node list.
    "lightning-slurm-test-attributes": "SLURM_NODEID=3 but SLURM_NODELIST=1.1.1.1, 1.1.1.2 lists 2 hosts",
    # Local rank 1 on a host that has one slot in the rank file: Lightning answers node 2 anyway.
    "lightning-lsf-test-attributes": "local rank 1 (JSM_NAMESPACE_LOCAL_RANK=1) is not below the number of processes "
                                     "on this node 1",
    # LOCAL_RANK alone: Lightning assumes node 0 and localhost (it spawns the other processes itself);
    # nothing here says the run is on one node, so both stay unknown.
    "lightning-env-local-rank-only": "differs: node_rank, master_addr",
    # GROUP_RANK=1 and nothing else: one process, which is one node (node 0), whatever GROUP_RANK
    # meant for the processes Lightning would start.
    "lightning-env-group-rank-only": "differs: node_rank",
    # SLURM_NTASKS=8 over SLURM_JOB_NUM_NODES=2 need not be 4 a node: Slurm places tasks by free
    # CPUs (submitit divides; hpcdist leaves it unknown and says to use --ntasks-per-node).
    "submitit-slurm-2x4": "differs: local_world_size",
    # submitit's 3 // 2 = 1 is wrong: node 0 runs 2 tasks (SLURM_TASKS_PER_NODE=2,1), this one local rank 1.
    "submitit-slurm-uneven": "differs: local_world_size",
    # accelerate reads no Flux variable: it gives every task local rank 0 of 1. FLUX_TASK_LOCAL_ID=1
    # is the task's local rank; Flux says no per-node count, so that stays unknown.
    "accelerate-under-flux": "differs: local_rank, local_world_size",
}


@pytest.mark.parametrize("vector", PEER_ENVS, ids=[v["name"] for v in PEER_ENVS])
def test_a_peers_environment_gives_the_peers_answer_or_a_listed_difference(vector, tmp_path):
    answer = hpcdist_answer(vector, str(tmp_path))
    expected = DIFFERENCES.get(vector["name"])
    if expected is None:
        assert verdict(vector, answer) in ("same", "same (port: own rule)", "answers (peer errs)"), answer
    elif isinstance(answer, str):
        assert expected in answer
    else:
        assert verdict(vector, answer) == expected, answer


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
