"""The commands that run inside a job: ``env``, ``hostfile``, ``supervise``, ``requeue``, the two
every job script calls, ``job-setup`` and ``agents``, and ``restart`` (a job's with
``--max-restarts``), whose arguments are read by hand (:data:`hpcdist.cli.commands.BY_HAND`:
argparse alone costs more than their work, on every job).
"""

from __future__ import annotations

import sys

from hpcdist.cli.commands import CommandError
from hpcdist.cli.common import help_end, positive_int
from hpcdist.schedulers import QUEUED



def run_by_hand(name: str, argv: list[str]) -> int:
    """``hpcdist job-setup`` (:mod:`hpcdist.injob.job_setup`) or ``hpcdist agents`` (:mod:`hpcdist.injob.agents`,
    each way of starting the agents its scheduler's)."""
    # Each in-job module imported by the command that runs it: no other command pays for them.
    if name == "job-setup":
        from hpcdist.injob.job_setup import main

        return main(argv)
    if name == "restart":
        from hpcdist.injob.restart import main

        return main(argv)
    from hpcdist.injob.agents import USAGE, node_agent, parse, reap

    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    options, command = parse(argv)
    if options["by"] == "node":
        return node_agent(command, options["status"], options.get("cd"))
    if options["by"] == "reap":
        reap(command)  # becomes the command: returns only if exec failed (OSError, said by the CLI)
    if options["by"] == "pbsdsh":
        from hpcdist.schedulers.pbs.pbsdsh import start
    elif options["by"] == "elastic":
        from hpcdist.schedulers.slurm.job import start_elastic as start
    else:
        from hpcdist.schedulers.local.job import start
    return start(command, options)


#: The in-job commands run without argparse, as `hpcdist --help` lists them: each module's first
#: docstring line (tests/cli/test_cli.py holds them equal), so that the list loads neither module.
LISTED = {"job-setup": "the job's set-up before the launcher, in one interpreter.",
          "agents": "start a launcher's agent once on every node, and end them all when one fails.",
          "restart": "after a failed launch, whether to start it again, and on which nodes."}


def add_parsers(sub, only: str | None, command: str | None) -> None:
    """Their parsers on ``sub`` (all, or ``only`` that one)."""
    import argparse  # not at the top: `hpcdist status` and the job scripts' commands build no parser

    if only in (None, "env"):
        env = sub.add_parser(
            "env", **help_end("env"),
            help="show this process's rank, local rank, world size, node rank and master",
            description="Resolve the distributed environment the way hpcdist.env does in training code.",
        )
        env.add_argument("--json", action="store_true", help="print JSON")
        env.add_argument(
            "--explain", action="store_true",
            help="also list every variable consulted and why each value was chosen",
        )
        env.add_argument("--field", choices=("rank", "local_rank", "world_size", "local_world_size",
                         "node_rank", "master_addr", "master_port", "launcher"),
                         help="print only this value (for job scripts)")
        env.set_defaults(run=run_env)
    if only in (None, "hostfile"):
        from hpcdist.allocation import HOSTFILE_FORMATS  # in-job: only when its parser is built

        hostfile = sub.add_parser(
            "hostfile", **help_end("hostfile"),
            help="write the allocation's hostfile (run inside a job)",
            description="Build a hostfile from SLURM_JOB_NODELIST/SLURM_TASKS_PER_NODE, $PBS_NODEFILE or "
            "$LSB_DJOB_RANKFILE (hpcdist.allocation says which first).",
        )
        hostfile.add_argument(
            "--format", "-f", choices=HOSTFILE_FORMATS, default="deepspeed",
            help="deepspeed/openmpi: 'host slots=N'; mpich: 'host:N'; hosts: a line per slot; "
            "nodes: a line per host (default: deepspeed)",
        )
        hostfile.add_argument(
            "--slots-per-node", type=positive_int, metavar="N",
            help="the same N slots on every host (e.g. one per GPU when the allocation counted CPUs)",
        )
        hostfile.add_argument("-o", "--output", metavar="FILE",
                              help="write FILE (atomically, when a regular file) instead of stdout")
        hostfile.set_defaults(run=run_hostfile)
    if only in (None, "supervise"):
        supervise = sub.add_parser(
            "supervise", **help_end("supervise"),
            help="run a pdsh-based launcher; end it on every node when one node fails (in job scripts)",
            description="Run COMMAND (DeepSpeed over pdsh); when pdsh reports a failed node, end "
                        "the launch everywhere.")
        supervise.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
        supervise.set_defaults(run=run_supervise)
    if only in (None, "requeue"):
        requeue = sub.add_parser(
            "requeue", **help_end("requeue"),
            help="requeue (Slurm) or resubmit (PBS) this job after the walltime warning (in job scripts)",
            description="Put the running job back in the queue, unless it went back --max times already (exit 3).")
        requeue.add_argument("--scheduler", choices=QUEUED, required=True)
        requeue.add_argument("--max", type=int, required=True, metavar="N", help="restarts allowed in all")
        requeue.add_argument("--script", required=True, help="PBS: the job script to submit again")
        requeue.add_argument("--job-dir", help="the job folder, where the resubmission is recorded")
        requeue.set_defaults(run=run_requeue)
    for name, module in (("job-setup", "hpcdist.injob.job_setup"), ("agents", "hpcdist.injob.agents"),
                         ("restart", "hpcdist.injob.restart")):
        if name in (only, command):  # its own help: hpcdist.cli runs them without argparse
            text = __import__(module, fromlist=["USAGE"])
            usage, _, description = text.USAGE.partition("\n")
            parser = sub.add_parser(name, help=LISTED[name], usage=usage.removeprefix("usage: "),
                                    description=description)
        elif only is None:  # listed by --help, the module not loaded for one line
            parser = sub.add_parser(name, help=LISTED[name])
        else:
            continue
        parser.add_argument("argv", nargs=argparse.REMAINDER)
        parser.set_defaults(run=lambda args, name=name: run_by_hand(name, args.argv))


def run_env(args: Namespace) -> int:
    import warnings  # not at the top: `hpcdist status` does not load it (it would cost it 1.4%)

    from hpcdist.env import UndistributedWarning, explain  # in-job: not every command's to pay

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndistributedWarning)
        env, why = explain()
    if args.field:
        # One value for a job script: the batch step's warning would only be noise there.
        print(env.value(args.field))  # an unknown field: its reason, as an error
        return 0
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
        import json  # not at the top: `hpcdist status` imports this module (json would cost it 7%)

        print(json.dumps(data, indent=2))
        return 0
    print(f"launcher          {env.launcher}    ({env.sources['launcher']})")
    for name in ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "master_addr", "master_port"):
        value = "unknown" if getattr(env, name) is None else getattr(env, name)
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


def run_supervise(args: Namespace) -> int:
    from hpcdist.injob.supervise import supervise  # in-job (subprocess, threading): not every command's to pay

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise CommandError("no command given: hpcdist supervise -- deepspeed ...")
    return supervise(argv)


def run_requeue(args: Namespace) -> int:
    from hpcdist.injob.requeue import main  # in-job: not every command's to pay

    return main(args.scheduler, args.max, args.script, args.job_dir)


def run_hostfile(args: Namespace) -> int:
    # In-job, and tempfile: not every command's to pay.
    from hpcdist.allocation import Allocation
    from hpcdist.jobs.atomic import write_output

    alloc = Allocation.from_env(slots_per_node=args.slots_per_node)
    text = alloc.to_hostfile(args.format)
    if args.output:
        try:
            write_output(args.output, text)
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.write(text)
    return 0
