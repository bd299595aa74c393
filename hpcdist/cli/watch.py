"""The commands that look inside a running job: ``watch`` and ``stacks`` (login side), and
``monitor``, which each submitted job script runs in its background (:mod:`hpcdist.progress.monitor`; its
arguments read by hand: :data:`hpcdist.cli.commands.BY_HAND`). Also what ``status`` and ``logs``
show of the progress.
"""

from __future__ import annotations

import os
import sys
import time

from hpcdist.cli.commands import CommandError



def run_by_hand(name: str, argv: list[str]) -> int:
    from hpcdist.progress.monitor import USAGE, main

    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    return main(argv)


def add_parsers(sub, only: str | None, command: str | None) -> None:
    from hpcdist.cli.common import help_end  # the parser's, which `hpcdist status` builds none of

    if only in (None, "watch"):
        watch = sub.add_parser("watch", help="each rank's progress in a running job; stragglers and hangs",
                               description="Per node and rank: step, steps/s, seconds since the last step, phase; "
                               "the slowest ranks; a line when the job looks hung. Refreshes until the job ends.",
                               **help_end("watch"))
        watch.add_argument("job", metavar="JOB")
        watch.add_argument("--once", action="store_true", help="one snapshot, then exit")
        watch.add_argument("--json", action="store_true", help="one snapshot as JSON")
        watch.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default: 2)")
        watch.add_argument("--index", type=int, default=None, metavar="N", help="an array's subjob N")
        watch.set_defaults(run=run_watch)
    if only in (None, "stacks"):
        stacks = sub.add_parser("stacks", help="every rank's Python stack in a running job, grouped",
                                description="Ask every rank of a running job for its Python stack (through the job "
                                "folder: no ssh) and print the identical stacks together.", **help_end("stacks"))
        stacks.add_argument("job", metavar="JOB")
        stacks.add_argument("--timeout", type=float, default=None,
                            help="seconds to wait for the answers (default: two of the ranks' intervals and 2)")
        stacks.add_argument("--index", type=int, default=None, metavar="N", help="an array's subjob N")
        stacks.set_defaults(run=run_stacks)
    if only in (None, "monitor"):  # listed by --help; hpcdist.cli runs it without argparse
        import argparse

        own = {}
        if "monitor" in (only, command):  # its usage is the monitor's module's: `hpcdist --help` loads none
            from hpcdist.progress.monitor import USAGE

            usage, _, description = USAGE.partition("\n")
            own = dict(usage=usage.removeprefix("usage: "), description=description)
        monitor = sub.add_parser("monitor", help="(in a job script) name stragglers and hangs in the job's log", **own)
        monitor.add_argument("argv", nargs=argparse.REMAINDER)
        monitor.set_defaults(run=lambda args: run_by_hand("monitor", args.argv))


def progress_dir(job, index: int | None = None) -> str:
    """The job's progress folder, or its subjob ``index``'s (an array's: :mod:`hpcdist.jobs.subjobs`)."""
    from hpcdist.jobs import subjobs

    return subjobs.progress_dir(job.path, index)


def subjob_indices(job) -> list[int]:
    """The indices of an array's subjobs that have a progress folder, by index."""
    from hpcdist.jobs import subjobs

    return [index for index, _ in subjobs.indexed(subjobs.progress_dir(job.path, 0)[:-1])]


def subjob_index(job, index: int | None, command: str) -> int | None:
    """``--index`` checked against the job: an array's subjob must be named, a job that is no array has none."""
    try:
        array = job.spec_values().get("array")
    except (OSError, ValueError, AttributeError):
        array = None
    array = array or (subjob_indices(job) and not os.path.isdir(progress_dir(job)))
    if index is not None and index < 0:
        raise CommandError(f"--index {index}: expected a subjob's index, 0 or more (as hpcdist {command} "
                           f"{job.job_id} --index 1)")
    if index is not None and not array:
        raise CommandError(f"--index {index}: job {job.job_id} is no array; leave --index out")
    if index is None and array:
        from hpcdist.progress.watch import ranges

        found = subjob_indices(job)
        some = f" (subjobs with progress so far: {ranges(found)})" if found else ""
        raise CommandError(f"job {job.job_id} is an array{some}: name a subjob with --index N (as hpcdist "
                           f"{command} {job.job_id} --index {found[0] if found else 1})")
    return index


