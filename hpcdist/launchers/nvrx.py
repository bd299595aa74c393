"""nvidia-resiliency-ext's ``ft_launcher`` (``--launcher nvrx``): torchrun's words, its program.

Where it runs: on the login node (the launch lines); in the job, what torchrun's does (one agent
per node, a c10d rendezvous at the master, the store held by the job script).

``ft_launcher`` is torchrun with fault tolerance: its agents restart the workers in the job when
one fails or stops sending heartbeats (the training's ``nvidia_resiliency_ext`` calls). So under
``nvrx``, ``--max-restarts`` is ft_launcher's own (``--max-restarts=N``), not the job script's
loop (:mod:`hpcdist.injob.restart`): one restarts at a time, and ft_launcher's is why a user picks
it. Its restarts stay on the job's nodes: ``--spare-nodes`` (hpcdist's) is refused. The package
must be in the job's environment (``pip install nvidia-resiliency-ext``); its log names a failed
rank as torchrun's does."""

from __future__ import annotations

import re

from hpcdist.launchers import exit_why, failure
from hpcdist.launchers.torchrun import Torchrun

#: ft_launcher's agent's summary of its failed workers (it prints no "Root Cause" block): by global
#: rank, in the order the agent saw them fail.
FAILED = re.compile(r"\[ft_launcher\d+@(?P<host>[^\]\s]+)\] Some rank\(s\) exited with non-zero exit "
                    r"code: \{(?P<ranks>.*?)\}\. Agent's exit code")
PROCESS = re.compile(r"(?P<rank>\d+): ProcessFailure\(local_rank=(?P<local>\d+), pid=\d+, "
                     r"exitcode=(?P<code>-?\d+)")


class Nvrx(Torchrun):
    name = "nvrx"

    def describe(self, spec, spread: str = ""):
        return super().describe(spec, spread).replace("Start torchrun", "Start ft_launcher "
                                                      "(nvidia-resiliency-ext)")

    def words(self, spec):
        words = super().words(spec)
        at = words.index("torchrun")
        restarts = [f"--max-restarts={spec.max_restarts}"] if spec.max_restarts else []
        return words[:at] + ["ft_launcher"] + words[at + 1:at + 3] + restarts + words[at + 3:]

    def failures(self, text, agents, nodes):
        return [(m.start() + p.start(), failure(exit_why(int(p["code"])), rank=int(p["rank"]),
                                                local_rank=int(p["local"]), host=m["host"], source="ft_launcher"))
                for m in FAILED.finditer(text) for p in PROCESS.finditer(m["ranks"])]


LAUNCHER = Nvrx()
