"""The commands of the login side: ``render``, ``submit``, ``status``, ``logs``, ``cancel``,
``doctor`` (which may submit a job that runs it) and ``profiles``.

Each adds its parser in :func:`add_parsers` and runs in a ``run_*`` function over the library,
which it imports when it runs: ``submit``'s imports are not ``logs``'s to pay. ``status`` runs in
:mod:`hpcdist.cli.status` (a plain ``hpcdist status`` loads no module of this one).
"""

from __future__ import annotations

import os
import sys

from hpcdist.cli import watch
from hpcdist.cli.commands import OWN_FLAGS, CommandError
from hpcdist.cli.common import SkipBytes, command_line, follow, help_end, job_spec
from hpcdist.cli.status import run_status
from hpcdist.shell import words_to_line

#: The commands whose flags are the job options (hpcdist.submission.options): built only when one
#: of them is asked for.
JOB_COMMANDS = tuple(OWN_FLAGS)


def add_parsers(sub, only: str | None, command: str | None) -> None:
    """Their parsers on ``sub`` (all, or ``only`` that one); ``command``: the subcommand named, whose
    job flags are the only ones built (argparse's parsers cost more than most commands)."""
    def job_flags(parser, script: bool = True) -> None:
        if command in JOB_COMMANDS:
            # The job options: `hpcdist status`, --help's list and the in-job commands pay none.
            from hpcdist.submission.options import add_flags

            add_flags(parser, script)

    # allow_abbrev=False: the script's own flags (--deepspeed) must never be taken for an
    # abbreviation of ours (--deepspeed-config).
    if only in (None, "render"):
        render = sub.add_parser(
            "render", **help_end("render"), help="print the job script for a training script",
            allow_abbrev=False, description="Render the job script `hpcdist submit` would submit.")
        job_flags(render)
        render.set_defaults(run=run_render, parser=render)
    if only in (None, "submit"):
        submit = sub.add_parser(
            "submit", **help_end("submit"), help="write the job script and submit it",
            allow_abbrev=False,
            description="Render the job script into .hpcdist/jobs/<name>-<time>/ and submit it.")
        job_flags(submit)
        dry_run, wait, as_json, resubmit, failed = OWN_FLAGS["submit"]
        submit.add_argument(dry_run, action="store_true",
                            help="print the script and the submit command; submit nothing")
        submit.add_argument(wait, action="store_true", help="follow the job to its end; exit with its exit code")
        submit.add_argument(as_json, action="store_true",
                            help="print a JSON object (job_id, scheduler, job_name, script, folder, log)")
        # A sweep's sets again (hpcdist.sweeps): no SCRIPT, the sweep's own.
        submit.add_argument(resubmit, metavar="JOB", help="submit sets of the sweep JOB again (with --failed), as "
                            "part of the same sweep; JOB: any of its arrays' ids or folders")
        submit.add_argument(failed, action="store_true", help="with --resubmit: the sets that failed, were killed "
                            "or were never submitted")
        for action in submit._actions:  # SCRIPT may be left out with --resubmit (run_submit says when it may not)
            if action.dest == "script":
                action.nargs, action.required, action.default = "?", False, None
        submit.set_defaults(run=run_submit, parser=submit)
    if only in (None, "status"):
        status = sub.add_parser("status", **help_end("status"), help="the state of submitted jobs")
        status.add_argument("jobs", nargs="*", metavar="JOB", help="job ids or folders (default: all from here)")
        status.add_argument("--json", action="store_true")
        status.set_defaults(run=run_status)
    if only in (None, "logs"):
        logs = sub.add_parser("logs", **help_end("logs"), help="a job's output")
        logs.add_argument("job", metavar="JOB")
        logs.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
        logs.add_argument("--from", dest="from_byte", type=int, default=0, metavar="BYTE",
                          help="leave out the first BYTE bytes of the output (to resume a `logs -f` cut off)")
        logs.set_defaults(run=run_logs)
    if only in (None, "cancel"):
        cancel = sub.add_parser("cancel", **help_end("cancel"), help="cancel a job")
        cancel.add_argument("job", metavar="JOB")
        cancel.set_defaults(run=run_cancel)
    if only in (None, "doctor"):
        doctor = sub.add_parser(
            "doctor", **help_end("doctor"),
            help="check every node of the allocation: ssh, launchers, versions, GPUs, master port",
            allow_abbrev=False,
            description="Inside a job: check every node of the allocation and print what to fix. "
            "With --scheduler slurm|pbs (and --nodes ...): submit a job that runs this check, and show its answer.")
        doctor.add_argument(*OWN_FLAGS["doctor"], action="store_true",
                            help="describe this node only, as JSON (used on each node)")
        job_flags(doctor, script=False)
        doctor.set_defaults(run=run_doctor)
    if only in (None, "profiles"):
        profiles = sub.add_parser("profiles", **help_end("profiles"),
                                  help="list the profiles and site presets; show one",
                                  description="Your profiles (./hpcdist.toml, ~/.config/hpcdist/config.toml) and "
                                  "the site presets hpcdist ships, or what one of them sets.")
        profiles.add_argument("name", nargs="?", metavar="NAME")
        profiles.set_defaults(run=run_profiles)