def _find(ref: str):
    from hpcdist import jobs

    try:
        return jobs.find(ref)
    except (jobs.JobNotFound, jobs.JobFolderError) as e:
        raise CommandError(str(e)) from None


def hang_floor(job) -> float:
    """The job's hang floor, as its monitor has it (from the options it was submitted with)."""
    from hpcdist.progress import watch

    try:
        values = job.spec_values()
    except (OSError, ValueError):
        values = {}
    return watch.floor_for(values.get("hang_floor_s"), values.get("hang_timeout_s"))


def _status(job, index: int | None = None):
    """The job's state (a JobStatus, as ``hpcdist status`` has it); an array's subjob ``index``:
    its own end where its exit-code file says it (and why, where its monitor ended it), else the array's."""
    from hpcdist.schedulers.base import JobStatus
    from hpcdist.submission import submit as sub

    try:
        status = sub.status(job)
    except sub.SubmitError as e:
        status = JobStatus(f"UNKNOWN ({e})", None, "unknown", None)
    if index is None:
        if status.state == "FAILED" and not status.reason:  # as `hpcdist status` says it
            status = JobStatus(status.state, status.exit_code, status.raw, sub.reason_in_log(job))
        return status
    from hpcdist import jobs
    from hpcdist.jobs import ending
    from hpcdist.schedulers.batch import signal_words

    code = jobs.read_subjob_exit_codes(job.path).get(index)
    if code is None:
        return status
    cause = ending.cause(job.path, index)
    return JobStatus("COMPLETED" if code == 0 else "FAILED", code, f"exit {code}",
                     cause or signal_words(code).removesuffix("; ") or None)


def this_run(job, index: int | None = None) -> tuple:
    """``(run id, run start)`` of the job's (or subjob ``index``'s) last run, as its monitor wrote them
    in its summary: the rank files of an earlier run in the folder are not shown (None, None: every file)."""
    import json

    from hpcdist.progress.monitor import SUMMARY
    from hpcdist.progress.watch import read_small

    try:
        summary = json.loads(read_small(os.path.join(progress_dir(job, index), SUMMARY)) or "{}")
    except ValueError:
        return None, None
    if not isinstance(summary, dict):
        return None, None
    run, started = summary.get("run"), summary.get("run_started")
    return (run if isinstance(run, str) else None,
            started if type(started) in (int, float) and started == started else None)


def startup_of(job_folder: str) -> dict | None:
    """The start-up's breakdown as the job's monitor last wrote it (``status --json``'s ``startup``)."""
    import json

    from hpcdist import jobs
    from hpcdist.progress.monitor import SUMMARY
    from hpcdist.progress.watch import read_small

    try:
        summary = json.loads(read_small(os.path.join(job_folder, jobs.PROGRESS, SUMMARY)) or "{}")
    except ValueError:
        return None
    found = summary.get("startup") if isinstance(summary, dict) else None
    return found if isinstance(found, dict) else None


def ended_words(state) -> str:
    """How an ended job ended, in ``hpcdist status``'s words: ``failed, exit 143: ended by ...``."""
    code = "" if state.exit_code is None else f", exit {state.exit_code}"
    return f"{state.state.lower()}{code}{': ' + state.reason if state.reason else ''}"


