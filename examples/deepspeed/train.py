"""DeepSpeed ZeRO on the digits: stage 1 shards the optimizer state over the ranks,
stage 2 the gradients too, stage 3 the weights too; the config file picks the stage.

    hpcdist submit --scheduler local --procs-per-node 2 --launcher deepspeed \\
        --deepspeed-config examples/deepspeed/zero2.json --wait examples/deepspeed/train.py
    hpcdist submit --scheduler pbs --nodes 2 --gpus-per-node 4 --launcher deepspeed \\
        --deepspeed-config examples/deepspeed/zero3.json examples/deepspeed/train.py --bf16

hpcdist passes the config as --deepspeed_config (DeepSpeed's own flag). The
configs use torch's AdamW ("torch_adam": true): nothing to compile, on CPUs or GPUs.
"""

from __future__ import annotations

import gc
import itertools
import json
import logging
import os
import sys
import time
import warnings

import deepspeed
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/common.py
import common  # noqa: E402
import hpcdist.env  # noqa: E402
from hpcdist.signals import StopRequest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def net(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.set_defaults(batch=None, lr=None)  # the config's, unless given
    p.add_argument("--bf16", action="store_true", help="turn the config's bf16 on")
    p.add_argument("--fp16", action="store_true",
                   help="turn the config's fp16 on (GPUs only: loss scaling, fp16 kernels)")
    deepspeed.add_config_arguments(p)  # --deepspeed, --deepspeed_config
    args = p.parse_args()

    env = hpcdist.env.init_distributed(timeout=120)  # DeepSpeed adopts this process group
    if env.rank != 0:
        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)  # its INFO lines on rank 0 only
    # DeepSpeed still calls torch.distributed's old names, and torch says so on every rank.
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning)
    device = common.settle(env, args.deterministic)
    if device.type == "cpu":
        # DeepSpeed's CPU backend compiles a shared-memory all-reduce with g++ when
        # it starts (a minute, on a fresh machine), for its inference kernels only:
        # training uses the gloo group. Mark it unavailable so nothing is compiled.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    config = load_config(args, device)
    common.log(f"DeepSpeed ZeRO-{config.get('zero_optimization', {}).get('stage', 0)} on "
               f"{common.ranks(env.world_size)} ({env.launcher}, {dist.get_backend()}, "
               f"{device.type}, config {args.deepspeed_config})")
    train(args, config, env)
    gc.collect()  # the engine is gone: the group can go (gloo aborts otherwise)
    dist.barrier()
    dist.destroy_process_group()


def load_config(args, device) -> dict:
    args.deepspeed_config = args.deepspeed_config or os.path.join(HERE, "zero2.json")
    with open(args.deepspeed_config) as f:
        config = json.load(f)
    if args.batch:
        config["train_micro_batch_size_per_gpu"] = args.batch
        config.pop("train_batch_size", None)  # DeepSpeed derives it: micro batch x accumulation x ranks
    if args.lr:
        config["optimizer"]["params"]["lr"] = args.lr
    for name in ("bf16", "fp16"):
        if getattr(args, name):
            config[name] = {**config.get(name, {}), "enabled": True}
    if config.get("fp16", {}).get("enabled") and device.type != "cuda":
        sys.exit("fp16 needs GPUs; on CPUs use --bf16 or neither")
    return config


