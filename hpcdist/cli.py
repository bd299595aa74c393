"""The ``hpcdist`` command. Each subcommand is a small function over the library.

Start-up stays fast: subcommands import what they need when they run.
"""

from __future__ import annotations

import sys

from hpcdist import __version__


class CommandError(Exception):
    """A user-facing failure: printed as one message, exit status 1."""


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
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _run(argv: list[str]) -> int:
    args = _plain_status(argv)
    if args is None:
        from hpcdist.dash_values import joined

        parser = build_parser(argv)
        args = parser.parse_args(joined(parser, argv))
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
        from hpcdist.validate import ValidationError

        if isinstance(e, (DistEnvError, AllocationError, HostlistError, ValidationError)):
            print(f"hpcdist {args.command}: error: {e}", file=sys.stderr)
            return 1
        raise


def _plain_status(argv: list[str]):
    """``hpcdist status [JOB ...]``, the command typed most, parsed as argparse would
    (tests/test_cli.py checks): there is nothing to parse, and building any argparse parser
    costs more than the command itself (it imports shutil and locale)."""
    if argv[:1] != ["status"] or any(a.startswith("-") for a in argv[1:]):
        return None
    from types import SimpleNamespace

    return SimpleNamespace(command="status", jobs=argv[1:], json=False, run=run_status)


#: Subcommands whose flags need the job spec module (imported only for them).
_JOB_COMMANDS = ("render", "submit", "doctor")
#: The subcommands, in the order `hpcdist --help` lists them.
COMMANDS = ("env", "render", "submit", "status", "logs", "cancel", "hostfile", "doctor", "supervise", "requeue",
            "profiles")


def build_parser(argv: list[str] = ()) -> argparse.ArgumentParser:
    import argparse

    # `hpcdist hostfile` and `hpcdist env` run inside every job: they skip the
    # job-spec imports that only render and submit need.
    command = next((a for a in argv if not a.startswith("-")), None)
    # A subcommand's parser sees only what follows its name: when the name comes first, that
    # parser is the only one built. `hpcdist --help` (and anything else) gets them all.
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = argparse.ArgumentParser(
        prog="hpcdist",
        description="Distributed PyTorch on PBS and Slurm clusters.",
    )
    parser.add_argument("--version", action="version", version=f"hpcdist {__version__}")
    # prog given: argparse would otherwise format the usage above to find it.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="hpcdist")

    if only in (None, "env"):
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
        env.add_argument("--field", choices=("rank", "local_rank", "world_size", "local_world_size",
                         "node_rank", "master_addr", "master_port", "launcher"),
                         help="print only this value (for job scripts)")
        env.set_defaults(run=run_env)

    # allow_abbrev=False: the script's own flags (--deepspeed) must never be
    # taken for an abbreviation of ours (--deepspeed-config).
    if only in (None, "render"):
        render = sub.add_parser("render", help="print the job script for a training script", allow_abbrev=False,
                                description="Render the job script `hpcdist submit` would submit.")
        if command in _JOB_COMMANDS:
            _add_job_flags(render)
        render.set_defaults(run=run_render)
    if only in (None, "submit"):
        submit = sub.add_parser("submit", help="write the job script and submit it", allow_abbrev=False,
                                description="Render the job script into .hpcdist/jobs/<name>-<time>/ and submit it.")
        if command in _JOB_COMMANDS:
            _add_job_flags(submit)
        submit.add_argument("--dry-run", action="store_true",
                            help="print the script and the submit command; submit nothing")
        submit.add_argument("--wait", action="store_true", help="follow the job to its end; exit with its exit code")
        submit.add_argument("--json", action="store_true", help="print a JSON object (job_id, scheduler, script)")
        submit.set_defaults(run=run_submit)

    if only in (None, "status"):
        status = sub.add_parser("status", help="the state of submitted jobs")
        status.add_argument("jobs", nargs="*", metavar="JOB", help="job ids or folders (default: all from here)")
        status.add_argument("--json", action="store_true")
        status.set_defaults(run=run_status)
    if only in (None, "logs"):
        logs = sub.add_parser("logs", help="a job's output")
        logs.add_argument("job", metavar="JOB")
        logs.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
        logs.set_defaults(run=run_logs)
    if only in (None, "cancel"):
        cancel = sub.add_parser("cancel", help="cancel a job")
        cancel.add_argument("job", metavar="JOB")
        cancel.set_defaults(run=run_cancel)

    if only in (None, "hostfile"):
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

    if only in (None, "doctor"):
        doctor = sub.add_parser(
            "doctor", help="check every node of the allocation: ssh, launchers, versions, GPUs, master port",
            description="Inside a job: check every node of the allocation and print what to fix. "
            "With --scheduler slurm|pbs (and --nodes ...): submit a job that runs this check, and show its answer.")
        doctor.add_argument("--probe", action="store_true",
                            help="describe this node only, as JSON (used on each node)")
        if command == "doctor":
            _add_job_flags(doctor, script=False)
        doctor.set_defaults(run=run_doctor)

    if only in (None, "supervise"):
        supervise = sub.add_parser(
            "supervise", help="run a pdsh-based launcher; end it on every node when one node fails (in job scripts)",
            description="Run COMMAND (DeepSpeed over pdsh); when pdsh reports a failed node, end the launch everywhere.")
        supervise.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
        supervise.set_defaults(run=run_supervise)

    if only in (None, "requeue"):
        requeue = sub.add_parser(
            "requeue", help="requeue (Slurm) or resubmit (PBS) this job after the walltime warning (in job scripts)",
            description="Put the running job back in the queue, unless it went back --max times already (exit 3).")
        from hpcdist.schedulers import QUEUED

        requeue.add_argument("--scheduler", choices=QUEUED, required=True)
        requeue.add_argument("--max", type=int, required=True, metavar="N", help="restarts allowed in all")
        requeue.add_argument("--script", required=True, help="PBS: the job script to submit again")
        requeue.add_argument("--job-dir", help="the job folder, where the resubmission is recorded")
        requeue.set_defaults(run=run_requeue)
    if only in (None, "profiles"):
        profiles = sub.add_parser("profiles", help="list the profiles and site presets; show one",
                                  description="Your profiles (./hpcdist.toml, ~/.config/hpcdist/config.toml) and "
                                  "the site presets hpcdist ships, or what one of them sets.")
        profiles.add_argument("name", nargs="?", metavar="NAME")
        profiles.set_defaults(run=run_profiles)
    return parser