def screen(job, view, state: str, ended=None, index: int | None = None) -> str:
    """``watch``'s screen: a header, one row per rank by node, the slowest ranks, the hang line;
    for a job that has ended (``ended``: its JobStatus), how it ended and its last figures. ``index``:
    an array's subjob."""
    nodes = sorted({r.get("node", "?") for r in view.ranks})
    which = f"{job.job_id} subjob {index}" if index is not None else job.job_id
    lines = [f"job {which} ({job.record['scheduler']}, {state.lower()}): {len(view.ranks)} rank(s) on "
             f"{len(nodes)} node(s), {time.strftime('%H:%M:%S', time.localtime(view.now))}",
             f"{'NODE':<16} {'RANK':>5} {'STEP':>8} {'STEPS/S':>8} {'WORK/STEP':>10} {'LAST STEP':>10}  PHASE"]
    for r in sorted(view.ranks, key=lambda r: (r.get("node", ""), r["rank"])):
        silent = f"  (silent {r['silent']:.0f} s)" if view.is_silent(r) else ""
        work = f"{r['work'] * 1000:.0f} ms" if r.get("work") is not None else "-"
        rate = f"{r['rate']:.2f}" if r.get("rate") is not None else "-"
        lines.append(f"{r.get('node', '?')[:16]:<16} {r['rank']:>5} {r.get('step', 0):>8} {rate:>8} "
                     f"{work:>10} {r['since']:>8.1f} s  {r.get('phase', '?')}{silent}")
    if len(nodes) > 1:
        per_node: dict[str, list[int]] = {}  # node -> its ranks' steps, in one pass
        for r in view.ranks:
            per_node.setdefault(r.get("node", "?"), []).append(r.get("step", 0))
        for node in nodes:
            steps = per_node[node]
            lines.append(f"node {node}: {len(steps)} rank(s), steps {min(steps)}-{max(steps)}")
    if view.median_rate:
        slow = "; ".join(f"rank {r['rank']} on {r.get('node', '?')}: {view.trailing(r)}" for r in view.slowest[:3])
        lines.append(f"median {view.median_rate:.2f} steps/s; slowest: {slow or 'none trails the median'}")
    if view.checkpointing:
        lines.append(f"checkpointing: rank(s) {', '.join(map(str, view.checkpointing))}")
    if view.hung:
        at = f" --index {index}" if index is not None else ""
        lines.append(f"LOOKS HUNG: {view.hung.removeprefix('looks hung: ')}; `hpcdist stacks {job.job_id}{at}` shows "
                     f"where each rank waits")
    elif view.not_answering:
        from hpcdist.progress.watch import silent_line

        lines.append(silent_line(view.not_answering))
    if not view.ranks and ended is None:
        lines.append("no rank has recorded its progress yet (ranks start through python -m hpcdist.rank, or call "
                     "hpcdist.env.step())")
    lines += restart_lines(job, index, ended is not None)
    if ended is not None:
        lines.append(f"the job has ended: {ended_words(ended)}; the figures above are the ranks' last")
    return "\n".join(lines) + "\n"


def restart_lines(job, index: int | None, ended: bool) -> list:
    """The launch's restarts (``--max-restarts``), one line each, and one for a restart under way:
    the monitor ended the launch, or ``hpcdist restart`` checks the nodes and sets up the next."""
    from hpcdist.jobs import launch_restarts
    from hpcdist.progress.monitor import LAUNCH_ENDED, RESTARTING, mtime
    from hpcdist.progress.watch import read_small

    done = launch_restarts.read(job.path) if index is None else []
    lines = []
    for r in done:
        at = time.strftime("%H:%M:%S", time.localtime(r.get("time") or 0))
        left = f"; left out: {' '.join(r['left_out'])}" if r.get("left_out") else ""
        spares = f", in their place: {' '.join(r['spares'])}" if r.get("spares") else ""
        lines.append(f"restart {r.get('restart')} of {r.get('of')} at {at} (step {r.get('step')}): "
                     f"{r.get('cause')}{left}{spares}")
    folder = progress_dir(job, index)
    cause = (read_small(os.path.join(folder, LAUNCH_ENDED)) or "").strip()
    last = done[-1].get("time") or 0 if done else 0
    if not ended and (cause or mtime(os.path.join(folder, RESTARTING)) > last):
        said = f": {cause}" if cause else ""
        lines.append(f"RESTARTING: the launch ended{said}; every node is asked to answer before "
                     f"the next launch")
    return lines




