"""Uneven data parallelism on the digits: each rank's micro-batch is proportional to its speed.

    hpcdist submit --scheduler local --procs-per-node 2 --wait examples/uneven/train.py --weights 2,1
    hpcdist submit --scheduler local --procs-per-node 2 --wait examples/uneven/train.py \\
        --calibrate --slow-rank 1 --slowdown 2
    hpcdist submit --scheduler local --procs-per-node 2 --launcher deepspeed --wait \\
        examples/uneven/train.py --engine deepspeed --weights 2,1

A cluster that mixes GPU generations: with the stock DistributedSampler the
fast GPUs wait for the slow ones at every all-reduce. Here
hpcdist.data.WeightedDistributedBatchSampler gives each rank a share of
every global batch in proportion to a weight (``--weights``, or measured
with ``--calibrate``), and each rank multiplies its loss by
``sampler.loss_scale(step)`` so that the update stays the mean over the
global batch. ``--slow-rank``/``--slowdown`` make one rank slower on
purpose (it sleeps after each forward), to see the effect on one machine.
DDP by default; ``--engine deepspeed`` trains the same model with a DeepSpeed
engine (see README.md here for how its one micro-batch size is handled).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/common.py
import common  # noqa: E402
import hpcdist.env  # noqa: E402
from hpcdist.data import WeightedDistributedBatchSampler, calibrate, parse_weights  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    share = p.add_mutually_exclusive_group()
    share.add_argument("--weights", help="relative speed of each rank, comma-separated "
                                         "(2,1: rank 0 twice as fast); default equal")
    share.add_argument("--calibrate", action="store_true",
                       help="measure each rank's throughput first and use it as the weights")
    p.add_argument("--global-batch", type=int, default=96, help="samples per optimizer step over all ranks")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow-rank", type=int, default=None, help="make this rank slower on purpose (a slower GPU)")
    p.add_argument("--slowdown", type=float, default=2.0, help="how much slower --slow-rank runs")
    # Not --deepspeed: hpcdist submit would take it for an abbreviation of its own --deepspeed-config.
    p.add_argument("--engine", choices=["ddp", "deepspeed"], default="ddp", help="DDP, or a DeepSpeed engine")
    p.add_argument("--zero-stage", type=int, default=0, choices=[0, 1, 2], help="DeepSpeed ZeRO stage")
    p.add_argument("--synthetic", action="store_true", help="random separable data instead of scikit-learn's digits")
    # DeepSpeed's launcher passes --local_rank; hpcdist.env already knows it.
    p.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()

    env = hpcdist.env.init_distributed(timeout=120)  # ranks from whichever launcher started us
    device = common.settle(env, deterministic=False)
    common.log(f"{'DeepSpeed' if args.engine == 'deepspeed' else 'DDP'} on "
               f"{common.ranks(env.world_size)} ({env.launcher}, {device.type})")
    train(args, env, device)
    # Leave together: gloo can abort at exit when one rank tears the group down
    # while another still uses it; train() has returned, so its model is gone.
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def make_net() -> nn.Module:
    # No BatchNorm: a rank with a micro-batch of one sample cannot take a training-mode BatchNorm.
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))


class Slowdown:
    """Makes one rank ``factor`` times slower, like an older GPU: it sleeps after each forward.

    The sleep is ``(factor - 1)`` times this rank's own compute time per
    sample, measured once on the bare model, so the rank stays ``factor``
    times slower whatever the micro-batch.
    """

    def __init__(self, slow: bool, factor: float, net: nn.Module, x, y):
        self.per_sample = 0.0
        if slow and factor > 1:
            self.per_sample = (factor - 1) * compute_seconds(net, x, y) / len(x)

    def after_forward(self, samples: int) -> None:
        if self.per_sample:
            time.sleep(self.per_sample * samples)


def compute_seconds(net: nn.Module, x, y, repeats: int = 7) -> float:
    """Median time of a forward and backward of the bare model (no collective in it)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        F.cross_entropy(net(x), y).backward()
        times.append(time.perf_counter() - started)
    net.zero_grad(set_to_none=True)
    return sorted(times)[len(times) // 2]


def train(args, env, device) -> None:
    train_set, test_set = common.digits(args.synthetic)
    common.seed_everything(args.seed)  # the same initial weights on every rank
    net = make_net().to(device)
    x_all, y_all = (t.to(device) for t in train_set.tensors)
    probe_x, probe_y = x_all[: args.global_batch // env.world_size], y_all[: args.global_batch // env.world_size]
    slowdown = Slowdown(env.rank == args.slow_rank, args.slowdown, net, probe_x, probe_y)

    if args.calibrate:
        # On the bare model, before DDP or DeepSpeed wrap it: the timed steps
        # must not all-reduce, or every rank would wait for the slowest and
        # measure the same time.
        def probe():
            loss = F.cross_entropy(net(probe_x), probe_y)
            slowdown.after_forward(len(probe_x))
            loss.backward()
            net.zero_grad(set_to_none=True)

        weights = calibrate(probe, samples_per_step=len(probe_x), steps=10)
        common.log("calibrated throughput (samples/s): " + ", ".join(f"{w:.0f}" for w in weights))
    elif args.weights:
        weights = parse_weights(args.weights, env.world_size)
    else:
        weights = [1.0] * env.world_size

    # The same weights on every rank give the same layout: the same number of steps everywhere.
    sampler = WeightedDistributedBatchSampler(train_set, weights, args.global_batch, seed=args.seed)
    loader = DataLoader(train_set, batch_sampler=sampler)
    # One write per line: the ranks share the job's log.
    sys.stdout.write(f"rank {env.rank}/{env.world_size}: weight {weights[env.rank]:.4g}, micro-batch "
                     f"{sampler.micro_batch_size} of {args.global_batch}, {len(sampler)} steps per epoch\n")
    sys.stdout.flush()

    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    if args.engine == "deepspeed":
        import deepspeed

        # train_micro_batch_size_per_gpu is one number for all ranks: the largest
        # micro-batch (what memory must hold). DeepSpeed never checks the batch
        # it is given, and averages gradients over ranks like DDP, so each rank's
        # own micro-batch with the loss scale gives the global mean.
        config = {
            "train_micro_batch_size_per_gpu": sampler.max_micro_batch_size,
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": args.zero_stage},
            "zero_allow_untested_optimizer": True,  # torch's SGD under ZeRO
            "gradient_clipping": 0.0,  # as the DDP path; DeepSpeed 0.19 clips at 1.0 when not told
        }
        model, _, _, _ = deepspeed.initialize(model=net, optimizer=opt, config=config)

        def update(loss):
            model.backward(loss)
            model.step()  # also zeroes the gradients
    else:
        model = nn.parallel.DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)

        def update(loss):
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP averages the ranks' gradients with equal weight
            opt.step()

    before = full_loss(net, x_all, y_all)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        dist.barrier()
        started = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            slowdown.after_forward(len(x))
            # This rank's share of the step's global batch, times the world size:
            # the equal-weight average over ranks becomes the mean over all samples.
            update(loss * sampler.loss_scale(step))
        dist.barrier()
        common.log(f"epoch {epoch}: {len(sampler)} steps in {time.perf_counter() - started:.2f} s, "
                   f"loss {full_loss(net, x_all, y_all):.4f}")

    after = torch.tensor([full_loss(net, x_all, y_all)], dtype=torch.float64, device=device)
    # Every rank holds the same model, so every rank measures the same loss.
    gathered = [torch.zeros_like(after) for _ in range(env.world_size)]
    dist.all_gather(gathered, after)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    accuracy = test_accuracy(net, test_set, device)
    common.log(f"loss {before:.4f} -> {after.item():.4f} on {common.ranks(env.world_size)}; "
               f"identical on all ranks: {same}; test accuracy {accuracy:.3f}")


@torch.no_grad()
def full_loss(net: nn.Module, x, y) -> float:
    """Mean loss over the whole training set: the same number on every rank when the models agree."""
    return F.cross_entropy(net(x), y).item()


@torch.no_grad()
def test_accuracy(net: nn.Module, test_set, device) -> float:
    x, y = (t.to(device) for t in test_set.tensors)
    return (net(x).argmax(1) == y).float().mean().item()


if __name__ == "__main__":
    main()
