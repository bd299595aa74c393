"""Test vectors for issue 14: what the launchers of real PBS sites (and PMIx launches) set in a
rank's environment, and what hpcdist must answer from it without mpi4py.

Data only (the name does not match ``test_*.py``): tests/env/test_env_launcher_sets.py checks each
vector. Each entry of :data:`LAUNCHER_ENVS` is a dict:

- ``name``; ``source``: where the variable set comes from (captured here, or the public
  documents and job scripts that name it);
- ``environ``: the variables; a variable that names a file (``PBS_NODEFILE``) has its text in
  ``files`` and a placeholder value (the test writes the file and points the variable there);
- ``hostname``: what ``socket.gethostname()`` returns on this rank's host;
- ``answer``: the fields hpcdist must give; ``unknown``: the fields it must leave unknown, each
  with words the reason must contain (what to install or set).
"""

#: Captured on the test cluster (tests/testcluster.py, Slurm 22.05.8 with its PBS personality,
#: MPICH 4.0.2's Hydra): ``hpcdist submit --scheduler pbs --dialect torque --launcher mpirun --mpi
#: mpich --mpiexec mpiexec.mpich --nodes 2 --procs-per-node 2``, each rank printing its
#: /proc/self/environ (the environment it started with, before hpcdist.rank exports anything).
#: Kept: every PBS_*, PMI_*, MPI_*, MPIR_*, MASTER_* and HPCDIST_* variable. Left out: the SLURM_*
#: ones, which only the test cluster's PBS-through-Slurm has (Hydra started its proxies with srun
#: there); a Torque mom sets none. Per rank: (host, PMI_RANK, MPI_LOCALRANKID, PMI_FD).
TORQUE_MPICH_RANKS = (("node1", 0, 0, 5), ("node1", 1, 1, 6), ("node2", 2, 0, 5), ("node2", 3, 1, 6))


def torque_mpich(host: str, rank: int, local: int, fd: int) -> dict:
    return {
        "name": f"hpcdist-torque-mpich-rank{rank}",
        "source": "captured: hpcdist's own Torque + MPICH job script on the test cluster (TORQUE_MPICH_RANKS)",
        "environ": {
            "HPCDIST_HOSTFILE": "/tmp/hpcdist.Mrr3XV/hostfile", "HPCDIST_JOB_ID": "1",
            "HPCDIST_NODEFILE": "/tmp/hpcdist.Mrr3XV/nodes", "MASTER_ADDR": "node1", "MASTER_PORT": "20001",
            "MPIR_CVAR_CH3_INTERFACE_HOSTNAME": host, "MPI_LOCALNRANKS": "2", "MPI_LOCALRANKID": str(local),
            "PBS_ENVIRONMENT": "PBS_BATCH", "PBS_JOBID": "1", "PBS_JOBNAME": "dump", "PBS_NODEFILE": "<file>",
            "PBS_NP": "4", "PBS_NUM_NODES": "2", "PBS_O_WORKDIR": "/tmp/capture", "PMI_FD": str(fd),
            "PMI_RANK": str(rank), "PMI_SIZE": "4",
        },
        # PBS_NP=4: one line per slot, the hosts in the job's order.
        "files": {"PBS_NODEFILE": "node1\nnode1\nnode2\nnode2\n"},
        "hostname": host,
        "answer": {"rank": rank, "local_rank": local, "world_size": 4, "local_world_size": 2,
                   "node_rank": int(host[-1]) - 1, "master_addr": "node1", "master_port": 20001, "launcher": "mpich"},
        "unknown": {},
    }


#: Polaris-style PBS Pro job of 2 chunks: ``mpiexec -n 8 --ppn 4 --depth 8``, no MASTER_ADDR.
_PBS_PRO = {"PBS_JOBID": "1234.polaris-pbs-01", "PBS_NODEFILE": "<file>", "PBS_ENVIRONMENT": "PBS_BATCH"}
_POLARIS_HOSTS = ("x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov", "x3005c0s13b1n0.hsn.cm.polaris.alcf.anl.gov")
_PALS_SOURCE = ("shared/reference/launchers.md section 1 (PALS: PALS_RANKID, PALS_LOCAL_RANKID, PALS_NODEID, "
                "PALS_LOCAL_SIZE, PMI_RANK, PMI_SIZE, PMI_LOCAL_RANK, PMI_LOCAL_SIZE; no PALS_SIZE); "
                "argonne-lcf/alcf-nccl-tests:pytests/launcher.sh reads PMI_SIZE/PMI_LOCAL_RANK under mpiexec")


