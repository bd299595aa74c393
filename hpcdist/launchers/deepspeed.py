"""DeepSpeed's launcher: its runners (pdsh, openmpi, slurm) or one launcher per node (``--no-ssh``).

Owns the ``--deepspeed-runner`` rules, the ``DS_ENV_FILE`` lines of the
allocation block (what pdsh/ssh would lose on the other nodes), and the log
lines that name a failed rank (``sigkill_handler``, ``global_rank_mapping``).
"""

from __future__ import annotations

import ast
import os
import re

from hpcdist.launchers import Launcher, exit_why, failure, hpcdist_command, program, rank_module
from hpcdist.shell import BREAK, Shell, var
from hpcdist.validate import ValidationError

#: DeepSpeed's name for its runner that starts the nodes with srun.
SRUN_RUNNER = "slurm"

# DeepSpeed's lines in a log (compiled by re's cache when a log is read).
#: One local rank's end, as DeepSpeed's per-node launcher reports it (pdsh prefixes the host).
RANK_FAILED = (
    r"^(?:(?P<host>[^\s:]+): )?\[[^\]]*\] \[ERROR\] \[launch\.py:\d+:sigkill_handler\] .*?"
    r"'--local_rank=(?P<local>\d+)'.*exits with return code = (?P<code>-?\d+)")
#: Which global ranks run on which host.
RANK_MAPPING = r"global_rank_mapping=defaultdict\(<class 'list'>, (?P<map>\{[^}]*\})\)"


def ranks_by_host(text: str) -> dict:
    """DeepSpeed's own ``global_rank_mapping`` line: host -> its global ranks."""
    m = re.search(RANK_MAPPING, text)
    try:
        mapping = ast.literal_eval(m["map"]) if m else {}
    except (ValueError, SyntaxError):
        return {}
    return mapping if isinstance(mapping, dict) else {}


