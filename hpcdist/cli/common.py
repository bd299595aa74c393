"""What the ``hpcdist`` commands share: the one-message error, the job spec from flags and
profiles, the command line for a script's header, following a job to its end."""

from __future__ import annotations

import sys

from hpcdist.shell import words_to_line


class CommandError(Exception):
    """A user-facing failure: printed as one message, exit status 1."""


def job_spec(args: Namespace, check_files: bool = True):
    from hpcdist.profiles import KEYS, ProfileError, build, load_profile  # the job options: not `status`'s to pay

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


def follow(job, quiet: bool = False) -> int:
    """``--wait``, ``logs -f`` and ``doctor --submit``: the job to its end; Ctrl-C stops
    following, not the job."""
    from hpcdist import submission as sub  # the submission code: not `status`'s to pay without jobs

    try:
        return sub.wait(job, quiet=quiet)
    except sub.JobFolderError as e:  # a log that cannot be read
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:
        print(f"\nhpcdist: stopped following job {job.job_id}; the job goes on. Follow it again with "
              f"`hpcdist logs -f {job.job_id}`, or stop it with `hpcdist cancel {job.job_id}`.", file=sys.stderr)
        return 130


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        import argparse  # loaded by the parser that calls this; `hpcdist status` builds none

        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value
