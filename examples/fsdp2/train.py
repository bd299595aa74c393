"""FSDP2 (fully_shard) on the digits: each rank keeps only a shard of every weight,
gradient and optimizer state, and gathers a block's full weights just for its forward and backward.

    hpcdist submit --scheduler local --procs-per-node 2 --wait examples/fsdp2/train.py
    hpcdist submit --scheduler slurm --nodes 2 --gpus-per-node 4 examples/fsdp2/train.py --amp bf16

Checkpoints are sharded (torch.distributed.checkpoint, one file per rank) and
load on any number of ranks; --save-final gathers a plain state dict on rank 0.
"""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_state_dict, set_state_dict)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/common.py
import common  # noqa: E402
import hpcdist.env  # noqa: E402


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + F.relu(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self, hidden: int = 128, depth: int = 2):
        super().__init__()
        self.stem = nn.Linear(64, hidden)
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(depth))
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> None:
    p = common.parser(__doc__.splitlines()[0], lr=1e-3)
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off",
                   help="dtype of the gathered weights and the compute (fp16: GPUs only); "
                        "gradients are reduced in float32")
    args = p.parse_args()

    env = hpcdist.env.init_distributed(timeout=120)
    device = common.settle(env, args.deterministic)
    common.log(f"FSDP2 on {common.ranks(env.world_size)} ({env.launcher}, {dist.get_backend()}, {device.type})")
    train(args, env, device)
    gc.collect()  # the sharded model is gone: the group can go (gloo aborts otherwise)
    dist.barrier()
    dist.destroy_process_group()


def train(args, env, device) -> None:
    if args.amp == "fp16" and device.type != "cuda":
        sys.exit("--amp fp16 needs GPUs; on CPUs use --amp bf16")
    train_set, test_set = common.digits(args.synthetic)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch, sampler=sampler, drop_last=True)

    common.seed_everything(args.seed)  # the same full weights on every rank before sharding
    model = Net().to(device)
    # Mixed precision: float32 master shards, gathered and computed in --amp's dtype,
    # gradients reduce-scattered in float32.
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    # One FSDP unit per block, then the root (stem and head): a block's full
    # weights exist only while that block runs.
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)  # over the shards (DTensors)
    common.seed_everything(args.seed + 1000 * (env.rank + 1))  # per-rank randomness from here on

    folder = common.checkpoint_dir(args, "fsdp2")
    start = load_latest(folder, model, opt) if args.resume else 0
    step = start
    while step < args.steps:
        epoch, done = divmod(step, len(loader))
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in itertools.islice(loader, done, None):  # skips what a resumed run already did
            loss = F.cross_entropy(model(x.to(device)).float(), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1

            if step == start + 1 or step % args.log_every == 0 or step == args.steps:
                total = loss.detach().clone()
                dist.all_reduce(total)
                common.log(f"step {step} epoch {epoch} loss {total.item() / env.world_size:.4f}")
            if step % args.save_every == 0 or step == args.steps:
                save(folder, step, model, opt, env)
            if step == args.steps:
                break

    loss, acc = evaluate(model, test_set, env, device)
    common.log(f"eval loss {loss:.4f} accuracy {acc:.3f} on {len(test_set)} test samples "
               f"from {common.ranks(env.world_size)}")
    if args.save_final:
        # Every rank takes part in the gather; rank 0 receives the full tensors.
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if env.rank == 0:
            common.atomic_save(full, args.save_final)  # loads into a plain Net()


def save(folder: str, step: int, model, opt, env) -> None:
    """A sharded checkpoint in folder/step-NNNNNN: each rank writes its own shards.
    It is written under a .tmp name and renamed once every rank has finished
    (dcp.save returns on all ranks only then), so a crash mid-save leaves no
    folder that looks complete."""
    model_sd, optim_sd = get_state_dict(model, opt)
    final = os.path.join(folder, f"step-{step:06d}")
    dcp.save({"model": model_sd, "optim": optim_sd, "step": step}, checkpoint_id=final + ".tmp")
    if env.rank == 0:
        shutil.rmtree(final, ignore_errors=True)
        os.rename(final + ".tmp", final)
        common.prune(folder)


def load_latest(folder: str, model, opt) -> int:
    if not common.saved(folder):
        common.log(f"no checkpoint in {folder}: starting from step 0")
        return 0
    path = common.saved(folder)[-1]
    # dcp.load fills the shards this rank owns, in place, whatever the number of ranks that saved them.
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd, "step": 0}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    common.log(f"resumed from {path} at step {state['step']}")
    return state["step"]


@torch.no_grad()
def evaluate(model, test_set, env, device) -> tuple[float, float]:
    x, y = (t.to(device) for t in common.eval_shard(test_set, env))
    out = model(x).float()
    sums = torch.tensor([F.cross_entropy(out, y, reduction="sum").item(), (out.argmax(1) == y).sum().item(),
                         len(y)], dtype=torch.float64, device=device)
    dist.all_reduce(sums)  # sums, not means: the shards differ in size by one
    return (sums[0] / sums[2]).item(), (sums[1] / sums[2]).item()


if __name__ == "__main__":
    main()
