"""What the ranks' progress files say: per rank and node, the slowest ranks, a hang, grouped stacks.

The ranks write their progress into the job folder's ``progress/`` (:mod:`hpcdist.progress`);
this module reads it, from the login node (``hpcdist watch``, ``hpcdist stacks``, the progress
column of ``hpcdist status``) and inside the job (``hpcdist monitor``, :mod:`hpcdist.progress.monitor`):

- :func:`read` the ranks' states; :func:`analyse` them into a :class:`View`: each rank's step,
  steps per second, seconds since its last step and phase; the median rate and the ranks that trail
  it by :data:`STRAGGLER_FACTOR`; whether the job looks hung (no rank has made a step for
  max(:data:`HANG_MULTIPLE` x the recent step time, the floor), the ranks' files being up to
  their interval old, and no rank checkpoints), and which
  ranks stopped writing (a stopped or dead process);
- :func:`request_stacks` asks every rank for its stack through the control file and gathers the
  answers; :func:`group_stacks` groups identical stacks ("ranks 0-2,4-7 in all_reduce at
  train.py:88").
"""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
import time

from hpcdist.progress import MAX_INTERVAL_S, STACKS_REQUEST, stacks_file

#: A job looks hung after this many of its recent step times without a step (and the floor).
HANG_MULTIPLE = 10
#: The floor's default: a slow step (a long evaluation) is no hang.
HANG_FLOOR_S = 120
#: The start-up limit's default with ``--hang-timeout`` (``--start-timeout``): no first step by then ends the job.
START_TIMEOUT_S = 600
#: A rank slower than the median rate by this factor is a straggler.
STRAGGLER_FACTOR = 1.5
#: A rank that has not written its file for this many of its intervals (and 5 s) is not answering.
SILENT_INTERVALS = 3


#: The most bytes read of a rank's file (about 250 written): a link to /dev/zero costs no memory.
MAX_FILE_BYTES = 64 << 10
#: The most bytes read of a rank's stack (a deep recursion's: 1,000 frames are about 100 KB).
MAX_STACK_BYTES = 4 << 20
#: A rank file's numbers (finite ints or floats, else left out) and words (strings, else left out).
NUMBERS = ("local_rank", "pid", "step", "first_step", "last_step", "rate", "work", "started", "written", "interval",
           "world", "proc_started", "rdzv_started", "rdzv_ended")
WORDS = ("node", "phase", "run")