def startup_text(job, view, index: int | None = None) -> str:
    """Where the start-up went, per node, so far (:mod:`hpcdist.progress.startup`): ``watch``'s last
    lines while the job starts (until every rank has made its first step: then the log's end and
    ``status --json`` give it)."""
    from hpcdist.progress import startup

    run, started = this_run(job, index)
    found = startup.of_folder(progress_dir(job, index), run, view.ranks, started)
    return "".join(line + "\n" for line in startup.lines(found)) if found and not found["complete"] else ""


def _seconds(flag: str, value: float, least: float, most: float, what: str, example: str, above: bool = False) -> float:
    """A flag's seconds, or the one-line refusal that names the flag, the value and the fix."""
    from hpcdist.progress import watch

    try:
        return watch.seconds(flag, value, least, most, what, example, above)
    except ValueError as e:
        raise CommandError(str(e)) from None


def run_watch(args) -> int:
    interval = _seconds("--interval", args.interval, 0.5, 86400, "the seconds between refreshes", "2")
    from hpcdist.submission.submit import exit_status

    job = _find(args.job)
    index = subjob_index(job, args.index, "watch")
    while True:
        status, view = view_of(job, index)
        state, ended = status.state, status if status.finished else None
        # Its exit status follows the job's once it has ended, as --wait's does.
        code = exit_status(ended) if ended is not None else 0
        if args.json:
            import json

            print(json.dumps(snapshot(job, view, status, index), indent=2))
            return code
        text = screen(job, view, state, ended, index) + startup_text(job, view, index)
        if args.once:
            sys.stdout.write(text)
            return code
        sys.stdout.write("\033[H\033[J" + text if sys.stdout.isatty() else text + "\n")
        sys.stdout.flush()
        if ended is not None or state not in ("RUNNING", "PENDING") and not state.startswith("UNKNOWN"):
            return code
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return 130


def snapshot(job, view, status, index: int | None = None) -> dict:
    """``watch --json``'s object (``hpcdist report`` reads the same): the job's state, how it
    ended (with "stopped", the ranks a hang's cause names as not answering, from the monitor's
    record), the view's summary, and each rank's row under "ranks" (the summary's "ranks" is
    their count: len() says it)."""
    how = {}
    if status.finished:
        how = {"exit_code": status.exit_code, "reason": status.reason,
               "stopped": stopped_ranks(job, index)}
    subjob = {"index": index} if index is not None else {}
    return {"job_id": job.job_id, **subjob, "state": status.state, **how, "time": view.now, **view.summary(),
            "ranks": view.ranks, "restarts": restart_lines(job, index, status.finished)}


def stopped_ranks(job, index: int | None = None) -> list[int]:
    """The ranks the monitor named as not answering when it ended the job for a hang (its record,
    :mod:`hpcdist.jobs.ending`); [] where it did not."""
    from hpcdist.jobs import ending

    named = (ending.read(job.path, index) or {}).get("stopped")
    return sorted(r for r in named if type(r) is int) if isinstance(named, list) else []


def view_of(job, index: int | None = None):
    """``(its JobStatus, the view of its ranks)`` as ``watch`` has them now."""
    from hpcdist.progress import watch

    from hpcdist.progress.monitor import RESTARTING, mtime

    status = _status(job, index)
    folder = progress_dir(job, index)
    ranks = watch.read(folder, *this_run(job, index))
    restarted = mtime(os.path.join(folder, RESTARTING))
    if restarted:  # the ranks of the launch that runs now, as the monitor judges them
        ranks = [r for r in ranks if (r.get("started") or 0) >= restarted]
    view = watch.analyse(ranks, floor=hang_floor(job), ended=status.finished)
    return status, view


