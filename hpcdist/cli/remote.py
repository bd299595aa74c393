"""The commands from a laptop: ``connect`` and ``disconnect``, and ``submit``, ``render``,
``status``, ``logs``, ``cancel``, ``watch``, ``stacks`` and ``report`` sent to a cluster's login
node (:mod:`hpcdist.remote`; ``report``'s page is written on the laptop).

A command goes to a cluster when ``--remote HOST`` is given, when its profile has ``remote =
"user@host"`` (submit, render), or when the job it names was sent from here (the others: the
laptop's ``.hpcdist/remote/jobs``). The login node's hpcdist does the work, in one ssh round trip
per command: it renders the script there, from the code snapshot sent with the job.
The laptop's profile goes as flags; its own paths, user name and environment do not go.
"""

from __future__ import annotations

import os
import sys

from hpcdist.cli.commands import BY_MODULE

#: The commands of this module (those it may send to a cluster: hpcdist.cli.commands.SENT).
COMMANDS = BY_MODULE["remote"]
#: The flags of the sent commands that take a value (besides the job options').
VALUED = ("--from", "--interval", "--timeout", "--index", "-o", "--output", "--format")
HELP = {"connect": "open the ssh connection to a cluster that the other commands use (the only one that may prompt)",
        "disconnect": "close the ssh connection to a cluster"}


def wanted(argv: list[str]) -> bool:
    """Whether ``hpcdist ARGV``, one of :data:`hpcdist.cli.commands.SENT`, is this module's to run.
    Asked by :func:`hpcdist.cli.sent` only: for a command but submit and render, once it has found
    no ``--remote`` and a laptop's record of sent jobs (``hpcdist status`` loads no module here)."""
    command = argv[0]
    if command in ("submit", "render"):  # they read the job options anyway
        laptop, _ = _split(argv)
        return "remote" in laptop or bool(_profile(laptop.get("profile"), quiet=True).get("remote"))
    from hpcdist.remote import records

    refs = _refs(argv)
    return (command == "status" and not refs) or any(records.find_job(ref) for ref in refs)