def read_small(path: str, limit: int = MAX_FILE_BYTES) -> str | None:
    """A regular file's text (UTF-8), or None: a link, a FIFO, a device, a file over ``limit``
    bytes or one that cannot be read. Never blocks on a FIFO nor follows a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace") if len(data) <= limit else None


def _finite(value) -> bool:
    """A finite float, or an int within 64 bits (a larger one overflows a float's arithmetic)."""
    if type(value) is int:
        return -(1 << 63) <= value < 1 << 63
    return type(value) is float and math.isfinite(value)


def clean(state) -> dict | None:
    """A rank's state as the view can trust it: its rank (an int, 0 or more), the numbers that are
    finite ints or floats and the words that are strings; anything else (null, a string for a
    number, NaN, a list) left out, as if the rank had not written it. None: no rank."""
    if not isinstance(state, dict) or type(state.get("rank")) is not int or state["rank"] < 0:
        return None
    out = {"rank": state["rank"]}
    out.update((key, state[key]) for key in NUMBERS if _finite(state.get(key)))
    out.update((key, state[key]) for key in WORDS if type(state.get(key)) is str)
    if not 0 < out.get("interval", 2.0) <= MAX_INTERVAL_S:  # waits are sized by it: a recorder's, or none
        del out["interval"]
    return out


def read(folder: str, run: str | None = None, since: float | None = None) -> list[dict]:
    """The ranks' states (their ``rank-N.json``), by rank, each :func:`clean`; files that cannot be
    read (or are no regular file) are skipped, and so are the files of an earlier run in the same
    folder (a requeue, ``bash job.sh`` again): another ``run`` id (:func:`hpcdist.progress.run_id`),
    or, a rank without one, started before ``since`` (this run's start, with 2 s for the clocks)."""
    ranks = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        if name.startswith("rank-") and name.endswith(".json"):
            text = read_small(os.path.join(folder, name))
            try:
                state = clean(json.loads(text)) if text is not None else None
            except (ValueError, RecursionError):
                state = None
            if state is not None and this_run(state, run, since):
                ranks.append(state)
    return sorted(ranks, key=lambda r: r["rank"])


def this_run(state: dict, run: str | None, since: float | None) -> bool:
    """Where the reader knows no run (``hpcdist monitor`` by hand, an older monitor), every file is."""
    if not run:
        return True
    if state.get("run"):
        return state["run"] == run
    return since is None or state.get("started", since) >= since - 2


class View:
    """The job at one moment: :attr:`ranks` (each with ``since``, seconds since its last step or its
    start, and ``silent``, seconds since it last wrote), :attr:`median_rate`, :attr:`slowest`,
    :attr:`hung` (a line, or None), :attr:`stalled_s` and :attr:`not_answering`."""

    def __init__(self, ranks: list[dict], now: float, floor: float, factor: float, ended: bool = False):
        self.ranks, self.now, self.ended = ranks, now, ended
        for r in ranks:
            r["since"] = now - (r.get("last_step") or r.get("started") or now)
            r["silent"] = now - r.get("written", now)
        live = [r for r in ranks if r.get("phase") not in ("finished", "failed")]
        # While the job runs a rank that has finished steps no more; once it has ended, every
        # rank's last figures are the run's (watch --json and the report after the end).
        measured = ranks if ended else live
        rates = [r["rate"] for r in measured if r.get("rate") is not None]
        self.median_rate = statistics.median(rates) if rates else 0.0
        # A job that has ended: no rank answers any more, and none is to.
        self.not_answering = [] if ended else [
            r for r in live if r["silent"] > max(5.0, SILENT_INTERVALS * r.get("interval", 2.0))]
        self._silent = {id(r) for r in self.not_answering}  # one look-up per rank, not a list searched
        # A rank that does not answer is no straggler: its figures are as old as its file.
        answering = [r for r in measured if r.get("step") and id(r) not in self._silent]
        works = [r["work"] for r in answering if r.get("work") is not None]
        self.median_work = statistics.median(works) if works else None
        self.slowest = [r for r in answering if self._trails(r, factor)]
        self.slowest.sort(key=lambda r: -self.slowness(r))
        self.finished = bool(ranks) and not live
        stepped = [r["last_step"] for r in ranks if r.get("last_step")]
        self.stalled_s = now - max(stepped) if stepped else 0.0
        #: How old the ranks' files may be and still be on time (each rank's age, at most its
        #: interval): a healthy rank's last step is that old in its file. A stall is counted
        #: from what the files show, so a hang is named (and ended) that much later, never a
        #: healthy job that writes less often than the threshold.
        self.lag_s = max((min(max(0.0, r["silent"]), r.get("interval", 2.0)) for r in live), default=0.0)
        step_time = 1 / self.median_rate if self.median_rate else 0.0
        self.threshold_s = max(HANG_MULTIPLE * step_time, floor)
        self.checkpointing = [r["rank"] for r in live if r.get("phase") == "checkpointing"]
        #: No step for long, and nothing that explains it: stalled_beyond() holds for any time.
        self.stuck = bool(live and stepped and not self.checkpointing and not ended)
        self.hung = None
        if self.stalled_beyond(self.threshold_s):
            why = (f"{HANG_MULTIPLE}x the recent step time {step_words(step_time)}, floor {floor:.0f} s" if step_time
                   else f"the floor {floor:.0f} s; no step time measured yet")
            self.hung = (f"looks hung: no rank has made a step for {self.stalled_s:.0f} s (threshold "
                         f"{self.threshold_s:.0f} s: {why})")
            if self.not_answering:
                self.hung += "; " + silent_line(self.not_answering)

    def is_silent(self, r: dict) -> bool:
        """``r`` is one of :attr:`not_answering`."""
        return id(r) in self._silent

    def stalled_beyond(self, seconds: float) -> bool:
        """No rank has made a step for ``seconds`` as far as the files show (:attr:`lag_s`
        allowed for), none checkpoints, and some have not finished."""
        return self.stuck and self.stalled_s - self.lag_s >= seconds

    def _trails(self, r: dict, factor: float) -> bool:
        """Fewer steps per second than the median by ``factor``, or (synchronous training, where
        every rank steps together) more work per step outside the collectives by ``factor`` and
        by 5 ms at least."""
        if self.median_rate > 0 and r.get("rate") is not None and r["rate"] * factor < self.median_rate:
            return True
        work = r.get("work")
        return bool(work is not None and self.median_work is not None and work > factor * self.median_work
                    and work - self.median_work > 0.005)

    def slowness(self, r: dict) -> float:
        """How many times slower than the median ``r`` is, by the measure that says it trails."""
        by_rate = self.median_rate / r["rate"] if r.get("rate") else float("inf")
        by_work = r["work"] / self.median_work if r.get("work") and self.median_work else 1.0
        return max(by_rate if self._slow_rate(r) else 1.0, by_work)

    def _slow_rate(self, r: dict) -> bool:
        return self.median_rate > 0 and r.get("rate") is not None and r["rate"] * STRAGGLER_FACTOR < self.median_rate

    def trailing(self, r: dict) -> str:
        """How ``r`` trails the median, in a few words."""
        if self._slow_rate(r):
            return (f"{r.get('rate', 0):.2f} steps/s, {r.get('rate', 0) / self.median_rate:.2f}x the median "
                    f"{self.median_rate:.2f} steps/s")
        return (f"{r['work'] * 1000:.0f} ms of its own work per step, {self.slowness(r):.1f}x the median "
                f"{self.median_work * 1000:.0f} ms (the others wait for it in their collectives)")

    def straggler_line(self, r: dict) -> str:
        return f"straggler: rank {r['rank']} on {r.get('node', '?')}: {self.trailing(r)} (step {r.get('step', 0)})"

    def summary(self) -> dict:
        """The few figures ``hpcdist status`` shows (and ``--json`` gives)."""
        steps = [r.get("step", 0) for r in self.ranks]
        return {"ranks": len(self.ranks), "step_min": min(steps, default=0), "step_max": max(steps, default=0),
                "median_rate": round(self.median_rate, 3), "stalled_s": round(self.stalled_s, 1),
                "hung": self.hung, "slowest": [r["rank"] for r in self.slowest],
                "not_answering": [r["rank"] for r in self.not_answering]}


def step_words(seconds: float) -> str:
    """A step time as read: ``0.06 s``, or ``4.0 ms`` below 10 ms (never ``0.00 s``)."""
    return f"{seconds:.2f} s" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


#: The silent ranks named one by one in a line; the others by their numbers.
NAMED_SILENT = 8
#: What a silent rank's process state (/proc, on its own node) says.
PROCESS_STATES = {"R": "busy: running but not writing, as in a long call that holds the GIL",
                  "S": "sleeping, its progress not written: a full disk, or a file system that refuses writes?",
                  "D": "waiting on a disk or file system that does not answer",
                  "T": "stopped", "t": "stopped by a debugger", "Z": "its process is gone"}
#: Where the state cannot be read: another node's rank.
ELSEWHERE = "busy, stopped or gone"
_boot_time: list = []


def process_state(r: dict) -> str:
    """Why rank ``r`` does not answer, from its process's state where this host can read it (its
    own node: R, S, D, T), else :data:`ELSEWHERE`. A pid whose process started after the rank is
    another process: the rank's is gone."""
    pid = r.get("pid")
    if r.get("node") != os.uname().nodename or type(pid) is not int or pid < 1:
        return ELSEWHERE
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        if not _boot_time:
            with open("/proc/stat") as f:
                _boot_time.append(next(int(line.split()[1]) for line in f if line.startswith("btime ")))
        started = _boot_time[0] + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except FileNotFoundError:
        return "its process is gone"
    except (OSError, ValueError, IndexError, StopIteration):
        return ELSEWHERE
    if r.get("started") is not None and started > r["started"] + 2:
        return "its process is gone"
    return PROCESS_STATES.get(fields[0], ELSEWHERE)


def silent_line(ranks: list[dict]) -> str:
    """The silent ranks, each with its process's state where this host can read it, the others
    (another node's) ending the line with :data:`ELSEWHERE`."""
    parts, unknown = [], len(ranks) > NAMED_SILENT
    for r in ranks[:NAMED_SILENT]:
        state = process_state(r)
        unknown = unknown or state == ELSEWHERE
        parts.append(f"rank {r['rank']} on {r.get('node', '?')} (pid {r.get('pid', '?')}) has not answered for "
                     f"{r['silent']:.0f} s" + (f" ({state})" if state != ELSEWHERE else ""))
    named = ", ".join(parts)
    if len(ranks) > NAMED_SILENT:
        more = ranks[NAMED_SILENT:]
        named += (f", and {len(more)} more (ranks {ranges([r['rank'] for r in more])}) for "
                  f"{min(r['silent'] for r in more):.0f} s or more")
    return named + (f" ({ELSEWHERE})" if unknown else "")


def not_answering_words(ranks: list[dict]) -> str:
    """The silent ranks in a few words, for the cause of a job's end: ``rank 3 on node2 not
    answering (stopped)``."""
    words = [f"rank {r['rank']} on {r.get('node', '?')} not answering ({process_state(r)})"
             for r in ranks[:NAMED_SILENT]]
    if len(ranks) > NAMED_SILENT:
        words.append(f"and {len(ranks) - NAMED_SILENT} more")
    return ", ".join(words)


#: Where a rank waits before its first step, by its phase.
WAITS = {"starting": "still starting (before init_distributed)", "rendezvous": "in the rendezvous (init_distributed)"}


def not_started(ranks: list[dict]) -> list[str]:
    """Before any rank's first step: which ranks have not reached it and where they wait
    (``ranks 0-2 in rendezvous``; ``rank 3 has not started``, from the world size the others say)."""
    by_phase: dict[str, list[int]] = {}
    for r in ranks:
        if not r.get("step"):
            by_phase.setdefault(r.get("phase", "?"), []).append(r["rank"])
    world = max((r.get("world", 0) for r in ranks), default=0)
    missing = sorted(set(range(int(world))) - {r["rank"] for r in ranks}) if world <= 1 << 20 else []
    out = [f"{'rank' if len(members) == 1 else 'ranks'} {ranges(members)} {WAITS.get(phase, 'in ' + phase)}"
           for phase, members in sorted(by_phase.items(), key=lambda g: g[1][0])]
    if missing:
        out.append(f"{'rank' if len(missing) == 1 else 'ranks'} {ranges(missing)} never started (no progress file)")
    return out or ["no rank has started (no progress file)"]


def seconds(flag: str, value, least: float, most: float, what: str, example: str, above: bool = False) -> float:
    """``value`` (a number, or the text of one) as seconds within ``least`` (or above it) and
    ``most``; ValueError with the one line that names the flag, the value and the fix."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (number > least if above else number >= least) or not number <= most:  # NaN fails both
        text = f"{value:g}" if isinstance(value, float) else value
        low = f"above {least:g}" if above else f"{least:g} or more"
        raise ValueError(f"{flag} {text}: expected {what}, {low} and at most {most:g} (as {flag} {example})")
    return number


def floor_for(floor_s: float | None, timeout_s: float | None) -> float:
    """The hang floor of a job with ``--hang-floor`` and ``--hang-timeout`` (None: not given): a
    timeout below the floor is the floor (a job is called hung before it is ended)."""
    floor = HANG_FLOOR_S if floor_s is None else floor_s
    return min(floor, timeout_s) if timeout_s is not None else floor


def analyse(ranks: list[dict], now: float | None = None, floor: float = HANG_FLOOR_S,
            factor: float = STRAGGLER_FACTOR, ended: bool = False) -> View:
    """The view of ``ranks``; ``ended``: of a job that has ended (no rank is silent or hung then)."""
    return View(ranks, time.time() if now is None else now, floor, factor, ended)


# -- Stacks -------------------------------------------------------------------------------------

def request_stacks(folder: str, ranks: list[int], wait_s: float) -> dict[int, list[str] | None]:
    """Ask every rank for its stack (the control file) and wait up to ``wait_s`` for the answers:
    rank -> its frames (``FILE:LINE FUNCTION``, outermost first), None where no answer came.

    Two requests at once (the monitor's and a user's): a rank answers the one it reads last, so an
    answer to a request made after this one (one that replaced it in the control file) is as
    fresh, and taken."""
    number = time.time_ns()
    request = os.path.join(folder, STACKS_REQUEST)
    temporary = os.path.join(folder, f".{STACKS_REQUEST}.{os.uname().nodename}.{os.getpid()}.{number}")
    try:
        with open(temporary, "w") as f:
            f.write(f"{number}\n")
        os.replace(temporary, request)
    except OSError:  # a full disk: no request, and no empty file left behind
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    fresh = {number}  # the requests this one's answers may answer
    answers: dict[int, list[str] | None] = {rank: None for rank in ranks}
    waiting = list(answers)
    deadline = time.time() + wait_s
    while True:
        current = (read_small(request, 64) or "").strip()
        if current.isdigit():
            fresh.add(int(current))
        still = []
        for rank in waiting:
            text = read_small(stacks_file(folder, rank), MAX_STACK_BYTES)
            first, _, rest = (text or "").partition("\n")
            answered = first.removeprefix("request ")
            if text is not None and answered != first and answered.isdigit() and int(answered) in fresh:
                answers[rank] = rest.splitlines()
            else:
                still.append(rank)
        waiting = still
        if not waiting or time.time() >= deadline:
            return answers
        time.sleep(0.2)


def _is_library(path: str) -> bool:
    return any(part in path for part in ("site-packages", "dist-packages", "/lib/python", os.sep + "hpcdist" + os.sep))


def where(frames: list[str]) -> str:
    """A stack in a few words: the innermost function, and the innermost line of the user's own code."""
    if not frames:
        return "no Python frame (outside Python code)"
    inner_file, _, inner_function = frames[-1].rpartition(" ")
    own = next((f.rpartition(" ")[0] for f in reversed(frames) if not _is_library(f.rpartition(" ")[0])), inner_file)
    path, _, line = own.rpartition(":")
    return f"in {inner_function} at {os.path.basename(path)}:{line}"


def ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 4]`` as ``0-2,4``."""
    out, numbers = [], sorted(numbers)
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(out)


def group_stacks(answers: dict[int, list[str] | None]) -> list[str]:
    """One line per distinct stack, the largest group first, then the ranks that gave none; each
    group's full stack (innermost last) under its line."""
    groups: dict[tuple, list[int]] = {}
    for rank, frames in answers.items():
        if frames is not None:
            groups.setdefault(tuple(frames), []).append(rank)
    lines = []
    for frames, members in sorted(groups.items(), key=lambda g: (-len(g[1]), g[1][0])):
        label = "rank" if len(members) == 1 else "ranks"
        lines.append(f"{label} {ranges(members)} {where(list(frames))}")
        lines += [f"    {frame}" for frame in frames[-8:]]
    silent = [rank for rank, frames in answers.items() if frames is None]
    if silent:
        lines.append(f"{'rank' if len(silent) == 1 else 'ranks'} {ranges(silent)}: no answer (stopped, or gone)")
    return lines