def pals_default(rank: int, host: int) -> dict:
    local = rank % 4
    return {
        "name": f"pals-default-pmi-rank{rank}",
        "source": _PALS_SOURCE,
        "environ": {**_PBS_PRO, "PALS_APID": "6ab9a8b3-bbd4-4c2a-9f77-1bd7a7d5d3e7", "PALS_DEPTH": "8",
                    "PALS_RANKID": str(rank), "PALS_LOCAL_RANKID": str(local), "PALS_NODEID": str(host),
                    "PALS_LOCAL_SIZE": "4", "PMI_RANK": str(rank), "PMI_SIZE": "8",
                    "PMI_LOCAL_RANK": str(local), "PMI_LOCAL_SIZE": "4"},
        "files": {"PBS_NODEFILE": "".join(f"{h}\n" for h in _POLARIS_HOSTS)},
        "hostname": _POLARIS_HOSTS[host].split(".")[0],  # the node file has full names, the host its short one
        "answer": {"rank": rank, "local_rank": local, "world_size": 8, "local_world_size": 4, "node_rank": host,
                   "master_addr": _POLARIS_HOSTS[0], "master_port": 21234, "launcher": "pals"},
        "unknown": {},
    }


#: What a PMIx server gives each process: captured here from Open MPI 4.1.4's (PMIx 4.2.2) ranks
#: (``mpirun -n 2 env``). PALS's PMIx mode and srun --mpi=pmix run a PMIx server too; it sets no
#: size, no local rank, no node: PMIX_RANK is all a rank learns from these.
def pmix_server(rank: int, namespace: str, host: str) -> dict:
    uri = f"{namespace}.0;tcp4://127.0.0.1:44119"
    return {"PMIX_RANK": str(rank), "PMIX_NAMESPACE": namespace, "PMIX_ID": f"{namespace}.{rank}",
            "PMIX_HOSTNAME": host, "PMIX_VERSION": "4.2.2rc2", "PMIX_SECURITY_MODE": "native",
            "PMIX_BFROP_BUFFER_TYPE": "PMIX_BFROP_BUFFER_NON_DESC", "PMIX_GDS_MODULE": "ds21,ds12,hash",
            "PMIX_SERVER_TMPDIR": "/tmp/pmix", "PMIX_SYSTEM_TMPDIR": "/tmp", "PMIX_SERVER_URI2": uri,
            "PMIX_SERVER_URI21": uri, "PMIX_SERVER_URI3": uri, "PMIX_SERVER_URI4": uri, "PMIX_SERVER_URI41": uri}


_AURORA_HOSTS = ("x4102c5s2b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov",
                 "x4102c5s3b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov")
_AURORA_SOURCE = (
    "Aurora `mpiexec --pmi=pmix -n 24 -ppn 12` (PALS): public Aurora job scripts read PALS_RANKID, "
    "PALS_LOCAL_RANKID, PALS_LOCAL_SIZE or PMIX_RANK there and compute WORLD_SIZE themselves "
    "(PALS_LOCAL_SIZE x the node file's hosts: 'PALS_SIZE is never set by mpiexec on Aurora'), and fall "
    "back from PMI_RANK/PMI_SIZE to PMIX_RANK + PALS_LOCAL_SIZE: no PMI_* in PMIx mode. PMIX_* names as "
    "captured from a PMIx server here (pmix_server). Not captured on Aurora itself.")


def aurora_pmix(rank: int, host: int, hosts=_AURORA_HOSTS, hostname=None, **extra) -> dict:
    local, hostname = rank % 12, hostname or _AURORA_HOSTS[host].split(".")[0]
    return {
        "name": f"aurora-pals-pmix-rank{rank}",
        "source": _AURORA_SOURCE,
        "environ": {"PBS_JOBID": "8730476.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov", "PBS_NODEFILE": "<file>",
                    "PBS_ENVIRONMENT": "PBS_BATCH", "PALS_APID": "3f6c2a58-1d9e-4a3b-a8f1-0c7e5b2d9e41",
                    "PALS_DEPTH": "16", "PALS_RANKID": str(rank), "PALS_LOCAL_RANKID": str(local),
                    "PALS_NODEID": str(host), "PALS_LOCAL_SIZE": "12",
                    **pmix_server(rank, "3f6c2a58-1d9e-4a3b-a8f1-0c7e5b2d9e41", hostname),
                    **extra},
        "files": {"PBS_NODEFILE": "".join(f"{h}\n" for h in hosts)},
        "hostname": hostname,
        "answer": {"rank": rank, "local_rank": local, "local_world_size": 12, "node_rank": host,
                   "master_addr": hosts[0], "launcher": "pals"},
        "unknown": {"world_size": ["PMIx mode", "PMI_SIZE", "mpiexec --env WORLD_SIZE=", "pip install 'hpcdist[mpi]'",
                                   "no --pmi=pmix"]},
    }


def aurora_pmix_one_node(rank: int) -> dict:
    vector = aurora_pmix(rank, 0, hosts=_AURORA_HOSTS[:1])
    vector["name"] = f"aurora-pals-pmix-one-node-rank{rank}"
    vector["answer"].update(world_size=12, master_addr="127.0.0.1", node_rank=0)
    vector["unknown"] = {}
    return vector


