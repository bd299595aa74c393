"""hpcdist.data: uneven per-rank micro-batches that still give the global-batch gradient.

The properties of the split and of the sampler are checked with hypothesis;
the gradient is checked for real: 2 processes under torchrun (gloo), DDP and
DeepSpeed, against one process training on the whole global batch. The
example is submitted through `hpcdist submit --scheduler local`.

This file is also the worker those launches run (`python tests/test_data.py
--worker ENGINE OUT`), so that the distributed run and the single-process
reference share one definition of the data, the model and the cases.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/bootstrap.sh installs it)")
from hypothesis import given, settings, strategies as st  # noqa: E402

from hpcdist.data import WeightedDistributedBatchSampler, calibrate, parse_weights, split_batch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "uneven", "train.py")
WEIGHTS = [3, 1]  # the uneven shares of the distributed cases: rank 0 takes three quarters

#: name: (data set length, global batch, epochs, loss scaled, ZeRO stage, gradient clipping)
CASES = {
    # The test: one step, shares 12 and 4 of 16.
    "one-step": (16, 16, 1, True, 0, 0.0),
    # The same without the loss scale: must NOT match, or the test could not fail.
    "one-step-unscaled": (16, 16, 1, False, 0, 0.0),
    # Steps of 8, 8, 6 (split 5 + 1): the last step's scale uses its own global count.
    "epochs-partial-last-step": (22, 8, 2, True, 0, 0.0),
    # 17 = 8 + 9: the one sample left over joins the last step (split 7 + 2).
    "epochs-tail-joins-last-step": (17, 8, 2, True, 0, 0.0),
}
DEEPSPEED_ONLY = {
    "one-step-zero2": (16, 16, 1, True, 2, 0.0),
    "epochs-zero2": (22, 8, 2, True, 2, 0.0),
    # DeepSpeed clips the norm of the averaged gradient: the global batch's, thanks to the scale.
    "epochs-zero2-clipped": (22, 8, 2, True, 2, 0.5),
}


# --------------------------------------------------------------------------
# split_batch
# --------------------------------------------------------------------------

def test_split_examples():
    assert split_batch(96, [2, 1]) == [64, 32]
    assert split_batch(10, [1, 1, 1]) == [4, 3, 3]  # ties go to the lower rank
    assert split_batch(16, [3, 1]) == [12, 4]
    assert split_batch(6, [3, 1]) == [5, 1]
    assert split_batch(5, [100, 1, 1]) == [3, 1, 1]  # the small ranks still get one sample each
    assert split_batch(7, [1e-9, 1, 1]) == [1, 3, 3]
    assert split_batch(3, [0.5, 0.25, 0.25]) == [1, 1, 1]
    assert split_batch(9, (2, 1)) == split_batch(9, torch.tensor([2.0, 1.0])) == [6, 3]  # calibrate()'s are floats


@pytest.mark.parametrize("batch, weights, message", [
    (8, [], "weights is empty"),
    (8, [1, 0], r"weights\[1\] = 0: every weight must be a finite number above 0"),
    (8, [1, -2], r"weights\[1\] = -2"),
    (8, [float("nan"), 1], r"weights\[0\] = nan"),
    (8, [1, float("inf")], r"weights\[1\] = inf"),
    (8, ["2", 1], r"weights\[0\] = '2' is not a number"),
    (8, [True, 1], r"weights\[0\] = True is not a number"),
    (8, "21", "weights must be a sequence"),
    (8, 2, "weights must be a sequence"),
    (8, {0: 1, 1: 1}, "weights must be a sequence"),
    (1, [1, 1], r"global_batch_size=1 is smaller than the number of ranks \(2\)"),
    (0, [1], "global_batch_size=0"),
    (8.0, [1, 1], "global_batch_size must be an int"),
])
def test_split_rejects_bad_arguments(batch, weights, message):
    with pytest.raises(ValueError, match=message):
        split_batch(batch, weights)


@pytest.mark.parametrize("text, world, message", [
    ("2;1", None, "give comma-separated positive numbers"),
    ("2,", None, "give comma-separated positive numbers"),
    ("2,0", None, r"weights\[1\] = 0.0"),
    ("2,1,1", 2, "has 3 entries but the world size is 2"),
])
def test_parse_weights_rejects(text, world, message):
    with pytest.raises(ValueError, match=message):
        parse_weights(text, world)


def test_parse_weights():
    assert parse_weights(" 2, 1 ", 2) == [2.0, 1.0]


# database=None: no .hypothesis/ folder in the work tree.
PROPERTY = settings(max_examples=300, database=None, deadline=None)

_weight = st.one_of(st.integers(1, 1000), st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False))
_weights = st.lists(_weight, min_size=1, max_size=8)


@PROPERTY
@given(weights=_weights, extra=st.integers(0, 500))
def test_split_sums_exactly_and_gives_every_rank_a_sample(weights, extra):
    batch = len(weights) + extra
    sizes = split_batch(batch, weights)
    assert len(sizes) == len(weights)
    assert sum(sizes) == batch
    assert min(sizes) >= 1


@PROPERTY
@given(weights=_weights, extra=st.integers(0, 500))
def test_split_is_proportional_within_rounding(weights, extra):
    batch = len(weights) + extra
    sizes = split_batch(batch, weights)
    total = sum(Fraction(w) for w in weights)
    quotas = [batch * Fraction(w) / total for w in weights]
    if min(quotas) >= 1:  # no rank needed topping up to one sample
        assert all(abs(s - q) < 1 for s, q in zip(sizes, quotas))
    for i in range(len(weights)):
        for j in range(len(weights)):
            if weights[i] > weights[j]:
                assert sizes[i] >= sizes[j]  # a faster rank never gets less
            elif weights[i] == weights[j]:
                assert abs(sizes[i] - sizes[j]) <= 1


@PROPERTY
@given(weights=_weights, extra=st.integers(0, 500), power=st.integers(-10, 10))
def test_split_depends_only_on_ratios(weights, extra, power):
    # Scaling by a power of two is exact in floating point.
    batch = len(weights) + extra
    assert split_batch(batch, [w * 2.0**power for w in weights]) == split_batch(batch, weights)


# --------------------------------------------------------------------------
# WeightedDistributedBatchSampler
# --------------------------------------------------------------------------

def samplers(length, weights, batch, **kw):
    return [WeightedDistributedBatchSampler(length, weights, batch, rank=r, world_size=len(weights), **kw)
            for r in range(len(weights))]


def epoch_batches(ranks, epoch):
    for s in ranks:
        s.set_epoch(epoch)
    return [list(s) for s in ranks]  # [rank][step] -> indices


@st.composite
def layouts(draw):
    weights = draw(st.lists(_weight, min_size=1, max_size=5))
    world = len(weights)
    batch = draw(st.integers(world, 40))
    length = draw(st.integers(world, 150))
    drop_last = draw(st.booleans()) and length >= batch
    return dict(length=length, weights=weights, batch=batch, drop_last=drop_last,
                shuffle=draw(st.booleans()), seed=draw(st.integers(0, 2**31)))


@PROPERTY
@given(layout=layouts(), epoch=st.integers(0, 1000))
def test_an_epoch_covers_the_data_and_every_rank_steps_together(layout, epoch):
    length, weights, batch, drop_last = layout["length"], layout["weights"], layout["batch"], layout["drop_last"]
    ranks = samplers(length, weights, batch, seed=layout["seed"], shuffle=layout["shuffle"], drop_last=drop_last)
    batches = epoch_batches(ranks, epoch)

    steps = len(ranks[0])
    assert all(len(s) == steps for s in ranks)  # the same number of steps on every rank...
    assert all(len(b) == steps for b in batches)  # ...and that is what iterating gives
    assert all(len(step) >= 1 for b in batches for step in b)  # never an empty micro-batch

    seen = [i for b in batches for step in b for i in step]
    if drop_last:
        assert len(seen) == len(set(seen)) == (length // batch) * batch  # at most once
        assert all(size == batch for size in ranks[0].step_sizes)
        assert set(seen) <= set(range(length))
    else:
        assert sorted(seen) == list(range(length))  # exactly once
        sizes = ranks[0].step_sizes
        # Full steps, then one smaller step; or the few left over joined the last step.
        assert all(size == batch for size in sizes[:-1])
        assert len(weights) <= sizes[-1] < batch + len(weights)

    for step in range(steps):
        split = ranks[0].micro_batch_sizes_at(step)
        assert [len(b[step]) for b in batches] == split
        assert split == split_batch(sum(split), weights)
        # The scales make the equal-weight mean over ranks a mean over samples.
        assert math.isclose(sum(s.loss_scale(step) for s in ranks), len(weights))
        assert [s.loss_scale(step) for s in ranks] == [n * len(weights) / sum(split) for n in split]
    assert ranks[0].max_micro_batch_size == max(max(ranks[0].micro_batch_sizes_at(k)) for k in range(steps))


@PROPERTY
@given(layout=layouts(), epoch=st.integers(0, 1000))
def test_the_same_seed_and_epoch_give_the_same_batches(layout, epoch):
    kw = dict(seed=layout["seed"], shuffle=layout["shuffle"], drop_last=layout["drop_last"])
    first = epoch_batches(samplers(layout["length"], layout["weights"], layout["batch"], **kw), epoch)
    again = epoch_batches(samplers(layout["length"], layout["weights"], layout["batch"], **kw), epoch)
    assert first == again


@PROPERTY
@given(length=st.integers(12, 300), seed=st.integers(0, 2**31), epoch=st.integers(0, 1000))
def test_each_epoch_has_its_own_order(length, seed, epoch):
    # 12! orders: two epochs sharing one is not a chance worth counting.
    ranks = samplers(length, [2, 1], 8, seed=seed)
    assert epoch_batches(ranks, epoch) != epoch_batches(ranks, epoch + 1)
    other_seed = samplers(length, [2, 1], 8, seed=seed + 1)
    assert epoch_batches(ranks, epoch) != epoch_batches(other_seed, epoch)


def test_without_shuffle_the_ranks_take_consecutive_slices():
    ranks = samplers(10, [3, 1], 4, shuffle=False)
    assert epoch_batches(ranks, 5) == [[[0, 1, 2], [4, 5, 6], [8]], [[3], [7], [9]]]
    assert ranks[0].step_sizes == [4, 4, 2]
    assert [ranks[0].loss_scale(k) for k in range(3)] == [1.5, 1.5, 1.0]
    assert [ranks[1].loss_scale(k) for k in range(3)] == [0.5, 0.5, 1.0]


def test_drop_last_skips_the_partial_step():
    ranks = samplers(10, [3, 1], 4, shuffle=False, drop_last=True)
    assert epoch_batches(ranks, 0) == [[[0, 1, 2], [4, 5, 6]], [[3], [7]]]


def test_a_dataloader_yields_the_micro_batches():
    data = torch.utils.data.TensorDataset(torch.arange(50))
    sampler = WeightedDistributedBatchSampler(data, [1, 3], 20, rank=1, world_size=2, seed=3)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler)
    assert len(loader) == 3
    assert [len(x) for (x,) in loader] == [15, 15, 7]  # 20, 20, then the 10 left: 3 + 7 (a tie: to rank 0)
    assert [x.tolist() for (x,) in loader] == list(sampler)


@pytest.mark.parametrize("kwargs, message", [
    (dict(dataset=10, weights=[1, 1, 1], global_batch_size=4, rank=0, world_size=2),
     "weights has 3 entries but world_size is 2"),
    (dict(dataset=10, weights=[1, 1], global_batch_size=4, rank=2, world_size=2), r"rank=2 is not in 0..1"),
    (dict(dataset=1, weights=[1, 1], global_batch_size=4, rank=0, world_size=2),
     "the data set has 1 sample, fewer than the 2 ranks"),
    (dict(dataset=10, weights=[1, 1], global_batch_size=16, rank=0, world_size=2, drop_last=True),
     "leaves no step at all"),
    (dict(dataset=10, weights=[1, 0], global_batch_size=4, rank=0, world_size=2), r"weights\[1\] = 0"),
    (dict(dataset=10, weights=2, global_batch_size=4, rank=0, world_size=2), "weights must be a sequence"),
    (dict(dataset=10, weights=[1, 1], global_batch_size=1, rank=0, world_size=2), "global_batch_size=1"),
])
def test_sampler_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WeightedDistributedBatchSampler(**kwargs)


def test_calibrate_needs_a_process_group():
    with pytest.raises(RuntimeError, match=r"needs torch.distributed initialised"):
        calibrate(lambda: None, samples_per_step=8)


# --------------------------------------------------------------------------
# The gradient: 2 ranks with shares 3:1 against one process on the whole batch
# --------------------------------------------------------------------------

def case_data(n, dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 5, generator=g, dtype=torch.float64)
    return x.to(dtype), torch.sin(x.sum(1, keepdim=True)).to(dtype)


def case_net(dtype):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(dtype)


def case_optimizer(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


def engine_dtype(engine):
    return torch.float64 if engine == "ddp" else torch.float32  # DeepSpeed reduces no float64


def train_distributed(engine, n, batch, epochs, scaled, zero, clip):
    """One rank's part (in the worker): this rank's micro-batches, DDP or DeepSpeed."""
    dtype = engine_dtype(engine)
    x, y = case_data(n, dtype)
    sampler = WeightedDistributedBatchSampler(n, WEIGHTS, batch, seed=7)  # rank and world from hpcdist.env
    net = case_net(dtype)
    opt = case_optimizer(net)
    if engine == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(net)

        def update(loss):
            opt.zero_grad()
            loss.backward()
            opt.step()
    else:
        import deepspeed

        config = {"train_micro_batch_size_per_gpu": sampler.max_micro_batch_size, "gradient_accumulation_steps": 1,
                  "zero_optimization": {"stage": zero}, "zero_allow_untested_optimizer": True,
                  # Explicit: DeepSpeed 0.19 clips at 1.0 when the config says nothing.
                  "gradient_clipping": clip}
        model, _, _, _ = deepspeed.initialize(model=net, optimizer=opt, config=config)

        def update(loss):
            model.backward(loss)
            model.step()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for step, idx in enumerate(sampler):
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            update(loss * sampler.loss_scale(step) if scaled else loss)
    return [p.detach().clone() for p in net.parameters()], sampler.micro_batch_size


def train_single_process(dtype, n, batch, epochs, clip):
    """The reference: one process, each step on the step's whole global batch."""
    x, y = case_data(n, dtype)
    ranks = samplers(n, WEIGHTS, batch, seed=7)
    net = case_net(dtype)
    opt = case_optimizer(net)
    for epoch in range(epochs):
        per_rank = epoch_batches(ranks, epoch)
        for step in range(len(ranks[0])):
            idx = [i for b in per_rank for i in b[step]]
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x[idx]), y[idx]).backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
            opt.step()
    return [p.detach().clone() for p in net.parameters()]