def end_line(ranks: list[dict]) -> str | None:
    """The job's step rate and its slowest rank, from each rank's first step to its last (the
    end of ``hpcdist logs`` and ``--wait``); None where no rank made a step."""
    rates = {r["rank"]: (r["step"] - 1) / (r["last_step"] - r["first_step"]) for r in ranks
             if r.get("step", 0) > 1 and r.get("first_step") and r.get("last_step", 0) > r["first_step"]}
    if not rates:
        return None
    # In synchronous training every rank steps together: the slowest is the one with the most
    # work of its own per step (the others wait for it), where that was measured.
    # A rank is named only where it trails the median as watch says it (STRAGGLER_FACTOR).
    works = {r["rank"]: r["work"] for r in ranks if r.get("work") is not None}
    median_rate = statistics.median(rates.values())
    median_work = statistics.median(works.values()) if works else 0
    slowest = max(works, key=works.get) if works else min(rates, key=rates.get)
    trails = (slowest in works and works[slowest] > STRAGGLER_FACTOR * median_work
              and works[slowest] - median_work > 0.005) or (
              slowest in rates and rates[slowest] * STRAGGLER_FACTOR < median_rate)
    steps = [r.get("step", 0) for r in ranks]
    head = (f"hpcdist: progress: {len(ranks)} rank(s), {min(steps)}-{max(steps)} steps, "
            f"{median_rate:.2f} steps/s (the median rank); slowest: ")
    if not trails:
        return head + "none trails the median"
    node = next(r.get("node", "?") for r in ranks if r["rank"] == slowest)
    work = (f", {works[slowest] * 1000:.0f} ms of its own work per step "
            f"(median {median_work * 1000:.0f} ms)") if works else ""
    rate = f"{rates[slowest]:.2f} steps/s" if slowest in rates else "no step rate"
    return f"{head}rank {slowest} on {node} at {rate}{work}"
