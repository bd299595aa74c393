"""Hugging Face accelerate: one ``accelerate launch`` per node, told its machine rank."""

from __future__ import annotations

from hpcdist.launchers import Launcher, program
from hpcdist.shell import BREAK, Shell


class Accelerate(Launcher):
    name = "accelerate"

    def per_node(self, spec):
        return True

    def describe(self, spec, spread: str = ""):
        return f"Start accelerate on every node{spread}, each told its node's index."

    def words(self, spec):
        # --multi_gpu is accelerate's multi-process launcher (torchrun inside), on
        # CPUs too; without it accelerate starts one process per node.
        return [BREAK, "accelerate", "launch", spec.count("--num_machines="),
                spec.count("--num_processes=", spec.procs_per_node), Shell('--machine_rank="$NODE_RANK"'),
                Shell('--main_process_ip="$MASTER_ADDR"'), Shell('--main_process_port="$MASTER_PORT"'),
                ] + (["--multi_gpu"] if spec.total_procs > 1 else []) + program(spec, argparse_launcher=True)


LAUNCHER = Accelerate()
