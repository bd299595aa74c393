"""A DeepSpeed pipeline on the digits: the layers are split into 2 stages, one per
rank, and each batch flows through them as micro-batches, so both stages work at once.

    hpcdist submit --scheduler local --procs-per-node 2 --launcher deepspeed \\
        --deepspeed-config examples/pipeline/pipeline.json --wait examples/pipeline/train.py
    hpcdist submit --scheduler slurm --nodes 2 --gpus-per-node 1 --launcher deepspeed \\
        --deepspeed-config examples/pipeline/pipeline.json examples/pipeline/train.py

With 4 ranks and 2 stages, 2 pipelines train side by side (data parallel).
gradient_accumulation_steps in the config is the number of micro-batches per step.
"""

from __future__ import annotations

import gc
import itertools
import json
import logging
import os
import sys
import warnings

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.pipe import LayerSpec, PipelineModule
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/common.py
import common  # noqa: E402
import hpcdist.env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def layers(hidden: int = 128) -> list:
    # LayerSpecs, not modules: each stage builds only its own layers.
    return [LayerSpec(nn.Linear, 64, hidden), LayerSpec(nn.ReLU),
            LayerSpec(nn.Linear, hidden, hidden), LayerSpec(nn.ReLU),
            LayerSpec(nn.Linear, hidden, 10)]


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.set_defaults(batch=None, lr=None)  # the config's micro batch and lr, unless given
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--bf16", action="store_true", help="turn the config's bf16 on")
    deepspeed.add_config_arguments(p)  # --deepspeed, --deepspeed_config
    args = p.parse_args()

    env = hpcdist.env.init_distributed(timeout=120)
    if env.rank != 0:
        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning)
    device = common.settle(env, args.deterministic)
    if device.type == "cpu":
        # Nothing to compile: DeepSpeed's CPU shared-memory all-reduce serves only inference.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    # PipelineModule asks deepspeed.comm for the ranks: it adopts hpcdist's process group.
    deepspeed.init_distributed(dist_backend=dist.get_backend())
    args.deepspeed_config = args.deepspeed_config or os.path.join(HERE, "pipeline.json")
    with open(args.deepspeed_config) as f:
        config = json.load(f)
    if args.batch:
        config["train_micro_batch_size_per_gpu"] = args.batch
        config.pop("train_batch_size", None)  # DeepSpeed derives it: micro batch x micro-batches x pipelines
    if args.lr:
        config["optimizer"]["params"]["lr"] = args.lr
    if args.bf16:
        config["bf16"] = {**config.get("bf16", {}), "enabled": True}
    common.log(f"DeepSpeed pipeline, {args.stages} stages on {common.ranks(env.world_size)} ({env.launcher}, "
               f"{dist.get_backend()}, {device.type}, config {args.deepspeed_config})")
    train(args, config, env)
    gc.collect()  # the engine is gone: the group can go (gloo aborts otherwise)
    dist.barrier()
    dist.destroy_process_group()


def train(args, config, env) -> None:
    train_set, test_set = common.digits(args.synthetic)
    common.seed_everything(args.seed)  # the same initial weights whichever rank builds a layer
    model = PipelineModule(layers=layers(), num_stages=args.stages, loss_fn=nn.CrossEntropyLoss(),
                           partition_method="parameters")  # stages of about equal parameter counts
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters()], config=config)
    common.seed_everything(args.seed + 1000 * (env.rank + 1))
    dtype = torch.bfloat16 if engine.bfloat16_enabled() else torch.float32

    # Both stages of a pipeline read the same batches (the first stage uses the
    # inputs, the last the labels): the sampler splits over pipelines, not ranks.
    grid = engine.grid
    sampler = DistributedSampler(train_set, num_replicas=grid.get_data_parallel_world_size(),
                                 rank=grid.get_data_parallel_rank(), shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=engine.train_micro_batch_size_per_gpu(), sampler=sampler, drop_last=True)
    per_step = engine.gradient_accumulation_steps()  # micro-batches per train_batch

    folder = common.checkpoint_dir(args, "pipeline")
    start = 0
    if args.resume:
        path, client = engine.load_checkpoint(folder)  # each stage loads its own layers
        if path is None:
            common.log(f"no checkpoint in {folder}: starting from step 0")
        else:
            start = client["step"]
            common.log(f"resumed from {path} at step {start}")

    def micro_batches(seen: int):
        """(inputs, labels) forever, epoch after epoch, from micro-batch ``seen`` on."""
        while True:
            epoch, done = divmod(seen, len(loader))
            sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on both stages
            for x, y in itertools.islice(loader, done, None):
                seen += 1
                yield x.to(dtype), y

    data = micro_batches(start * per_step)
    for step in range(start + 1, args.steps + 1):
        # One step: per_step micro-batches through both stages, then one optimizer step.
        # The loss comes from the last stage, sent to every stage.
        loss = engine.train_batch(data_iter=data)
        if step == start + 1 or step % args.log_every == 0 or step == args.steps:
            common.log(f"step {step} epoch {(step - 1) * per_step // len(loader)} loss {loss.item():.4f}")
        if step % args.save_every == 0 or step == args.steps:
            save(engine, folder, step, env)

    test = DataLoader(test_set, batch_size=engine.train_micro_batch_size_per_gpu(), drop_last=True)
    loss = engine.eval_batch(iter((x.to(dtype), y) for x, y in test), num_micro_batches=len(test))
    common.log(f"eval loss {loss.item():.4f} on {len(test) * test.batch_size} test samples")
    if args.save_final:
        # Each stage holds its own layers ("0.weight" on the first, "4.weight" on the
        # last): rank 0 gathers them into one state dict for nn.Sequential(*layers).
        mine = {k: v.detach().float().cpu() for k, v in engine.module.state_dict().items()}
        parts = [None] * env.world_size
        dist.all_gather_object(parts, mine)
        if env.rank == 0:
            common.atomic_save({k: v for part in parts for k, v in part.items()}, args.save_final)


def save(engine, folder: str, step: int, env) -> None:
    """Each stage writes its layers, and 'latest' is written last, atomically
    (see examples/deepspeed/train.py)."""
    tag = f"step-{step:06d}"
    engine.save_checkpoint(folder, tag=tag, client_state={"step": step}, save_latest=False)
    if env.rank == 0:
        with open(os.path.join(folder, "latest.tmp"), "w") as f:
            f.write(tag)
            f.flush()
            os.fsync(f.fileno())
        os.replace(os.path.join(folder, "latest.tmp"), os.path.join(folder, "latest"))
        common.prune(folder)


if __name__ == "__main__":
    main()