def run_render(args: Namespace) -> int:
    # not at the top: every command, status and agents too, imports this module
    from hpcdist.submission.render import render

    _check_flags_after_script(args)
    spec = job_spec(args)
    if spec.sweep or spec.sweep_file:  # a sweep's first array, as submit would write it (hpcdist.sweeps)
        from hpcdist.sweeps import cli as sweeps

        return sweeps.render_first(spec, command_line(), dry_run=False)
    sys.stdout.write(render(spec, command_line=command_line()))
    return 0


def run_submit(args: Namespace) -> int:
    import shlex  # not at the top: it would cost `hpcdist status` 1.4%

    from hpcdist.schedulers import registry as schedulers  # not at the top: `hpcdist status` with no job needs none
    from hpcdist.submission.render import render

    if getattr(args, "resubmit", None) or getattr(args, "failed", False):
        return _resubmit(args)
    if getattr(args, "script", "") is None:  # argparse's own answer, as when SCRIPT was required
        args.parser.error("the following arguments are required: SCRIPT, ARGS")
    _check_flags_after_script(args)
    spec = job_spec(args)
    if spec.sweep or spec.sweep_file:
        return _submit_sweep(args, spec)
    if args.dry_run:
        sys.stdout.write(render(spec, command_line=command_line()))
        folder = ".hpcdist/jobs/<name>-<time>"
        argv = schedulers.get(spec.scheduler, spec.dialect).submit_argv(f"{folder}/job.sh", f"{folder}/job.log")
        print(f"hpcdist submit: dry run, nothing submitted; would run: {shlex.join(argv)}", file=sys.stderr)
        return 0
    from hpcdist.submission import submit as sub  # not for a dry run

    try:
        job = sub.submit(spec, command_line=command_line())
    except (sub.SubmitError, sub.JobFolderError) as e:
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:  # Ctrl-C: any job taken is recorded first (submission.py says so)
        return 130
    if args.json:
        import json  # not at the top: it would cost `hpcdist status` 7%

        print(json.dumps({"job_id": job.job_id, "scheduler": job.scheduler, "job_name": job.record.get("job_name"),
                          "script": job.script,
                          "folder": job.path, "log": job.log}))
    else:
        print(job.job_id)
        print(f"hpcdist submit: {spec.scheduler} job {job.job_id}, script and log in {job.path}", file=sys.stderr)
    if args.wait:
        return _follow_to_end(job)
    return 0


def _submit_sweep(args: Namespace, spec) -> int:
    """``--sweep``/``--sweep-file``: the sets, checked before the queue, as few arrays as the site
    allows (hpcdist.sweeps)."""
    from hpcdist.sweeps import cli as sweeps

    return sweeps.submit(args, spec, command_line())


def _resubmit(args: Namespace) -> int:
    from hpcdist.sweeps import cli as sweeps

    return sweeps.resubmit(args, command_line())


#: hpcdist's flags that a training script may well take of its own (--output FILE, an RL
#: script's --env NAME, wandb's --project): after the script they stay the script's, with a
#: warning. Any other of hpcdist's flags there is refused: it would change the job or hpcdist's
#: run unseen (issue 50).
SCRIPTS_TOO = frozenset({"--output", "--env", "--project", "--template", "--json", "--module",
                         "--source", "--setup", "--include"})


