"""One rank's place as a framework sees it and as hpcdist sees it, then a few synchronised steps.

``--framework fabric``: Lightning Fabric (cpu, ``--devices`` x ``--nodes``,
strategy ddp), as a Lightning user writes it, with no cluster plugin.
``--framework trainer``: the Lightning Trainer, the same way.
``--framework accelerate``: accelerate's ``Accelerator(cpu=True)``, which the
Hugging Face Trainer builds on too.

hpcdist's view is taken first (``hpcdist.env.resolve()``), before the
framework starts: the order that once left MPI finalized under Lightning.
Each rank prints one ``VIEW {json}`` line: both views and a checksum of the
parameters after training on data that differs per rank; equal checksums
mean the gradients were averaged across all ranks.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys

import hpcdist.env

parser = argparse.ArgumentParser()
parser.add_argument("--framework", choices=["fabric", "trainer", "accelerate"], required=True)
parser.add_argument("--devices", type=int, default=2)
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--local_rank", type=int, default=-1)  # DeepSpeed's launcher adds it
args = parser.parse_args()

ours = hpcdist.env.resolve()
import torch  # noqa: E402  (after hpcdist's view, on purpose)

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def batch(rank: int) -> torch.Tensor:
    return torch.randn(16, 8, generator=torch.Generator().manual_seed(1000 + rank))


def train(model, optimizer, rank: int, backward) -> torch.Tensor:
    """``--steps`` steps on this rank's data through the framework's ``backward``; the parameters, flat."""
    for _ in range(args.steps):
        backward(model(batch(rank)).pow(2).mean())
        optimizer.step()
        optimizer.zero_grad()
    return flat_parameters(model)


def flat_parameters(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


if args.framework == "fabric":
    import lightning as L
    from lightning.fabric.strategies import DDPStrategy

    fabric = L.Fabric(accelerator="cpu", devices=args.devices, num_nodes=args.nodes,
                      strategy=DDPStrategy(timeout=datetime.timedelta(seconds=60)))
    fabric.launch()
    theirs = dict(rank=fabric.global_rank, local_rank=fabric.local_rank, node_rank=fabric.node_rank,
                  world_size=fabric.world_size,
                  environment=type(fabric._connector.cluster_environment).__name__)
    flat = train(*fabric.setup(model, optimizer), fabric.global_rank, fabric.backward)
    everyone = fabric.all_gather(flat)
elif args.framework == "trainer":
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = model

        def training_step(self, _, __):
            return self.layer(batch(self.global_rank)).pow(2).mean()

        def configure_optimizers(self):
            return optimizer

    trainer = L.Trainer(accelerator="cpu", devices=args.devices, num_nodes=args.nodes, max_steps=args.steps,
                        strategy=DDPStrategy(timeout=datetime.timedelta(seconds=60)), logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        use_distributed_sampler=False)
    steps = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(args.steps, 1)), batch_size=1)
    trainer.fit(Module(), steps)
    theirs = dict(rank=trainer.global_rank, local_rank=trainer.local_rank, node_rank=trainer.node_rank,
                  world_size=trainer.world_size, environment=type(trainer.strategy.cluster_environment).__name__)
    flat = flat_parameters(model)
    everyone = trainer.strategy.all_gather(flat)
else:
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(
        timeout=datetime.timedelta(seconds=60))])
    state = accelerator.state
    theirs = dict(rank=accelerator.process_index, local_rank=accelerator.local_process_index,
                  world_size=accelerator.num_processes, environment=str(state.distributed_type))
    flat = train(*accelerator.prepare(model, optimizer), accelerator.process_index, accelerator.backward)
    everyone = accelerator.gather(flat[None])

same = bool(all(torch.equal(row, everyone[0]) for row in everyone))
line = dict(host=socket.gethostname(), framework=args.framework, theirs=theirs,
            ours=dict(rank=ours.rank, local_rank=ours.local_rank, node_rank=ours.node_rank,
                      world_size=ours.world_size, launcher=ours.launcher),
            checksum=round(float(flat.sum()), 6), gathered=len(everyone), same_on_all=same,
            slurm_ntasks=os.environ.get("SLURM_NTASKS"))
print("VIEW " + json.dumps(line, sort_keys=True), flush=True)
# torch's advice: without this, gloo's threads can meet the exit half-way ("terminate called
# without an active exception"), with or without hpcdist, under srun as under plain python.
torch.distributed.destroy_process_group()
sys.exit(0)