def main(argv: list[str]) -> int:
    from hpcdist import remote

    command = argv[0]
    try:
        if command in COMMANDS:
            return _connect(command, argv[1])
        if command in ("submit", "render"):
            return _send_job(argv)
        run = {"status": _status, "logs": _logs, "cancel": _cancel, "watch": _watch,
               "stacks": _watch, "report": _report}[command]
        return run(argv)
    except remote.RemoteError as e:
        print(f"hpcdist {command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


# -- Reading the command line ---------------------------------------------------------------------

def _split(argv: list[str]) -> tuple[dict, list[str]]:
    """The laptop's own flags (the remote settings, --profile, submit's --wait and --json) and the
    words that go to the login node as typed. Nothing after the script (submit, render), nor after
    ``--``, is read; status, logs and cancel take their flags before or after a job."""
    from hpcdist.submission.options import FLAGS_WITH_A_VALUE, REMOTE_OPTIONS

    own = {o.flags[0]: o.key for o in REMOTE_OPTIONS}
    own["--profile"] = "profile"
    laptop: dict = {}
    forwarded, k = [], 1
    while k < len(argv):
        word = argv[k]
        if word == "--" or not word.startswith("-") and argv[0] in ("submit", "render"):
            break
        name, eq, value = word.partition("=")
        if name in own:
            if not eq:
                k += 1
                value = argv[k] if k < len(argv) else ""
            key = own[name]
            laptop[key] = [*laptop.get(key, []), value] if key == "include" else value
        elif argv[0] == "submit" and word in ("--wait", "--json"):
            laptop[word[2:]] = True
        else:
            forwarded.append(word)
            takes_value = word in FLAGS_WITH_A_VALUE or word in VALUED
            if word.startswith("-") and not eq and takes_value and k + 1 < len(argv):
                k += 1
                forwarded.append(argv[k])
        k += 1
    return laptop, forwarded + argv[k:]


def _refs(argv: list[str]) -> list[str]:
    _, words = _split(argv)
    refs, k = [], 0
    while k < len(words):
        if words[k] in VALUED:
            k += 1
        elif not words[k].startswith("-"):
            refs.append(words[k])
        k += 1
    return refs


def _profile(name: str | None, quiet: bool = False):
    from hpcdist.submission.profiles import PROJECT_FILE, ProfileError, load_profile, user_file

    if name is None and not any(os.path.isfile(p) for p in (PROJECT_FILE, user_file())):
        return {}
    try:
        return load_profile(name)
    except ProfileError:
        if quiet:  # the command that runs here says what is wrong with it
            return {}
        raise


def _target(laptop: dict, profile: dict):
    from hpcdist import remote

    host = laptop.get("remote") or profile.get("remote")
    if not host:
        raise remote.RemoteError("the laptop", "no cluster to send to: give --remote HOST, or a profile with "
                                 "remote = \"user@host\"")
    from hpcdist.submission.options import REMOTE_OPTIONS

    defaults = {o.key: o.default for o in REMOTE_OPTIONS}
    values = {key: laptop.get(key) or profile.get(key) or defaults[key] for key in ("remote_folder", "remote_hpcdist")}
    for o in REMOTE_OPTIONS:  # the flags' values checked as a profile's are
        given = laptop.get(o.key)
        for value in (given if isinstance(given, list) else [given] if given else []):
            _checked(o, value)
    name = getattr(profile, "name", "") if not laptop.get("remote") and profile.get("remote") else host
    return remote.Target(host, values["remote_folder"], values["remote_hpcdist"], name)


def _checked(option, value):
    from hpcdist import remote
    from hpcdist.validate import ValidationError

    try:
        return option.check(value, option, None)
    except ValidationError as e:
        raise remote.RemoteError("the laptop", str(e)) from None


def _cluster(name: str, laptop: dict | None = None):
    """A cluster by what the user calls it: a profile with a remote, else an ssh host; the
    --remote-folder and --remote-hpcdist of ``laptop`` (the command line's) over its own."""
    from hpcdist.submission.profiles import ProfileError, load_profile

    try:
        profile = load_profile(name)
    except ProfileError as e:
        if "no profile" not in str(e):  # a profile of that name, with a mistake: said
            from hpcdist import remote

            raise remote.RemoteError("the laptop", str(e)) from None
        profile = {}
    flags = {k: v for k, v in (laptop or {}).items() if k in ("remote_folder", "remote_hpcdist")}
    return _target(flags if profile.get("remote") else {**flags, "remote": name}, profile)


# -- submit and render ----------------------------------------------------------------------------

def _send_job(argv: list[str]) -> int:
    import json

    from hpcdist import remote
    from hpcdist.remote import records, snapshot
    from hpcdist.remote import script as login
    from hpcdist.submission.options import FLAGS_WITH_A_VALUE
    from hpcdist.submission.profiles import ProfileError

    command = argv[0]
    laptop, forwarded = _split(argv)
    try:
        profile = _profile(laptop.get("profile"))
        target = _target(laptop, profile)
        remote.require_open(target)
        code = snapshot.take(os.getcwd(), tuple(profile.get("include", ())) + tuple(laptop.get("include", ())))
    except (ProfileError, snapshot.SnapshotError) as e:
        raise remote.RemoteError("the laptop", str(e)) from None
    forwarded = _profile_flags(profile, code) + forwarded
    _check_no_laptop_paths(forwarded, code)
    # --env values go on stdin, never as arguments: every user of the login node can read those.
    forwarded, secret = login.split_secrets(forwarded, FLAGS_WITH_A_VALUE | frozenset(VALUED))
    print(f"hpcdist {command}: {code.summary()}", file=sys.stderr)
    args = [command, "--json", *forwarded] if command == "submit" else [command, *forwarded]
    submits = command == "submit" and "--dry-run" not in forwarded
    token = records.new_token() if submits else ""
    send = not records.sent_before(target, code.digest)
    while True:
        archive = code.archive() if send else b""
        done = _round_trip(target, login.script(target, args, create=True, code=code.digest, send=send,
                                                subdir=code.subdir, count=login.file_count(code.files),
                                                secrets=True, token=token),
                           login.stdin_line(secret) + archive, lost_ok=submits)
        if done is not None or send:  # None: the laptop's record of it was wrong, the cluster has not got it
            break
        send = True
    said = remote.marks(done.stderr.decode("utf-8", errors="replace"))
    if submits and "exit" not in {m.split(" ", 1)[0] for m in said} and (
            "submitting" in said or done.returncode == remote.SSH_FAILED or done.returncode < 0):
        records.record_pending(target, code.digest, token)  # it may have submitted: `status` finds out
        raise remote.RemoteError(f"ssh to {target.host}", "the connection ended before the login node answered: the "
                                 "job may have been submitted. Check with `hpcdist status` before you submit again"
                                 + ("" if remote.is_open(target) else f" (once connected: "
                                    f"{remote.connect_command(target)})"))
    if done.returncode == 0:
        records.record_sent(target, code.digest)
    if done.returncode != 0 or not submits:
        sys.stdout.write(done.stdout.decode("utf-8", errors="replace"))
        return done.returncode
    job = _answer(target, done.stdout, "submit --json")
    records.record_job(target, job, code.digest, token)
    sent = f"sent {len(archive)} bytes" if send else "already there, nothing sent"
    print(f"hpcdist submit: {job['scheduler']} job {job['job_id']} on {target.name}; code {code.digest} "
          f"({sent}); job folder {target.host}:{job['folder']}", file=sys.stderr)
    print(json.dumps({**job, **target.as_record()}) if laptop.get("json") else job["job_id"], flush=True)
    if laptop.get("wait"):
        return _follow(target, job["job_id"], 0)
    return 0


def _profile_flags(profile: dict, code) -> list[str]:
    """The laptop's profile as flags of the login node's command (its own profiles are not read)."""
    from hpcdist import remote
    from hpcdist.submission.options import OPTIONS
    from hpcdist.submission.profiles import REMOTE_KEYS, SITE_KEYS

    by_key = {o.key: o for o in OPTIONS}
    flags = []
    for key, value in profile.items():
        if key in REMOTE_KEYS or key in SITE_KEYS:
            continue
        flag = by_key[key].flags[0]
        if key in ("template", "template_dir"):  # made absolute from the profile's file: a laptop path
            inside = os.path.relpath(value, os.getcwd())
            if os.path.relpath(value, code.root).startswith(".."):
                raise remote.RemoteError("the laptop", f"profile {getattr(profile, 'name', '')} sets {key} = {value}, "
                                         f"which is outside the code snapshot ({code.root}): put it in the git tree, "
                                         f"or give the cluster's own path with {flag}")
            value = inside
        if isinstance(value, bool):
            flags += [flag] if value else []
        elif isinstance(value, dict):
            flags += [f"{flag}={k}={v}" for k, v in value.items()]
        elif isinstance(value, list):
            flags += [f"{flag}={item}" for item in value]
        else:
            flags.append(f"{flag}={value}")
    return flags


def _check_no_laptop_paths(words: list[str], code) -> None:
    """A laptop path on the command line would reach the cluster's script: refused. One in the
    project's tree always is one; one under the home only when it exists here (the cluster's home
    may have the same path: /home/me on both)."""
    from hpcdist import remote

    home = os.path.expanduser("~").rstrip("/")
    for word in words:
        for path in dict.fromkeys((word, word.partition("=")[2], word.rpartition("=")[2])):
            mine = _below(path, code.root) or (_below(path, home) and os.path.lexists(path))
            if path and mine:
                raise remote.RemoteError("the laptop", f"{word!r} names a path on this laptop ({path}), which the "
                                         f"cluster does not have: give it relative to {os.getcwd()} (the job runs "
                                         f"from the snapshot of that tree), or the cluster's own path")


def _below(path: str, folder: str) -> bool:
    return bool(folder) and (path == folder or path.startswith(folder + "/"))


def _round_trip(target, remote_script: str, data: bytes | None = None, lost_ok: bool = False):
    """One command on the login node; its stderr shown, said where from. None: the snapshot is not
    there. ``lost_ok``: a connection lost before the end is the caller's to say (a submit's)."""
    from hpcdist import remote

    done = remote.run(target, remote_script, data)
    stderr = done.stderr.decode("utf-8", errors="replace")
    if f"{remote.MARK} need-code" in stderr:
        return None
    if not (lost_ok and done.returncode == remote.SSH_FAILED and not remote.marks(stderr)):
        problem = remote.explain(target, done.returncode, stderr)
        if problem is not None:
            raise problem
    for line in stderr.splitlines():
        if not line.startswith(remote.MARK):
            print(f"{target.host}: {line}", file=sys.stderr)
    return done


def _answer(target, stdout: bytes, command: str):
    """The JSON the login node's ``hpcdist COMMAND`` printed (another program answering: said)."""
    import json

    from hpcdist import remote

    try:
        return json.loads(stdout)
    except ValueError:
        said = stdout.decode("utf-8", errors="replace").strip()[:200]
        raise remote.RemoteError(f"the login node {target.host}", f"`{target.command} {command}` printed "
                                 f"{said!r}, not the JSON hpcdist prints: check that remote_hpcdist names hpcdist "
                                 f"{remote.__version__} there") from None


# -- status, logs, cancel ----------------------------------------------------------------------

def _status(argv: list[str]) -> int:
    from hpcdist import remote
    from hpcdist.cli.status import show_rows, status_rows
    from hpcdist.remote import records

    laptop, words = _split(argv)
    as_json, refs = "--json" in words, _refs(argv)
    asks: dict = {}  # (host, folder) -> (target, refs there, the laptop's records of its jobs)
    if "remote" in laptop:
        target = _cluster(laptop["remote"], laptop)
        remote.require_open(target)  # asked for by name: no connection is the answer
        asks[(target.host, target.folder)] = (target, refs, [])
        local = []
    else:
        entries = {ref: records.find_job(ref) for ref in refs}
        # A job here with the id of one sent from here: both shown (`cancel` asks which).
        local = [ref for ref, entry in entries.items() if entry is None or _here(ref)]
        for entry in (entries.values() if refs else records.recorded_jobs() + records.pending()):
            if entry is not None:
                target = remote.Target.from_record(entry)
                _, there, kept = asks.setdefault((target.host, target.folder), (target, [], []))
                there.extend([entry["job_id"]] if refs else [])
                kept.append(entry)
    rows, status, no_ssh = status_rows(local) if local or not refs else [], 0, False
    for target, there, kept in asks.values():
        try:
            reachable = no_ssh is False and remote.is_open(target)
        except remote.RemoteError as e:  # no ssh here: the jobs run here are still shown
            print(f"hpcdist status: error: {e}; the jobs sent to clusters are shown as unknown", file=sys.stderr)
            reachable, no_ssh = False, True
        if not reachable:  # the other clusters' rows still shown; this one's said
            if not no_ssh:
                print(f"hpcdist status: error: ssh to {target.host}: no connection is open; its jobs are shown as "
                      f"unknown. Open one with: {remote.connect_command(target)}", file=sys.stderr)
            why = "no ssh on this laptop" if no_ssh else "no connection"
            known = {e["job_id"]: e for e in kept if e["job_id"]}  # not the submits whose answer was lost
            rows += [_unreachable(entry, target, why) for entry in known.values()]
            status = 1
            continue
        waiting = tuple(e["pending"] for e in kept if e.get("pending"))
        done = _round_trip(target, _script(target, ["status", "--json", *there], answers=waiting))
        records.settle(target, done.stderr.decode("utf-8", errors="replace"), kept)
        if done.returncode != 0:
            return done.returncode
        rows += _answer(target, done.stdout, "status --json")
    show_rows(rows, as_json)
    return status


def _script(*args, **kwargs) -> str:
    """The login node's script (:func:`hpcdist.remote.script.script`)."""
    from hpcdist.remote import script

    return script.script(*args, **kwargs)


def _here(ref: str) -> list:
    """The jobs run here (on this machine, ``.hpcdist/jobs``) that ``ref`` names."""
    from hpcdist import jobs

    try:
        return jobs.select([ref])
    except (jobs.JobNotFound, jobs.JobFolderError):
        return []


def _unreachable(entry: dict, target, why: str = "no connection") -> dict:
    """A row for a job sent from here whose cluster has no connection open: what the laptop knows."""
    return {"job_id": entry["job_id"], "name": entry.get("job_name", ""), "scheduler": entry.get("scheduler", ""),
            "state": "UNKNOWN", "exit_code": None, "reason": f"on {target.name}: {why}",
            "restarts": 0, "current_job_id": entry["job_id"], "folder": entry.get("folder"), "log": None}


def _job_target(argv: list[str]):
    from hpcdist import remote
    from hpcdist.remote import records

    laptop, _ = _split(argv)
    refs = _refs(argv)
    if not refs:
        raise remote.RemoteError("the laptop", f"hpcdist {argv[0]} needs a job: hpcdist {argv[0]} JOB")
    if "remote" in laptop:
        return _cluster(laptop["remote"], laptop), refs[0]
    entry = records.find_job(refs[0])
    target = remote.Target.from_record(entry)
    here = _here(refs[0])
    if here:  # the same id here and there: which one is not guessed
        from hpcdist.jobs.folders import word

        ref, folder = refs[0], word(here[-1].path)
        raise remote.RemoteError("the laptop", f"job {ref} names a job run here ({folder}) and one sent to "
                                 f"{target.name}: {argv[0]} the one here with `hpcdist {argv[0]} {folder}`, the "
                                 f"cluster's with `hpcdist {argv[0]} --remote {target.name} {ref}`")
    return target, entry["job_id"]


def _cancel(argv: list[str]) -> int:
    from hpcdist import remote

    target, job = _job_target(argv)
    remote.require_open(target)
    return _round_trip(target, _script(target, ["cancel", job])).returncode


def _logs(argv: list[str]) -> int:
    _, words = _split(argv)
    target, job = _job_target(argv)
    start = int(words[words.index("--from") + 1]) if "--from" in words[:-1] else 0
    if "-f" in words or "--follow" in words:
        return _follow(target, job, start)
    from hpcdist import remote

    remote.require_open(target)
    done = _round_trip(target, _script(target, ["logs", "--from", str(start), job]))
    sys.stdout.buffer.write(done.stdout)
    return done.returncode


def _follow(target, job: str, offset: int) -> int:
    from hpcdist.remote import follow

    return follow.follow(target, job, offset)


def _watch(argv: list[str]) -> int:
    """``watch`` and ``stacks`` from the laptop: the login node's, in one round trip. A live
    ``watch`` there prints a screen at each refresh; on a terminal here each is drawn over the last."""
    from hpcdist import remote
    from hpcdist.remote import follow

    _, words = _split(argv)
    target, job = _job_target(argv)
    remote.require_open(target)
    ref, command = _refs(argv)[0], argv[0]
    words = [job if w == ref else w for w in words]
    live = command == "watch" and not {"--once", "--json"} & set(words) and sys.stdout.isatty()
    ssh = remote.command_argv(target, _script(target, [command, *words]))
    returncode, _, stderr = follow.stream(target, ssh, 0, job, redraw=live)
    problem = remote.explain(target, returncode, stderr)
    if problem is not None:
        raise problem
    return returncode


def _report(argv: list[str]) -> int:
    """``report`` from the laptop: the login node's ``report --data`` in one round trip, the page
    drawn and written here (its figures need matplotlib here, not there)."""
    from hpcdist import remote
    from hpcdist.cli import report

    try:
        args = report.laptop_args(_split(argv)[1])  # -o checked before anything is asked
        target, job = _job_target(argv)
        remote.require_open(target)
        index = ["--index", str(args.index)] if args.index is not None else []
        done = _round_trip(target, _script(target, ["report", "--data", *index, job]))
        if done.returncode != 0 or args.data:
            sys.stdout.buffer.write(done.stdout)
            return done.returncode
        found = _answer(target, done.stdout, "report --data")
        return report.write_page(found, args.output, args.format)
    except report.CommandError as e:
        print(f"hpcdist report: error: {e}", file=sys.stderr)
        return 1


# -- connect, disconnect ------------------------------------------------------------------------

def add_parsers(sub, only: str | None, command: str | None = None) -> None:
    """``connect`` and ``disconnect``'s parsers on ``sub`` (all, or ``only`` that one)."""
    from hpcdist.cli.common import help_end  # the parser's, which `hpcdist status` builds none of

    for name in COMMANDS:
        if only in (None, name):
            parser = sub.add_parser(name, help=HELP[name], description=HELP[name][0].upper() + HELP[name][1:] + ".",
                                    **help_end(name))
            parser.add_argument("cluster", metavar="CLUSTER",
                                help="a profile with remote = \"user@host\", or an ssh host")
            parser.set_defaults(run=lambda args: main([args.command, args.cluster]))


def _connect(command: str, cluster: str) -> int:
    from hpcdist import remote

    target = _cluster(cluster)
    if command == "disconnect":
        closed = remote.close(target)
        print(f"hpcdist disconnect: {'closed the' if closed else 'no'} connection to {target.host}", file=sys.stderr)
        return 0
    if remote.is_open(target):
        print(f"hpcdist connect: a connection to {target.host} is open already", file=sys.stderr)
    else:
        opened = remote.ssh(remote.master_argv(target)).returncode  # ssh may prompt here, on the terminal
        if opened != 0:
            raise remote.RemoteError(f"ssh to {target.host}", f"ssh could not connect (exit status {opened}; its "
                                     f"message is above); check that `ssh {target.host}` works")
    done = _round_trip(target, _script(target, None, create=True))
    version, _, folder = done.stdout.decode("utf-8", errors="replace").strip().partition(" ")[2].partition(" ")
    print(f"hpcdist connect: connected to {target.host}: hpcdist {version} there, jobs and code in {folder}; the "
          f"other commands use this connection until it is unused for {remote.PERSIST} "
          f"(or `hpcdist disconnect {target.name}`)", file=sys.stderr)
    return 0