def _check_flags_after_script(args: Namespace) -> None:
    """Everything after the script is the script's (torchrun's rule), hpcdist's flags too:
    `submit train.py --dry-run` would submit, `train.py --nodes 2` ask for one node. Such a flag
    is refused, with the command moved before the script; ``--`` right after the script (or
    before the flag) keeps it the script's, for a script that takes a flag of that name."""
    from hpcdist.submission.options import FLAGS_WITH_A_VALUE, OPTION_FLAGS, REMOTE_OPTIONS

    remote = {flag for o in REMOTE_OPTIONS for flag in o.flags}
    ours = OPTION_FLAGS | remote | set(OWN_FLAGS[args.command])
    valued = FLAGS_WITH_A_VALUE | remote | {"--resubmit"}
    words = getattr(getattr(args, "parser", None), "words", None) or []
    at = len(words) - len(args.script_args) - 1  # the script's own `--`, which argparse takes away
    if at >= 1 and words[at] == "--" and words[at - 1] == args.script:
        return
    found, k = [], 0  # (first word, last word + 1) of each
    while k < len(args.script_args) and args.script_args[k] != "--":
        name, eq, _ = args.script_args[k].partition("=")
        if name in ours:
            takes = not eq and name in valued and k + 1 < len(args.script_args)
            found.append((k, k + 1 + takes))
            k += takes
        k += 1
    refused = [(a, b) for a, b in found if args.script_args[a].partition("=")[0] not in SCRIPTS_TOO]
    if refused:
        raise CommandError(_moved(args, words, refused))
    if found:
        said = ", ".join(" ".join(args.script_args[a:b]) for a, b in found)
        it, comes, goes = ("it", "comes", "it goes") if len(found) == 1 else ("them", "come", "they go")
        script = args.script
        print(f"hpcdist {args.command}: warning: {said} {comes} after {script}, so {goes} to "
              f"{script}, not to hpcdist (everything after the script is the script's); to give "
              f"{it} to hpcdist, put {it} before {script} (`{script} -- ...` keeps {it} "
              f"{script}'s, without this warning)", file=sys.stderr)


def _moved(args: Namespace, words: list[str], refused: list[tuple[int, int]]) -> str:
    """The refusal of hpcdist's flags after the script, with the command that gives them to
    hpcdist and the one that gives them to the script."""
    script, rest = args.script, args.script_args
    moved = [w for a, b in refused for w in rest[a:b]]
    kept = [w for k, w in enumerate(rest) if not any(a <= k < b for a, b in refused)]
    before = words[:len(words) - len(rest) - 1]
    if before[-1:] == ["--"]:  # `submit -- train.py ...`: hpcdist's flags end; the moved go first
        before = before[:-1]
    if kept[:1] == ["--"]:  # argparse takes away a `--` right after the script: the script's, kept
        kept = ["--", *kept]
    said = ", ".join(" ".join(rest[a:b]) for a, b in refused)
    names = " or ".join(dict.fromkeys(rest[a].partition("=")[0] for a, _ in refused))
    it, they, comes = ("it", "it", "comes") if len(refused) == 1 else ("them", "they", "come")
    return (f"{said} {comes} after {script}, so {they} would go to {script}, not to hpcdist "
            f"(everything after the script is the script's); put {it} before the script: "
            f"{words_to_line(['hpcdist', args.command, *before, *moved, script, *kept])}; or, if "
            f"{script} takes {names} itself, put -- after {script}: "
            f"{words_to_line([script, '--', *rest])}")


def run_logs(args: Namespace) -> int:
    from hpcdist import jobs  # not at the top: no other command's to pay
    from hpcdist.submission import submit as sub

    try:
        job = jobs.find(args.job)
        out = SkipBytes(sys.stdout, args.from_byte)
        if args.follow:
            return _follow_to_end(job, out=out)
        # Written as it is read: a long training's log holds gigabytes.
        if not sub.write_logs(job, out):
            raise CommandError(f"job {job.job_id} has no log yet ({job.log})")
    except (jobs.JobNotFound, jobs.JobFolderError, sub.SubmitError) as e:
        raise CommandError(str(e)) from None
    out.flush()
    try:
        state = sub.status(job)
    except sub.SubmitError:
        state = None
    if state is not None and state.finished:
        watch.print_end_line(job)
    if state is not None and state.finished and state.state != "COMPLETED":
        sub.print_first_failure(job)
        if state.state == "FAILED":
            print_error_line(job)
    return 0


