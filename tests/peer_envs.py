"""Test vectors for issue 13: the environments other tools build in their own tests and helpers,
and what each of those tools derives from them.

Data, and :func:`hpcdist_answer` and :func:`verdict` to compare; no tests here (the name does
not match ``test_*.py``): tests/env/test_env_peers.py checks each vector, and
``bench/peer_env_table.py`` prints hpcdist's answer next to each peer's.

Each entry of :data:`PEER_ENVS` is a dict:

- ``name``: unique id; ``peer``: the tool whose answer ``peer_answer`` is;
- ``source``: ``owner/repo:path`` and the test or helper the environment comes from;
- ``environ``: the variables, as the peer's test or helper sets them (str -> str). Where a
  variable names a file (``LSB_DJOB_RANKFILE``, ``PBS_NODEFILE``), ``files`` holds the file's
  text under the variable's name: the test writes it to a temporary path and points the
  variable there (the value in ``environ`` is a placeholder);
- ``hostname`` (optional): what the peer's test makes ``socket.gethostname()`` return;
- ``peer_answer``: the fields the peer itself derives (rank, local_rank, world_size,
  local_world_size, node_rank, master_addr, master_port), exactly as the peer's code returns
  them; a field the peer does not give is left out;
- ``peer_error`` (optional): what the peer raises instead, for the fields it cannot give;
- ``note``: one line: what is special, what was adapted or inferred, where the peer is wrong.

Ports: a peer's port derived from the job id (Lightning: ``15000 + int(SLURM_JOB_ID[-4:])``,
LSF ``10000 + LSB_JOBID % 1000``, submitit ``random.Random(job_id).randint(20000, 60000)``) is
a convention, not a fact of the environment; only a ``MASTER_PORT`` that is set must match.
"""

LIGHTNING = "Lightning-AI/pytorch-lightning"
L_TESTS = f"{LIGHTNING}:tests/tests_fabric/plugins/environments"
L_SRC = f"{LIGHTNING}:src/lightning/fabric/plugins/environments"
SUBMITIT = "facebookincubator/submitit"
DS = "deepspeedai/DeepSpeed:deepspeed/launcher"
ACCEL = "huggingface/accelerate:src/accelerate"

#: The environment of Lightning's test_slurm.py::test_attributes_from_environment_variables.
_LIGHTNING_SLURM = {
    "SLURM_NODELIST": "1.1.1.1, 1.1.1.2",
    "SLURM_JOB_ID": "0001234",
    "SLURM_NTASKS": "20",
    "SLURM_NTASKS_PER_NODE": "10",
    "SLURM_LOCALID": "2",
    "SLURM_PROCID": "1",
    "SLURM_NODEID": "3",
    "SLURM_JOB_NAME": "JOB",
}


#: What horovodrun --gloo sets next to the ranks (gloo_run.py); the rendezvous is the driver's.
_HOROVOD_GLOO = {"PYTHONUNBUFFERED": "1", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.11.11.10",
                 "HOROVOD_GLOO_RENDEZVOUS_PORT": "41234", "HOROVOD_CONTROLLER": "gloo",
                 "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": "eth0",
                 "NCCL_SOCKET_IFNAME": "eth0"}

def _lightning_nodelist(nodelist: str, hosts: int, first: str) -> dict:
    """A node list of test_main_address_from_slurm_node_list, inside a consistent srun task."""
    return {
        "name": f"lightning-slurm-nodelist-{nodelist}",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_slurm.py::test_main_address_from_slurm_node_list + "
                  f"test_attributes_from_environment_variables; {L_SRC}/slurm.py::SLURMEnvironment",
        "environ": {**_LIGHTNING_SLURM, "SLURM_NODELIST": nodelist, "SLURM_NTASKS": str(2 * hosts),
                    "SLURM_NTASKS_PER_NODE": "2", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
                    "SLURM_NODEID": "1"},
        "peer_answer": {"rank": 3, "local_rank": 1, "world_size": 2 * hosts, "node_rank": 1,
                        "master_addr": first, "master_port": 16234},
        "note": f"adapted: the test sets only SLURM_NODELIST; task variables made consistent with its "
                f"{hosts} hosts (2 per node, block). Lightning's master is the list's first host.",
    }


