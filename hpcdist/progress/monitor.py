"""``hpcdist monitor``: the job's watcher, in the background of the job script on its first node.

Every few seconds it reads the ranks' progress (:mod:`hpcdist.progress.watch`) and writes into the job's log:

- a straggler, once, with its figures, when it trails the median rate for three checks in a row;
- a hang, once per hang: the line of :attr:`hpcdist.progress.watch.View.hung`, then every rank's stack,
  grouped (asked through the control file: no ssh to the nodes);
- with ``--hang-timeout``: when no rank has made a step for that long (not while one checkpoints),
  the cause and the grouped stacks, then the job is ended: TERM (and CONT, for a stopped rank) to the
  batch shell's process group, which holds the launcher; the scheduler ends what runs elsewhere;
- with ``--hang-timeout`` (or ``--start-timeout`` in the job's spec): a start that takes longer than
  the start-up limit (no rank's first step; default :data:`~hpcdist.progress.watch.START_TIMEOUT_S`)
  ends the job the same way, naming the ranks that never reached their first step and where they wait;
- the job's step rate and slowest rank once every rank has finished.

With ``--restarts`` (the job restarts its launch: ``--max-restarts``, :mod:`hpcdist.injob.restart`) it
ends the launch, not the job, where it would end the job, and also when ranks have not answered
(:attr:`~hpcdist.progress.watch.View.not_answering`) while no rank made a step for
:data:`LOST_AFTER_S`: a lost node's ranks write no more, and the others wait for them in a
collective, which a scheduler may take minutes to end (Slurm's SlurmdTimeout, PBS's mom). The cause
goes into the progress folder (:data:`LAUNCH_ENDED`) for the restart's line; the next launch's ranks
are judged alone.

An array's subjob has a progress folder of its own (``progress.<index>``, :mod:`hpcdist.jobs.subjobs`):
its monitor watches, and ends, that subjob alone. A job it ends is recorded as such in the job
folder (:mod:`hpcdist.jobs.ending`; a subjob's in ``ended.json.<index>``): ``status``,
``logs``, ``--wait`` and ``watch`` say the cause. Each run of the job script (a requeue, a run
by hand) is judged by its own ranks: rank files of an earlier run are left out
(:func:`hpcdist.progress.watch.read`). It also keeps ``summary.json`` there (one small file:
``hpcdist status`` reads it), ``timeline.jsonl`` (each rank's steps over the run, for ``hpcdist
report``: :mod:`hpcdist.progress.timeline`) and ends with the batch shell (``--pid``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from hpcdist.injob.end_all import WARNINGS
from hpcdist.progress import process_start, startup, timeline, watch

USAGE = ("usage: hpcdist monitor --dir PROGRESS_DIR --pid PID [--hang-floor S] [--hang-timeout S] [--start-timeout S]"
         " [--interval S] [--restarts]\n"
         "Inside a job script: watch the ranks' progress; stragglers and hangs into the log.")
SUMMARY = "summary.json"
#: In the progress folder: why the monitor ended a launch that is to restart (one line); and the
#: mark ``hpcdist restart`` leaves as it starts (its time: the ranks before it are the last launch's).
LAUNCH_ENDED, RESTARTING = "launch-ended", "restarting"
#: Seconds without a step, with ranks that do not answer, after which a launch that restarts is ended.
LOST_AFTER_S = 10.0
#: A silent rank whose process this host sees alive (its own node's: running, sleeping, waiting on
#: a disk) is busy or blocked, not on a lost node: only a hang timeout may end it (CI of 92f9984:
#: 2 ranks held the GIL 12 s after their last step, and a job that had trained to its end restarted).
ALIVE = frozenset(watch.PROCESS_STATES[state] for state in "RSD")
#: Seconds an ended launch has after TERM before what is left of it gets KILL (a launcher that
#: waits for a node that does not answer would wait for ever).
LAUNCH_GRACE_S = 10.0


#: Each option's (least, most, what, example, above least): a value outside is refused in one line.
LIMITS = {"hang_floor": (0, 1e7, "the least seconds without a step called a hang", "120", False),
          "hang_timeout": (0, 1e7, "the seconds without a step that end the job", "900", True),
          "start_timeout": (0, 1e7, "the seconds before the first step that end the job", "600", True),
          "interval": (0.5, 3600, "the seconds between checks", "2", False)}


def parse(argv: list[str]) -> dict:
    options = {"dir": None, "pid": None, "hang_floor": None, "hang_timeout": None, "start_timeout": None,
               "interval": 2.0, "restarts": False}
    args = list(argv)
    while args:
        name = args.pop(0).lstrip("-").replace("-", "_")
        if name == "restarts":
            options["restarts"] = True
            continue
        if name not in options or not args:
            raise SystemExit(f"hpcdist monitor: unknown or incomplete argument --{name}\n{USAGE}")
        value = args.pop(0)
        flag = "--" + name.replace("_", "-")
        if name == "dir":
            options[name] = value
        elif name == "pid":
            if not (value.isascii() and value.isdigit() and 1 < int(value) < 1 << 31):
                raise SystemExit(f"hpcdist monitor: error: --pid {value}: expected the batch shell's process id, "
                                 f"a whole number above 1 (as --pid $$)")
            options[name] = int(value)
        else:
            try:
                options[name] = watch.seconds(flag, value, *LIMITS[name])
            except ValueError as e:
                raise SystemExit(f"hpcdist monitor: error: {e}") from None
    if not options["dir"] or options["pid"] is None:
        raise SystemExit(f"hpcdist monitor: --dir and --pid are required\n{USAGE}")
    return options


def say(line: str) -> None:
    tell(f"hpcdist: {line}")


def tell(line: str) -> None:
    """A line into the job's log; a log that cannot take it (a full disk) does not stop the monitor."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def stacks_lines(folder: str, view) -> list[str]:
    ranks = [r["rank"] for r in view.ranks if r.get("phase") not in ("finished", "failed")]
    interval = max((r.get("interval", 2.0) for r in view.ranks), default=2.0)
    return watch.group_stacks(watch.request_stacks(folder, ranks, wait_s=2 * interval + 2))


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` on this node (from /proc), nearest first."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    # The parent is the second field after the command, which may hold spaces.
                    parent = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def end_job(pid: int) -> None:
    """TERM, and CONT (a stopped process takes a TERM only once it runs again), to every process
    the batch shell started on this node but this monitor: the launcher (srun, mpirun, torchrun's
    agents) ends the ranks it started elsewhere; the shell then ends with the launcher's status and
    records it. Not the shell's process group: a local job's runner is in it, and records the end."""
    me = os.getpid()
    for signal_number in (signal.SIGTERM, signal.SIGCONT):
        for process in descendants(pid):
            if process != me:
                try:
                    os.kill(process, signal_number)
                except OSError:
                    pass  # ended meanwhile


def end_launch(pid: int, folder: str, cause: str, grace: float = LAUNCH_GRACE_S) -> None:
    """End the running launch for a restart: :func:`end_job`, then KILL to what is left of it after
    ``grace`` seconds (those processes alone: the batch shell's restart, started meanwhile, is not
    the launch's); ``cause`` into the progress folder for the restart's line."""
    try:
        with open(os.path.join(folder, LAUNCH_ENDED), "w", encoding="utf-8") as f:
            f.write(cause + "\n")
    except OSError:
        pass  # the restart still happens; its line names less
    me = os.getpid()
    launch = {p: _started(p) for p in descendants(pid) if p != me}
    end_job(pid)
    deadline = time.monotonic() + grace
    while any(_started(p) == t for p, t in launch.items()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for process, started in launch.items():
        if started is not None and _started(process) == started:
            try:
                os.kill(process, signal.SIGKILL)
            except OSError:
                pass


def _started(pid: int) -> str | None:
    """The process's start time (/proc's field 22), which tells it from a later one of the same pid;
    None once it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return None if fields[0] == "Z" else fields[19]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """The batch shell runs on; one that has ended but that its parent has not collected yet (a
    zombie: `bash job.sh` under a parent that reads its output first) has ended too."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[:1] != ["Z"]
    except (OSError, IndexError):
        return True  # no /proc: as kill says


def run_start(pid: int) -> float:
    """When the batch shell ``pid`` started (this run's start), from /proc, to the clock tick, as
    the start-up's breakdown has it (:func:`hpcdist.progress.process_start`); else now. Not from
    /proc/stat's btime, a whole second: a local job's run then read as started before it was
    submitted (by the fraction of a second btime drops)."""
    started = process_start(pid)
    return time.time() if started is None else started


def _lost(silent: list[dict]) -> list[dict]:
    """The silent ranks that may be on a lost node: all but those this host sees alive."""
    return [r for r in silent if watch.process_state(r) not in ALIVE]


def start_limit(options: dict, job_folder: str) -> float | None:
    """The start-up limit: --start-timeout, else the job's (its spec), else the default with a
    --hang-timeout; None: a slow start is never ended."""
    from hpcdist.jobs import ending

    limit = options["start_timeout"] or ending.start_timeout(job_folder)
    if limit is None and options["hang_timeout"] is not None:
        limit = watch.START_TIMEOUT_S
    return limit


def run(options: dict) -> int:
    """The job's monitor (``hpcdist monitor``), on the first node while the batch shell ``--pid``
    lives: every ``--interval`` it reads the ranks' progress in ``--dir``, writes the summary and
    the timeline, names a rank slow three checks running, says a hang with every rank's stack, and
    ends the job at ``--hang-timeout`` or the start-up limit (or, with ``--restarts``, only the
    launch, for a restart); at the end, the job's last line and the start-up's breakdown. 0."""
    from hpcdist.jobs import LAST_LINES, PROGRESS, ending, subjobs
    from hpcdist.progress import run_id

    folder, pid = options["dir"], int(options["pid"])
    job_folder = os.path.dirname(os.path.abspath(folder))
    index = subjobs.index_of(folder, PROGRESS)  # an array's subjob: its own folder, its own end
    timeout = options["hang_timeout"]
    floor = watch.floor_for(options["hang_floor"], timeout)
    os.makedirs(folder, 0o700, exist_ok=True)  # private, as the job folder
    run, started = run_id(), run_start(pid)
    ending.clear(job_folder, index)  # the last run's end is not this run's
    _remove(os.path.join(folder, LAST_LINES))
    ending.reserve(job_folder, index)  # room for this run's end, should the disk fill
    limit = start_limit(options, job_folder)
    # Ranks that record nothing (a launcher that starts the script itself) say nothing of a slow start.
    recorded = ending.spec_value(job_folder, "launcher") not in ("none", "accelerate")
    slow_checks: dict[int, int] = {}
    named, hang_told, trouble = set(), False, None
    boot = None  # the start-up's breakdown (hpcdist.progress.startup), until every rank has stepped
    since = 0.0  # the current launch's start, once the monitor has ended one for a restart
    looks = timeline.Writer(folder, run, options["interval"])  # the steps over the run, for `hpcdist report`
    while alive(pid):
        if options["restarts"]:
            since, boot = _restart_begun(folder, run, started, since, boot)
        try:
            # A restarted launch is judged by its own ranks (the last launch's files stay until theirs).
            view = watch.analyse([r for r in watch.read(folder, run, started) if (r.get("started") or 0) >= since],
                                 floor=floor)
            if boot is None or not boot["complete"]:
                boot = startup.of_folder(folder, run, view.ranks, started) or boot
            _write_summary(folder, view, options["interval"], run, started, boot)
            looks.add(view)
            _name_stragglers(view, slow_checks, named)
        except Exception as e:  # noqa: BLE001 - the monitor outlives what it cannot read: it ends hung jobs
            if repr(e) != trouble:
                trouble = repr(e)
                say(f"monitor: cannot read the ranks' progress ({type(e).__name__}: {e}); trying again")
            time.sleep(options["interval"])
            continue
        ending_now = timeout is not None and view.stalled_beyond(timeout)
        never_stepped = not any(r.get("step") for r in view.ranks) and not view.finished
        slow_start = (limit is not None and never_stepped and (recorded or view.ranks)
                      and view.now - started >= limit)
        if view.hung and not hang_told or ending_now or slow_start:
            hang_told = True
            stacks = _say_stuck(folder, view, slow_start, started)
        elif view.hung is None:
            hang_told = False
        lost = options["restarts"] and view.stalled_beyond(LOST_AFTER_S) and _lost(view.not_answering)
        if options["restarts"] and (ending_now or slow_start or lost):
            cause = (watch.silent_line(lost) + f", and no rank has made a step for {view.stalled_s:.0f} s"
                     if lost and not (ending_now or slow_start) else
                     f"no rank has made its first step {view.now - started:.0f} s after the job's start" if slow_start
                     else f"no rank has made a step for {view.stalled_s:.0f} s (--hang-timeout {timeout:.0f} s)")
            say(f"ending the launch for a restart: {cause}")
            end_launch(pid, folder, cause)
            since, started, hang_told = time.time(), time.time(), False
            boot = boot if boot is not None and boot["complete"] else None  # the first launch's stays
            named.clear()
            slow_checks.clear()
            continue
        if ending_now or slow_start:
            _end_the_job(pid, job_folder, index, view, stacks, slow_start, started, limit, timeout,
                         os.path.join(folder, LAST_LINES), _first_boot(boot, folder, run, view.ranks, started))
            return 0
        if view.finished and not (options["restarts"] and any(r.get("phase") == "failed" for r in view.ranks)):
            _say_the_end(folder, run, view.ranks, started, boot)
            return 0
        time.sleep(options["interval"])
    # The batch shell ended before the ranks' last look (a short job): the breakdown, where this
    # monitor still may write (logs and --wait say it after the log where it is missing).
    if boot is not None and boot["complete"]:
        _say_the_end(folder, run, watch.read(folder, run, started), started, boot)
    return 0


def _name_stragglers(view, slow_checks: dict, named: set) -> None:
    """A rank among the slowest three checks running is named once (``slow_checks`` counts them)."""
    slow = {r["rank"] for r in view.slowest}  # once per check, not once per rank
    for rank in [rank for rank in slow_checks if rank not in slow]:
        del slow_checks[rank]
    for r in view.slowest:
        slow_checks[r["rank"]] = slow_checks.get(r["rank"], 0) + 1
        if slow_checks[r["rank"]] >= 3 and r["rank"] not in named:
            named.add(r["rank"])
            say(view.straggler_line(r))


def _say_stuck(folder: str, view, slow_start: bool, started: float) -> list:
    """Say that the ranks are stuck (a hang, or no first step yet), with every rank's stack; the
    stacks' lines."""
    if slow_start:
        say(f"no rank has made its first step {view.now - started:.0f} s after the job's start: "
            f"{'; '.join(watch.not_started(view.ranks))}; every rank's stack:")
    else:
        say(f"{view.hung or 'no rank has made a step for %.0f s' % view.stalled_s}; every rank's stack:")
    stacks = _stacks(folder, view)
    for line in stacks:
        tell(f"hpcdist:   {line}")
    return stacks


def _end_the_job(pid: int, job_folder: str, index, view, stacks: list, slow_start: bool, started: float,
                 limit, timeout, last_lines: str, boot) -> None:
    """End the job at its start-up limit or its --hang-timeout: why, in its folder and its log (and
    the log's last lines, ``last_lines``: the cause and the start-up, for the job script to copy)."""
    from hpcdist.jobs import ending

    stopped = None
    if slow_start:
        flag, cause = "--start-timeout", (f"ended by --start-timeout after {view.now - started:.0f} s without "
                                          f"a first step; {'; '.join(watch.not_started(view.ranks))}")
    else:
        flag, cause = "--hang-timeout", (f"ended by --hang-timeout after {view.stalled_s:.0f} s without a step"
                                         f"; {_who(view, stacks)}")
        stopped = [r["rank"] for r in view.not_answering]  # those _who names first
    ending.write(job_folder, flag.lstrip("-"), cause, time.time(), index, stopped)
    _write_last_lines(last_lines, [f"hpcdist: the job was {cause}",
                                   *("hpcdist: " + line for line in startup.lines(boot))])
    say(f"ending the job: no rank has made its first step {view.now - started:.0f} s after the job's start "
        f"(--start-timeout {limit:.0f} s)" if slow_start else
        f"ending the job: no rank has made a step for {view.stalled_s:.0f} s (--hang-timeout {timeout:.0f} s)")
    end_job(pid)


def _say_the_end(folder: str, run: str, ranks: list, started: float, boot) -> None:
    """The job's last lines from hpcdist: how the ranks ended, and the start-up's breakdown: the
    first launch's once complete (after a restart the rank files are the next launch's, which,
    measured from the job's start, would fold the restart into it)."""
    line = watch.end_line(ranks)
    if line:
        tell(line)
    for line in startup.lines(_first_boot(boot, folder, run, ranks, started)):
        say(line)


def _restart_begun(folder: str, run, started: float, since: float, boot) -> tuple:
    """``(since, boot)`` once ``hpcdist restart`` has left its mark: the ranks are judged from the
    mark on, and the start-up's breakdown is taken from the last launch's files before the next
    launch's replace them (the first launch's, if every rank of it had stepped)."""
    mark = mtime(os.path.join(folder, RESTARTING))
    if mark <= since:
        return since, boot
    if boot is None or not boot["complete"]:
        last = [r for r in watch.read(folder, run, started) if (r.get("started") or 0) >= since]
        boot = startup.of_folder(folder, run, last, started) or boot
    return mark, boot


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_last_lines(path: str, lines: list[str]) -> None:
    """The log's last lines, for the job script's exit trap to copy: the launcher, ended, writes its
    own shutdown lines after this monitor's, and a user reading job.log's end met those alone."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    except OSError:
        pass  # logs and --wait still say the cause (ended.json)


def _first_boot(boot, folder: str, run, ranks: list, started: float):
    """The breakdown as complete as it got first: kept once every rank had stepped (after a
    restart the rank files are the next launch's); else as the ranks' files have it now."""
    return boot if boot is not None and boot["complete"] else startup.of_folder(folder, run, ranks, started)


def mtime(path: str) -> float:
    """A file's modification time; 0 where there is none."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _stacks(folder: str, view) -> list[str]:
    """The grouped stacks; best effort (a full disk cannot hold the request): ending the job is not."""
    try:
        return stacks_lines(folder, view)
    except OSError as e:
        return [f"(no stacks: cannot ask the ranks for them: {e.strerror or e})"]


def _who(view, stacks: list[str]) -> str:
    """The ranks to blame in a few words: those not answering, else where the ranks wait."""
    if view.not_answering:
        return watch.not_answering_words(view.not_answering)
    groups = [line for line in stacks if not line.startswith(" ") and not line.startswith("(")]
    return "; ".join(groups[:3]) or "every rank answers"


def _write_summary(folder: str, view, interval: float, run: str | None = None, started: float | None = None,
                   boot: dict | None = None) -> None:
    """``summary.json`` for ``hpcdist status``, with the time after which it is stale (a monitor
    that has stopped): a few checks, and the longest wait for stacks, late."""
    ranks_interval = max((r.get("interval", 2.0) for r in view.ranks), default=2.0)
    stale_after = max(30.0, 3 * interval + 2 * ranks_interval + 2)
    text = json.dumps({"time": view.now, "stale_after": round(stale_after, 1), "run": run, "run_started": started,
                       **view.summary(), "startup": boot})
    temporary = os.path.join(folder, f".{SUMMARY}.tmp")
    try:
        with open(temporary, "w") as f:
            f.write(text)
        os.replace(temporary, os.path.join(folder, SUMMARY))
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        _summary_in_place(os.path.join(folder, SUMMARY), text)


def _summary_in_place(path: str, text: str) -> None:
    """A full disk takes no new file: ``text`` over the last summary, in the blocks it has (padded
    with spaces, which JSON allows, to the old size). A reader may find
    it half written for a moment (``status`` then shows no figures, never wrong ones)."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        size = os.fstat(fd).st_size
        data = text.encode()
        os.write(fd, data + b" " * max(0, size - len(data)))
    except OSError:
        pass
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    # A site's warning (USR1, USR2) is the batch shell's to act on, not the monitor's to die of:
    # a `qsig -s USR2` reaches every process of a PBS job, and the monitor must live on.
    for warning in WARNINGS:
        signal.signal(warning, signal.SIG_IGN)
    return run(parse(argv))
