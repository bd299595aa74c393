"""The ``hpcdist`` command. Each subcommand is a small function over the library.

Start-up stays fast: subcommands import what they need when they run.
"""

from __future__ import annotations

import argparse
import json
import sys

from hpcdist import __version__


class CommandError(Exception):
    """A user-facing failure: printed as one message, exit status 1."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except CommandError as e:
        print(f"hpcdist {args.command}: error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        # DistEnvError, AllocationError and HostlistError are ValueErrors
        # whose messages are written for the user.
        from hpcdist.allocation import AllocationError
        from hpcdist.env import DistEnvError
        from hpcdist.hostlist import HostlistError

        if isinstance(e, (DistEnvError, AllocationError, HostlistError)):
            print(f"hpcdist {args.command}: error: {e}", file=sys.stderr)
            return 1
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpcdist",
        description="Distributed PyTorch on PBS and Slurm clusters.",
    )
    parser.add_argument("--version", action="version", version=f"hpcdist {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    env = sub.add_parser(
        "env",
        help="show this process's rank, local rank, world size, node rank and master",
        description="Resolve the distributed environment the way hpcdist.env does in training code.",
    )
    env.add_argument("--json", action="store_true", help="print JSON")
    env.add_argument(
        "--explain", action="store_true",
        help="also list every variable consulted and why each value was chosen",
    )
    env.set_defaults(run=run_env)

    from hpcdist.allocation import HOSTFILE_FORMATS

    hostfile = sub.add_parser(
        "hostfile",
        help="write the allocation's hostfile (run inside a job)",
        description="Build a hostfile from $PBS_NODEFILE or SLURM_JOB_NODELIST/SLURM_TASKS_PER_NODE.",
    )
    hostfile.add_argument(
        "--format", "-f", choices=HOSTFILE_FORMATS, default="deepspeed",
        help="deepspeed/openmpi: 'host slots=N'; mpich: 'host:N'; hosts: a line per slot; "
        "nodes: a line per host (default: deepspeed)",
    )
    hostfile.add_argument(
        "--slots-per-node", type=_positive_int, metavar="N",
        help="the same N slots on every host (e.g. one per GPU when the allocation counted CPUs)",
    )
    hostfile.add_argument("-o", "--output", metavar="FILE", help="write FILE atomically instead of stdout")
    hostfile.set_defaults(run=run_hostfile)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def run_env(args: argparse.Namespace) -> int:
    import warnings

    from hpcdist.env import UndistributedWarning, explain

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndistributedWarning)
        env, why = explain()
    for warning in caught:
        print(f"hpcdist env: warning: {warning.message}", file=sys.stderr)
    if args.json:
        data = env.as_dict()
        if args.explain:
            data["explain"] = {
                "detection": [
                    {"launcher": name, "detected": hit, "markers": list(markers)}
                    for name, hit, markers in why.trace
                ],
                "consulted": why.consulted,
                "warnings": why.warnings,
            }
        print(json.dumps(data, indent=2))
        return 0
    print(f"launcher          {env.launcher}    ({env.sources['launcher']})")
    for name in ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "master_addr", "master_port"):
        value = getattr(env, name)
        if args.explain:
            print(f"{name:<17} {str(value):<10} {env.sources[name]}")
        else:
            print(f"{name:<17} {value}")
    if args.explain:
        print("\ndetection, innermost launcher first (the first that matches wins):")
        for name, hit, markers in why.trace:
            print(f"  {name:<10} {'yes' if hit else 'no':<4} {', '.join(markers) or '(always)'}")
        print("\nvariables consulted:")
        for name, value in why.consulted.items():
            print(f"  {name}={value}" if value is not None else f"  {name} (unset)")
    return 0


def run_hostfile(args: argparse.Namespace) -> int:
    from hpcdist.allocation import Allocation
    from hpcdist.atomic import write_text_atomic

    alloc = Allocation.from_env(slots_per_node=args.slots_per_node)
    text = alloc.to_hostfile(args.format)
    if args.output:
        try:
            write_text_atomic(args.output, text)
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.write(text)
    return 0
