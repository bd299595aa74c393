"""The commands that look inside a running job: ``watch`` and ``stacks`` (login side), and
``monitor``, which each submitted job script runs in its background (:mod:`hpcdist.progress.monitor`; its
arguments read by hand, :data:`BY_HAND`). Also what ``status`` and ``logs`` show of the progress.
"""

from __future__ import annotations

import os
import sys
import time

from hpcdist.cli.common import CommandError

#: The commands here, in the order `hpcdist --help` lists them.
COMMANDS = ("watch", "stacks", "monitor")
BY_HAND = ("monitor",)


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
        watch.set_defaults(run=run_watch)
    if only in (None, "stacks"):
        stacks = sub.add_parser("stacks", help="every rank's Python stack in a running job, grouped",
                                description="Ask every rank of a running job for its Python stack (through the job "
                                "folder: no ssh) and print the identical stacks together.", **help_end("stacks"))
        stacks.add_argument("job", metavar="JOB")
        stacks.add_argument("--timeout", type=float, default=None,
                            help="seconds to wait for the answers (default: two of the ranks' intervals and 2)")
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


def progress_dir(job) -> str:
    from hpcdist import jobs

    return os.path.join(job.path, jobs.PROGRESS)


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


def _status(job):
    """The job's state (a JobStatus, as ``hpcdist status`` has it)."""
    from hpcdist.schedulers.base import JobStatus
    from hpcdist.submission import submit as sub

    try:
        return sub.status(job)
    except sub.SubmitError as e:
        return JobStatus(f"UNKNOWN ({e})", None, "unknown", None)


def this_run(job) -> tuple:
    """``(run id, run start)`` of the job's last run, as its monitor wrote them in its summary: the
    rank files of an earlier run in the folder are not shown (None, None: every file)."""
    import json

    from hpcdist.progress.monitor import SUMMARY
    from hpcdist.progress.watch import read_small

    try:
        summary = json.loads(read_small(os.path.join(progress_dir(job), SUMMARY)) or "{}")
    except ValueError:
        return None, None
    if not isinstance(summary, dict):
        return None, None
    run, started = summary.get("run"), summary.get("run_started")
    return (run if isinstance(run, str) else None,
            started if type(started) in (int, float) and started == started else None)


def ended_words(state) -> str:
    """How an ended job ended, in ``hpcdist status``'s words: ``failed, exit 143: ended by ...``."""
    code = "" if state.exit_code is None else f", exit {state.exit_code}"
    return f"{state.state.lower()}{code}{': ' + state.reason if state.reason else ''}"


def screen(job, view, state: str, ended=None) -> str:
    """``watch``'s screen: a header, one row per rank by node, the slowest ranks, the hang line;
    for a job that has ended (``ended``: its JobStatus), how it ended and its last figures."""
    nodes = sorted({r.get("node", "?") for r in view.ranks})
    lines = [f"job {job.job_id} ({job.record['scheduler']}, {state.lower()}): {len(view.ranks)} rank(s) on "
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
        lines.append(f"LOOKS HUNG: {view.hung.removeprefix('looks hung: ')}; `hpcdist stacks {job.job_id}` shows "
                     f"where each rank waits")
    elif view.not_answering:
        from hpcdist.progress.watch import silent_line

        lines.append(silent_line(view.not_answering))
    if not view.ranks and ended is None:
        lines.append("no rank has recorded its progress yet (ranks start through python -m hpcdist.rank, or call "
                     "hpcdist.env.step())")
    if ended is not None:
        lines.append(f"the job has ended: {ended_words(ended)}; the figures above are the ranks' last")
    return "\n".join(lines) + "\n"


def _seconds(flag: str, value: float, least: float, most: float, what: str, example: str, above: bool = False) -> float:
    """A flag's seconds, or the one-line refusal that names the flag, the value and the fix."""
    from hpcdist.progress import watch

    try:
        return watch.seconds(flag, value, least, most, what, example, above)
    except ValueError as e:
        raise CommandError(str(e)) from None


def run_watch(args) -> int:
    from hpcdist.progress import watch

    interval = _seconds("--interval", args.interval, 0.5, 86400, "the seconds between refreshes", "2")
    from hpcdist.submission.submit import exit_status

    job = _find(args.job)
    folder, floor = progress_dir(job), hang_floor(job)
    while True:
        status = _status(job)
        state, ended = status.state, status if status.finished else None
        # Its exit status follows the job's once it has ended, as --wait's does.
        code = exit_status(ended) if ended is not None else 0
        view = watch.analyse(watch.read(folder, *this_run(job)), floor=floor, ended=ended is not None)
        if args.json:
            import json

            # Each rank's row under "ranks" (the summary's "ranks" is their count: len() says it).
            how = {"exit_code": ended.exit_code, "reason": ended.reason} if ended is not None else {}
            print(json.dumps({"job_id": job.job_id, "state": state, **how, "time": view.now, **view.summary(),
                              "ranks": view.ranks}, indent=2))
            return code
        text = screen(job, view, state, ended)
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


def run_stacks(args) -> int:
    from hpcdist.progress import watch

    if args.timeout is not None:
        _seconds("--timeout", args.timeout, 0, 3600, "the seconds to wait for the ranks' answers", "10", above=True)
    job = _find(args.job)
    folder = progress_dir(job)
    ranks = [r for r in watch.read(folder, *this_run(job)) if r.get("phase") not in ("finished", "failed")]
    if not ranks:
        raise CommandError(f"job {job.job_id} has no running rank that records its progress ({folder})")
    wait = args.timeout if args.timeout is not None else 2 * max(r.get("interval", 2.0) for r in ranks) + 2
    try:
        answers = watch.request_stacks(folder, [r["rank"] for r in ranks], wait)
    except OSError as e:
        raise CommandError(f"cannot ask the ranks for their stacks in {folder}: {e.strerror or e}") from None
    print("\n".join(watch.group_stacks(answers)))
    return 0


def print_end_line(job) -> None:
    """The job's step rate and slowest rank (``logs``, ``--wait``), where its ranks recorded them;
    on stderr, after the log, as the first failure is. Not again where the job's monitor wrote it
    at the end of the last log (its last 64 KiB read: a log may hold gigabytes)."""
    from hpcdist.jobs import logfiles
    from hpcdist.progress import watch

    line = watch.end_line(watch.read(progress_dir(job), *this_run(job)))
    if not line:
        return
    try:
        tail = logfiles.read_tail(job.logs[-1][1], 64 << 10) if job.logs else ""
    except OSError:
        tail = ""
    if line not in tail:
        print(line, file=sys.stderr)


def status_column(job, state: str) -> str:
    """``hpcdist status``'s short progress of a running job, from the monitor's summary."""
    if state != "RUNNING":
        return ""
    import json

    from hpcdist.progress.monitor import SUMMARY
    from hpcdist.progress.watch import read_small

    try:
        summary = json.loads(read_small(os.path.join(progress_dir(job), SUMMARY)) or "{}")
    except ValueError:
        return ""
    if not isinstance(summary, dict):
        return ""
    try:
        if summary.get("hung"):
            column = f"HUNG {summary.get('stalled_s', 0):.0f}s"
        elif not summary.get("ranks"):
            return ""
        else:
            column = f"step {summary.get('step_min', 0)} {summary.get('median_rate', 0):.1f}/s"
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