def _follow_to_end(job, out=None) -> int:
    """``--wait`` and ``logs -f``: the log to the job's end, then its step rate and slowest rank."""
    status = follow(job, out=out)
    if status not in (0, 130):  # after the first failure's line (submission.submit.wait), the cause's
        job.reload()
        if job.record.get("state") == "FAILED":
            print_error_line(job)
    if status != 130:  # not stopped by Ctrl-C
        watch.print_end_line(job)
    return status


def print_error_line(job) -> None:
    """After ``the first to fail: rank 0 ...: exit code 2``: the error line that says why, where
    the first failure's line does not quote it already (a rank's own report does)."""
    from hpcdist.failures import ERROR_TAIL, error_line
    from hpcdist.jobs.logfiles import read_tail
    from hpcdist.submission import submit as sub

    try:
        line = error_line(read_tail(job.log, ERROR_TAIL))
    except OSError:
        return
    failure = sub.first_failure(job) if line else None
    if line and not (failure is not None and line in failure.why):
        print(f"hpcdist: the last error line in its log: {line}", file=sys.stderr)


def run_cancel(args: Namespace) -> int:
    from hpcdist import jobs  # not at the top: no other command's to pay
    from hpcdist.submission import submit as sub

    try:
        sub.cancel(jobs.find(args.job))
    except (jobs.JobNotFound, jobs.JobFolderError, sub.SubmitError) as e:
        raise CommandError(str(e)) from None
    return 0


def run_doctor(args: Namespace) -> int:
    # The doctor's modules (subprocess, socket, json; the in-job allocation and env), its alone.
    from hpcdist.injob import doctor
    from hpcdist.schedulers import registry as schedulers

    if args.probe:
        import json

        print(json.dumps(doctor.probe(args.stage_dir if args.stage_env else None)))
        return 0
    if args.scheduler and schedulers.get(args.scheduler).queued:  # a job that runs the check, not the check here
        return _submit_doctor(args)
    from hpcdist.allocation import Allocation, AllocationError
    from hpcdist.env.job_id import job_id_from
    from hpcdist.ports import port_for_job

    try:
        hosts = Allocation.from_env().host_names
    except AllocationError as e:
        import socket

        hosts = [socket.gethostname()]
        print(f"hpcdist doctor: not inside a job ({e}); checking this host only. Run it inside a job, "
              "or give --scheduler slurm --nodes 2 to submit one that runs it.", file=sys.stderr)
    from hpcdist.env.model import EnvReader

    job = job_id_from(os.environ)
    port = (EnvReader(os.environ).integer("MASTER_PORT", "master port")  # too many digits: one line
            if os.environ.get("MASTER_PORT", "").isdigit() else port_for_job(job[1]) if job else None)
    report = doctor.check(hosts, port, int(args.ssh_port) if getattr(args, "ssh_port", None) else None)
    sys.stdout.write(doctor.report_text(report))
    return 0 if report.ok else 1


def _submit_doctor(args: Namespace) -> int:
    """A job of --nodes nodes whose script runs `hpcdist doctor` on its first node."""
    from hpcdist.submission import submit as sub  # not at the top: no other command's to pay

    args.script, args.script_args, args.launcher, args.python = "doctor", [], "none", "hpcdist"
    args.job_name = args.job_name or "hpcdist-doctor"
    spec = job_spec(args, check_files=False)
    try:
        job = sub.submit(spec, command_line=command_line())
    except (sub.SubmitError, sub.JobFolderError) as e:
        raise CommandError(str(e)) from None
    print(f"hpcdist doctor: {spec.scheduler} job {job.job_id} checks {spec.nodes} node(s); log in {job.log}",
          file=sys.stderr)
    return follow(job, quiet=True)


def run_profiles(args: Namespace) -> int:
    from hpcdist.submission.profiles import ProfileError, describe  # the job options: `hpcdist status` pays none

    try:
        sys.stdout.write(describe(args.name))
    except ProfileError as e:
        raise CommandError(str(e)) from None
    return 0
