"""A DDP training in which one rank fails half-way, for the failure tests.

    failing_training.py --fail-rank 3 --fail-step 5 --how raise|exit|kill [--others sleep]

The failing rank raises an exception, exits with status 3, or kills itself
with SIGKILL at the given step. The other ranks go on into the next
all-reduce (where gloo sees the peer gone), or with ``--others sleep``
they sleep instead, as a rank busy in a long computation would: then only
the launcher can end them.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import hpcdist.env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-step", type=int, default=5)
    parser.add_argument("--how", choices=("raise", "exit", "kill"), default="raise")
    parser.add_argument("--others", choices=("collective", "sleep"), default="collective")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--local_rank", type=int, help=argparse.SUPPRESS)  # DeepSpeed's
    args = parser.parse_args()

    env = hpcdist.env.init_distributed(timeout=300)
    sys.stdout.write(f"[{socket.gethostname()}] rank {env.rank}/{env.world_size} started\n")  # one write per line
    sys.stdout.flush()
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
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
            elif args.others == "sleep":
                time.sleep(600)
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        time.sleep(0.2)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.write(f"rank {env.rank} finished\n")


if __name__ == "__main__":
    main()