def run_profiles(args: argparse.Namespace) -> int:
    from hpcdist.profiles import ProfileError, describe

    try:
        sys.stdout.write(describe(args.name))
    except ProfileError as e:
        raise CommandError(str(e)) from None
    return 0


def _add_job_flags(p: argparse.ArgumentParser, script: bool = True) -> None:
    from hpcdist.options import add_flags

    add_flags(p, script)


def _spec(args: argparse.Namespace, check_files: bool = True):
    from hpcdist.profiles import KEYS, ProfileError, build, load_profile

    try:
        # build: a mistake in a profile's value names the file and the key, not a flag nobody typed.
        flags = {name: getattr(args, name) for name in (*KEYS, "script", "script_args")}
        spec = build(load_profile(args.profile), flags, check_files=check_files)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    for note in spec.notes:
        print(f"hpcdist {args.command}: {note}", file=sys.stderr)
    return spec


def _command_line() -> str:
    """The command as typed, for the script's header: an argument's line break or carriage
    return is escaped (bash's $'...'), never written raw into the comment."""
    from hpcdist.shell import words_to_line

    return words_to_line(["hpcdist", *sys.argv[1:]])


def run_render(args: argparse.Namespace) -> int:
    from hpcdist.render import render

    sys.stdout.write(render(_spec(args), command_line=_command_line()))
    return 0


def run_submit(args: argparse.Namespace) -> int:
    import shlex

    from hpcdist import schedulers
    from hpcdist.render import render

    spec = _spec(args)
    if args.dry_run:
        sys.stdout.write(render(spec, command_line=_command_line()))
        folder = ".hpcdist/jobs/<name>-<time>"
        argv = schedulers.get(spec.scheduler, spec.dialect).submit_argv(f"{folder}/job.sh", f"{folder}/job.log")
        print(f"hpcdist submit: dry run, nothing submitted; would run: {shlex.join(argv)}", file=sys.stderr)
        return 0
    from hpcdist import submission as sub

    try:
        job = sub.submit(spec, command_line=_command_line())
    except (sub.SubmitError, sub.JobFolderError) as e:
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:  # Ctrl-C: any job taken is recorded first (submission.py says so)
        return 130
    if args.json:
        import json

        print(json.dumps({"job_id": job.job_id, "scheduler": job.scheduler, "script": job.script,
                          "folder": job.path, "log": job.log}))
    else:
        print(job.job_id)
        print(f"hpcdist submit: {spec.scheduler} job {job.job_id}, script and log in {job.path}", file=sys.stderr)
    if args.wait:
        return _follow(job)
    return 0


def _follow(job, quiet: bool = False) -> int:
    """``--wait``, ``logs -f`` and ``doctor --submit``: the job to its end; Ctrl-C stops
    following, not the job."""
    from hpcdist import submission as sub

    try:
        return sub.wait(job, quiet=quiet)
    except sub.JobFolderError as e:  # a log that cannot be read
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:
        print(f"\nhpcdist: stopped following job {job.job_id}; the job goes on. Follow it again with "
              f"`hpcdist logs -f {job.job_id}`, or stop it with `hpcdist cancel {job.job_id}`.", file=sys.stderr)
        return 130


