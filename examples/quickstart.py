"""A small DDP training run that works unchanged under torchrun, mpirun, mpiexec and srun.

    torchrun --nproc-per-node 2 examples/quickstart.py
    mpirun -np 2 python examples/quickstart.py
    srun --ntasks-per-node 2 python examples/quickstart.py

hpcdist.env finds the rank, local rank and master whichever launcher
started the processes; there is no --local_rank argument to parse.
"""

from __future__ import annotations

import argparse
import gc
import socket
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import hpcdist.env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    # DeepSpeed's launcher passes --local_rank; hpcdist.env already knows it.
    parser.add_argument("--local_rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    env = hpcdist.env.init_distributed(timeout=120)
    # One write per line: ranks share the launcher's stdout.
    sys.stdout.write(
        f"[{socket.gethostname()}] rank {env.rank}/{env.world_size} local {env.local_rank}/"
        f"{env.local_world_size} node {env.node_rank} via {env.launcher} "
        f"(master {env.master_addr}:{env.master_port}, rank from {env.sources['rank']})\n"
    )
    sys.stdout.flush()

    train(env, args)
    # The DDP model is gone by now (train returned, and gc collects any cycle):
    # the process group it used can be torn down cleanly. gloo may abort at
    # exit when ranks leave without the barrier, or while a model holds the group.
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def train(env, args) -> None:
    # nccl (hpcdist.env's choice where there is a GPU) moves CUDA tensors only.
    gpu = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    # The same target for every rank; each rank draws its own samples (on the CPU: the
    # same numbers with or without a GPU).
    torch.manual_seed(0)
    true_w = torch.randn(16, 1).to(device)
    torch.manual_seed(1000 + env.rank)
    model = DistributedDataParallel(torch.nn.Linear(16, 1).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def loss_on(x):
        noise = 0.1 * torch.randn(len(x), 1, generator=torch.Generator().manual_seed(len(x))).to(device)
        return torch.nn.functional.mse_loss(model(x), x @ true_w + noise)

    probe = torch.randn(256, 16, generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        before = loss_on(probe).item()
    for _ in range(args.steps):
        x = torch.randn(args.batch, 16).to(device)
        opt.zero_grad()
        loss_on(x).backward()  # DDP averages the gradients over all ranks
        opt.step()
    with torch.no_grad():
        after = torch.tensor([loss_on(probe).item()], device=device)
    # Every rank holds the same model, so every rank measures the same loss.
    gathered = [torch.zeros(1, device=device) for _ in range(env.world_size)]
    dist.all_gather(gathered, after)
    if env.rank == 0:
        same = all(torch.equal(g, gathered[0]) for g in gathered)
        ranks = "1 rank" if env.world_size == 1 else f"{env.world_size} ranks"
        print(f"loss {before:.4f} -> {after.item():.4f} on {ranks}; "
              f"identical on all ranks: {same}", flush=True)


if __name__ == "__main__":
    main()
