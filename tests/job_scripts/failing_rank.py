"""A rank that fails half-way while the others are busy, without torch: the launcher's part.

    failing_rank.py --fail-rank 3 --fail-step 5 --how raise|exit|kill

For the failure rows of tests/launchers/test_matrix.py, whose question is whether the
launcher ends the whole job and hpcdist names the rank, not the training:
each rank finds its rank with hpcdist.env (as a training does), reports an
uncaught exception as init_distributed() would (hpcdist.failures), takes a
few steps, and then the failing rank raises, exits with status 3 or kills
itself with SIGKILL, while the others sleep (a rank busy in a long
computation, outside any collective): only the launcher can end them.
Without torch each rank starts in a fraction of a second, so a row costs
the launcher's time, not four torch imports (tests/job_scripts/failing_training.py
is the same with a DDP model, where a collective matters).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time

import hpcdist.env
from hpcdist.failures import report_failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-step", type=int, default=5)
    parser.add_argument("--how", choices=("raise", "exit", "kill"), default="raise")
    parser.add_argument("--steps", type=int, default=10)
    # A word of the test's own on every process's command line: how it finds this job's processes
    # left behind, and not those of a job on the other test cluster (one pid space) beside it.
    parser.add_argument("--run-id", default="")
    parser.add_argument("--local_rank", type=int, help=argparse.SUPPRESS)  # DeepSpeed's
    args = parser.parse_args()

    env = hpcdist.env.resolve()
    report_failures(env)
    sys.stdout.write(f"[{socket.gethostname()}] rank {env.rank}/{env.world_size} started\n")  # one write per line
    sys.stdout.flush()
    for step in range(args.steps):
        if step == args.fail_step:
            if env.rank == args.fail_rank:
                sys.stdout.write(f"failing now: {time.time():.3f}\n")
                sys.stdout.flush()
                if args.how == "raise":
                    raise ValueError(f"injected failure at step {step}")
                if args.how == "exit":
                    sys.exit(3)
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(600)
        time.sleep(0.2)
    sys.stdout.write(f"rank {env.rank} finished\n")


if __name__ == "__main__":
    main()
