"""The training of tests/progress/test_watch.py's jobs: gloo, a step every ~50 ms, one fault where asked.

FAULT: ``stop`` (rank FAULT_RANK stops itself with SIGSTOP at step 20), ``slow`` (it sleeps
0.2 s before each step, as a slow data loader), ``collective`` (at step 20 it enters an
all_reduce the others never reach). FAULT_FILE gets the fault's time. CHECKPOINT_S: rank 0
checkpoints that long at step 30 (``hpcdist.env.phase``), the others wait for it.
"""

import os
import signal
import time

import torch
import torch.distributed as dist

import hpcdist.env as henv

henv.init_distributed()
rank = dist.get_rank()
pair = dist.new_group([2, 3])  # every rank creates it; only the collective fault uses it
fault, fault_rank = os.environ.get("FAULT", ""), int(os.environ.get("FAULT_RANK", "1"))
checkpoint_s = float(os.environ.get("CHECKPOINT_S", "0"))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def mark_fault():
    if os.environ.get("FAULT_FILE"):
        with open(os.environ["FAULT_FILE"], "w") as f:
            f.write(str(time.time()))


for step in range(int(os.environ.get("STEPS", "400"))):
    if rank == fault_rank and fault == "slow":
        time.sleep(0.2)
    if rank == fault_rank and step == 20 and fault == "stop":
        mark_fault()
        os.kill(os.getpid(), signal.SIGSTOP)
    if rank == fault_rank and step == 20 and fault == "collective":
        mark_fault()
        dist.all_reduce(torch.ones(1), group=pair)  # rank 3 never reaches this one
    if rank == 0 and step == 30 and checkpoint_s:
        with henv.phase("checkpointing"):
            time.sleep(checkpoint_s)
    model(torch.ones(8, 4)).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    opt.zero_grad()
    time.sleep(0.05)
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
