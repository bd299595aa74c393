"""What the ``hpcdist`` commands share: the one-message error, the job spec from flags and
profiles, the command line for a script's header, following a job to its end."""

from __future__ import annotations

import sys

from hpcdist.shell import words_to_line


class CommandError(Exception):
    """A user-facing failure: printed as one message, exit status 1."""


def job_spec(args: Namespace, check_files: bool = True):
    from hpcdist.submission.profiles import KEYS, REMOTE_KEYS, ProfileError, build, load_profile  # not `status`'s to pay

    given = next((key for key in REMOTE_KEYS if getattr(args, key, None) is not None), None)
    if given == "remote":  # submit and render with one are hpcdist.cli.remote's; doctor runs here
        raise CommandError(f"--remote: hpcdist {args.command} runs where it is typed (submit, render, status, logs "
                           f"and cancel go to a cluster from a laptop); run it on the login node")
    if given:  # a remote setting without a cluster to send to
        flag = "--" + given.replace("_", "-")
        raise CommandError(f"{flag} is for a job sent to a cluster from here: give --remote HOST too, or a "
                           f"--profile whose remote = \"user@host\"")
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


#: Where the documentation's pages are, from the root of hpcdist's source (docs/, built with
#: `mkdocs build`); point it at the published site once there is one.
DOCS = "docs/"

#: The end of each command's --help: one or two examples, and its page under DOCS. job-setup and
#: agents (written by the job scripts, their help printed by hand) have none.
HELP_ENDS = {
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

    epilog = "examples:\n" + "".join(f"  {line}\n" for line in examples) + f"\ndocs: {DOCS}{page}\n"
    return {"epilog": epilog, "formatter_class": Formatter}