#: A step of the test cluster's Slurm 22.05.8 captured here: ``srun --mpi=cray_shasta -N2 -n4
#: --ntasks-per-node=2``: the plugin sets PALS_APID, PALS_APINFO, PALS_NODEID, PALS_RANKID and
#: PALS_SPOOL_DIR only (no PALS_LOCAL_*, no PMI_*); the rest is srun's. (host, rank, local, gtids)
SHASTA_TASKS = (("node1", 0, 0, "0,1"), ("node1", 1, 1, "0,1"), ("node2", 2, 0, "2,3"), ("node2", 3, 1, "2,3"))


def srun_cray_shasta(host: str, rank: int, local: int, gtids: str) -> dict:
    node = int(host[-1]) - 1
    spool = f"/tmp/hpcdist-cluster/spool/{host}/mpi_cray_shasta/1.0"
    return {
        "name": f"srun-cray-shasta-rank{rank}",
        "source": "captured: srun --mpi=cray_shasta on the test cluster (Slurm 22.05.8), /proc/self/environ",
        "environ": {
            "PALS_APID": "1.0", "PALS_APINFO": f"{spool}/apinfo", "PALS_NODEID": str(node), "PALS_RANKID": str(rank),
            "PALS_SPOOL_DIR": spool, "SLURM_CPUS_ON_NODE": "2", "SLURM_GTIDS": gtids, "SLURM_JOBID": "1",
            "SLURM_JOB_ID": "1", "SLURM_JOB_NAME": "python", "SLURM_JOB_NODELIST": "node[1-2]",
            "SLURM_JOB_NUM_NODES": "2", "SLURM_LAUNCH_NODE_IPADDR": "10.213.0.1", "SLURM_LOCALID": str(local),
            "SLURM_MPI_TYPE": "cray_shasta", "SLURM_NNODES": "2", "SLURM_NODEID": str(node),
            "SLURM_NODELIST": "node[1-2]", "SLURM_NPROCS": "4", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_PROCID": str(rank), "SLURM_STEPID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node[1-2]",
            "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
            "SLURM_TASKS_PER_NODE": "2(x2)", "SLURMD_NODENAME": host,
        },
        "hostname": host,
        "answer": {"rank": rank, "local_rank": local, "world_size": 4, "local_world_size": 2, "node_rank": node,
                   "master_addr": "node1", "launcher": "pals"},
        "unknown": {},
    }


def srun_pmix(rank: int) -> dict:
    """``srun --mpi=pmix``: srun's step variables (as in SHASTA_TASKS's capture, less the PALS ones)
    and a PMIx server's. (The test cluster's pmix plugin fails to start a step in its network
    namespaces, so this set is assembled from the two captures.)"""
    host, _, local, gtids = SHASTA_TASKS[rank]
    environ = {k: v for k, v in srun_cray_shasta(host, rank, local, gtids)["environ"].items()
               if not k.startswith("PALS_")}
    environ.update(pmix_server(rank, "slurm.pmix.1.0", host), SLURM_MPI_TYPE="pmix")
    return {"name": f"srun-pmix-rank{rank}", "source": srun_pmix.__doc__.strip(), "environ": environ,
            "hostname": host,
            "answer": {"rank": rank, "local_rank": local, "world_size": 4, "local_world_size": 2,
                       "node_rank": int(host[-1]) - 1, "master_addr": "node1", "launcher": "slurm"},
            "unknown": {}}


#: A bare PMIx launch (a PMIx server's variables and nothing else, as under prterun with the
#: OMPI_* removed): the rank only; the rest needs MPI (mpi4py), and the reason says so.
BARE_PMIX = {
    "name": "bare-pmix",
    "source": "captured: Open MPI 4.1.4's PMIx variables here (pmix_server), without its OMPI_COMM_WORLD_*",
    "environ": pmix_server(1, "1275330561", "vm"),
    "hostname": "vm",
    "answer": {"rank": 1, "launcher": "mpi4py"},
    "unknown": {"world_size": ["sets no world size", "pip install 'hpcdist[mpi]'", "WORLD_SIZE"],
                "local_rank": ["mpi4py"], "local_world_size": ["mpi4py", "LOCAL_WORLD_SIZE"],
                "node_rank": ["mpi4py"], "master_addr": ["mpi4py"]},
}

LAUNCHER_ENVS = (
    [torque_mpich(*r) for r in TORQUE_MPICH_RANKS]
    + [pals_default(rank, host) for rank, host in ((0, 0), (5, 1))]
    + [aurora_pmix(rank, host) for rank, host in ((0, 0), (13, 1))]
    + [aurora_pmix_one_node(rank) for rank in (0, 7)]
    + [srun_cray_shasta(*t) for t in SHASTA_TASKS]
    + [srun_pmix(rank) for rank in (0, 3)]
    + [BARE_PMIX]
)
