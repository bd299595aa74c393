"""DistributedDataParallel on the digits: every rank holds the whole model and
trains on its own share of the data; gradients are averaged after each backward.

    hpcdist submit --scheduler local --procs-per-node 2 --wait examples/ddp/train.py
    hpcdist submit --scheduler slurm --nodes 2 --gpus-per-node 4 examples/ddp/train.py --amp bf16

Same file on CPUs (gloo) and GPUs (nccl), under torchrun, srun, mpirun or DeepSpeed's launcher.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/common.py
import common  # noqa: E402
import hpcdist.env  # noqa: E402
from hpcdist.signals import StopRequest  # noqa: E402


class Net(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(64, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, 10),
        )

    def forward(self, x):
        return self.layers(x)


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--accum", type=int, default=1,
                   help="gradient accumulation: slices per batch, one all-reduce per step")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off", help="autocast dtype (fp16: GPUs only)")
    p.add_argument("--sync-bn", action="store_true", help="BatchNorm statistics over all ranks (GPUs only)")
    args = p.parse_args()

    env = hpcdist.env.init_distributed(timeout=120)  # ranks from whichever launcher started us
    device = common.settle(env, args.deterministic)
    common.log(f"DDP on {common.ranks(env.world_size)} ({env.launcher}, {dist.get_backend()}, {device.type})")
    train(args, env, device)
    # Leave together: gloo can abort at exit when one rank tears the group down
    # while another still uses it. train() has returned, so the DDP model that
    # held the group is gone (gc collects any cycle).
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def train(args, env, device) -> None:
    if args.amp == "fp16" and device.type != "cuda":
        sys.exit("--amp fp16 needs GPUs; on CPUs use --amp bf16")
    train_set, test_set = common.digits(args.synthetic)
    # The sampler gives each rank its own part of every epoch's shuffle;
    # drop_last keeps the number of steps the same on every rank.
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch, sampler=sampler, drop_last=True)

    common.seed_everything(args.seed)  # the same initial weights on every rank
    model = Net()
    opt_state = scaler_state = None
    start = 0
    folder = common.checkpoint_dir(args, "ddp")
    if args.resume and common.saved(folder, ".pt"):
        # Every rank reads the newest file (the checkpoint folder is on the shared file
        # system): DDP broadcasts the weights, but not the optimizer state.
        path = common.saved(folder, ".pt")[-1]
        ckpt = torch.load(path, map_location="cpu")
        model.load_state_dict(ckpt["model"])  # saved from model.module: no "module." prefix
        opt_state, scaler_state, start = ckpt["optimizer"], ckpt["scaler"], ckpt["step"]
        # A launch that hpcdist restarted (--max-restarts) says which restart it is.
        restart = hpcdist.env.restart_count()
        common.log(f"resumed from {path} at step {start}" + (f" (restart {restart})" if restart else ""))
    elif args.resume:
        common.log(f"no checkpoint in {folder}: starting from step 0")
    # Anything random from here on (dropout, augmentation) differs between ranks.
    common.seed_everything(args.seed + 1000 * (env.rank + 1))

    if args.sync_bn and device.type == "cuda":
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    elif args.sync_bn:
        common.log("--sync-bn: torch's SyncBatchNorm has no CPU kernel; plain BatchNorm on CPUs")
    # --deterministic keeps DDP's gradient buckets as they are laid out at the start: by
    # default DDP lays them out anew after its first step, in every run, so a resumed run's
    # first step sums each gradient over the ranks in another order (with more than 2
    # ranks, other last bits). Looking for unused parameters turns that off, at the cost
    # of one walk over the autograd graph per step.
    model = DistributedDataParallel(model.to(device), device_ids=[device.index] if device.type == "cuda" else None,
                                    find_unused_parameters=args.deterministic)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    # bf16 has float32's range: only fp16 needs its loss scaled.
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp == "fp16")
    if opt_state is not None:
        opt.load_state_dict(opt_state)
        scaler.load_state_dict(scaler_state)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)

    stop = StopRequest()  # catches the job script's stop request (hpcdist submit --requeue)
    step = start
    while step < args.steps:
        epoch, done = divmod(step, len(loader))
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        # A resumed run skips the batches of this epoch it already trained on.
        for x, y in itertools.islice(loader, done, None):
            x, y = x.to(device), y.to(device)
            opt.zero_grad(set_to_none=True)
            total = torch.zeros((), device=device)
            # Gradient accumulation: the batch in --accum slices (the memory of one slice);
            # no_sync skips the all-reduce for all but the last slice's backward.
            for k, (xs, ys) in enumerate(zip(x.chunk(args.accum), y.chunk(args.accum))):
                sync = contextlib.nullcontext() if k == args.accum - 1 else model.no_sync()
                with sync:
                    with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                        loss = F.cross_entropy(model(xs), ys) / args.accum
                    scaler.scale(loss).backward()
                total += loss.detach().float()
            scaler.step(opt)
            scaler.update()
            step += 1

            if step == start + 1 or step % args.log_every == 0 or step == args.steps:
                dist.all_reduce(total)  # the loss averaged over all ranks' batches
                common.log(f"step {step} epoch {epoch} loss {total.item() / env.world_size:.4f}")
            # The walltime warning or a preemption: every rank learns it at the same step; after the
            # last step the training is done, whatever came: it is not stopped (so it is not requeued).
            stopping = step < args.steps and stop.agreed()
            if step % args.save_every == 0 or step == args.steps or stopping:
                if env.rank == 0:  # the weights and optimizer state are the same on every rank
                    common.atomic_save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                                        "scaler": scaler.state_dict(), "step": step},
                                       os.path.join(folder, f"step-{step:06d}.pt"))
                    common.prune(folder, ".pt")
            if stopping:
                common.log(f"stopped at step {step} ({stop.reason}): checkpoint saved; a requeued job goes on from it")
                return
            if step == args.steps:
                break
            time.sleep(args.step_delay)

    loss, acc = evaluate(model, test_set, env, device)
    common.log(f"eval loss {loss:.4f} accuracy {acc:.3f} on {len(test_set)} test samples "
               f"from {common.ranks(env.world_size)}")
    if args.save_final and env.rank == 0:
        common.atomic_save(model.module.state_dict(), args.save_final)  # loads into a plain Net()


@torch.no_grad()
def evaluate(model, test_set, env, device) -> tuple[float, float]:
    x, y = (t.to(device) for t in common.eval_shard(test_set, env))
    model.eval()
    out = model(x).float()
    model.train()
    # Sums, not means: the ranks' shards differ in size by one.
    sums = torch.tensor([F.cross_entropy(out, y, reduction="sum").item(), (out.argmax(1) == y).sum().item(),
                         len(y)], dtype=torch.float64, device=device)
    dist.all_reduce(sums)
    return (sums[0] / sums[2]).item(), (sums[1] / sums[2]).item()


if __name__ == "__main__":
    main()
