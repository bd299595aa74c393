"""torchrun: one agent per node, a c10d rendezvous on the first host; restarts and elastic size.

Where it runs: on the login node (the launch lines). The agents' rendezvous store is held by the
job's set-up (``hpcdist job-setup --hold-store``: :mod:`hpcdist.injob.store`).

``--min-nodes`` without ``--max-restarts`` is its elastic size (``--nnodes=MIN:MAX``, Slurm only);
with ``--max-restarts`` the restarts are the job script's (:mod:`hpcdist.injob.restart`), under
every launcher, and ``--min-nodes`` the fewest nodes they go on with: torchrun's own restarts are
never used. Its log names a failed rank in its "Root Cause" block.
"""

from __future__ import annotations

import re
import sys

from hpcdist.launchers import Launcher, exit_why, failure, program
from hpcdist.shell import BREAK, Shell

#: torchrun's summary of the first failed worker (compiled by re's cache when a log is read).
ROOT_CAUSE = (
    r"Root Cause \(first observed failure\):\s*\[\d+\]:\s*time\s*: (?P<time>\S+)\s*host\s*: (?P<host>\S+)\s*"
    r"rank\s*: (?P<rank>\d+) \(local_rank: (?P<local>\d+)\)\s*exitcode\s*: (?P<code>-?\d+)[^\n]*\n"
    r"(?:\s*error_file\s*:[^\n]*\n)?(?:\s*traceback\s*: (?P<tb>[^\n]*))?")

#: torchrun's own lines when a signal (a cancel, the walltime, a preemption) stops it: its log lines
#: of the shutdown, and the exception each of its nested handlers raises on the way out. Read by
#: :mod:`hpcdist.jobs.logfiles`, which folds that teardown into one line of ``hpcdist logs``.
TEARDOWN_LINE = (r"^[IWE]\d{4} (?P<time>\d\d:\d\d:\d\d)\.\d+ +\d+ torch/distributed/elastic/\S+\] "
                 r"(?:Received \d+ death signal|Sending process \d+ closing signal)")
#: Searched, not matched: two agents on one host cut each other's lines in the log.
SIGNAL_EXCEPTION = r"SignalException: Process \d+ got signal: (?P<signal>\d+)"
#: Any line of torchrun's agent's own log.
ELASTIC_LINE = r"[IWE]\d{4} [\d:.]+ +\d+ torch/distributed/elastic/"


class Torchrun(Launcher):
    name = "torchrun"

    def per_node(self, spec):
        return True

    def describe(self, spec, spread: str = ""):
        # The agents meet at $MASTER_ADDR:$MASTER_PORT (c10d); torchrun then gives its workers a
        # master of its own choosing (the first agent's host and a free port).
        n = spec.procs_per_node
        meeting = "this node" if holds_store(spec) else "the master"
        return f"Start torchrun on every node{spread}: {n} process{'es' if n > 1 else ''} each, meeting at {meeting}."

    def words(self, spec):
        # c10d rendezvous on the first host; the rendezvous assigns node ranks.
        # Elastic: MIN:MAX nodes; the training goes on (after a restart) with those left.
        # A job whose restarts may go on with fewer nodes: the set-up's count (spec.count).
        nnodes = Shell(f"--nnodes={spec.min_nodes}:{spec.nodes}") if spec.elastic else spec.count("--nnodes=")
        # The first node's agent hosts the store, and only it: left to guess, torch lets an agent
        # on the master's host that cannot listen on the port join whatever listens there
        # (another job's store, another user's program), and on the local backend every agent is
        # on the master's host. An elastic job's two srun steps each count their nodes from 0:
        # hpcdist agents --elastic says which agent hosts (hpcdist.schedulers.slurm.job).
        if spec.elastic:
            host = []
        elif holds_store(spec):
            host = ["--rdzv-conf=is_host=0"]
        else:
            host = [Shell('--rdzv-conf=is_host="$(( $NODE_RANK == 0 ))"')]
        # An elastic job's new round: torch's agents keep one store for every round, where a restarted
        # worker can read the dead workers' addresses (gloo "Connection refused" at every restart,
        # until torchrun gives up: pytorch/pytorch#135712, #167288). Each round then gets a store of
        # its own, as before torch 2.4.
        fresh = ["env", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"] if spec.elastic else []
        return [BREAK, *fresh, "torchrun", nnodes, f"--nproc-per-node={spec.procs_per_node}",
                "--rdzv-backend=c10d", Shell('--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"'), *host,
                Shell('--rdzv-id="$HPCDIST_JOB_ID"')] + workers(spec)

    def job_setup(self, spec):
        # The agents' store outlives every agent: the set-up holds it on the master's port, and a
        # restart's set-up the next launch's (hpcdist.injob.store).
        return ["--hold-store"] if holds_store(spec) else []

    def failures(self, text, agents, nodes):
        return [(m.start(), failure(exit_why(int(m["code"])), rank=int(m["rank"]), local_rank=int(m["local"]),
                                    host=m["host"], source="torchrun"))
                for m in re.finditer(ROOT_CAUSE, text)]


def workers(spec) -> list:
    """What torchrun starts: each worker through hpcdist.rank (its --module), which records its
    progress for `hpcdist watch`; the script is then an argument (a `--` after it is not torchrun's
    to swallow). In a container the script itself, as before: the image need not hold hpcdist
    (tests/launchers/test_matrix.py trains in one that does not)."""
    from hpcdist import containers

    if containers.get(spec) is not None:
        return program(spec, argparse_launcher=True)
    return ["-m", "hpcdist.rank"] + program(spec)


def holds_store(spec) -> bool:
    """Whether the job's set-up holds the rendezvous store (:mod:`hpcdist.injob.store`): several
    nodes, a fixed size (an elastic job's rounds are hpcdist agents --elastic's), and the host's
    python the training's (in a container the host may have no torch)."""
    from hpcdist import containers

    return spec.nodes > 1 and not spec.elastic and spec.python != "hpcdist" and containers.get(spec) is None


LAUNCHER = Torchrun()

if __name__ == "__main__":  # the line of scripts written before the set-up held the store itself
    if len(sys.argv) != 3 or sys.argv[1] != "--hold-store" or not sys.argv[2].isdigit():
        raise SystemExit("usage: python -m hpcdist.launchers.torchrun --hold-store PORT")
    from hpcdist.injob.store import cannot_listen, hold

    try:
        hold(int(sys.argv[2]))
    except OSError as e:
        raise SystemExit(f"hpcdist: {cannot_listen(sys.argv[2], e)}") from None
