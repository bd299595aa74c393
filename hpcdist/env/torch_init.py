"""``init_distributed()``: the process group, under any launcher. Imports torch."""

from __future__ import annotations

import os
from datetime import timedelta

from hpcdist.env.model import DistEnv, DistEnvError


def init_distributed(env: DistEnv, backend: str | None = None, timeout=None) -> DistEnv:
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        if (dist.get_rank(), dist.get_world_size()) != (env.rank, env.world_size):
            raise DistEnvError(
                f"a process group is already initialised as rank {dist.get_rank()} of "
                f"{dist.get_world_size()}, but the environment says rank {env.rank} of "
                f"{env.world_size} ({env.sources.get('rank')})."
            )
        return env

    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if backend is None:
        backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(_device_for(env, torch.cuda.device_count()))

    kwargs = {}
    if timeout is not None:
        kwargs["timeout"] = timeout if isinstance(timeout, timedelta) else timedelta(seconds=timeout)
    if env.world_size == 1:
        # One process needs no rendezvous: an in-process store binds no port,
        # so many single-process jobs on one node never collide.
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, **kwargs)
    else:
        dist.init_process_group(
            backend, init_method="env://", rank=env.rank, world_size=env.world_size, **kwargs
        )
    return env


def _device_for(env: DistEnv, visible: int) -> int:
    if visible >= env.local_world_size:
        return env.local_rank
    if visible == 1:
        # One GPU per process (srun --gpus-per-task, a per-rank CUDA_VISIBLE_DEVICES).
        return 0
    raise DistEnvError(
        f"{env.local_world_size} processes run on this node but only {visible} GPUs are "
        f"visible (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): "
        f"start one process per GPU, or pass backend='gloo' to train on the CPU."
    )
