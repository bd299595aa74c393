"""Each rank's steps over the whole run: ``timeline.jsonl`` in the job's progress folder.

Where it runs: written by the job's monitor (:mod:`hpcdist.progress.monitor`, on the first node),
one line per look at the ranks; read on the login node or a laptop by ``hpcdist report``
(:mod:`hpcdist.report`), whose heat map is drawn from it.

The ranks' own files hold their state now, not their past (:mod:`hpcdist.progress`): the monitor
already reads them all every few seconds, so it keeps what it saw. A line: ``t`` (the look's
time), ``run`` (:func:`hpcdist.progress.run_id`), and per rank, in the same order, ``rank``,
``step``, ``work`` (its own work per step in ms, outside the collectives; null where not
measured), ``slow`` (the ranks the look named stragglers, as ``watch`` does) and ``hung`` (the
look found the job hung). The file stays small at any length of run: past :data:`MOST_LINES`
lines of a run, every other line is dropped and the lines come half as often, so a run of days
has as many lines as one of minutes (about 14 KB a line at 1,024 ranks: 6 MB at most).
"""

from __future__ import annotations

import json
import os

TIMELINE = "timeline.jsonl"
#: The most lines kept of one run before they are thinned to half.
MOST_LINES = 400


def line(view, run: str | None) -> str:
    """One look (a :class:`hpcdist.progress.watch.View`) as the file's line."""
    ranks = sorted(view.ranks, key=lambda r: r["rank"])
    work = [round(r["work"] * 1000, 2) if r.get("work") is not None else None for r in ranks]
    return json.dumps({"t": round(view.now, 3), "run": run, "rank": [r["rank"] for r in ranks],
                       "step": [r.get("step", 0) for r in ranks], "work": work,
                       "slow": [r["rank"] for r in view.slowest], "hung": bool(view.hung)},
                      separators=(",", ":")) + "\n"


class Writer:
    """The monitor's side: :meth:`add` each look; a line at most every :attr:`every` seconds."""

    def __init__(self, folder: str, run: str | None, every: float):
        self.path, self.run, self.every = os.path.join(folder, TIMELINE), run, every
        self.last, self.count = 0.0, 0

    def add(self, view) -> None:
        if not view.ranks or view.now - self.last < self.every:
            return
        self.last = view.now
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line(view, self.run))
            self.count += 1
            if self.count >= MOST_LINES:
                self._thin()
        except OSError:  # a full disk: the picture has a gap, the monitor goes on
            pass

    def _thin(self) -> None:
        """Every other line of this run dropped (another run's kept whole), the lines half as often."""
        with open(self.path, encoding="utf-8") as f:
            lines = f.readlines()
        kept, mine = [], 0
        for text in lines:
            if f'"run":{json.dumps(self.run)},' in text:
                mine += 1
                if mine % 2:
                    continue
            kept.append(text)
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.writelines(kept)
        os.replace(temporary, self.path)
        self.count, self.every = mine // 2, self.every * 2


def read(folder: str, run: str | None = None) -> list[dict]:
    """The looks of ``run`` (every run's where None), oldest first; a line cut short is skipped."""
    found = []
    try:
        with open(os.path.join(folder, TIMELINE), encoding="utf-8") as f:
            for text in f:
                try:
                    look = json.loads(text)
                except ValueError:
                    continue
                if isinstance(look, dict) and (run is None or look.get("run") == run) and _whole(look):
                    found.append(look)
    except OSError:
        pass
    return found


def _whole(look: dict) -> bool:
    """A line with its time and the three lists of one length."""
    ranks = look.get("rank")
    return (type(look.get("t")) in (int, float) and isinstance(ranks, list)
            and all(isinstance(look.get(k), list) and len(look[k]) == len(ranks) for k in ("step", "work")))