def run_stacks(args) -> int:
    from hpcdist.progress import watch

    if args.timeout is not None:
        _seconds("--timeout", args.timeout, 0, 3600, "the seconds to wait for the ranks' answers", "10", above=True)
    job = _find(args.job)
    index = subjob_index(job, args.index, "stacks")
    _not_ended(job, index)
    folder = progress_dir(job, index)
    ranks = [r for r in watch.read(folder, *this_run(job, index)) if r.get("phase") not in ("finished", "failed")]
    if not ranks:
        which = f"{job.job_id} subjob {index}" if index is not None else job.job_id
        raise CommandError(f"job {which} has no running rank that records its progress ({folder})")
    wait = args.timeout if args.timeout is not None else 2 * max(r.get("interval", 2.0) for r in ranks) + 2
    try:
        answers = watch.request_stacks(folder, [r["rank"] for r in ranks], wait)
    except OSError as e:
        raise CommandError(f"cannot ask the ranks for their stacks in {folder}: {e.strerror or e}") from None
    if all(frames is None for frames in answers.values()):
        _not_ended(job, index)  # it ended while we waited
    print("\n".join(watch.group_stacks(answers)))
    return 0


def _not_ended(job, index: int | None = None) -> None:
    """A job (or subjob) that has ended has no rank to answer: say so, and how it ended (its
    monitor's record where hpcdist ended it), at once."""
    status = _status(job, index)
    if status.finished:
        which = f"{job.job_id} subjob {index}" if index is not None else job.job_id
        raise CommandError(f"job {which} has ended ({ended_words(status)}): no rank is left to answer; "
                           f"`hpcdist logs {job.job_id}` shows its last lines")


def print_end_line(job) -> None:
    """The job's step rate and slowest rank (``logs``, ``--wait``), where its ranks recorded them;
    on stderr, after the log, as the first failure is. Not again where the job's monitor wrote it
    at the end of the last log (its last 64 KiB read: a log may hold gigabytes)."""
    from hpcdist.jobs import logfiles
    from hpcdist.progress import watch

    from hpcdist.progress import startup

    run, started = this_run(job)
    ranks = watch.read(progress_dir(job), run, started)
    line = watch.end_line(ranks)
    if not line:
        return
    try:
        tail = logfiles.read_tail(job.logs[-1][1], 64 << 10) if job.logs else ""
    except OSError:
        tail = ""
    if line not in tail:
        print(line, file=sys.stderr)
    # Where the start-up went: the monitor says it last, unless the job ended before its next look.
    if "hpcdist: start-up: " not in tail:
        kept = startup_of(job.path)  # the monitor's, the first launch's once complete
        found = kept if kept and kept.get("complete") else startup.of_folder(progress_dir(job), run,
                                                                              ranks, started)
        for said in startup.lines(found):
            print(f"hpcdist: {said}", file=sys.stderr)


def status_column(job, state: str) -> str:
    """``hpcdist status``'s short progress of a running job, from the monitor's summary."""
    if state != "RUNNING":
        return ""
    import json

    from hpcdist.progress.monitor import SUMMARY
    from hpcdist.progress.watch import read_small

    def read(folder: str):
        try:
            found = json.loads(read_small(os.path.join(folder, SUMMARY)) or "{}")
        except ValueError:
            return None
        return found if isinstance(found, dict) and found else None

    summary, which = read(progress_dir(job)), ""
    if summary is None:  # an array: the first hung subjob, else the first with figures
        found = [(index, s) for index in subjob_indices(job) if (s := read(progress_dir(job, index)))]
        index, summary = next((f for f in found if f[1].get("hung")), found[0] if found else (None, None))
        which = f"subjob {index} " if summary is not None else ""
    if summary is None:
        return ""
    try:
        if summary.get("hung"):
            column = f"{which}HUNG {summary.get('stalled_s', 0):.0f}s"
        elif not summary.get("ranks"):
            return ""
        else:
            column = f"{which}step {summary.get('step_min', 0)} {summary.get('median_rate', 0):.1f}/s"
        # A monitor that has stopped (killed, its node gone) left its last figures: say how old.
        age = time.time() - summary.get("time", time.time())
        if age > summary.get("stale_after", 30):
            column = f"stale {duration(age)}: {column} (its monitor stopped)"
    except (TypeError, ValueError):  # not the figures a monitor writes
        return ""
    return column


def duration(seconds: float) -> str:
    """``42s``, ``3m``, ``2h``, ``1d``: an age in its largest unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"
