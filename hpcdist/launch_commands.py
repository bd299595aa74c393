"""Each launcher's command line, built here and nowhere else.

The templates only place the lines this module returns. Words a user
supplied (script, arguments, paths) are shell-quoted; values that exist only
inside the running job (the first host, the port, the hostfile path, a node
rank) are references to shell variables the script sets before the launch:

- ``HPCDIST_HOSTFILE``: the hostfile in this launcher's format;
- ``MASTER_ADDR``, ``MASTER_PORT``: the first host, and the port derived
  from the job id (see :mod:`hpcdist.env.ports`);
- ``NODE_RANK``: set per node by :func:`per_node`.

Launchers that start one agent per node (torchrun, accelerate, DeepSpeed
``--no-ssh``) are spread over the nodes by the scheduler's own tool (srun on
Slurm, Open MPI's ``mpirun --map-by ppr:1:node`` on PBS, background agents
on the local backend); the others are started once, from the first node.
"""

from __future__ import annotations

from hpcdist.launchers.mpi import MPI_EXPORTS, mpi_exports
from hpcdist.shell import Shell, var, words_to_line
from hpcdist.spec import JobSpec


def hostfile_format(spec: JobSpec) -> str:
    if spec.launcher == "mpirun":
        return "mpich" if spec.mpi == "mpich" else "openmpi"
    return "deepspeed"


def program(spec: JobSpec, argparse_launcher: bool = False) -> list:
    """The training program and its arguments, as the launcher should start it.

    ``argparse_launcher``: the launcher reads the script's arguments with
    argparse's REMAINDER (torchrun, DeepSpeed, accelerate), which swallows a
    ``--`` right after the script: that one is doubled.
    """
    args = list(spec.script_args)
    if argparse_launcher and args[:1] == ["--"]:
        args.insert(0, "--")
    if spec.deepspeed_config:
        # Under any launcher: a DeepSpeed script started by torchrun or srun reads it too.
        args += ["--deepspeed_config", spec.deepspeed_config]
    return [spec.script] + args


class Launcher:
    name: str
    #: True: one agent per node, spread by the scheduler; False: started once.
    per_node = False

    def words(self, spec: JobSpec) -> list:
        raise NotImplementedError

    def setup(self, spec: JobSpec) -> list[str]:
        """Shell lines the launch needs before it starts."""
        return []


class Torchrun(Launcher):
    name = "torchrun"
    per_node = True

    def words(self, spec):
        # c10d rendezvous on the first host; the rendezvous assigns node ranks.
        # Elastic: MIN:MAX nodes; the training goes on (after a restart) with those left.
        nnodes = f"{spec.min_nodes}:{spec.nodes}" if spec.elastic else str(spec.nodes)
        restarts = [f"--max-restarts={spec.max_restarts}"] if spec.max_restarts else []
        return ["torchrun", f"--nnodes={nnodes}", f"--nproc-per-node={spec.procs_per_node}", *restarts,
                "--rdzv-backend=c10d", Shell('--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"'),
                Shell('--rdzv-id="$HPCDIST_JOB_ID"')] + program(spec, argparse_launcher=True)


class Accelerate(Launcher):
    name = "accelerate"
    per_node = True

    def words(self, spec):
        # --multi_gpu is accelerate's multi-process launcher (torchrun inside), on
        # CPUs too; without it accelerate starts one process per node.
        return ["accelerate", "launch", f"--num_machines={spec.nodes}",
                f"--num_processes={spec.total_procs}", Shell('--machine_rank="$NODE_RANK"'),
                Shell('--main_process_ip="$MASTER_ADDR"'), Shell('--main_process_port="$MASTER_PORT"'),
                ] + (["--multi_gpu"] if spec.total_procs > 1 else []) + program(spec, argparse_launcher=True)


class DeepSpeed(Launcher):
    name = "deepspeed"  # per node only with --no-ssh: see is_per_node()

    @staticmethod
    def mode(spec) -> str:
        """How DeepSpeed reaches the nodes: "one-host", "no-ssh", or its runner (pdsh, openmpi, slurm)."""
        if spec.nodes == 1 or spec.scheduler == "local":
            return "one-host"
        return "no-ssh" if spec.no_ssh else spec.deepspeed_runner

    def words(self, spec):
        words = ["deepspeed", "--hostfile", var("HPCDIST_HOSTFILE"),
                 "--master_addr", var("MASTER_ADDR"), "--master_port", var("MASTER_PORT")]
        mode = self.mode(spec)
        if mode == "one-host":
            # One host: DeepSpeed starts it without ssh, once its ssh check is skipped.
            words.append("--no_ssh_check")
        elif mode == "no-ssh":
            words += ["--no_ssh", Shell('--node_rank="$NODE_RANK"')]
        elif mode != "pdsh":
            words += ["--launcher", mode]
        if spec.ssh_port and not spec.no_ssh:
            words += ["--ssh_port", str(spec.ssh_port)]
        words += program(spec, argparse_launcher=True)
        # pdsh waits for every node even after one failed: see hpcdist.supervise.
        return ["hpcdist", "supervise", "--"] + words if mode == "pdsh" else words

    def setup(self, spec):
        mode = self.mode(spec)
        if mode == "slurm":
            # DeepSpeed's srun leaves the other tasks running when one fails.
            return ["export SLURM_KILL_BAD_EXIT=1"]
        if mode == "pdsh":
            return ["# pdsh waits for every node even after one failed: `hpcdist supervise` ends the launch then."]
        return []


