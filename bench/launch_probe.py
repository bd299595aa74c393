"""The training code of bench/bench_launch.py: plain torch under torchrun, one all-reduce per step.

Rank 0 prints the wall-clock time of its first training step.
"""

import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    if step == 0 and dist.get_rank() == 0:
        print(f"first-step {time.time():.3f}", flush=True)
dist.barrier()
dist.destroy_process_group()
