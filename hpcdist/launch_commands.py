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
    """Lines that start ``words`` once on every node: the scheduler's own way
    (:meth:`hpcdist.schedulers.base.Scheduler.spread`)."""
    from hpcdist import schedulers

    return schedulers.get(spec.scheduler, spec.dialect).spread(spec, words)


def launch_lines(spec: JobSpec) -> list[str]:
    """The shell lines that start the training on every node."""
    launcher = LAUNCHERS[spec.launcher]
    words = launcher.words(spec)
    if is_per_node(spec):
        return launcher.setup(spec) + per_node(spec, words)
    setup = launcher.setup(spec) + ([mpi_exports(spec)] if MPI_EXPORTS in words else [])
    return setup + [words_to_line(words)]