class Mpirun(Launcher):
    name = "mpirun"

    def words(self, spec):
        python = [spec.python] + program(spec)
        if spec.mpi == "mpich":
            return [spec.mpiexec or "mpiexec", "-f", var("HPCDIST_HOSTFILE"), "-n", str(spec.total_procs),
                    "-genv", "MASTER_ADDR", var("MASTER_ADDR"),
                    "-genv", "MASTER_PORT", var("MASTER_PORT")] + python
        return [spec.mpiexec or "mpirun", "--hostfile", var("HPCDIST_HOSTFILE"), "-np", str(spec.total_procs),
                "--map-by", "slot", "--bind-to", "none", MPI_EXPORTS] + python


class Srun(Launcher):
    name = "srun"

    def words(self, spec):
        words = ["srun", f"--nodes={spec.nodes}", f"--ntasks-per-node={spec.procs_per_node}",
                 "--kill-on-bad-exit=1"]
        if spec.cpus_per_proc:
            # Slurm 22.05 stopped passing --cpus-per-task from sbatch to srun.
            words.append(f"--cpus-per-task={spec.cpus_per_proc}")
        return words + [spec.python] + program(spec)


class Once(Launcher):
    """No launcher: the program runs once, in the batch shell, and starts its own processes."""
    name = "none"

    def words(self, spec):
        return [spec.python] + program(spec)


LAUNCHERS = {cls.name: cls() for cls in (Torchrun, Accelerate, DeepSpeed, Mpirun, Srun, Once)}


def is_per_node(spec: JobSpec) -> bool:
    if spec.launcher == "deepspeed":
        # Locally all "nodes" are this one host: one DeepSpeed launcher for all slots.
        return spec.no_ssh and spec.nodes > 1 and spec.scheduler != "local"
    return LAUNCHERS[spec.launcher].per_node


def per_node(spec: JobSpec, words: list) -> list[str]:
    """Lines that start ``words`` once on every node.

    Where the words refer to ``$NODE_RANK``, each node's agent runs them in
    ``bash -c`` after setting it from the scheduler's per-task variable, so
    the variable is expanded on that node, not once in the batch shell.
    Every way ends the whole job when one agent fails: srun's
    --kill-on-bad-exit, mpirun's abort, and hpcdist_wait_all locally; except
    an elastic job's (Slurm only), which goes on without a node it lost.
    """
    needs_rank = any(isinstance(w, Shell) and "$NODE_RANK" in w for w in words)

    def on_each_node(prefix: list, rank_variable: str) -> list[str]:
        if not needs_rank:
            return [words_to_line(prefix + words)]
        agent = f'export NODE_RANK="${rank_variable}"; exec {words_to_line(words)}'
        return [words_to_line(prefix + ["bash", "-c", agent])]

    if spec.scheduler == "slurm":
        # The agent's one task gets every CPU the node's processes were given;
        # by default a step's task has one CPU, and all workers would share it.
        cpus = spec.procs_per_node * (spec.cpus_per_proc or 1)
        each = ["--ntasks-per-node=1", f"--cpus-per-task={cpus}"]
        if spec.elastic:
            return elastic_on_slurm(spec, each, on_each_node)
        return on_each_node(["srun", f"--nodes={spec.nodes}", f"--ntasks={spec.nodes}", *each,
                             "--kill-on-bad-exit=1"], "SLURM_NODEID")
    if spec.scheduler == "pbs":
        spread = ["mpirun", "--hostfile", var("HPCDIST_NODEFILE"), "-np", str(spec.nodes),
                  "--map-by", "ppr:1:node", "--bind-to", "none", MPI_EXPORTS]
        return [mpi_exports(spec)] + on_each_node(spread, "OMPI_COMM_WORLD_RANK")
    # local: several "nodes" on this host, as background agents.
    return [
        "pids=()",
        f"for node_rank in $(seq 0 {spec.nodes - 1}); do",
        # A subshell, so that the words' own "$NODE_RANK" sees this node's value.
        f"  (export NODE_RANK=$node_rank; exec {words_to_line(words)} ) &",
        "  pids+=($!)",
        "done",
        'hpcdist_wait_all "${pids[@]}"',
    ]


def elastic_on_slurm(spec: JobSpec, each: list, on_each_node) -> list[str]:
    """An elastic job's agents: the first node's, which holds the rendezvous store, in a step of
    its own whose end is the job's; the other nodes' in a second step, which may lose a node
    (``--no-kill``, as the job's ``#SBATCH --no-kill``: Slurm keeps the rest of the allocation)
    while the training goes on, after a restart, on the nodes left."""
    others = spec.nodes - 1
    first = on_each_node(["srun", "--nodes=1", "--ntasks=1", "--relative=0", *each, "--no-kill"], "SLURM_NODEID")
    rest = on_each_node(["srun", f"--nodes={others}", f"--ntasks={others}", "--relative=1", *each, "--no-kill"],
                        "SLURM_NODEID")
    return [
        *rest[:-1], rest[-1] + " &",
        "hpcdist_other_nodes=$!",
        "hpcdist_status=0",
        *first[:-1], first[-1] + " || hpcdist_status=$?",
        # The training failed: the other agents would wait for a rendezvous that never comes.
        '[ "$hpcdist_status" = 0 ] || kill "$hpcdist_other_nodes" 2>/dev/null || true',
        'wait "$hpcdist_other_nodes" || echo "hpcdist: the agents on the other nodes ended with status $? '
        '(a node lost?); the job ends as the first node\'s agent did: status $hpcdist_status" >&2',
        'exit "$hpcdist_status"',
    ]


def launch_lines(spec: JobSpec) -> list[str]:
    """The shell lines that start the training on every node."""
    launcher = LAUNCHERS[spec.launcher]
    words = launcher.words(spec)
    if is_per_node(spec):
        return launcher.setup(spec) + per_node(spec, words)
    setup = launcher.setup(spec) + ([mpi_exports(spec)] if MPI_EXPORTS in words else [])
    return setup + [words_to_line(words)]
