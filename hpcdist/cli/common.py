"""What the ``hpcdist`` commands share: the job spec from flags and profiles, the command line
for a script's header, following a job to its end (their one-message error is
:class:`hpcdist.cli.commands.CommandError`)."""

from __future__ import annotations

import os
import sys

from hpcdist.cli.commands import CommandError
from hpcdist.shell import words_to_line


def job_spec(args: Namespace, check_files: bool = True):
    # not at the top: not `status`'s to pay
    from hpcdist.submission.profiles import KEYS, REMOTE_KEYS, ProfileError, build, load_profile

    given = next((key for key in REMOTE_KEYS if getattr(args, key, None) is not None), None)
    if given == "remote":  # submit and render with one are hpcdist.cli.remote's; doctor runs here
        raise CommandError(f"--remote: hpcdist {args.command} runs where it is typed (submit, render, status, logs "
                           f"and cancel go to a cluster from a laptop); run it on the login node")
    if given:  # a remote setting without a cluster to send to
        flag = "--" + given.replace("_", "-")
        raise CommandError(f"{flag} is for a job sent to a cluster from here: give --remote HOST too, or a "
                           f"--profile whose remote = \"user@host\"")
    if os.environ.get("HPCDIST_SENT_ENV"):  # a laptop's --env values, sent on stdin, not as arguments
        from hpcdist.remote.script import take_sent_env

        take_sent_env(args)
    try:
        # build: a mistake in a profile's value names the file and the key, not a flag nobody typed.
        flags = {name: getattr(args, name) for name in (*KEYS, "script", "script_args")}
        profile = load_profile(args.profile)
        for note in profile.notes:  # a profile file ignored, the default chosen: before any error
            print(f"hpcdist {args.command}: {note}", file=sys.stderr)
        spec = build(profile, flags, check_files=check_files)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    for note in spec.notes:
        print(f"hpcdist {args.command}: {note}", file=sys.stderr)
    from hpcdist.submission.profiles import missing_required
    from hpcdist.submission.unchosen import unchosen_local

    # Refused where it would start the job; render and a dry run start nothing, and a script
    # rendered to read (or to finish by hand) is still worth reading: they warn.
    for said in (unchosen_local(profile, flags, spec), missing_required(profile, flags, spec)):
        if not said:
            continue
        if args.command == "submit" and not getattr(args, "dry_run", False):
            raise CommandError(said)
        print(f"hpcdist {args.command}: warning: {said}", file=sys.stderr)
    return spec


def command_line() -> str:
    """The command as typed, for the script's header: an argument's line break or carriage
    return is escaped (bash's $'...'), never written raw into the comment."""
    return words_to_line(["hpcdist", *sys.argv[1:]])


def follow(job, quiet: bool = False, out=None) -> int:
    """``--wait``, ``logs -f`` and ``doctor --submit``: the job to its end; Ctrl-C stops
    following, not the job."""
    from hpcdist.submission import submit as sub  # the submission code: not `status`'s to pay without jobs

    try:
        return sub.wait(job, quiet=quiet, out=out or sys.stdout)
    except sub.JobFolderError as e:  # a log that cannot be read
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:
        print(f"\nhpcdist: stopped following job {job.job_id}; the job goes on. Follow it again with "
              f"`hpcdist logs -f {job.job_id}`, or stop it with `hpcdist cancel {job.job_id}`.", file=sys.stderr)
        return 130


