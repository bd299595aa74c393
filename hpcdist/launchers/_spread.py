"""TEMPORARY: the per-node spreading of launch_commands.py, moved here unchanged.

How each scheduler starts one agent per node belongs to the schedulers
(``Scheduler.spread``), written in another branch; at the merge
:func:`hpcdist.render.launch_lines` calls that instead and this module goes.
"""

from __future__ import annotations

from hpcdist.launchers.mpi import MPI_EXPORTS, mpi_exports
from hpcdist.shell import Shell, var, words_to_line
from hpcdist.spec import JobSpec


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
