"""Uneven data parallelism: each rank gets a share of the data proportional to its speed.

The stock :class:`torch.utils.data.DistributedSampler` gives every rank the
same number of samples, so on a cluster that mixes GPU generations the
fastest GPU waits for the slowest at every gradient all-reduce. Here each
rank gets a micro-batch proportional to a weight (its throughput, given or
measured by :func:`calibrate`), and its loss is scaled so that the update is
still the mean over the global batch::

    import hpcdist.env
    from hpcdist.data import WeightedDistributedBatchSampler, calibrate

    env = hpcdist.env.init_distributed()
    model = DistributedDataParallel(net)
    weights = [2, 1]                               # or calibrate(probe, samples_per_step=32)
    sampler = WeightedDistributedBatchSampler(dataset, weights, global_batch_size=96, seed=0)
    loader = DataLoader(dataset, batch_sampler=sampler)   # not batch_size=, not sampler=
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y) * sampler.loss_scale(step)
            opt.zero_grad(); loss.backward(); opt.step()

Why the loss is scaled: DDP (and DeepSpeed) average the gradients over the
ranks with equal weight, ``(g_0 + ... + g_{W-1}) / W``. If rank ``r`` holds
``n_r`` of the step's ``G`` samples and computes the mean loss over them,
multiplying it by ``n_r * W / G`` makes that average
``sum_r n_r * mean_r / G``: the mean over the global batch, exactly as one
process training on all ``G`` samples would compute it. Without the scale a
sample on a rank with a small micro-batch would count for more than one on
a rank with a large one. (This is unrelated to fp16 "loss scaling".)

The layout of an epoch (how many steps, how many samples each rank takes in
each step) depends only on the data set's length, the global batch size,
the weights and ``drop_last``; the epoch and seed only choose which samples.
So every rank runs the same number of steps and the collectives line up, as
long as every rank passes the same weights (:func:`calibrate` returns the
same list on every rank).

Each epoch is a permutation of the data set (seeded by ``seed + epoch``, as
``DistributedSampler`` does) cut into steps of ``global_batch_size``
consecutive samples; a step is cut into one contiguous slice per rank,
sized by :func:`split_batch`. The last step:

- ``drop_last=False`` (default): every index exactly once per epoch. The
  ``len % global_batch_size`` samples left over form a smaller last step,
  split by the same weights; if there are fewer of them than ranks (a rank
  would get an empty batch, which neither the DataLoader's collate nor a
  mean loss can take), they join the step before, which is then larger
  than ``global_batch_size`` by fewer than ``world_size`` samples.
  :meth:`WeightedDistributedBatchSampler.loss_scale` uses each step's
  actual global count, so the gradient is the mean over that step's
  samples in every case.
- ``drop_last=True``: every step has exactly ``global_batch_size`` samples;
  each index at most once per epoch, the ``len % global_batch_size`` left
  over after the permutation are skipped (different ones each epoch when
  shuffling).

DeepSpeed: ``train_micro_batch_size_per_gpu`` is one number for every
rank, but the engine never checks the batch it is given. Build the
DataLoader yourself with this batch sampler (do not pass ``training_data``
to ``deepspeed.initialize``), put
:attr:`WeightedDistributedBatchSampler.max_micro_batch_size` in the config
(the largest micro-batch any rank takes: what a GPU's memory must hold)
with ``gradient_accumulation_steps: 1``, and multiply the loss by
``loss_scale(step)`` before ``engine.backward(loss)``: DeepSpeed averages
gradients over the ranks as DDP does (tested with ZeRO stages 0 and 2), so
the update is the global mean again, and gradient clipping clips that
mean (DeepSpeed 0.19 clips at 1.0 unless ``gradient_clipping`` says
otherwise). What DeepSpeed then reports as samples per second counts
``max_micro_batch_size * world_size`` samples per step.
Pipeline parallelism (``PipelineEngine``), which cuts every micro-batch to
one fixed shape, is not supported. See ``examples/uneven/README.md``.

This module imports torch; ``import hpcdist`` and ``import hpcdist.env``
never import it (nothing imports this module for you).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from fractions import Fraction
from numbers import Real

import torch

__all__ = ["split_batch", "parse_weights", "WeightedDistributedBatchSampler", "calibrate"]


def _weights_as_fractions(weights, argument: str = "weights") -> list[Fraction]:
    """Validated weights, as exact fractions: every rank then rounds the same way."""
    if isinstance(weights, (str, bytes, Mapping)) or not isinstance(weights, Iterable):
        raise ValueError(f"{argument} must be a sequence of positive numbers, one per rank; got {weights!r}")
    weights = list(weights)  # a list, a tuple, a tensor, an array
    if len(weights) == 0:
        raise ValueError(f"{argument} is empty: give one positive number per rank")
    out = []
    for i, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, (Real, torch.Tensor)):
            raise ValueError(f"{argument}[{i}] = {w!r} is not a number")
        value = float(w)
        if not math.isfinite(value) or value <= 0:
            raise ValueError(
                f"{argument}[{i}] = {w!r}: every weight must be a finite number above 0 "
                f"(every rank takes at least one sample per step)"
            )
        # Fraction(float) is exact; ints and Fractions stay exact too.
        out.append(Fraction(w) if isinstance(w, (int, Fraction)) else Fraction(value))
    return out


def split_batch(global_batch_size: int, weights: Sequence[float]) -> list[int]:
    """Split ``global_batch_size`` samples into one micro-batch per rank, proportional to ``weights``.

    Largest-remainder rounding (Hamilton's method): each rank gets the whole
    part of its quota ``global_batch_size * w / sum(weights)``, and the
    samples still unassigned go one each to the ranks with the largest
    fractional parts (ties to the lower rank). Every rank gets at least one
    sample: a rank whose quota is below one gets exactly one, and the rest is
    shared among the others in proportion to their weights. The sizes sum to
    ``global_batch_size`` exactly; with every quota at least one, each size
    is within one of its quota. Exact arithmetic (fractions), so every rank
    computes the same split from the same weights.

    >>> split_batch(96, [2, 1])
    [64, 32]
    >>> split_batch(10, [1, 1, 1])
    [4, 3, 3]

    Raises ValueError naming the argument: a weight that is not a finite
    number above 0, no weights, or a global batch smaller than the number of
    ranks.
    """
    fractions = _weights_as_fractions(weights)
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int):
        raise ValueError(f"global_batch_size must be an int; got {global_batch_size!r}")
    ranks = len(fractions)
    if global_batch_size < ranks:
        raise ValueError(
            f"global_batch_size={global_batch_size} is smaller than the number of ranks ({ranks}): "
            f"every rank needs at least one sample per step"
        )

    sizes = [0] * ranks
    active = list(range(ranks))
    budget = global_batch_size
    # Ranks whose quota is below one get one sample and leave the sharing;
    # removing them raises the others' quotas, so repeat until none is left.
    # It ends: the active quotas sum to budget >= len(active), so not all are below one.
    while True:
        total = sum(fractions[i] for i in active)
        quotas = {i: budget * fractions[i] / total for i in active}
        small = [i for i in active if quotas[i] < 1]
        if not small:
            break
        for i in small:
            sizes[i] = 1
        budget -= len(small)
        active = [i for i in active if quotas[i] >= 1]

    for i in active:
        sizes[i] = math.floor(quotas[i])
    left = budget - sum(sizes[i] for i in active)
    by_remainder = sorted(active, key=lambda i: (-(quotas[i] - sizes[i]), i))
    for i in by_remainder[:left]:
        sizes[i] += 1
    return sizes


def parse_weights(text: str, world_size: int | None = None) -> list[float]:
    """``"2,1"`` -> ``[2.0, 1.0]``, for a ``--weights`` flag; checked as :func:`split_batch` checks them.

    With ``world_size``, the number of weights must match it.
    """
    parts = [p.strip() for p in str(text).split(",")]
    try:
        weights = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"weights {text!r}: give comma-separated positive numbers, one per rank, like 2,1") from None
    _weights_as_fractions(weights)
    if world_size is not None and len(weights) != world_size:
        raise ValueError(f"weights {text!r} has {len(weights)} entries but the world size is "
                         f"{world_size}: give one per rank")
    return weights


class WeightedDistributedBatchSampler(torch.utils.data.Sampler):
    """This rank's micro-batches (lists of indices), sized in proportion to the ranks' weights.

    Give it to a DataLoader as ``batch_sampler=``. See the module docstring
    for the layout of an epoch and the last step.

    Args:
        dataset: the data set, or its length.
        weights: one positive number per rank (relative speed; only ratios
            matter); ``None`` for equal weights. Must be the same on every rank.
        global_batch_size: samples per optimizer step over all ranks.
        rank, world_size: default to :mod:`hpcdist.env`'s answer.
        seed, shuffle: the permutation of epoch ``e`` is ``randperm`` seeded
            with ``seed + e``; without shuffle, the data set's order.
        drop_last: drop the incomplete last step instead of keeping it.

    Attributes:
        micro_batch_sizes: every rank's micro-batch in a full step.
        micro_batch_size: this rank's micro-batch in a full step.
        max_micro_batch_size: the largest micro-batch of any rank in any step.
        step_sizes: the global number of samples in each step of an epoch.
    """

    def __init__(
        self,
        dataset: Sized | int,
        weights: Sequence[float] | None,
        global_batch_size: int,
        rank: int | None = None,
        world_size: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
    ) -> None:
        if rank is None or world_size is None:
            import hpcdist.env

            rank = hpcdist.env.get_rank() if rank is None else rank
            world_size = hpcdist.env.get_world_size() if world_size is None else world_size
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} is not in 0..{world_size - 1} (world_size={world_size})")
        if weights is None:
            weights = [1] * world_size
        _weights_as_fractions(weights)  # a clear error for a bad weight before len() is asked of it
        weights = list(weights)
        if len(weights) != world_size:
            raise ValueError(f"weights has {len(weights)} entries but world_size is {world_size}: give one per rank")
        length = dataset if isinstance(dataset, int) and not isinstance(dataset, bool) else len(dataset)
        if length < world_size:
            samples = "1 sample" if length == 1 else f"{length} samples"
            raise ValueError(f"the data set has {samples}, fewer than the {world_size} ranks")

        self.length = length
        self.weights = weights
        self.global_batch_size = global_batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0

        self.micro_batch_sizes = split_batch(global_batch_size, self.weights)  # validates both
        self.micro_batch_size = self.micro_batch_sizes[rank]
        self.step_sizes = self._step_sizes()
        self._splits = {g: split_batch(g, self.weights) for g in set(self.step_sizes)}
        self.max_micro_batch_size = max(max(s) for s in self._splits.values())

    def _step_sizes(self) -> list[int]:
        full, rest = divmod(self.length, self.global_batch_size)
        sizes = [self.global_batch_size] * full
        if self.drop_last:
            if not sizes:
                raise ValueError(
                    f"drop_last=True with global_batch_size={self.global_batch_size} larger than the data set "
                    f"({self.length} samples) leaves no step at all"
                )
        elif rest >= self.world_size:
            # (With no full step, rest is the whole data set: at least world_size.)
            sizes.append(rest)
        elif rest:
            # Too few to give every rank one: they join the step before.
            sizes[-1] += rest
        return sizes

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch's permutation (call it before each epoch, on every rank)."""
        self.epoch = epoch

    def __len__(self) -> int:
        """Steps per epoch: the same on every rank."""
        return len(self.step_sizes)

    def micro_batch_sizes_at(self, step: int) -> list[int]:
        """Every rank's number of samples in ``step`` of an epoch."""
        return list(self._splits[self.step_sizes[step]])

    def loss_scale(self, step: int) -> float:
        """What to multiply this rank's mean loss by in ``step``: ``n_rank * world_size / n_global``.

        With it, DDP's and DeepSpeed's mean over ranks is the mean over the
        step's global batch (see the module docstring). ``step`` counts from
        0 within the epoch, as ``enumerate(loader)`` does.
        """
        mine = self._splits[self.step_sizes[step]][self.rank]
        return mine * self.world_size / self.step_sizes[step]

    def _permutation(self) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.length)
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.length, generator=generator)

    def __iter__(self):
        order = self._permutation()
        start = 0
        for size in self.step_sizes:
            split = self._splits[size]
            offset = start + sum(split[: self.rank])
            yield order[offset : offset + split[self.rank]].tolist()
            start += size