PEER_ENVS = [
    # ---------------------------------------------------------------- Lightning SLURMEnvironment
    {
        "name": "lightning-slurm-test-attributes",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_slurm.py::test_attributes_from_environment_variables; "
                  f"{L_SRC}/slurm.py::SLURMEnvironment",
        "environ": dict(_LIGHTNING_SLURM),
        "peer_answer": {"rank": 1, "local_rank": 2, "world_size": 20, "node_rank": 3,
                        "master_addr": "1.1.1.1", "master_port": 16234},
        "note": "verbatim. Node list with a space after the comma. The values contradict each other "
                "(SLURM_NODEID=3 with 2 hosts and 20 tasks at 10 per node): Lightning never checks.",
    },
    {
        "name": "lightning-slurm-multinode",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_slurm.py::test_attributes_from_environment_variables; "
                  f"{L_SRC}/slurm.py::SLURMEnvironment",
        "environ": {**_LIGHTNING_SLURM, "SLURM_NODELIST": "1.1.1.1,1.1.1.2", "SLURM_PROCID": "12",
                    "SLURM_NODEID": "1"},
        "peer_answer": {"rank": 12, "local_rank": 2, "world_size": 20, "node_rank": 1,
                        "master_addr": "1.1.1.1", "master_port": 16234},
        "note": "adapted from the test: SLURM_NODEID 3->1 and SLURM_PROCID 1->12 so 2 nodes x 10 tasks "
                "hold together. No SLURM_GTIDS / SLURM_STEP_TASKS_PER_NODE: only SLURM_NTASKS_PER_NODE.",
    },
    {
        "name": "lightning-slurm-single-node",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_slurm.py::test_attributes_from_environment_variables; "
                  f"{L_SRC}/slurm.py::SLURMEnvironment",
        "environ": {**_LIGHTNING_SLURM, "SLURM_NODELIST": "1.1.1.1", "SLURM_NTASKS": "10",
                    "SLURM_NODEID": "0"},
        "peer_answer": {"rank": 1, "local_rank": 2, "world_size": 10, "node_rank": 0,
                        "master_addr": "1.1.1.1", "master_port": 16234},
        "note": "adapted from the test: one node of 10 tasks (SLURM_NTASKS 20->10, SLURM_NODEID 3->0). "
                "rank 1 with SLURM_LOCALID 2 is kept: a cyclic or arbitrary placement allows it.",
    },
    _lightning_nodelist("1.2.3.[089, 100-110]", 12, "1.2.3.089"),
    _lightning_nodelist("alpha, host[5-9], gamma", 7, "alpha"),
    _lightning_nodelist("host[5-9,1]", 6, "host5"),
    _lightning_nodelist("alpha beta gamma", 3, "alpha"),
    {
        "name": "lightning-slurm-ntasks-without-per-node",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_slurm.py::test_srun_variable_validation; "
                  f"{L_SRC}/slurm.py::SLURMEnvironment._validate_srun_variables",
        "environ": {"SLURM_NTASKS": "2"},
        "peer_answer": {},
        "peer_error": "RuntimeError: You set `--ntasks=2` in your SLURM bash script, but this variable "
                      "is not supported. HINT: Use `--ntasks-per-node=2` instead.",
        "note": "verbatim. No SLURM_PROCID: not an srun task (a batch step or salloc shell of a "
                "2-task job); Lightning refuses for another reason (--ntasks without --ntasks-per-node).",
    },
    {
        "name": "lightning-slurm-interactive-bash",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_slurm.py::test_detect; {L_SRC}/slurm.py::_is_slurm_interactive_mode, "
                  f"{L_SRC}/lightning.py::LightningEnvironment",
        "environ": {"SLURM_JOB_NAME": "bash"},
        "peer_answer": {"rank": 0, "local_rank": 0, "world_size": 1, "node_rank": 0,
                        "master_addr": "127.0.0.1"},
        "note": "verbatim. Job name bash/interactive: Lightning skips SLURM and falls back to "
                "LightningEnvironment (one process).",
    },
    # ------------------------------------------------------------ Lightning TorchElastic / torchrun
    {
        "name": "lightning-torchelastic-test-attributes",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_torchelastic.py::test_attributes_from_environment_variables; "
                  f"{L_SRC}/torchelastic.py::TorchElasticEnvironment",
        "environ": {"MASTER_ADDR": "1.2.3.4", "MASTER_PORT": "500", "WORLD_SIZE": "20", "RANK": "1",
                    "LOCAL_RANK": "2", "GROUP_RANK": "3"},
        "peer_answer": {"rank": 1, "local_rank": 2, "world_size": 20, "node_rank": 3,
                        "master_addr": "1.2.3.4", "master_port": 500},
        "note": "verbatim: torch variables by hand, no LOCAL_WORLD_SIZE and no TORCHELASTIC_RUN_ID. "
                "Peer takes the node rank from GROUP_RANK; it gives no local world size.",
    },
    {
        "name": "lightning-torchelastic-detected",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_torchelastic.py::test_attributes_from_environment_variables + "
                  f"test_detect; {L_SRC}/torchelastic.py::TorchElasticEnvironment",
        "environ": {"TORCHELASTIC_RUN_ID": "", "MASTER_ADDR": "1.2.3.4", "MASTER_PORT": "500",
                    "WORLD_SIZE": "20", "RANK": "1", "LOCAL_RANK": "2", "GROUP_RANK": "3"},
        "peer_answer": {"rank": 1, "local_rank": 2, "world_size": 20, "node_rank": 3,
                        "master_addr": "1.2.3.4", "master_port": 500},
        "note": "the two tests combined: TORCHELASTIC_RUN_ID='' (test_detect: empty counts as "
                "launched) and no LOCAL_WORLD_SIZE.",
    },
    {
        "name": "torchrun-worker-2x4",
        "peer": "torchrun",
        "source": "pytorch/pytorch:torch/distributed/elastic/agent/server/local_elastic_agent.py::"
                  "LocalElasticAgent._start_workers",
        "environ": {"LOCAL_RANK": "2", "RANK": "6", "GROUP_RANK": "1", "ROLE_RANK": "6",
                    "ROLE_NAME": "default", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8",
                    "GROUP_WORLD_SIZE": "2", "ROLE_WORLD_SIZE": "8", "MASTER_ADDR": "node1.cluster",
                    "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "0",
                    "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none",
                    "TORCHELASTIC_USE_AGENT_STORE": "False", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
        "peer_answer": {"rank": 6, "local_rank": 2, "world_size": 8, "local_world_size": 4,
                        "node_rank": 1, "master_addr": "node1.cluster", "master_port": 29500},
        "note": "every variable the agent sets (values: 2 nodes x 4, static rendezvous); the control "
                "case, hpcdist handles it today.",
    },
    {
        "name": "torchrun-virtual-local-rank",
        "peer": "torchrun",
        "source": "pytorch/pytorch:torch/distributed/elastic/agent/server/local_elastic_agent.py::"
                  "LocalElasticAgent._set_local_rank_env (--virtual-local-rank)",
        "environ": {"LOCAL_RANK": "0", "RANK": "6", "GROUP_RANK": "1", "ROLE_RANK": "6",
                    "ROLE_NAME": "default", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8",
                    "GROUP_WORLD_SIZE": "2", "ROLE_WORLD_SIZE": "8", "MASTER_ADDR": "node1.cluster",
                    "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "0",
                    "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none",
                    "TORCHELASTIC_USE_AGENT_STORE": "False", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                    "CUDA_VISIBLE_DEVICES": "2"},
        "peer_answer": {"rank": 6, "local_rank": 0, "world_size": 8, "local_world_size": 4,
                        "node_rank": 1, "master_addr": "node1.cluster", "master_port": 29500},
        "note": "LOCAL_RANK=0 for every worker, the device in CUDA_VISIBLE_DEVICES: rank 6 != "
                "node*4+local, so no check may compute the rank.",
    },
    # ------------------------------------------------------------------ Lightning LightningEnvironment
    {
        "name": "lightning-env-local-and-node-rank",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_lightning.py::test_attributes_from_environment_variables; "
                  f"{L_SRC}/lightning.py::LightningEnvironment",
        "environ": {"MASTER_ADDR": "1.2.3.4", "MASTER_PORT": "500", "LOCAL_RANK": "2", "NODE_RANK": "3"},
        "peer_answer": {"local_rank": 2, "node_rank": 3, "master_addr": "1.2.3.4", "master_port": 500},
        "note": "verbatim. Manual launch: the peer's rank and world size (0 and 1 here) are placeholders "
                "its strategy overwrites, so they are left out; the rest is known.",
    },
    {
        "name": "lightning-env-local-rank-only",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_lightning.py::test_manual_user_launch; "
                  f"{L_SRC}/lightning.py::LightningEnvironment",
        "environ": {"LOCAL_RANK": "2"},
        "peer_answer": {"local_rank": 2, "node_rank": 0, "master_addr": "127.0.0.1"},
        "note": "verbatim: LOCAL_RANK alone makes the process externally launched; node 0 and "
                "127.0.0.1 are the peer's defaults.",
    },
    {
        "name": "lightning-env-group-rank-only",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_lightning.py::test_node_rank_from_group_rank; "
                  f"{L_SRC}/lightning.py::LightningEnvironment.node_rank",
        "environ": {"GROUP_RANK": "1"},
        "peer_answer": {"local_rank": 0, "node_rank": 1},
        "note": "verbatim. GROUP_RANK substitutes NODE_RANK; with no RANK/WORLD_SIZE/LOCAL_RANK the "
                "process is not externally launched (Lightning would spawn its own workers).",
    },
    {
        "name": "lightning-env-default",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_lightning.py::test_default_attributes; "
                  f"{L_SRC}/lightning.py::LightningEnvironment",
        "environ": {},
        "peer_answer": {"rank": 0, "local_rank": 0, "world_size": 1, "node_rank": 0,
                        "master_addr": "127.0.0.1"},
        "note": "verbatim (clear=True): one process.",
    },
    # -------------------------------------------------------------------------------- LSF jsrun
    {
        "name": "lightning-lsf-test-attributes",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_lsf.py::test_attributes_from_environment_variables + test_node_rank; "
                  f"{L_SRC}/lsf.py::LSFEnvironment",
        "environ": {"LSB_DJOB_RANKFILE": "<tmp>/lsb_djob_rankfile", "LSB_JOBID": "1234",
                    "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_RANK": "3",
                    "JSM_NAMESPACE_LOCAL_RANK": "1"},
        "files": {"LSB_DJOB_RANKFILE": "batch\n10.10.10.0\n10.10.10.1\n10.10.10.2\n10.10.10.3"},
        "hostname": "10.10.10.2",
        "peer_answer": {"rank": 3, "local_rank": 1, "world_size": 4, "node_rank": 2,
                        "master_addr": "10.10.10.0", "master_port": 10234},
        "note": "verbatim (the test mocks gethostname to 10.10.10.2). Peer skips line 1 (launch node). "
                "Peer wrong: the rank file gives this host 1 slot, so local rank 1 cannot be.",
    },
    {
        "name": "lsf-jsrun-rankfile-no-local-size",
        "peer": "lightning",
        "source": f"{L_TESTS}/test_lsf.py::_make_rankfile + test_node_rank; {L_SRC}/lsf.py::LSFEnvironment",
        "environ": {"LSB_DJOB_RANKFILE": "<tmp>/lsb_djob_rankfile", "LSB_JOBID": "1234",
                    "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_RANK": "3",
                    "JSM_NAMESPACE_LOCAL_RANK": "1"},
        "files": {"LSB_DJOB_RANKFILE": "batch\n10.10.10.0\n10.10.10.0\n10.10.10.1\n10.10.10.1"},
        "hostname": "10.10.10.1",
        "peer_answer": {"rank": 3, "local_rank": 1, "world_size": 4, "node_rank": 1,
                        "master_addr": "10.10.10.0", "master_port": 10234},
        "note": "adapted: the test's rank file with 2 slots per host (one line per slot) so rank 3 / local "
                "1 fit. No JSM_NAMESPACE_LOCAL_SIZE: the rank file's 2 lines for this host give it.",
    },
    {
        "name": "lsf-jsrun-with-local-size",
        "peer": "lightning",
        "source": f"{L_SRC}/lsf.py::LSFEnvironment; jsrun's JSM_NAMESPACE_LOCAL_SIZE "
                  f"(shared/reference/launchers.md section 1)",
        "environ": {"LSB_DJOB_RANKFILE": "<tmp>/lsb_djob_rankfile", "LSB_JOBID": "1234",
                    "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_RANK": "3",
                    "JSM_NAMESPACE_LOCAL_RANK": "1", "JSM_NAMESPACE_LOCAL_SIZE": "2"},
        "files": {"LSB_DJOB_RANKFILE": "batch\n10.10.10.0\n10.10.10.0\n10.10.10.1\n10.10.10.1"},
        "hostname": "10.10.10.1",
        "peer_answer": {"rank": 3, "local_rank": 1, "world_size": 4, "node_rank": 1,
                        "master_addr": "10.10.10.0", "master_port": 10234},
        "note": "the previous vector plus the local size jsrun sets: the control case.",
    },
    # ------------------------------------------------------------------------------- MPI families
    {
        "name": "accelerate-openmpi-one-node",
        "peer": "accelerate",
        "source": f"{ACCEL}/utils/environment.py::get_cpu_distributed_information; {ACCEL}/state.py",
        "environ": {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
                    "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                    "OMPI_UNIVERSE_SIZE": "4"},
        "peer_answer": {"rank": 1, "local_rank": 1, "world_size": 4, "local_world_size": 4,
                        "master_port": 29500},
        "note": "mpirun -np 4 on one host; accelerate's port default is 29500 and it asks for no "
                "master on one node.",
    },
    {
        "name": "accelerate-openmpi-multinode",
        "peer": "accelerate",
        "source": f"{ACCEL}/utils/environment.py::get_cpu_distributed_information; "
                  f"{ACCEL}/state.py::PartialState (MULTI_CPU)",
        "environ": {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
                    "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                    "OMPI_COMM_WORLD_NODE_RANK": "1", "OMPI_UNIVERSE_SIZE": "8"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "master_port": 29500},
        "peer_error": "ValueError: Tried to launch on distributed with multinode, but `MASTER_ADDR` env "
                      "was not set, please try exporting rank 0's hostname as `MASTER_ADDR`",
        "note": "mpirun -np 8 on 2 hosts; accelerate gives the ranks and refuses only for the master. "
                "OMPI_COMM_WORLD_NODE_RANK is not a node index (never read).",
    },
    {
        "name": "deepspeed-openmpi-runner",
        "peer": "deepspeed",
        "source": f"{DS}/multinode_runner.py::OpenMPIRunner (exports UCX_TLS=tcp); "
                  "deepspeedai/DeepSpeed:deepspeed/comm/utils.py::get_*_from_launcher",
        "environ": {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
                    "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                    "OMPI_UNIVERSE_SIZE": "8", "UCX_TLS": "tcp"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8},
        "note": "the runner exports no RANK; DeepSpeed's launcher helpers read OMPI_COMM_WORLD_* and "
                "init_distributed takes the master from mpi4py (mpi_discovery).",
    },
    {
        "name": "accelerate-intelmpi-multinode",
        "peer": "accelerate",
        "source": f"{ACCEL}/utils/environment.py::get_cpu_distributed_information; "
                  f"{ACCEL}/state.py::PartialState (MULTI_CPU)",
        "environ": {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
                    "PMI_FD": "3"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "master_port": 29500},
        "peer_error": "ValueError: Tried to launch on distributed with multinode, but `MASTER_ADDR` env "
                      "was not set, please try exporting rank 0's hostname as `MASTER_ADDR`",
        "note": "Intel MPI / MPICH Hydra, 2 hosts x 4 (PMI_FD value inferred: Hydra sets one).",
    },
    {
        "name": "accelerate-mpirun-multicpu",
        "peer": "accelerate",
        "source": f"{ACCEL}/utils/launch.py::prepare_simple_launcher_cmd_env (--mpirun_hostfile); "
                  "huggingface/accelerate docs usage_guides (MULTI_CPU config: main_process_ip "
                  "36.112.23.24, mpirun_ccl 1, 16 processes on 4 machines)",
        "environ": {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "36.112.23.24", "MASTER_PORT": "29500",
                    "CCL_WORKER_COUNT": "1", "KMP_AFFINITY": "granularity=fine,compact,1,0",
                    "KMP_BLOCKTIME": "1", "ACCELERATE_MIXED_PRECISION": "bf16",
                    "PMI_RANK": "5", "PMI_SIZE": "16", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 16, "local_world_size": 4,
                        "master_addr": "36.112.23.24", "master_port": 29500},
        "note": "accelerate launch --mpirun_hostfile (Intel MPI mpirun -f -ppn 4 -n 16); PMI_*/MPI_LOCAL* "
                "are Hydra's for rank 5. No node rank anywhere: the peer needs none.",
    },
    {
        "name": "accelerate-mvapich-multinode",
        "peer": "accelerate",
        "source": f"{ACCEL}/utils/environment.py::get_cpu_distributed_information",
        "environ": {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
                    "MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "4"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "master_port": 29500},
        "peer_error": "ValueError: Tried to launch on distributed with multinode, but `MASTER_ADDR` env "
                      "was not set, please try exporting rank 0's hostname as `MASTER_ADDR`",
        "note": "MVAPICH2 mpirun_rsh, 2 hosts x 4.",
    },
    {
        "name": "deepspeed-mvapich-runner",
        "peer": "deepspeed",
        "source": f"{DS}/multinode_runner.py::MVAPICHRunner; "
                  "deepspeedai/DeepSpeed:deepspeed/comm/utils.py::get_*_from_launcher",
        "environ": {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
                    "MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "4",
                    "MV2_SMP_USE_CMA": "0", "MV2_DEBUG_SHOW_BACKTRACE": "1", "MV2_USE_CUDA": "1",
                    "MV2_SUPPORT_DL": "1", "MV2_ENABLE_AFFINITY": "0", "MV2_INTER_ALLGATHER_TUNING": "5",
                    "MV2_CUDA_USE_NAIVE": "0"},
        "peer_answer": {},
        "peer_error": "DeepSpeed reads no MV2_COMM_WORLD_*: without mpi4py its launcher helpers fall back "
                      "to rank 0 / world 1 (wrong), with it mpi_discovery gives rank, local rank, master",
        "note": "the runner's -env exports; all seven fields are in MV2_* except node rank and master.",
    },
    {
        "name": "deepspeed-mpich-runner-helper",
        "peer": "deepspeed",
        "source": f"{DS}/multinode_runner.py::MPICHRunner.get_cmd (-genv MASTER_ADDR/MASTER_PORT/WORLD_SIZE"
                  f"/LOCAL_SIZE); microsoft/DeepSpeed:deepspeed/launcher/launcher_helper.py::env_mapping",
        "environ": {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
                    "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "8",
                    "LOCAL_SIZE": "4", "RANK": "5", "LOCAL_RANK": "1"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "master_addr": "10.0.0.1", "master_port": 29500},
        "note": "mpirun -n 8 -ppn 4 -hosts worker-0,worker-1 + launcher_helper (RANK<-PMI_RANK, "
                "LOCAL_RANK<-MPI_LOCALRANKID). MASTER_ADDR value inferred (the runner's hostname -I).",
    },
    {
        "name": "deepspeed-impi-runner",
        "peer": "deepspeed",
        "source": f"{DS}/multinode_runner.py::IMPIRunner.get_cmd (-genv ..., I_MPI_PIN 0, per-rank "
                  "-env RANK i -env LOCAL_RANK i%ppn)",
        "environ": {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
                    "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "8",
                    "LOCAL_SIZE": "4", "I_MPI_PIN": "0", "RANK": "5", "LOCAL_RANK": "1"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "master_addr": "10.0.0.1", "master_port": 29500},
        "note": "peer computes LOCAL_RANK = i % ppn: right only for block placement in -hosts order "
                "(MPI_LOCALRANKID is the truth). MASTER_ADDR value inferred.",
    },
    {
        "name": "deepspeed-mpich-helper-on-pals",
        "peer": "deepspeed",
        "source": f"{DS}/multinode_runner.py::MPICHRunner.get_cmd; microsoft/DeepSpeed:deepspeed/launcher/"
                  "launcher_helper.py::env_mapping (PMIX_RANK/PMI_RANK, PALS_LOCAL_RANKID/MPI_LOCALRANKID)",
        "environ": {"PMI_RANK": "5", "PMI_SIZE": "8", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "4",
                    "PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1",
                    "PALS_APID": "6ab9a8b3-bbd4-4c2a-9f77-1bd7a7d5d3e7", "PALS_DEPTH": "8",
                    "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "8",
                    "LOCAL_SIZE": "4", "RANK": "5", "LOCAL_RANK": "1"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "master_addr": "10.0.0.1", "master_port": 29500},
        "note": "DeepSpeed's mpich runner under Cray PALS mpiexec (Polaris); PALS_NODEID gives the node "
                "rank the peer does not need. PALS_APID/MASTER_ADDR values inferred.",
    },
    {
        "name": "deepspeed-launch-pdsh",
        "peer": "deepspeed",
        "source": f"{DS}/launch.py::main (current_env RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_SIZE/CROSS_RANK/"
                  "CROSS_SIZE/MASTER_*)",
        "environ": {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
                    "WORLD_SIZE": "8", "CROSS_RANK": "1", "CROSS_SIZE": "2", "LOCAL_SIZE": "4",
                    "RANK": "5", "LOCAL_RANK": "1"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "node_rank": 1, "master_addr": "10.0.0.1", "master_port": 29500},
        "note": "the pdsh launcher, 2 nodes x 4 (--node_rank=%n -> CROSS_RANK): the control case.",
    },
    # ----------------------------------------------------------------------------------- submitit
    {
        "name": "submitit-slurm-2x4",
        "peer": "submitit",
        "source": f"{SUBMITIT}:submitit/helpers.py::TorchDistributedEnvironment; "
                  f"{SUBMITIT}:submitit/slurm/slurm.py::SlurmJobEnvironment._env; "
                  f"{SUBMITIT}:submitit/slurm/test_slurm.py::mocked_slurm, test_slurm_node_list",
        "environ": {"SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": "12", "SLURM_PROCID": "5",
                    "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS": "8",
                    "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "compute-a1,compute-b2"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "node_rank": 1, "master_addr": "compute-a1", "master_port": 58811},
        "note": "only the variables submitit reads (its tests set SLURM_JOB_ID/SLURM_JOB_NODELIST; task "
                "values chosen); no SLURM_GTIDS/STEP_TASKS_PER_NODE. Peer: lws = ntasks // nnodes.",
    },
    {
        "name": "submitit-slurm-ntasks-per-node",
        "peer": "submitit",
        "source": f"{SUBMITIT}:submitit/helpers.py::TorchDistributedEnvironment; "
                  f"{SUBMITIT}:submitit/slurm/_sbatch_test_record.txt (#SBATCH --ntasks-per-node)",
        "environ": {"SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": "12", "SLURM_PROCID": "5",
                    "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS": "8",
                    "SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NUM_NODES": "2",
                    "SLURM_JOB_NODELIST": "compute-b2[1,2]"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4,
                        "node_rank": 1, "master_addr": "compute-b21", "master_port": 58811},
        "note": "submitit's sbatch always sets --ntasks-per-node, so Slurm exports SLURM_NTASKS_PER_NODE; "
                "node list from test_slurm_node_list.",
    },
    {
        "name": "submitit-slurm-uneven",
        "peer": "submitit",
        "source": f"{SUBMITIT}:submitit/helpers.py::TorchDistributedEnvironment (num_tasks // num_nodes)",
        "environ": {"SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": "12", "SLURM_PROCID": "1",
                    "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_NTASKS": "3",
                    "SLURM_TASKS_PER_NODE": "2,1", "SLURM_JOB_NUM_NODES": "2",
                    "SLURM_JOB_NODELIST": "compute[042-043]"},
        "peer_answer": {"rank": 1, "local_rank": 1, "world_size": 3, "local_world_size": 1,
                        "node_rank": 0, "master_addr": "compute042", "master_port": 58811},
        "note": "-N2 -n3 (SLURM_TASKS_PER_NODE=2,1 as Slurm sets it). Peer wrong: 3 // 2 = 1 local "
                "task, but node 0 holds 2 (local rank 1 < 1 fails); entry 0 of SLURM_TASKS_PER_NODE says 2.",
    },
    {
        "name": "submitit-local-4-tasks",
        "peer": "submitit",
        "source": f"{SUBMITIT}:submitit/local/local.py::start_controller + Controller.start_tasks + "
                  f"LocalJobEnvironment._env; {SUBMITIT}:submitit/helpers.py::TorchDistributedEnvironment",
        "environ": {"SUBMITIT_LOCAL_NTASKS": "4", "SUBMITIT_LOCAL_COMMAND": "python -u -m submitit.core._submit /tmp/x",
                    "SUBMITIT_LOCAL_TIMEOUT_S": "120", "SUBMITIT_LOCAL_SIGNAL_DELAY_S": "30",
                    "SUBMITIT_LOCAL_NODEID": "0", "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
                    "SUBMITIT_EXECUTOR": "local", "CUDA_AVAILABLE_DEVICES": "",
                    "SUBMITIT_LOCAL_LOCALID": "2", "SUBMITIT_LOCAL_GLOBALID": "2",
                    "SUBMITIT_LOCAL_JOB_ID": "4242"},
        "peer_answer": {"rank": 2, "local_rank": 2, "world_size": 4, "local_world_size": 4,
                        "node_rank": 0, "master_port": 42455},
        "note": "every variable the local executor sets (job id = controller pid, chosen). Peer's master "
                "is socket.gethostname() (left out: host-dependent).",
    },
    # --------------------------------------------------------------------------------------- Flux
    {
        "name": "flux-block-2nodes",
        "peer": "flux",
        "source": "flux-framework/flux-core:doc/man7/flux-environment.rst (JOB ENVIRONMENT; block table)",
        "environ": {"FLUX_JOB_ID": "f2Xi5HYPhM", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2",
                    "FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_TMPDIR": "/tmp/flux-xyz",
                    "FLUX_URI": "local:///run/flux/local", "PMI_RANK": "5", "PMI_SIZE": "8", "PMI_FD": "3"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8},
        "note": "8 tasks on 2 nodes, block (the man page's table: node 1 holds 4-7). Flux gives no "
                "per-node count or node index. FLUX_JOB_ID/TMPDIR/PMI_FD values inferred.",
    },
    {
        "name": "flux-cyclic-2nodes",
        "peer": "flux",
        "source": "flux-framework/flux-core:doc/man7/flux-environment.rst (FLUX_TASK_RANK: cyclic table)",
        "environ": {"FLUX_JOB_ID": "f2Xi5HYPhM", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2",
                    "FLUX_TASK_RANK": "3", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_TMPDIR": "/tmp/flux-xyz",
                    "FLUX_URI": "local:///run/flux/local", "PMI_RANK": "3", "PMI_SIZE": "8", "PMI_FD": "3"},
        "peer_answer": {"rank": 3, "local_rank": 1, "world_size": 8},
        "note": "--taskmap=cyclic: rank 3 is local 1 on node 1, so node*4+local (5) would be wrong.",
    },
    {
        "name": "flux-one-node",
        "peer": "flux",
        "source": "flux-framework/flux-core:doc/man7/flux-environment.rst",
        "environ": {"FLUX_JOB_ID": "f2Xi5HYPhM", "FLUX_JOB_SIZE": "4", "FLUX_JOB_NNODES": "1",
                    "FLUX_TASK_RANK": "2", "FLUX_TASK_LOCAL_ID": "2", "FLUX_URI": "local:///run/flux/local",
                    "PMI_RANK": "2", "PMI_SIZE": "4", "PMI_FD": "3"},
        "peer_answer": {"rank": 2, "local_rank": 2, "world_size": 4},
        "note": "one node: local size = job size. The control case.",
    },
    {
        "name": "accelerate-under-flux",
        "peer": "accelerate",
        "source": f"{ACCEL}/utils/environment.py::get_cpu_distributed_information on flux-core's task "
                  "environment (doc/man7/flux-environment.rst: the pmi plugin sets PMI_RANK/PMI_SIZE)",
        "environ": {"FLUX_JOB_ID": "f2Xi5HYPhM", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2",
                    "FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_URI": "local:///run/flux/local",
                    "PMI_RANK": "5", "PMI_SIZE": "8", "PMI_FD": "3", "MASTER_ADDR": "node1"},
        "peer_answer": {"rank": 5, "local_rank": 0, "world_size": 8, "local_world_size": 1,
                        "master_addr": "node1", "master_port": 29500},
        "note": "Peer wrong: no MPI_LOCALRANKID under Flux, so accelerate's defaults give local rank 0 / "
                "local size 1 to every task. MASTER_ADDR added (accelerate needs it multi-node).",
    },
    # ------------------------------------------------------------------------------------ Horovod
    {
        "name": "horovod-gloo-2x4",
        "peer": "horovod",
        "source": "horovod/horovod:horovod/runner/gloo_run.py (HOROVOD_* worker env); "
                  "horovod/horovod:horovod/runner/common/util/hosts.py::get_host_assignments",
        "environ": {"HOROVOD_HOSTNAME": "10.11.11.12", "HOROVOD_RANK": "5", "HOROVOD_SIZE": "8",
                    "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "4", "HOROVOD_CROSS_RANK": "1",
                    "HOROVOD_CROSS_SIZE": "2", **_HOROVOD_GLOO},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4},
        "note": "horovodrun --gloo -H 10.11.11.11:4,10.11.11.12:4 (hosts.py's docstring example). Cross "
                "rank = node index here. The rendezvous address is the driver's, not rank 0's.",
    },
    {
        "name": "horovod-gloo-uneven",
        "peer": "horovod",
        "source": "horovod/horovod:horovod/runner/common/util/hosts.py::get_host_assignments; "
                  "horovod/horovod:horovod/runner/gloo_run.py",
        "environ": {"HOROVOD_HOSTNAME": "10.11.11.12", "HOROVOD_RANK": "4", "HOROVOD_SIZE": "6",
                    "HOROVOD_LOCAL_RANK": "2", "HOROVOD_LOCAL_SIZE": "4", "HOROVOD_CROSS_RANK": "0",
                    "HOROVOD_CROSS_SIZE": "1", **_HOROVOD_GLOO},
        "peer_answer": {"rank": 4, "local_rank": 2, "world_size": 6, "local_world_size": 4},
        "note": "-H 10.11.11.11:2,10.11.11.12:4, as get_host_assignments computes it: HOROVOD_CROSS_RANK=0 "
                "on the second host (only it has local slot 2), so cross rank is no node index.",
    },
    # --------------------------------------------------------------------------------- Cray PALS
    {
        "name": "pals-mpiexec-pbs",
        "peer": "pals",
        "source": "argonne-lcf/user-guides:docs/aurora/data-science/frameworks/pytorch.md (mpiexec -np "
                  "-ppn under PBS Pro, ranks counted from $PBS_NODEFILE); variable names as in "
                  "SchedMD/slurm:src/plugins/mpi/cray_shasta/mpi_cray_shasta.c and shared/reference/"
                  "launchers.md section 1 (PALS_LOCAL_SIZE, PALS_DEPTH)",
        "environ": {"PBS_JOBID": "1234.polaris-pbs-01", "PBS_NODEFILE": "<tmp>/nodefile",
                    "PBS_ENVIRONMENT": "PBS_BATCH", "PALS_APID": "6ab9a8b3-bbd4-4c2a-9f77-1bd7a7d5d3e7",
                    "PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1",
                    "PALS_LOCAL_SIZE": "4", "PALS_DEPTH": "8", "PMI_RANK": "5", "PMI_SIZE": "8",
                    "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "4"},
        "files": {"PBS_NODEFILE": "x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov\n"
                                  "x3005c0s13b1n0.hsn.cm.polaris.alcf.anl.gov\n"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4, "node_rank": 1},
        "note": "mpiexec -n 8 --ppn 4 --depth 8 under PBS Pro (2 chunks). No master variable: the node "
                "file's first line is rank 0's host (block placement). Host names/APID inferred.",
    },
    {
        "name": "pals-slurm-cray-shasta",
        "peer": "pals",
        "source": "SchedMD/slurm:src/plugins/mpi/cray_shasta/mpi_cray_shasta.c::mpi_p_slurmstepd_task",
        "environ": {"PALS_APID": "1234.0", "PALS_APINFO": "/var/spool/slurmd/mpi_cray_shasta/1234.0/apinfo",
                    "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1", "PALS_RANKID": "5",
                    "PALS_SPOOL_DIR": "/var/spool/slurmd/mpi_cray_shasta/1234.0", "PMI_JOBID": "1234",
                    "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "4", "PMI_RANK": "5", "PMI_SIZE": "8",
                    "PMI_UNIVERSE_SIZE": "8", "SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "0",
                    "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS": "8",
                    "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
                    "SLURM_STEP_NODELIST": "nid[001096-001097]", "SLURM_JOB_NODELIST": "nid[001096-001097]"},
        "peer_answer": {"rank": 5, "local_rank": 1, "world_size": 8, "local_world_size": 4, "node_rank": 1},
        "note": "srun --mpi=cray_shasta: the plugin's PALS_*/PMI_* (no PALS_LOCAL_SIZE: PMI_LOCAL_SIZE) "
                "next to srun's own; master: first host of SLURM_STEP_NODELIST.",
    },
    # ------------------------------------------------------------------- the "not distributed" default
    {
        "name": "local-rank-minus-one",
        "peer": "accelerate",
        "source": f"{ACCEL}/state.py::PartialState.__init__ (int(os.environ.get('LOCAL_RANK', -1)) != -1 "
                  "means distributed)",
        "environ": {"LOCAL_RANK": "-1"},
        "peer_answer": {"rank": 0, "local_rank": 0, "world_size": 1, "local_world_size": 1},
        "note": "LOCAL_RANK=-1 exported with no launcher (transformers' --local_rank default): the peer "
                "reads it as not distributed, one process.",
    },
]


def hpcdist_answer(vector: dict, folder: str):
    """hpcdist's fields as a dict (None: unknown), or the DistEnvError message. The files the
    vector names are written to ``folder`` first, and ``socket.gethostname`` answers the
    vector's ``hostname`` where the peer's test mocks it."""
    import os
    import socket
    from unittest import mock

    from hpcdist.env import DistEnvError, resolve
    from hpcdist.env.model import FIELDS

    environ = dict(vector["environ"])
    for variable, text in vector.get("files", {}).items():
        path = os.path.join(folder, f"{vector['name']}-{variable}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        environ[variable] = path
    here = vector.get("hostname", socket.gethostname())
    try:
        with mock.patch("socket.gethostname", return_value=here):
            env = resolve(environ)
    except DistEnvError as e:
        return str(e)
    return {f: getattr(env, f) for f in FIELDS}


def verdict(vector: dict, answer) -> str:
    """How hpcdist's answer compares with the peer's, on the fields the peer gives. A
    ``master_port`` the peer derives from the job id is its own convention: it counts only
    when ``MASTER_PORT`` is set in the vector."""
    peer = vector["peer_answer"]
    if isinstance(answer, str):
        return "error (peer errs too)" if not peer and vector.get("peer_error") else "error"
    if not peer and vector.get("peer_error"):
        return "answers (peer errs)"
    differ = [f for f, v in peer.items() if answer[f] != v
              and not (f == "master_port" and "MASTER_PORT" not in vector["environ"])]
    if differ:
        return "differs: " + ", ".join(differ)
    own_port = "master_port" in peer and answer["master_port"] != peer["master_port"]
    return "same (port: own rule)" if own_port else "same"
