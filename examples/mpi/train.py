"""Data-parallel training started by mpirun: MPI gives the ranks (mpi4py, as in
seed 002), hpcdist.env sets up torch's process group from them, DDP averages the gradients.

    hpcdist submit --scheduler local --procs-per-node 2 --launcher mpirun --wait examples/mpi/train.py
    hpcdist submit --scheduler pbs --nodes 2 --procs-per-node 4 --launcher mpirun examples/mpi/train.py

mpi4py is imported first, so MPI is ours: hpcdist reads the ranks from Open
MPI's variables and leaves MPI initialised (mpi4py finalizes it at exit).
"""

from __future__ import annotations

import gc
import itertools
import os
import sys

from mpi4py import MPI  # first: MPI_Init before anything else

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/common.py
import common  # noqa: E402
import hpcdist.env  # noqa: E402


def net(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def main() -> None:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()  # the seed-002 way
    env = hpcdist.env.init_distributed(timeout=120)  # MASTER_ADDR/PORT and the local rank, under any MPI
    if (env.rank, env.world_size) != (rank, size):
        sys.exit(f"MPI says rank {rank} of {size}, hpcdist.env says {env.rank} of {env.world_size}")
    device = common.settle(env, args.deterministic)
    common.log(f"MPI + DDP on {common.ranks(size)} ({MPI.Get_library_version().split(',')[0].strip()}; "
               f"{env.launcher}, {dist.get_backend()}, {device.type})")
    train(args, comm, env, device)
    gc.collect()  # the DDP model is gone: the group can go (gloo aborts otherwise)
    dist.barrier()
    dist.destroy_process_group()


def train(args, comm, env, device) -> None:
    train_set, test_set = common.digits(args.synthetic)
    sampler = DistributedSampler(train_set, num_replicas=comm.Get_size(), rank=comm.Get_rank(),
                                 shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch, sampler=sampler, drop_last=True)
    common.seed_everything(args.seed)
    model = net().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    folder = common.checkpoint_dir(args, "mpi")
    start = 0
    if args.resume:
        # Rank 0 reads the checkpoint and MPI broadcasts it: the other ranks need
        # not see the file.
        saved = common.saved(folder, ".pt") if env.rank == 0 else []
        ckpt = comm.bcast(torch.load(saved[-1], map_location="cpu") if saved else None, root=0)
        if ckpt is None:
            common.log(f"no checkpoint in {folder}: starting from step 0")
        else:
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])  # moved to the parameters' device
            start = ckpt["step"]
            common.log(f"resumed at step {start}")
    common.seed_everything(args.seed + 1000 * (env.rank + 1))
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    step = start
    while step < args.steps:
        epoch, done = divmod(step, len(loader))
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in itertools.islice(loader, done, None):  # skips what a resumed run already did
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step == start + 1 or step % args.log_every == 0 or step == args.steps:
                mean = comm.allreduce(loss.item()) / comm.Get_size()  # MPI and gloo side by side
                common.log(f"step {step} epoch {epoch} loss {mean:.4f}")
            if (step % args.save_every == 0 or step == args.steps) and env.rank == 0:
                common.atomic_save({"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step},
                                   os.path.join(folder, f"step-{step:06d}.pt"))
                common.prune(folder, ".pt")
            if step == args.steps:
                break

    x, y = (t.to(device) for t in common.eval_shard(test_set, env))
    with torch.no_grad():
        out = model.module(x)
    # Sums over the ranks with MPI: loss, correct answers, samples.
    mine = torch.tensor([F.cross_entropy(out, y, reduction="sum").item(), (out.argmax(1) == y).sum().item(), len(y)],
                        dtype=torch.float64)
    loss, correct, n = comm.allreduce(mine.numpy())
    common.log(f"eval loss {loss / n:.4f} accuracy {correct / n:.3f} on {int(n)} test samples "
               f"from {common.ranks(comm.Get_size())}")
    if args.save_final and env.rank == 0:
        common.atomic_save(model.module.state_dict(), args.save_final)


if __name__ == "__main__":
    main()
