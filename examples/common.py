"""What every training example here shares: flags, the data, rank-0 logging, atomic saves.

Copy this file along with the example you start from; nothing in it is
specific to one strategy.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import shutil

import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset

import hpcdist.env


def parser(description: str, steps: int = 60, batch: int = 32, lr: float = 3e-3) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps,
                   help="optimizer steps in all (a resumed run counts from its checkpoint)")
    p.add_argument("--batch", type=int, default=batch, help="samples per rank per optimizer step")
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--checkpoint-dir", default=None, help="default: checkpoints/<example> in the submit folder")
    p.add_argument("--save-every", type=int, default=20,
                   help="steps between checkpoints (and one at the end); the last 2 are kept")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in --checkpoint-dir, if there is one")
    p.add_argument("--save-final", metavar="FILE",
                   help="rank 0 writes the whole trained state dict here (plain torch.save)")
    p.add_argument("--step-delay", type=float, default=0.0, metavar="SECONDS",
                   help="sleep after each step: time to watch a walltime stop or a restart happen")
    p.add_argument("--synthetic", action="store_true", help="random separable data instead of scikit-learn's digits")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic kernels: a resumed run matches an uninterrupted one bit for bit")
    # DeepSpeed's launcher passes --local_rank; hpcdist.env already knows it.
    p.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    return p


def checkpoint_dir(args, example: str) -> str:
    return args.checkpoint_dir or os.path.join("checkpoints", example)


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else hpcdist.env.get_rank()


def ranks(n: int) -> str:
    """"1 rank", "4 ranks": a count as a person writes it."""
    return f"{n} rank" if n == 1 else f"{n} ranks"


def log(*parts) -> None:
    """Print on rank 0 only: every rank shares the job's log."""
    if rank() == 0:
        print(*parts, flush=True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def settle(env, deterministic: bool) -> torch.device:
    """This rank's device; on CPUs, each process's share of the cores."""
    if deterministic:
        # cuBLAS needs a fixed workspace for reproducible matmuls; set before any CUDA work.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        # ...without filling every torch.empty with NaN first: DeepSpeed's ZeRO 1/2
        # allocate a 2 GB gradient bucket that way in each backward (seconds each).
        torch.utils.deterministic.fill_uninitialized_memory = False
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())  # init_distributed bound it
    # Ranks that each start one thread per core fight over the cores, and every
    # step waits for the slowest rank.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    torch.set_num_threads(max(1, cores // env.local_world_size))
    return torch.device("cpu")


def digits(synthetic: bool = False, test_size: int = 297) -> tuple[TensorDataset, TensorDataset]:
    """scikit-learn's 1797 handwritten digits (8x8 pixels, shipped with the package:
    no download), split the same way on every rank. ``synthetic`` (or no
    scikit-learn): random points around 10 class centres, same shapes."""
    try:
        if synthetic:
            raise ImportError
        from sklearn.datasets import load_digits
        d = load_digits()
        x = torch.tensor(d.data, dtype=torch.float32) / 16.0
        y = torch.tensor(d.target, dtype=torch.long)
    except ImportError:
        if not synthetic:
            log("scikit-learn is not installed: synthetic data instead of the digits")
        g = torch.Generator().manual_seed(1234)
        centres = torch.rand(10, 64, generator=g)
        y = torch.randint(0, 10, (1797,), generator=g)
        x = centres[y] + 0.15 * torch.randn(1797, 64, generator=g)
    # A fixed permutation: every rank (and every run) gets the same split.
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    return TensorDataset(x[test_size:], y[test_size:]), TensorDataset(x[:test_size], y[:test_size])


def eval_shard(test: TensorDataset, env) -> tuple[torch.Tensor, torch.Tensor]:
    """Every world_size-th test sample, from this rank's offset. Unlike
    DistributedSampler, which pads the last shard with repeats, this counts
    each sample exactly once when the ranks sum their results."""
    x, y = test.tensors
    return x[env.rank::env.world_size], y[env.rank::env.world_size]


def atomic_save(obj, path: str) -> None:
    """torch.save through a temporary name: a crash mid-write never leaves a
    file under ``path`` that looks complete."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())  # on the disk (or the file server) before the rename makes it visible
    os.replace(tmp, path)


def saved(folder: str, suffix: str = "") -> list[str]:
    """The complete checkpoints in ``folder``, oldest first: ``step-NNNNNN<suffix>``
    (the zero padding makes the names sort by step; temporary names never match)."""
    return sorted(glob.glob(os.path.join(folder, f"step-{'[0-9]' * 6}{suffix}")))


def prune(folder: str, suffix: str = "", keep: int = 2) -> None:
    """Remove all but the newest ``keep`` checkpoints (one process calls this)."""
    for old in saved(folder, suffix)[:-keep]:
        shutil.rmtree(old) if os.path.isdir(old) else os.remove(old)
