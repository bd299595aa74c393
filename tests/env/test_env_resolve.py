"""hpcdist.env.resolve() on the variables each launcher really sets.

The environments are those launchers' own (see shared/reference/launchers.md
section 1, and the cases of Lightning's, DeepSpeed's and submitit's test
suites); the Slurm ones were dumped from real srun steps and batch steps.
"""

from __future__ import annotations

import sys
import warnings

import pytest

import hpcdist.env as henv
from hpcdist.env import DistEnvError, UndistributedWarning, resolve
from hpcdist.ports import PORT_BASE, PORT_SPAN, port_for_job


@pytest.fixture(autouse=True)
def _fresh_warnings():
    henv._warned.clear()
    yield
    henv._warned.clear()


def torchrun(rank, local, world, lws, group, **extra):
    env = {
        "TORCHELASTIC_RUN_ID": "none", "RANK": str(rank), "LOCAL_RANK": str(local),
        "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(lws), "GROUP_RANK": str(group),
        "ROLE_RANK": str(rank), "GROUP_WORLD_SIZE": str(world // lws),
        "MASTER_ADDR": "node1.cluster", "MASTER_PORT": "29500",
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
    }
    env.update(extra)
    return env


def openmpi(rank, local, world, lws, **extra):
    env = {
        "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(lws),
        # Not a node index: the docs say "relative rank on this node across all jobs".
        "OMPI_COMM_WORLD_NODE_RANK": str(local), "PMIX_RANK": str(rank), "OMPI_UNIVERSE_SIZE": str(world),
    }
    env.update(extra)
    return env


def srun_step(procid, localid, nodeid, ntasks, gtids, nodelist, tasks_per_node, **extra):
    env = {
        "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train", "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist, "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_NTASKS": str(ntasks),
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_TASKS_PER_NODE": tasks_per_node,
        "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid), "SLURM_NODEID": str(nodeid),
        "SLURM_GTIDS": gtids, "SLURM_STEP_NUM_NODES": "2", "SLURM_LAUNCH_NODE_IPADDR": "10.9.9.9",
    }
    env.update(extra)
    return env


BATCH_STEP = {
    "SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "train", "SLURM_JOB_NODELIST": "node[1-2]",
    "SLURM_NODELIST": "node[1-2]", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4",
    "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0", "SLURM_GTIDS": "0", "SLURM_JOB_NUM_NODES": "2",
}


# (id, environment, expected fields)
CASES = [
    ("outside any launcher", {}, dict(
        rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0,
        master_addr="127.0.0.1", master_port=29500, launcher="single")),
    ("torchrun node 2 of 2", torchrun(5, 1, 8, 4, 1), dict(
        rank=5, local_rank=1, world_size=8, local_world_size=4, node_rank=1,
        master_addr="node1.cluster", master_port=29500, launcher="torchrun")),
    ("torchrun with an empty run id still counts", torchrun(1, 1, 2, 2, 0, TORCHELASTIC_RUN_ID=""), dict(
        rank=1, launcher="torchrun")),
    # c10d: RANK need not be group_rank*lws + local_rank; never recomputed.
    ("torchrun c10d rank order", torchrun(0, 1, 4, 2, 1), dict(rank=0, local_rank=1, node_rank=1)),
    ("torchrun --virtual-local-rank", torchrun(3, 0, 4, 2, 1), dict(rank=3, local_rank=0)),
    ("torchrun inside srun: torchrun's values win",
     torchrun(3, 1, 4, 2, 1, **srun_step(1, 0, 1, 2, "1", "node[1-2]", "1(x2)")), dict(
        rank=3, local_rank=1, world_size=4, local_world_size=2, node_rank=1, launcher="torchrun")),
    ("torchrun inside mpirun: torchrun's values win",
     torchrun(2, 0, 4, 2, 1, **openmpi(1, 0, 2, 1)), dict(rank=2, world_size=4, launcher="torchrun")),
    ("torchrun inside an sbatch batch step", torchrun(1, 1, 2, 2, 0, **BATCH_STEP), dict(
        rank=1, world_size=2, launcher="torchrun")),
    ("deepspeed launch over pdsh", {
        "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_SIZE": "2", "CROSS_RANK": "1",
        "CROSS_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}, dict(
        rank=3, local_rank=1, world_size=4, local_world_size=2, node_rank=1,
        master_addr="10.0.0.1", launcher="deepspeed")),
    ("deepspeed mpich helper (RANK from PMI_RANK)", {
        "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_SIZE": "2",
        "PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
        "MASTER_ADDR": "n1", "MASTER_PORT": "29500"}, dict(rank=1, launcher="deepspeed", node_rank=0)),
    ("openmpi one node", openmpi(1, 1, 2, 2), dict(
        rank=1, local_rank=1, world_size=2, local_world_size=2, node_rank=0,
        master_addr="127.0.0.1", launcher="openmpi")),
    ("openmpi NODE_RANK is not read", openmpi(0, 0, 2, 2, OMPI_COMM_WORLD_NODE_RANK="7"), dict(node_rank=0)),
    ("openmpi across nodes with MASTER_ADDR and NODE_RANK",
     openmpi(5, 1, 8, 4, MASTER_ADDR="node1", NODE_RANK="1"), dict(
        rank=5, node_rank=1, master_addr="node1", launcher="openmpi")),
    ("mpirun inside an sbatch script: MPI's values, not the batch step's",
     openmpi(3, 1, 4, 2, MASTER_ADDR="node1", NODE_RANK="1", **BATCH_STEP), dict(
        rank=3, local_rank=1, world_size=4, launcher="openmpi", master_port=PORT_BASE + 77)),
    ("openmpi with RANK exported by export_torch_env", openmpi(
        1, 1, 2, 2, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2"), dict(
        rank=1, launcher="openmpi")),
    ("mpich hydra", {"PMI_RANK": "1", "PMI_SIZE": "2", "PMI_FD": "6", "MPI_LOCALRANKID": "1",
                     "MPI_LOCALNRANKS": "2"}, dict(
        rank=1, local_rank=1, world_size=2, local_world_size=2, launcher="mpich")),
    ("intel mpi with PMIx", {"PMI_RANK": "0", "PMI_SIZE": "4", "PMIX_RANK": "0", "MPI_LOCALRANKID": "0",
                             "MPI_LOCALNRANKS": "4"}, dict(rank=0, world_size=4, launcher="mpich")),
    ("mvapich", {"MV2_COMM_WORLD_RANK": "2", "MV2_COMM_WORLD_SIZE": "4",
                 "MV2_COMM_WORLD_LOCAL_RANK": "0", "MV2_COMM_WORLD_LOCAL_SIZE": "2",
                 "MASTER_ADDR": "gpu01", "NODE_RANK": "1"}, dict(
        rank=2, local_rank=0, node_rank=1, master_addr="gpu01", launcher="mvapich")),
    ("cray pals", {"PALS_RANKID": "3", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1",
                   "PALS_LOCAL_SIZE": "2", "PMI_RANK": "3", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1",
                   "PMI_LOCAL_SIZE": "2", "PALS_APID": "x", "MASTER_ADDR": "x1000c0s0b0n0",
                   "PBS_JOBID": "9.pbs01"}, dict(
        rank=3, local_rank=1, world_size=4, local_world_size=2, node_rank=1, launcher="pals",
        master_port=PORT_BASE + 9)),
    ("flux on one node", {"FLUX_TASK_RANK": "1", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "2",
                          "FLUX_JOB_NNODES": "1", "FLUX_JOB_ID": "ƒ2X3", "PMI_RANK": "1",
                          "PMI_SIZE": "2"}, dict(rank=1, local_world_size=2, launcher="flux")),
    ("horovod gloo", {"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
                      "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2",
                      "HOROVOD_CONTROLLER": "gloo", "MASTER_ADDR": "h1",
                      "HOROVOD_GLOO_RENDEZVOUS_ADDR": "driver"}, dict(
        rank=3, node_rank=1, master_addr="h1", launcher="horovod")),
    ("lsf jsrun, Spectrum MPI's OMPI_* agree", {
        "LSB_JOBID": "1234", "JSM_NAMESPACE_RANK": "1", "JSM_NAMESPACE_SIZE": "2",
        "JSM_NAMESPACE_LOCAL_RANK": "1", "JSM_NAMESPACE_LOCAL_SIZE": "2",
        "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, dict(
        rank=1, launcher="lsf", master_port=PORT_BASE + 1234)),
    ("srun block, second node", srun_step(3, 1, 1, 4, "2,3", "node[1-2]", "2(x2)"), dict(
        rank=3, local_rank=1, world_size=4, local_world_size=2, node_rank=1,
        master_addr="node1", master_port=PORT_BASE + 4242, launcher="slurm")),
    # --distribution=cyclic: rank 1 is on node 2; never rank = node*lws + local.
    ("srun cyclic", srun_step(1, 0, 1, 4, "1,3", "node[1-2]", "2(x2)", SLURM_DISTRIBUTION="cyclic"), dict(
        rank=1, local_rank=0, node_rank=1, master_addr="node1")),
    ("srun uneven -n3 -N2, second node", srun_step(2, 0, 1, 3, "2", "node[1-2]", "2,1"), dict(
        rank=2, local_rank=0, world_size=3, local_world_size=1, node_rank=1)),
    ("srun uneven without SLURM_GTIDS", {
        k: v for k, v in srun_step(1, 1, 0, 3, "", "node[1-2]", "2,1").items() if k != "SLURM_GTIDS"}, dict(
        local_world_size=2)),
    ("srun sub-step: step variables, not the job's", srun_step(
        1, 1, 0, 2, "0,1", "node2", "2", SLURM_JOB_NODELIST="node[1-2]", SLURM_NODELIST="node[1-2]",
        SLURM_STEP_NUM_NODES="1"), dict(world_size=2, master_addr="node2", node_rank=0)),
    ("srun multi-bracket node list", srun_step(
        0, 0, 0, 4, "0,1", "rack[1-2]-node[01-04]", "2(x2)"), dict(master_addr="rack1-node01")),
    ("srun with an explicit MASTER_ADDR and MASTER_PORT", srun_step(
        0, 0, 0, 4, "0,1", "node[1-2]", "2(x2)", MASTER_ADDR="node1-ib", MASTER_PORT="12345"), dict(
        master_addr="node1-ib", master_port=12345)),
    ("srun with RANK exported by export_torch_env", srun_step(
        3, 1, 1, 4, "2,3", "node[1-2]", "2(x2)", RANK="3", LOCAL_RANK="1", WORLD_SIZE="4"), dict(
        rank=3, launcher="slurm")),
    ("srun task without a step id, rank > 0", {
        k: v for k, v in srun_step(1, 1, 0, 2, "0,1", "n1", "2").items() if k != "SLURM_STEP_ID"}, dict(
        rank=1, launcher="slurm")),
    ("submitit", srun_step(1, 1, 0, 2, "0,1", "node1", "2", SUBMITIT_EXECUTOR="slurm"), dict(
        rank=1, launcher="submitit")),
    ("submitit local executor", {"SUBMITIT_EXECUTOR": "local", "SUBMITIT_LOCAL_NTASKS": "2",
                                 "SUBMITIT_LOCAL_GLOBALID": "1", "SUBMITIT_LOCAL_LOCALID": "1",
                                 "SUBMITIT_LOCAL_NODEID": "0", "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
                                 "SUBMITIT_LOCAL_JOB_ID": "4321"}, dict(
        rank=1, world_size=2, local_world_size=2, node_rank=0, launcher="submitit",
        master_addr="127.0.0.1", master_port=PORT_BASE + 4321)),
    ("salloc shell", {"SLURM_JOB_ID": "5", "SLURM_JOB_NAME": "interactive", "SLURM_NTASKS": "4",
                      "SLURM_NODELIST": "n[1-2]"}, dict(rank=0, world_size=1, launcher="single")),
    ("ssh into an allocated node", {"SLURM_JOB_ID": "5"}, dict(launcher="single", master_port=PORT_BASE + 5)),
    ("one-task batch step", {**BATCH_STEP, "SLURM_NTASKS": "1", "SLURM_NPROCS": "1"}, dict(
        launcher="single", world_size=1)),
    ("pbs batch script, no launcher", {"PBS_JOBID": "1234.pbs01", "PBS_ENVIRONMENT": "PBS_BATCH"}, dict(
        launcher="single", master_port=PORT_BASE + 1234)),
    ("kubeflow pod with LOCAL_RANK set", {"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0",
                                          "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "2", "MASTER_ADDR": "job-master-0",
                                          "MASTER_PORT": "23456"}, dict(
        rank=2, world_size=4, local_rank=0, local_world_size=1, launcher="torchrun",
        master_addr="job-master-0")),
    ("env:// on one node without a marker", {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                                              "LOCAL_WORLD_SIZE": "2"}, dict(
        rank=1, node_rank=0, master_addr="127.0.0.1", launcher="torchrun")),
    ("RANK=0 WORLD_SIZE=1 alone", {"RANK": "0", "WORLD_SIZE": "1"}, dict(rank=0, local_world_size=1)),
    ("HPCDIST_LAUNCHER picks openmpi over torchrun's marker", {
        **openmpi(1, 1, 2, 2), "TORCHELASTIC_RUN_ID": "x", "HPCDIST_LAUNCHER": "openmpi"}, dict(
        rank=1, launcher="openmpi")),
    ("whitespace around values", openmpi(1, 1, 2, 2, OMPI_COMM_WORLD_RANK=" 1\n"), dict(rank=1)),
    ("array job on PBS: a port per sub-job", {"PBS_JOBID": "1234[5].pbs01"}, dict(
        master_port=port_for_job("1234[5].pbs01"))),
]


@pytest.mark.parametrize("environ,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_resolve(environ, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these may warn
        env = resolve(environ)
    got = {name: getattr(env, name) for name in expected}
    assert got == expected
    assert set(env.sources) >= {"rank", "local_rank", "world_size", "local_world_size",
                                "node_rank", "master_addr", "master_port", "launcher"}


def test_sources_name_the_variables():
    env = resolve(srun_step(3, 1, 1, 4, "2,3", "node[1-2]", "2(x2)"))
    assert env.sources["rank"] == "SLURM_PROCID=3"
    assert env.sources["world_size"] == "SLURM_STEP_NUM_TASKS=4"
    assert "SLURM_GTIDS" in env.sources["local_world_size"]
    assert "SLURM_STEP_NODELIST" in env.sources["master_addr"]
    assert "SLURM_JOB_ID=4242" in env.sources["master_port"]


# (id, environment, substrings every message must contain)
ERRORS = [
    ("RANK contradicts PMI_RANK", {"PMI_RANK": "1", "PMI_SIZE": "2", "RANK": "0",
                                   "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
     ["RANK=0", "PMI_RANK=1", "unset"]),
    ("LOCAL_RANK contradicts OMPI_COMM_WORLD_LOCAL_RANK", openmpi(1, 1, 2, 2, LOCAL_RANK="0"),
     ["LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_RANK=1"]),
    ("PMIX_RANK contradicts OMPI_COMM_WORLD_RANK", openmpi(1, 1, 2, 2, PMIX_RANK="0"),
     ["PMIX_RANK=0", "OMPI_COMM_WORLD_RANK=1"]),
    ("stale RANK in an srun step", srun_step(1, 1, 0, 2, "0,1", "n1", "2", RANK="0"),
     ["SLURM_PROCID=1", "RANK=0"]),
    ("stale WORLD_SIZE in an srun step", srun_step(1, 1, 0, 2, "0,1", "n1", "2", WORLD_SIZE="8"),
     ["WORLD_SIZE=8", "SLURM_STEP_NUM_TASKS=2"]),
    ("rank not below world size", openmpi(2, 0, 2, 2), ["rank 2", "OMPI_COMM_WORLD_RANK=2",
                                                      "world size 2"]),
    ("local rank not below local size", {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "2",
                                         "MPI_LOCALNRANKS": "2"}, ["local rank 2", "MPI_LOCALRANKID=2"]),
    ("torchrun rank not below world size", torchrun(4, 0, 4, 2, 0), ["rank 4", "RANK=4", "WORLD_SIZE=4"]),
    ("more local than global ranks", openmpi(0, 0, 2, 4), ["4 processes on this node", "only 2"]),
    ("empty RANK under torchrun", torchrun(0, 0, 2, 2, 0, RANK=""), ["RANK=''", "global rank"]),
    ("non-integer OMPI rank", openmpi(0, 0, 2, 2, OMPI_COMM_WORLD_RANK="one"),
     ["OMPI_COMM_WORLD_RANK='one'", "not a non-negative integer"]),
    ("non-ASCII digits", openmpi(0, 0, 2, 2, OMPI_COMM_WORLD_RANK="١"), ["OMPI_COMM_WORLD_RANK='١'"]),
    ("a sign is not an integer", openmpi(0, 0, 2, 2, OMPI_COMM_WORLD_RANK="+1"), ["'+1'"]),
    ("NUL in PBS_NODEFILE", {"PBS_VNODENUM": "0", "PBS_NODEFILE": "a\x00b"}, ["PBS_NODEFILE", "cannot be read"]),
    ("negative SLURM_PROCID", srun_step(0, 0, 0, 2, "0,1", "n1", "2", SLURM_PROCID="-1"),
     ["SLURM_PROCID='-1'"]),
    ("empty MASTER_ADDR", openmpi(0, 0, 2, 2, MASTER_ADDR=" "), ["MASTER_ADDR", "empty"]),
    ("MASTER_PORT out of range", openmpi(0, 0, 2, 2, MASTER_PORT="70000"), ["MASTER_PORT=70000"]),
    ("unknown HPCDIST_LAUNCHER", {"HPCDIST_LAUNCHER": "mpirun"}, ["HPCDIST_LAUNCHER='mpirun'", "openmpi"]),
    ("srun: SLURM_NODEID beyond the step's node counts", {
        k: v for k, v in srun_step(0, 0, 3, 4, "", "n[1-2]", "2(x2)").items() if k != "SLURM_GTIDS"},
     ["SLURM_NODEID=3", "SLURM_STEP_TASKS_PER_NODE=2(x2)"]),
    ("srun with a malformed node list", srun_step(0, 0, 0, 2, "0,1", "n[1-", "2"),
     ["SLURM_STEP_NODELIST", "n[1-"]),
]


@pytest.mark.parametrize("environ,needles", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_name_variables_and_values(environ, needles):
    with pytest.raises(DistEnvError) as info:
        resolve(environ)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in: {message}"


# (id, environment, {unknown field: substrings its reason must contain}, {known field: value}):
# what the environment does not say is unknown, each field alone; the rest is answered.
UNKNOWNS = [
    ("torchrun without LOCAL_RANK", {k: v for k, v in torchrun(0, 0, 2, 2, 0).items() if k != "LOCAL_RANK"},
     {"local_rank": ["torchrun", "LOCAL_RANK", "not set"]},
     {"rank": 0, "world_size": 2, "master_addr": "node1.cluster"}),
    # Multi-node MPI run: the master cannot be guessed; a mapping is never sent to mpi4py.
    ("multi-node openmpi without a master", openmpi(5, 1, 8, 4),
     {"master_addr": ["openmpi run spans nodes", "8 ranks, 4 on this node", "MASTER_ADDR", "mpi4py"],
      "node_rank": ["NODE_RANK", "mpi4py"]},
     {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4}),
    ("multi-node mpich without a master", {"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0",
                                           "MPI_LOCALNRANKS": "2", "NODE_RANK": "0"},
     {"master_addr": ["mpich run spans nodes", "master address", "MASTER_ADDR"]}, {"node_rank": 0, "rank": 0}),
    ("PMIx only", {"PMIX_RANK": "3"},
     {"world_size": ["mpi4py", "world size"], "local_rank": ["mpi4py"], "local_world_size": ["mpi4py"],
      "node_rank": ["whether this mpi4py run spans nodes", "LOCAL_WORLD_SIZE"], "master_addr": ["mpi4py"]},
     {"rank": 3}),
    ("RANK and WORLD_SIZE without LOCAL_RANK", {"RANK": "1", "WORLD_SIZE": "4"},
     {"local_rank": ["LOCAL_RANK", "guess"], "local_world_size": ["LOCAL_WORLD_SIZE", "guess"],
      "node_rank": ["LOCAL_WORLD_SIZE"], "master_addr": ["LOCAL_WORLD_SIZE"]},
     {"rank": 1, "world_size": 4}),
    ("LOCAL_RANK alone", {"LOCAL_RANK": "1"},
     {"rank": ["RANK", "not set"], "world_size": ["WORLD_SIZE", "not set"], "local_world_size": ["LOCAL_WORLD_SIZE"],
      "node_rank": ["LOCAL_WORLD_SIZE"], "master_addr": ["LOCAL_WORLD_SIZE"]},
     {"local_rank": 1}),
    ("LOCAL_RANK with NODE_RANK", {"LOCAL_RANK": "2", "NODE_RANK": "3", "MASTER_ADDR": "1.2.3.4"},
     {"rank": ["RANK"], "world_size": ["WORLD_SIZE"], "local_world_size": ["LOCAL_WORLD_SIZE"]},
     {"local_rank": 2, "node_rank": 3, "master_addr": "1.2.3.4"}),
    ("srun across nodes with arbitrary placement and no MASTER_ADDR", srun_step(
        0, 0, 0, 4, "0,1", "n[1-2]", "2(x2)", SLURM_DISTRIBUTION="arbitrary"),
     {"master_addr": ["slurm run spans nodes", "MASTER_ADDR"]}, {"rank": 0, "node_rank": 0, "local_world_size": 2}),
]


@pytest.mark.parametrize("environ,unknown,known", [c[1:] for c in UNKNOWNS], ids=[c[0] for c in UNKNOWNS])
def test_what_the_environment_does_not_say_is_unknown_alone(environ, unknown, known, monkeypatch):
    env = resolve(environ)
    assert set(env.unknown) == set(unknown)
    for field, needles in unknown.items():
        assert getattr(env, field) is None and env.sources[field].startswith("unknown: ")
        with pytest.raises(DistEnvError) as info:
            env.value(field)
        for needle in needles:
            assert needle in str(info.value), f"{needle!r} not in: {info.value}"
    for field, value in known.items():
        assert env.value(field) == value
    # torch needs every field: the error names each unknown one.
    with pytest.raises(DistEnvError) as info:
        env.torch_env()
    assert all(field in str(info.value) for field in unknown)
    # The getters: each raises for its own field only. The process's own environment would be
    # sent to mpi4py (installed here): hidden, as on a machine without it.
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setattr("os.environ", dict(environ))
    henv._reset()
    try:
        for field, value in known.items():
            assert getattr(henv, f"get_{field}")() == value
        for field in unknown:
            with pytest.raises(DistEnvError, match=f"the {field.replace('_', ' ')} is unknown"):
                getattr(henv, f"get_{field}")()
    finally:
        henv._reset()


def test_batch_step_of_a_multi_task_job_warns_once_and_runs_one_process():
    with pytest.warns(UndistributedWarning, match=r"batch step.*srun") as record:
        first = resolve(BATCH_STEP)
    assert (first.rank, first.world_size, first.launcher) == (0, 1, "single")
    assert first.master_port == PORT_BASE + 77
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = resolve(BATCH_STEP)  # a second resolution does not warn again
    assert again == first


def test_pbs_batch_script_with_several_slots_warns(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("n1\nn1\nn2\nn2\n")
    with pytest.warns(UndistributedWarning, match="4 slots"):
        env = resolve({"PBS_JOBID": "12.srv", "PBS_NODEFILE": str(nodefile)})
    assert env.world_size == 1


def test_pbsdsh_task_reads_its_slot_in_the_node_file(tmp_path):
    nodefile = tmp_path / "nodes"
    # Lines of one host need not be adjacent.
    nodefile.write_text("n1\nn2\nn1\nn2\n")
    env = resolve({"PBS_JOBID": "12.srv", "PBS_NODEFILE": str(nodefile), "PBS_VNODENUM": "2",
                   "PBS_TASKNUM": "17", "PBS_NODENUM": "0"})
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size, env.node_rank) == (2, 1, 4, 2, 0)
    assert (env.master_addr, env.launcher) == ("n1", "pbs")


def test_lsf_rankfile_gives_master_and_node_rank(tmp_path, monkeypatch):
    import socket

    rankfile = tmp_path / "ranks"
    rankfile.write_text("launch\nc1\nc1\nc2\nc2\n")
    monkeypatch.setattr(socket, "gethostname", lambda: "c2")
    env = resolve({"LSB_JOBID": "7", "LSB_DJOB_RANKFILE": str(rankfile), "JSM_NAMESPACE_RANK": "2",
                   "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_LOCAL_RANK": "0",
                   "JSM_NAMESPACE_LOCAL_SIZE": "2"})
    assert (env.master_addr, env.node_rank, env.launcher) == ("c1", 1, "lsf")


def test_mpirun_in_a_slurm_job_takes_node_rank_and_master_from_the_node_list(monkeypatch):
    """Open MPI's own variables say no node and no master; the batch job's node list does (rank
    0 runs on the job's first host, and this host's place in the list is its node rank)."""
    import socket

    monkeypatch.setattr(socket, "gethostname", lambda: "gpu2.cluster.org")
    job = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_NTASKS": "8", "SLURM_PROCID": "0"}
    env = resolve(openmpi(5, 1, 8, 4, **job))
    assert (env.node_rank, env.master_addr, env.unknown) == (1, "gpu1", {})
    assert env.sources["node_rank"] == "position of gpu2 among the hosts of SLURM_JOB_NODELIST=gpu[1-2]"
    assert env.sources["master_addr"] == "first host of SLURM_JOB_NODELIST=gpu[1-2]"
    # A host the list does not name: the node rank stays unknown, the master is still the first host.
    monkeypatch.setattr(socket, "gethostname", lambda: "login1")
    env = resolve(openmpi(5, 1, 8, 4, **job))
    assert (env.node_rank, env.master_addr) == (None, "gpu1") and "NODE_RANK" in env.unknown["node_rank"]


def test_mpich_in_a_pbs_job_takes_local_size_node_rank_and_master_from_the_node_file(tmp_path, monkeypatch):
    """Hydra without MPI_LOCALNRANKS: $PBS_NODEFILE, one line per rank, says them all."""
    import socket

    nodefile = tmp_path / "nodes"
    nodefile.write_text("x1\nx1\nx1\nx2\nx2\nx2\n")
    monkeypatch.setattr(socket, "gethostname", lambda: "x2")
    env = resolve({"PMI_RANK": "4", "PMI_SIZE": "6", "PBS_JOBID": "12.pbs", "PBS_NODEFILE": str(nodefile)})
    assert (env.local_world_size, env.node_rank, env.master_addr) == (3, 1, "x1")
    assert env.local_rank is None  # nothing says it; never rank - node x local size
    # A node file that is not the run's ranks (mpirun -np 4 over 6 slots) says no local size.
    env = resolve({"PMI_RANK": "3", "PMI_SIZE": "4", "PBS_JOBID": "12.pbs", "PBS_NODEFILE": str(nodefile)})
    assert env.local_world_size is None


def test_torch_env_is_the_env_protocol():
    env = resolve(openmpi(1, 1, 2, 2, SLURM_JOB_ID="31"))
    assert env.torch_env() == {
        "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
        "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(PORT_BASE + 31),
    }
    # What export_torch_env() leaves behind resolves to the same answer.
    assert resolve({**openmpi(1, 1, 2, 2, SLURM_JOB_ID="31"), **env.torch_env()}) == env


def test_distenv_is_a_frozen_dataclass_with_read_only_sources():
    import copy
    import dataclasses
    import pickle

    env = resolve(openmpi(1, 1, 2, 2))
    assert dataclasses.is_dataclass(env) and dataclasses.is_dataclass(type(env))
    assert [f.name for f in dataclasses.fields(env)] == [
        "rank", "local_rank", "world_size", "local_world_size", "node_rank", "master_addr",
        "master_port", "launcher", "sources"]
    assert dataclasses.asdict(env)["sources"]["rank"] == "OMPI_COMM_WORLD_RANK=1"
    moved = dataclasses.replace(env, rank=0)
    assert (moved.rank, moved.world_size, moved.sources) == (0, 2, env.sources)
    assert pickle.loads(pickle.dumps(env)) == env == copy.deepcopy(env)
    assert hash(env) == hash(copy.copy(env)) and env != moved
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.rank = 3
    with pytest.raises(TypeError):
        env.sources["rank"] = "x"
    with pytest.raises(TypeError):
        env.sources.update(rank="x")


@pytest.mark.parametrize("job_id", ["1", "4242", "99999999", "1234.pbs-server.example", "12[3].srv", "ƒABC"])
def test_derived_ports_stay_below_the_ephemeral_range(job_id):
    port = port_for_job(job_id)
    assert PORT_BASE <= port < PORT_BASE + PORT_SPAN <= 32768


def test_consecutive_jobs_get_different_ports():
    assert len({port_for_job(str(n)) for n in range(1000, 1000 + PORT_SPAN)}) == PORT_SPAN


def test_getters_resolve_once(monkeypatch):
    import os

    henv._reset()
    monkeypatch.setattr(os, "environ", {**openmpi(1, 1, 2, 2)})
    try:
        assert (henv.get_rank(), henv.get_local_rank(), henv.get_world_size(),
                henv.get_local_world_size(), henv.get_node_rank(), henv.get_master_addr(),
                henv.detect_launcher()) == (1, 1, 2, 2, 0, "127.0.0.1", "openmpi")
        monkeypatch.setattr(os, "environ", {})
        assert henv.get_rank() == 1  # cached, not resolved again
    finally:
        henv._reset()


# Every variable any launcher family reads, and values that are numbers, near-numbers or junk.
from hypothesis import given, settings, strategies as st  # noqa: E402

from hpcdist.env import model  # noqa: E402
from hpcdist.env.detectors import DETECTION_ORDER  # noqa: E402

_NAMES = sorted(
    {v for launcher in DETECTION_ORDER for names in launcher.variables.values() for v in names}
    | {m for launcher in DETECTION_ORDER for m in launcher.markers}
    | {a for names in model.ALIASES.values() for a in names}
    | {"MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_GTIDS",
       "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_DISTRIBUTION",
       "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_NUM_NODES", "SLURM_NODELIST",
       "GROUP_RANK", "PALS_NODEID", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "PBS_JOBID",
       "PBS_NODEFILE", "LSB_DJOB_RANKFILE", "FLUX_JOB_NNODES",
       "HPCDIST_LAUNCHER", "SUBMITIT_EXECUTOR"}
)
_VALUES = st.one_of(
    st.integers(0, 5).map(str),
    st.sampled_from(["", " ", "-1", "1.5", "x", "2(x2)", "n[1-2]", "n[1-", "slurm", "openmpi",
                     "/nonexistent", "/dev/null", "4294967291", "arbitrary", "0\x00", "１"]),
    st.text(max_size=8),
)


_BASES = [c[1] for c in CASES] + [BATCH_STEP, {"PBS_VNODENUM": "1", "PBS_NODEFILE": "/dev/null"}]


@st.composite
def _environments(draw):
    """A real launcher's environment with a few variables changed, dropped or added."""
    environ = dict(draw(st.sampled_from(_BASES)))
    for name in draw(st.lists(st.sampled_from(_NAMES), max_size=4)):
        if draw(st.booleans()) and name in environ:
            del environ[name]
        else:
            environ[name] = draw(_VALUES)
    return environ


@settings(max_examples=3000, deadline=None)
@given(st.one_of(_environments(), st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=10)))
def test_any_environment_resolves_or_raises_distenverror(environ):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndistributedWarning)
        try:
            env = resolve(environ)
        except DistEnvError as e:
            assert str(e)
            return
    for field, reason in env.unknown.items():  # unknown fields say why; the getter raises that
        assert reason and getattr(env, field) is None
        with pytest.raises(DistEnvError):
            env.value(field)
    if None not in (env.rank, env.world_size):
        assert 0 <= env.rank < env.world_size
    if None not in (env.local_rank, env.local_world_size, env.world_size):
        assert 0 <= env.local_rank < env.local_world_size <= env.world_size
    assert env.master_addr is None or env.master_addr
    assert 0 <= env.master_port <= 65535


def test_every_schedulers_job_id_variable_is_seen_by_the_light_check():
    """A rank's lookup outside any job imports no scheduler module to learn that it is in none
    (hpcdist.env.model.in_a_job): each job id variable's name must end as that check expects."""
    from hpcdist.env.model import JOB_ID_SUFFIXES, in_a_job
    from hpcdist.env.job_id import job_id_variables

    for name in job_id_variables():
        assert name.endswith(JOB_ID_SUFFIXES), name
        assert in_a_job({name: "1"})
    assert not in_a_job({"PATH": "/usr/bin", "HOME": "/root"})