class DeepSpeed(Launcher):
    name = "deepspeed"
    ranks_through_hpcdist = True

    @staticmethod
    def mode(spec) -> str:
        """How DeepSpeed reaches the nodes: "one-host", "no-ssh", or its runner (pdsh, openmpi, slurm)."""
        if spec.nodes == 1 or spec.one_host:
            return "one-host"
        return "no-ssh" if spec.no_ssh else spec.deepspeed_runner

    def check(self, values, scheduler):
        super().check(values, scheduler)
        if values.get("deepspeed_runner") == SRUN_RUNNER and not scheduler.runs_srun:
            raise ValidationError("--deepspeed-runner", "slurm", "needs --scheduler slurm.", "Use pdsh or openmpi.")
        if (values["deepspeed_runner"] == "pdsh" and not values.get("no_ssh")
                and values.get("nodes", 1) > 1 and not scheduler.one_host):
            # DeepSpeed's pdsh runner starts the other nodes with `cd {os.path.abspath('.')};` unquoted
            # (deepspeed/launcher/multinode_runner.py, PDSHRunner.get_cmd): the job runs in the
            # submit folder, whose path must be one plain shell word.
            here = os.getcwd()
            bad = next((c for c in here if c.isspace() or c in "'\"\\$`;&|<>()*?[]{}!#~"), None)
            if bad is not None:
                raise ValidationError(
                    "the submit folder", here,
                    f"DeepSpeed's pdsh runner starts the other nodes with `cd {here};` unquoted, where "
                    f"{bad!r} breaks the command (\"cd: too many arguments\", then the script is not found).",
                    "Submit from a folder whose path has no spaces or shell characters, or use --no-ssh "
                    "(no pdsh) or --launcher torchrun.")
            for name, value in values.get("env", ()):
                # DeepSpeed's pdsh runner re-exports variables on the other nodes inside
                # double quotes, where $, `, " and \ would be expanded or break the line.
                bad = next((c for c in '$`"\\\n' if c in value), None)
                if bad is not None:
                    raise ValidationError(
                        "--env", f"{name}={value}",
                        f"DeepSpeed's pdsh runner passes variables to the other nodes inside double "
                        f"quotes, where {bad!r} would be expanded or break the command.",
                        "Use --deepspeed-runner openmpi, or --no-ssh, for values like this.")

    def check_container(self, values, scheduler):
        nodes = values.get("nodes", 1)
        if nodes > 1 and not values.get("no_ssh") and not scheduler.one_host:
            runner = values.get("deepspeed_runner", "pdsh")
            raise ValidationError(
                "--container-image", values["container_image"],
                f"DeepSpeed's {runner} runner starts the other nodes' launchers itself, outside the image.",
                "Add --no-ssh (one DeepSpeed launcher per node, each in the image), or use --launcher torchrun.")

    def per_node(self, spec):
        # Locally all "nodes" are this one host: one DeepSpeed launcher for all slots.
        return spec.no_ssh and spec.nodes > 1 and not spec.one_host

    def words(self, spec):
        words = ["deepspeed", "--hostfile", var("HPCDIST_HOSTFILE"),
                 "--master_addr", var("MASTER_ADDR"), "--master_port", var("MASTER_PORT")]
        mode = self.mode(spec)
        if mode == "one-host":
            # One host: DeepSpeed starts it without ssh, once its ssh check is skipped.
            words.append("--no_ssh_check")
        elif mode == "no-ssh":
            words += ["--no_ssh", Shell('--node_rank="$NODE_RANK"')]
        elif mode != "pdsh":
            words += ["--launcher", mode]
        if spec.ssh_port and not spec.no_ssh:
            words += ["--ssh_port", str(spec.ssh_port)]
        # Each rank through hpcdist.rank (DeepSpeed's --module), which adds the node rank and
        # local world size DeepSpeed does not export (Lightning reads NODE_RANK). The script is
        # then not the launcher's first argument, where its argparse would swallow a "--".
        words += ["--module", *rank_module(spec)[1:]] + program(spec)
        # pdsh waits for every node even after one failed: see hpcdist.injob.supervise.
        return hpcdist_command(spec) + ["supervise", "--", BREAK] + words if mode == "pdsh" else words

    def setup(self, spec):
        if self.mode(spec) == SRUN_RUNNER:
            # DeepSpeed's srun leaves the other tasks running when one fails.
            return ["export SLURM_KILL_BAD_EXIT=1"]
        return []

    def hostfile_format(self, spec):
        return "deepspeed"

    def job_setup(self, spec):
        # What pdsh/ssh (or the runner's mpirun, srun) would lose on the other nodes: DeepSpeed
        # exports the file's variables there.
        return [] if self.mode(spec) in ("one-host", "no-ssh") else ["--deepspeed-env"]

    def describe(self, spec, spread: str = ""):
        mode = self.mode(spec)
        if mode == "one-host":
            return "Start DeepSpeed, which starts every process on this host."
        if mode == "no-ssh":
            return f"Start DeepSpeed on every node{spread} (--no_ssh: each is told its node's index)."
        if mode == "pdsh":
            return "Start DeepSpeed; it reaches the other nodes by pdsh (`hpcdist supervise`: one fails, all end)."
        return f"Start DeepSpeed, which reaches the other nodes with its {mode} runner."

    def failures(self, text, agents, nodes):
        found = []
        ranks_on = ranks_by_host(text)
        for m in re.finditer(RANK_FAILED, text, re.M):
            local = int(m["local"])
            # Without pdsh's "host: " prefix the host is known only when there is one.
            host = m["host"] or (next(iter(ranks_on)) if len(ranks_on) == 1 else None)
            found.append((m.start(), failure(exit_why(int(m["code"])), local_rank=local, host=host,
                                             source="deepspeed", rank=_rank_of(ranks_on, host, local))))
        return found

    def global_rank(self, text, host, local_rank):
        return _rank_of(ranks_by_host(text), host, local_rank)


def _rank_of(ranks_on: dict, host: str | None, local_rank: int) -> int | None:
    """The global rank of ``local_rank`` on ``host`` in DeepSpeed's mapping, when it holds one."""
    on_host = ranks_on.get(host, [])
    return on_host[local_rank] if local_rank < len(on_host) else None


LAUNCHER = DeepSpeed()