def worker_main(engine, out):
    import torch.distributed as dist

    import hpcdist.env

    env = hpcdist.env.init_distributed(timeout=60)
    cases = {**CASES, **(DEEPSPEED_ONLY if engine == "deepspeed" else {})}
    results = {name: train_distributed(engine, *case) for name, case in cases.items()}
    torch.save(results, os.path.join(out, f"rank{env.rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def distributed_results(tmp_path_factory):
    """results(engine): every case's parameters after training on 2 ranks under torchrun (one launch per engine)."""
    from launch import clean_env, run, torchrun

    cache = {}

    def results(engine):
        if engine not in cache:
            if engine == "deepspeed":
                pytest.importorskip("deepspeed", reason="deepspeed is not installed")
            out = tmp_path_factory.mktemp(engine)
            # DeepSpeed compiles its CPU communication op on first use (a minute or two).
            run(torchrun(2, no_python=False) + [os.path.abspath(__file__), "--worker", engine, str(out)],
                clean_env(), timeout=400 if engine == "deepspeed" else 120)
            ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
            for name in ranks[0]:
                # Both replicas hold the same parameters after every case.
                assert all(torch.equal(a, b) for a, b in zip(ranks[0][name][0], ranks[1][name][0])), name
            # The shares 3:1, with rank and world size from hpcdist.env.
            assert (ranks[0]["one-step"][1], ranks[1]["one-step"][1]) == (12, 4)
            cache[engine] = {name: r[0] for name, r in ranks[0].items()}
        return cache[engine]

    return results


def tolerance(engine):
    return dict(rtol=1e-10, atol=1e-12) if engine == "ddp" else dict(rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("engine, case", [("ddp", c) for c in CASES]
                         + [("deepspeed", c) for c in {**CASES, **DEEPSPEED_ONLY}])
def test_uneven_shares_give_the_global_batch_update(distributed_results, engine, case):
    n, batch, epochs, scaled, _, clip = {**CASES, **DEEPSPEED_ONLY}[case]
    got = distributed_results(engine)[case]
    expected = train_single_process(engine_dtype(engine), n, batch, epochs, clip)
    worst = max((a - b).abs().max().item() for a, b in zip(got, expected))
    matches = all(torch.allclose(a, b, **tolerance(engine)) for a, b in zip(got, expected))
    if scaled:
        assert matches, f"largest difference {worst}"
    else:
        # Without the scale the ranks' gradients count equally: rank 1's 4 samples
        # weigh as much as rank 0's 12, a different update.
        assert not matches and worst > 1e-3, f"largest difference {worst}"


# --------------------------------------------------------------------------
# The example, submitted as a user would
# --------------------------------------------------------------------------

def submit_example(tmp_path, launcher, *script_args, timeout=300):
    from launch import clean_env

    argv = [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--procs-per-node", "2",
            "--launcher", launcher, "--wait", EXAMPLE, "--epochs", "3", *script_args]
    env = clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def assert_trained(out):
    before, after = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+) on 2 ranks", out).groups())
    assert after < before / 5, out
    assert "identical on all ranks: True" in out, out
    steps = re.findall(r"rank \d/2: .* (\d+) steps per epoch", out)
    assert len(steps) == 2 and steps[0] == steps[1], out


def micro_batches(out):
    return {int(r): int(m) for r, m in re.findall(r"rank (\d)/2: weight \S+, micro-batch (\d+) of 96", out)}


def epoch_losses(out):
    return [float(x) for x in re.findall(r"epoch \d+: \d+ steps in [\d.]+ s, loss ([\d.]+)", out)]


@pytest.fixture(scope="module")
def ddp_weighted_run(tmp_path_factory):
    return submit_example(tmp_path_factory.mktemp("ddp"), "torchrun", "--weights", "2,1")


def test_example_with_weights_trains_with_ddp(ddp_weighted_run):
    assert micro_batches(ddp_weighted_run) == {0: 64, 1: 32}
    assert_trained(ddp_weighted_run)
    assert len(epoch_losses(ddp_weighted_run)) == 3


def test_example_calibrates_and_trains_the_same(tmp_path, ddp_weighted_run):
    out = submit_example(tmp_path, "torchrun", "--calibrate", "--slow-rank", "1", "--slowdown", "3")
    assert re.search(r"calibrated throughput \(samples/s\): \d+, \d+", out), out
    sizes = micro_batches(out)
    assert sorted(sizes) == [0, 1] and sum(sizes.values()) == 96
    assert_trained(out)
    # Whatever split the calibration chose, each step is the mean over the same
    # global batch: the losses follow the 2:1 run's (up to float rounding).
    assert epoch_losses(out) == pytest.approx(epoch_losses(ddp_weighted_run), abs=2e-3)


def test_example_trains_with_deepspeed_as_with_ddp(tmp_path, ddp_weighted_run):
    pytest.importorskip("deepspeed", reason="deepspeed is not installed")
    out = submit_example(tmp_path, "deepspeed", "--engine", "deepspeed", "--weights", "2,1", "--zero-stage", "2",
                         timeout=400)
    assert "DeepSpeed on 2 ranks (deepspeed" in out
    assert micro_batches(out) == {0: 64, 1: 32}
    assert_trained(out)
    assert epoch_losses(out) == pytest.approx(epoch_losses(ddp_weighted_run), abs=2e-3)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker_main(sys.argv[2], sys.argv[3])