def run_status(args: argparse.Namespace) -> int:
    from hpcdist import jobs

    try:
        selected = jobs.select(args.jobs)
    except (jobs.JobNotFound, jobs.JobFolderError) as e:
        raise CommandError(str(e)) from None
    states = []
    if selected:  # the schedulers' code only for jobs to ask about
        from hpcdist import submission as sub

        # All at once: one command per scheduler (and cluster) for many jobs, none for a job whose
        # end is recorded, and one controller that cannot be reached answers for all its jobs.
        states = sub.statuses(selected)
    rows = []
    for job, state in zip(selected, states):
        if isinstance(job, jobs.Broken):  # one row saying what is wrong; the other jobs go on
            rows.append(job.row())
            continue
        try:
            state = sub.status(job) if state is None else state  # None: a record to ask about alone
            state, exit_code, reason = state.state, state.exit_code, state.reason
        except sub.SubmitError as e:
            state, exit_code, reason = "UNKNOWN", None, str(e)
        # Read after the state: the runs file, once per job, then as new as the state.
        runs = job.history()
        if runs.restarts:
            now = f", now job {runs.current_id}" if runs.current_id != job.job_id else ""
            reason = f"restarted {runs.restarts} time(s){now}" + (f"; {reason}" if reason else "")
        record = job.record
        rows.append({"job_id": record["job_id"], "name": record.get("job_name", ""), "scheduler": record["scheduler"],
                     "state": state, "exit_code": exit_code, "reason": reason, "restarts": runs.restarts,
                     "current_job_id": runs.current_id, "folder": job.path, "log": runs.logs[-1][1]})
    if args.json:
        import json

        print(json.dumps(rows, indent=2))
        return 0
    lines = [f"{'JOB':<12} {'NAME':<24} {'SCHEDULER':<9} {'STATE':<10} {'EXIT':<5} REASON"]
    for r in rows:
        exit_code = "" if r["exit_code"] is None else str(r["exit_code"])
        lines.append(f"{r['job_id']:<12} {r['name'][:24]:<24} {r['scheduler']:<9} {r['state'].lower():<10} "
                     f"{exit_code:<5} {r['reason'] or ''}")
    print("\n".join(lines))  # one write: a print per row costs 2,000 jobs' status 5%
    return 0


def run_logs(args: argparse.Namespace) -> int:
    from hpcdist import jobs, submission as sub

    try:
        job = jobs.find(args.job)
        text = None if args.follow else sub.log_text(job)
    except (jobs.JobNotFound, jobs.JobFolderError, sub.SubmitError) as e:
        raise CommandError(str(e)) from None
    if args.follow:
        return _follow(job)
    if text is None:
        raise CommandError(f"job {job.job_id} has no log yet ({job.log})")
    sys.stdout.write(text)
    sys.stdout.flush()
    try:
        state = sub.status(job)
    except sub.SubmitError:
        state = None
    if state is not None and state.finished and state.state != "COMPLETED":
        sub.print_first_failure(job)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    from hpcdist import jobs, submission as sub

    try:
        sub.cancel(jobs.find(args.job))
    except (jobs.JobNotFound, jobs.JobFolderError, sub.SubmitError) as e:
        raise CommandError(str(e)) from None
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        import argparse

        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def run_env(args: argparse.Namespace) -> int:
    import warnings

    from hpcdist.env import UndistributedWarning, explain

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
        import json

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


def run_doctor(args: argparse.Namespace) -> int:
    from hpcdist import doctor

    if args.probe:
        import json

        print(json.dumps(doctor.probe()))
        return 0
    from hpcdist import schedulers

    if args.scheduler and schedulers.get(args.scheduler).queued:  # a job that runs the check, not the check here
        return _submit_doctor(args)
    from hpcdist.allocation import Allocation, AllocationError
    from hpcdist.env.ports import job_id_from, port_for_job
    import os

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


def _submit_doctor(args: argparse.Namespace) -> int:
    """A job of --nodes nodes whose script runs `hpcdist doctor` on its first node."""
    from hpcdist import submission as sub

    args.script, args.script_args, args.launcher, args.python = "doctor", [], "none", "hpcdist"
    args.job_name = args.job_name or "hpcdist-doctor"
    spec = _spec(args, check_files=False)
    try:
        job = sub.submit(spec, command_line=_command_line())
    except (sub.SubmitError, sub.JobFolderError) as e:
        raise CommandError(str(e)) from None
    print(f"hpcdist doctor: {spec.scheduler} job {job.job_id} checks {spec.nodes} node(s); log in {job.log}",
          file=sys.stderr)
    return _follow(job, quiet=True)


def run_supervise(args: argparse.Namespace) -> int:
    from hpcdist.supervise import supervise

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise CommandError("no command given: hpcdist supervise -- deepspeed ...")
    return supervise(argv)


def run_requeue(args: argparse.Namespace) -> int:
    from hpcdist.requeue import main

    return main(args.scheduler, args.max, args.script, args.job_dir)


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