class SkipBytes:
    """``out`` less the first ``skip`` bytes written to it (as UTF-8): ``logs --from``, with which a
    laptop resumes a ``logs -f`` whose connection dropped, from the byte it had."""

    def __init__(self, out, skip: int):
        self.out, self.skip = out, max(0, skip)

    def write(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        cut = min(self.skip, len(data))
        self.skip -= cut
        if data[cut:]:
            self.out.flush()
            self.out.buffer.write(data[cut:])

    def flush(self) -> None:
        self.out.flush()
        self.out.buffer.flush()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        import argparse  # loaded by the parser that calls this; `hpcdist status` builds none

        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


#: Where the documentation is: no site is published, so a --help names its page in the source
#: (the git tree and the sdist carry docs/; `mkdocs serve` there shows them as a site).
DOCS = "docs/"


def docs_url(page: str) -> str:
    """Where ``page`` (as under docs/, with its anchor) is, for a --help's last line."""
    return f"{DOCS}{page} in hpcdist's source"


#: The end of each command's --help (and of `hpcdist --help`): its examples, and its page under DOCS.
#: job-setup, agents and monitor (written by the job scripts, their help printed by hand) have none.
HELP_ENDS = {
    "hpcdist": (["hpcdist render --scheduler slurm --nodes 2 --gpus-per-node 4 train.py    # the job script, to read",
                 "hpcdist submit --scheduler local --nodes 2 --wait train.py    # a job on this machine, to its end",
                 "hpcdist submit -h    # a command's flags and examples"], "index.md"),
    "render": (["hpcdist render --scheduler pbs --nodes 2 --gpus-per-node 4 train.py > job.pbs",
                "hpcdist render --profile polaris --nodes 2 --account MYPROJ --walltime 30m train.py"],
               "guide/first-job.md"),
    "submit": (["hpcdist submit --scheduler slurm --nodes 2 --gpus-per-node 4 --walltime 12h train.py --lr 0.1",
                "hpcdist submit --scheduler local --nodes 2 --wait train.py"],
               "guide/first-job.md#submit-follow-cancel"),
    "status": (["hpcdist status", "hpcdist status --json JOB"], "guide/first-job.md#submit-follow-cancel"),
    "logs": (["hpcdist logs -f JOB"], "guide/first-job.md#submit-follow-cancel"),
    "cancel": (["hpcdist cancel JOB"], "guide/first-job.md#submit-follow-cancel"),
    "doctor": (["hpcdist doctor --scheduler slurm --nodes 2", "hpcdist doctor    # inside a job"],
               "guide/troubleshooting.md#hpcdist-doctor"),
    "profiles": (["hpcdist profiles", "hpcdist profiles polaris"], "guide/sites.md"),
    "env": (["hpcdist env --explain", "mpirun -np 2 hpcdist env --field rank"], "reference/env.md"),
    "hostfile": (["hpcdist hostfile --format deepspeed -o hostfile    # inside a job",
                  "hpcdist hostfile --format nodes --slots-per-node 4"],
                 "reference/env.md#hostfiles-hpcdist-hostfile"),
    "supervise": (["hpcdist supervise -- deepspeed --hostfile hostfile train.py    # as a DeepSpeed job script does"],
                  "guide/walltime.md#when-a-rank-dies"),
    "requeue": (["hpcdist requeue --scheduler slurm --max 2 --script job.sh    # as a --requeue job script does"],
                "guide/walltime.md#walltime-and-preemption-checkpoint-then-requeue"),
    "watch": (["hpcdist watch JOB", "hpcdist watch --once --json JOB    # for tools"], "watch.md#hpcdist-watch"),
    "stacks": (["hpcdist stacks JOB"], "watch.md#hangs-detected-shown-ended"),
    "report": (["hpcdist report JOB -o run.html", "hpcdist report JOB --format png    # and a PNG of each figure"],
               "report.md"),
    "connect": (["hpcdist connect mycluster    # a profile with remote = \"me@login.cluster\"",
                 "hpcdist submit --profile mycluster --nodes 2 train.py    # then, over that connection"],
                "remote.md#2-connect"),
    "disconnect": (["hpcdist disconnect mycluster"], "remote.md#2-connect"),
}


def help_end(command: str) -> dict:
    """add_parser's keywords for ``command``'s --help to end with its examples and its page."""
    import argparse  # loaded by the parser that calls this; `hpcdist status` builds none

    examples, page = HELP_ENDS[command]

    class Formatter(argparse.HelpFormatter):
        def _fill_text(self, text, width, indent):  # the examples as written, a line each
            if text.startswith("examples:"):
                return "".join(indent + line for line in text.splitlines(keepends=True))
            return super()._fill_text(text, width, indent)

    epilog = "examples:\n" + "".join(f"  {line}\n" for line in examples) + f"\ndocs: {docs_url(page)}\n"
    return {"epilog": epilog, "formatter_class": Formatter}


# -- A mistake on the command line: one line, hpcdist's words, no usage dump --------------------

def new_parser(**kwargs):
    """The ``hpcdist`` parser (its commands' parsers are of its class): argparse's, whose mistakes
    read as hpcdist's own messages, one line each: the flag, the value, the nearest valid words and
    the fix (``--scheduler slrum: not a scheduler; did you mean slurm? (local, slurm, pbs)``), with
    no usage above it (``-h`` shows it). Exit status 2, as argparse's."""
    import argparse  # loaded by the parser that calls this; `hpcdist status` builds none

    class Parser(argparse.ArgumentParser):
        words: list = []

        def parse_known_args(self, args=None, namespace=None):
            self.words = list(sys.argv[1:] if args is None else args)  # what a message may look at
            return super().parse_known_args(args, namespace)

        def parse_args(self, args=None, namespace=None):
            args, extra = self.parse_known_args(args, namespace)
            if extra:
                parser = getattr(self, "commands", {}).get(getattr(args, "command", None), self)
                parser.fail(unknown_word(parser, extra[0]))
            return args

        def _check_value(self, action, value):
            if action.choices is not None and value not in action.choices:
                self.fail(wrong_choice(self, action, value))

        def error(self, message):
            self.fail(explained(self, message))

        def fail(self, message: str):
            self.exit(2, f"{self.prog}: error: {message}\n")

    return Parser(**kwargs)


#: What a choice is, for "--scheduler slrum: not a scheduler" (else its dest's words).
CHOICE_NOUNS = {"mpi": "an MPI flavour", "dialect": "a PBS dialect", "request": "a PBS request form",
                "setup_on": "a place for the setup lines", "deepspeed_runner": "a DeepSpeed runner",
                "pbs_spread": "a way to start PBS's agents", "gpu_map": "a GPU map", "hint": "a Slurm hint",
                "container_gpu": "a container GPU setting", "format": "hostfile format"}
#: What a positional argument is, for "SCRIPT is missing: the training script ...".
MISSING = {"SCRIPT": "the training script (its own arguments, ARGS, may follow it)",
           "JOB": "a job id or folder (hpcdist status lists them)"}


def _said(value) -> str:
    text = str(value)
    return text if text and not any(c.isspace() or c in "'\"\\" for c in text) else repr(text)


def _flag(action) -> str:
    return next((s for s in action.option_strings if s.startswith("--")), None) or "/".join(action.option_strings)


def wrong_choice(parser, action, value) -> str:
    """``--scheduler slrum: not a scheduler; did you mean slurm? (local, slurm, pbs)``, or for the
    command: ``unknown command submti; did you mean submit?``."""
    import difflib  # the error path's alone

    choices = [str(c) for c in action.choices]
    close = difflib.get_close_matches(str(value), choices, n=1) or difflib.get_close_matches(
        str(value).lower(), choices, n=1)
    if not action.option_strings:  # the command
        if close:
            return f"unknown command {_said(value)}; did you mean {close[0]}?"
        if str(value).endswith(".py") or os.path.isfile(str(value)):
            return (f"unknown command {_said(value)}; to run a script: hpcdist submit --scheduler local "
                    f"{_said(value)} (hpcdist render shows its job script)")
        return f"unknown command {_said(value)}; hpcdist --help lists the commands"
    noun = CHOICE_NOUNS.get(action.dest) or action.dest.replace("_", " ")
    noun = noun if noun.startswith(("a ", "an ")) else ("an " if noun[0] in "aeiou" else "a ") + noun
    listed = ", ".join(choices)
    fix = f"did you mean {close[0]}? ({listed})" if close else f"one of {listed}"
    return f"{_flag(action)} {_said(value)}: not {noun}; {fix}"


def unknown_word(parser, word: str) -> str:
    """``unknown flag --nodse; did you mean --nodes?``, or a word the command does not take."""
    if word.startswith("-") and word != "-":
        import difflib  # the error path's alone

        flag = word.split("=", 1)[0]
        flags = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
        close = difflib.get_close_matches(flag, flags, n=1) or difflib.get_close_matches("-" + flag, flags, n=1)
        return f"unknown flag {flag}; " + (f"did you mean {close[0]}?" if close else
                                           f"{parser.prog} -h lists the flags")
    return f"{_said(word)}: one word too many; {parser.format_usage().strip()}"


def explained(parser, message: str) -> str:
    """argparse's ``message`` in hpcdist's words (the ones a newcomer meets; any other as argparse
    says it, less its usage)."""
    import re  # the error path's alone

    required = message.partition("the following arguments are required: ")[2]
    if required:
        known = parser._option_string_actions
        unknown = next((w for w in parser.words if w.startswith("-") and w not in ("-", "--")
                        and w.split("=", 1)[0] not in known), None)
        if unknown:  # `submit --nodse`: the typo, not the script that went missing after it
            return unknown_word(parser, unknown)
        names = [name for name in required.split(", ") if name != "ARGS"]  # the script's own: optional
        said = f"{names[0]} is missing" + (f": {MISSING[names[0]]}" if names[0] in MISSING else "") \
            if len(names) == 1 else f"{', '.join(names)} are missing"
        examples = HELP_ENDS.get(parser.prog.split()[-1], ([], ""))[0]
        example = next((e for e in examples if "--scheduler local" in e), examples[0] if examples else "")
        example = example.split("    #")[0]  # its comment is the help's
        return f"{said}; " + (f"e.g. {example}" if example else parser.format_usage().strip())
    m = re.fullmatch(r"argument (\S+): expected one argument", message)
    if m:
        action = parser._option_string_actions.get(m[1].split("/")[0])
        flag = _flag(action) if action else m[1]
        wanted = (f"one of {', '.join(map(str, action.choices))}" if action and action.choices else
                  f"{flag} {action.metavar or action.dest.upper()}" if action else "a value")
        text = f"{flag} needs a value: {wanted}"
        after = parser.words[parser.words.index(m[1]) + 1:][:1] if m[1] in parser.words else []
        if after and after[0] in parser._option_string_actions:
            text += f" ({after[0]} is a flag of its own; to give it as the value: {flag}={after[0]})"
        return text
    m = re.fullmatch(r"argument (\S+): invalid (int|float) value: (.*)", message)
    if m:
        return f"{m[1]} {_said(m[3][1:-1])}: not a {'whole ' if m[2] == 'int' else ''}number"
    return message.removeprefix("argument ")
