"""The ``hpcdist`` command: one parser, and each subcommand a small function over the library.

Where it runs: where the user types ``hpcdist`` (the login node, or a laptop for the commands it
sends on); its in-job commands run inside jobs, on the nodes.

The commands live by concern: :mod:`hpcdist.cli.jobs` (the login side: render, submit, status,
logs, cancel, doctor, profiles; status's own code is :mod:`hpcdist.cli.status`),
:mod:`hpcdist.cli.watch` (watch, stacks: inside a running job; and monitor, in every submitted
job), :mod:`hpcdist.cli.report` (report: a run's page), :mod:`hpcdist.cli.remote` (connect,
disconnect, and the commands a laptop sends on) and :mod:`hpcdist.cli.in_job` (what runs inside a
job: env, hostfile, supervise, requeue, job-setup, agents, restart); :mod:`hpcdist.cli.common`
holds what they share, :mod:`hpcdist.cli.commands` which command is whose. Start-up stays fast:
a command's module is imported when it runs, a subcommand named first builds only its own parser,
``hpcdist status`` and the two commands of every job script none at all, and each command
imports what it needs when it runs.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from hpcdist import STATE_DIR, __version__
from hpcdist.cli.commands import BY_HAND, BY_MODULE, COMMANDS, MODULE, OWN_FLAGS, SENT, CommandError

#: `hpcdist --help` in two groups: what a user types (login node, laptop), and what runs inside a job.
USER_COMMANDS = ("render", "submit", "status", "logs", "watch", "stacks", "report", "cancel", "doctor",
                 "profiles", "connect", "disconnect")
IN_JOB_COMMANDS = ("env", "hostfile", "supervise", "requeue", "monitor", "job-setup", "agents", "restart")
GROUPS = (("commands", USER_COMMANDS),
          ("inside a job (env and hostfile are yours to use there; hpcdist's job scripts run the others)",
           IN_JOB_COMMANDS))

__all__ = ["main", "build_parser", "COMMANDS", "CommandError"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        status = _run(argv)
        if sys.stdout is not None:  # None: started with stdout closed
            sys.stdout.flush()  # here, where a closed pipe can still be answered quietly
        return status
    except BrokenPipeError:
        # The reader went away (`hpcdist status | head`): nothing more to say. stdout goes
        # to devnull so that Python's own flush at exit does not fail again; status as if
        # SIGPIPE had ended us, as it ends C tools (128 + 13).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _run(argv: list[str]) -> int:
    if (os.environ.get("HPCDIST_EXPECT_VERSION") or __version__) != __version__:  # sent by a laptop (hpcdist.remote)
        from hpcdist.remote import MARK

        print(f"{MARK} version hpcdist {__version__}", file=sys.stderr)
        return 3
    if argv == ["--version"]:  # as argparse's version action says it, without building every parser
        print(f"hpcdist {__version__}")
        return 0
    if argv in (["-h"], ["--help"]):  # the list of commands, without building every parser
        from hpcdist.cli.top_help import TEXT

        sys.stdout.write(TEXT)
        return 0
    if argv[:1] and argv[0] in BY_HAND:
        return _module(MODULE[argv[0]]).run_by_hand(argv[0], argv[1:])
    # From a laptop: sent to a cluster (--remote, a profile's remote, a job sent from here).
    if argv[:1] and sent(argv):
        return _module("remote").main(argv)
    args = _plain_status(argv)
    if args is None:
        from hpcdist.cli.dash_values import joined  # a parse's alone: `hpcdist status` has none

        parser = build_parser(argv)
        args = parser.parse_args(joined(argv, OWN_FLAGS))
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
        # whose messages are written for the user. Imported here: the in-job modules and validate
        # are not every command's to pay for (`hpcdist status` imports none of them).
        from hpcdist.allocation import AllocationError
        from hpcdist.env import DistEnvError
        from hpcdist.hostlist import HostlistError
        from hpcdist.validate import ValidationError

        if isinstance(e, (DistEnvError, AllocationError, HostlistError, ValidationError)):
            print(f"hpcdist {args.command}: error: {e}", file=sys.stderr)
            return 1
        raise


def sent(argv: list[str]) -> bool:
    """Whether ``hpcdist ARGV`` goes to a cluster (:mod:`hpcdist.cli.remote` runs it). Cheap but
    for submit and render, which read their profile (and the job options) anyway: ``hpcdist
    status`` pays two string tests and a stat here, no import."""
    if argv[0] not in SENT:
        return False
    if argv[0] not in ("submit", "render"):
        if any(word == "--remote" or word.startswith("--remote=") for word in argv[1:]):
            return True
        if not os.path.exists(os.path.join(STATE_DIR, "remote", "jobs")):
            return False
    return _module("remote").wanted(argv)


def _module(name: str):
    """hpcdist.cli's module ``name`` (:data:`hpcdist.cli.commands.BY_MODULE`), imported now."""
    return __import__(f"{__name__}.{name}", fromlist=["_"])


def _plain_status(argv: list[str]):
    """``hpcdist status [JOB ...]``, the command typed most, parsed as argparse would
    (tests/cli/test_cli.py checks): there is nothing to parse, and building any argparse parser
    costs more than the command itself (it imports shutil and locale)."""
    if argv[:1] != ["status"] or any(a.startswith("-") for a in argv[1:]):
        return None
    from hpcdist.cli.status import run_status

    return SimpleNamespace(command="status", jobs=argv[1:], json=False, run=run_status)


def build_parser(argv: list[str] = ()):
    """The parser: a subcommand's alone when its name comes first (a subcommand's parser sees only
    what follows its name), else all of them (`hpcdist --help`)."""
    from hpcdist.cli.common import help_end, new_parser

    command = next((a for a in argv if not a.startswith("-")), None)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = new_parser(prog="hpcdist", description="Distributed PyTorch on PBS and Slurm clusters.",
                        **help_end("hpcdist"))
    parser.add_argument("--version", action="version", version=f"hpcdist {__version__}")
    # prog given: argparse would otherwise format the usage above to find it.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="hpcdist")
    if list(argv) in ([], ["-h"], ["--help"]):
        # `hpcdist --help` lists the commands, not their arguments: each command's parser is made
        # without them (half of its cost was every job option of render and submit, twice).
        sub._parser_class = _listed_only(sub._parser_class)
    for module in ([MODULE[only]] if only else BY_MODULE):  # only the named command's module loaded
        _module(module).add_parsers(sub, only, command)
    parser.commands = sub.choices  # for a mistake's message: the command's own parser
    if only is None:
        _group(parser, sub)
    return parser


def _listed_only(parser_class):
    """A command's parser that takes no arguments: for the list of commands, which shows none."""
    class Listed(parser_class):
        def add_argument(self, *args, **kwargs):
            return None

        def add_argument_group(self, *args, **kwargs):
            return self

        def add_mutually_exclusive_group(self, *args, **kwargs):
            return self

    return Listed


def _group(parser, sub) -> None:
    """`hpcdist --help` lists the commands in :data:`GROUPS`, before the options, not as argparse's
    one list of COMMAND's choices (its usage line still says COMMAND)."""
    listed = {action.dest: action for action in sub._choices_actions}
    parser._positionals._group_actions.remove(sub)
    groups = []
    for title, names in GROUPS:
        group = parser.add_argument_group(title)
        group._group_actions.extend(listed[name] for name in names)
        groups.append(group)
    parser._action_groups = groups + [g for g in parser._action_groups if g not in groups]