def train(args, config, env) -> None:
    train_set, test_set = common.digits(args.synthetic)
    common.seed_everything(args.seed)  # the same initial weights on every rank
    # The config is passed as a dict (after the flags' changes), not as args:
    # DeepSpeed refuses a config given both ways.
    engine, _, _, _ = deepspeed.initialize(model=net(), model_parameters=None, config=config)
    common.seed_everything(args.seed + 1000 * (env.rank + 1))  # per-rank randomness from here on
    dtype = torch.bfloat16 if engine.bfloat16_enabled() else torch.float16 if engine.fp16_enabled() else torch.float32
    common.log(f"ZeRO stage {engine.zero_optimization_stage()}, weights and activations in {dtype}, "
               f"optimizer {type(engine.optimizer).__name__} over {type(engine.basic_optimizer).__name__}")

    # Our own loader rather than deepspeed.initialize(training_data=...): its sampler is ours to set_epoch.
    micro = engine.train_micro_batch_size_per_gpu()
    accum = engine.gradient_accumulation_steps()
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=micro, sampler=sampler, drop_last=True)

    folder = common.checkpoint_dir(args, "deepspeed")
    start = 0
    if args.resume:
        # Model, optimizer (each rank its own ZeRO partition) and our client state.
        path, client = engine.load_checkpoint(folder)
        if path is None:
            common.log(f"no checkpoint in {folder}: starting from step 0")
        else:
            start = client["step"]
            common.log(f"resumed from {path} at step {start}")

    stop = StopRequest()  # catches the job script's stop request (hpcdist submit --requeue)
    step, seen = start, start * accum  # optimizer steps, micro-batches
    while step < args.steps:
        epoch, done = divmod(seen, len(loader))
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in itertools.islice(loader, done, None):  # skips what a resumed run already did
            loss = F.cross_entropy(engine(x.to(engine.device, dtype)).float(), y.to(engine.device))
            engine.backward(loss)  # scales the loss for fp16 and for accumulation
            engine.step()  # updates the weights only at the end of each gradient_accumulation_steps
            seen += 1
            if seen % accum:
                continue
            step += 1

            if step == start + 1 or step % args.log_every == 0 or step == args.steps:
                total = loss.detach().clone()
                dist.all_reduce(total)
                common.log(f"step {step} epoch {epoch} loss {total.item() / env.world_size:.4f}")
            # The walltime warning or a preemption, on every rank at this step; after the last step
            # the training is done, whatever came: it is not stopped (so it is not requeued).
            stopping = step < args.steps and stop.agreed()
            if step % args.save_every == 0 or step == args.steps or stopping:
                save(engine, folder, step, env)
            if stopping:
                common.log(f"stopped at step {step} ({stop.reason}): checkpoint saved; a requeued job goes on from it")
                return
            if step == args.steps:
                break
            time.sleep(args.step_delay)

    loss, acc = evaluate(engine, test_set, env, dtype)
    common.log(f"eval loss {loss:.4f} accuracy {acc:.3f} on {len(test_set)} test samples "
               f"from {common.ranks(env.world_size)}")
    if args.save_final:
        # ZeRO-3 keeps a shard of each weight per rank: gather them for the plain copy
        # (a no-op under stages 1 and 2). With bf16/fp16 these are the 16-bit weights.
        with deepspeed.zero.GatheredParameters(list(engine.module.parameters())):
            if env.rank == 0:
                full = {k: v.detach().float().cpu().clone() for k, v in engine.module.state_dict().items()}
                common.atomic_save(full, args.save_final)  # loads into a plain net()


def save(engine, folder: str, step: int, env) -> None:
    """Every rank writes its part (rank 0 the weights, each rank its optimizer
    partition) into folder/step-NNNNNN. DeepSpeed's own 'latest' file is written
    by rank 0 without waiting for the other ranks; ours is written after
    save_checkpoint's closing barrier, atomically, so it never names a checkpoint
    that a crash left half-written."""
    tag = f"step-{step:06d}"
    engine.save_checkpoint(folder, tag=tag, client_state={"step": step}, save_latest=False)
    if env.rank == 0:
        with open(os.path.join(folder, "latest.tmp"), "w") as f:
            f.write(tag)
            f.flush()
            os.fsync(f.fileno())
        os.replace(os.path.join(folder, "latest.tmp"), os.path.join(folder, "latest"))
        common.prune(folder)


@torch.no_grad()
def evaluate(engine, test_set, env, dtype) -> tuple[float, float]:
    x, y = (t.to(engine.device) for t in common.eval_shard(test_set, env))
    engine.eval()
    out = engine(x.to(dtype)).float()
    engine.train()
    sums = torch.tensor([F.cross_entropy(out, y, reduction="sum").item(), (out.argmax(1) == y).sum().item(),
                         len(y)], dtype=torch.float64, device=engine.device)
    dist.all_reduce(sums)  # sums, not means: the shards differ in size by one
    return (sums[0] / sums[2]).item(), (sums[1] / sums[2]).item()


if __name__ == "__main__":
    main()
