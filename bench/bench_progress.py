#!/usr/bin/env python3
"""What recording a rank's progress (issue 31) costs a training loop with a step every ~10 ms.

The same loop runs as a process of its own, interleaved, ``--reps`` times each way:

- **without**: ``python loop.py`` (nothing of hpcdist's);
- **with**: ``python -m hpcdist.rank loop.py`` with ``$HPCDIST_PROGRESS_DIR`` set, as in a
  submitted job: the optimizer step hook, the timed collectives, the thread that writes the rank's
  file (at the default interval, 2 s).

The loop: a gloo process group of one rank, a small model, forward, backward, an ``all_reduce``
of each gradient and ``optimizer.step()``: a step of about a millisecond, all of it the work the
recorder adds to (the hook, the timed collectives). Only the loop is timed (``perf_counter``
around it, printed by the script): the start of the process is bench_rank_start.py's. The
fastest run of each way is taken (a shared machine only ever adds time); what recording adds
to each step, put against a 10 ms step, is the ratio asked for. Prints a markdown section. Not a
test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable

LOOP = """
import os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%(port)d", rank=0, world_size=1)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
time.sleep(0.5)  # the hook is installed once torch has been imported (as in any script)
steps = int(sys.argv[1])
start = time.perf_counter()
for _ in range(steps):
    model(x).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    opt.zero_grad()
print(f"LOOP {(time.perf_counter() - start) / steps:.9f}")
dist.destroy_process_group()
"""


def run(argv: list[str], env: dict) -> float:
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    line = next((x for x in out.stdout.splitlines() if x.startswith("LOOP ")), None)
    if line is None:
        raise SystemExit(f"{argv}: no timing\n{out.stdout}\n{out.stderr}")
    return float(line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "loop.py")
        with open(script, "w") as f:
            f.write(LOOP % {"port": 29000 + os.getpid() % 1000})
        base = {k: v for k, v in os.environ.items() if not k.startswith("HPCDIST_")}
        base.update(PYTHONPATH=str(REPO), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT="29999", TORCHELASTIC_RUN_ID="bench")
        recorded = dict(base, HPCDIST_PROGRESS_DIR=os.path.join(tmp, "progress"))
        without, with_ = [], []
        for _ in range(args.reps):
            without.append(run([PYTHON, script, str(args.steps)], base))
            with_.append(run([PYTHON, "-m", "hpcdist.rank", script, str(args.steps)], recorded))
        steps_file = os.path.join(tmp, "progress", "rank-0.json")
        recorded_steps = open(steps_file).read() if os.path.exists(steps_file) else "(none)"
    a, b = min(without), min(with_)
    added = b - a
    print("## Progress recording (issue 31): its cost at a step every 10 ms\n")
    print(f"The fastest of {args.reps} interleaved runs of {args.steps} steps each (gloo, 1 rank, all_reduce of "
          f"each of 4 gradients, SGD step); {os.cpu_count()} CPUs.\n")
    print("| loop | time per step | ratio |")
    print("|---|---|---|")
    print(f"| without (`python loop.py`) | {a * 1e6:.1f} us | 1.000 |")
    print(f"| with (`python -m hpcdist.rank loop.py`, progress recorded) | {b * 1e6:.1f} us | {b / a:.4f} |")
    print(f"| a 10 ms step, with what recording adds ({added * 1e6:+.1f} us) | {(0.010 + added) * 1e3:.4f} ms | "
          f"{(0.010 + added) / 0.010:.4f} |")
    print(f"| median of the runs: without / with | {statistics.median(without) * 1e6:.1f} / "
          f"{statistics.median(with_) * 1e6:.1f} us | {statistics.median(with_) / statistics.median(without):.4f} |")
    print(f"\nEach run (us per step): without {', '.join(f'{t * 1e6:.1f}' for t in without)}; "
          f"with {', '.join(f'{t * 1e6:.1f}' for t in with_)}.")
    print(f"\nThe last recorded rank's file: `{recorded_steps.strip()}`")


if __name__ == "__main__":
    main()