def calibrate(
    step_fn: Callable[[], object],
    samples_per_step: int,
    steps: int = 5,
    warmup: int = 2,
    group=None,
) -> list[float]:
    """Measure every rank's throughput; returns samples per second, one per rank, the same list on every rank.

    Each rank runs ``step_fn()`` ``warmup`` times untimed, then ``steps``
    times timed; its throughput is ``samples_per_step`` over the median step
    time, and an all-gather gives every rank the whole list, ready to pass
    as ``weights``. Needs ``torch.distributed`` initialised.

    ``step_fn`` must do this rank's work alone, with no collective: under
    DDP run the forward and backward inside ``model.no_sync()`` (and zero
    the gradients after), otherwise each step waits for the slowest rank and
    every rank measures the same time. Use the micro-batch size you expect
    to train with: a GPU's throughput depends on it. On CUDA, the device is
    synchronised around each timed step.
    """
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("calibrate() needs torch.distributed initialised (hpcdist.env.init_distributed())")
    if steps < 1 or samples_per_step < 1:
        raise ValueError(f"steps={steps} and samples_per_step={samples_per_step} must be at least 1")

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(warmup):
        step_fn()
    times = []
    for _ in range(steps):
        sync()
        started = time.perf_counter()
        step_fn()
        sync()
        times.append(time.perf_counter() - started)
    throughput = samples_per_step / max(statistics.median(times), 1e-9)

    # nccl only moves CUDA tensors.
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else "cpu"
    mine = torch.tensor([throughput], dtype=torch.float64, device=device)
    gathered = [torch.zeros_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(gathered, mine, group=group)
    return [float(t.item()) for t in gathered]
