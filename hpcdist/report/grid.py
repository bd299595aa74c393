"""The heat map's grid, from the monitor's timeline (:mod:`hpcdist.progress.timeline`): ranks by
node against time, each cell one interval between two of the monitor's looks.

Where it runs: the login node or a laptop (``hpcdist report``). A cell is the rank's own work per
step in that interval (ms, outside the collectives: in synchronous training every rank steps at
the slowest one's rate, and the straggler is the one with the most work of its own), where the
ranks measured it; else its step time (the interval's seconds over its steps, in ms). A rank that
made no step in the interval has no value (drawn grey): a hang is a grey band across every rank.

The marks (stragglers, hangs, stopped ranks, restarts, the end) need nothing but Python: a page
without matplotlib says them in words. The cells' values need numpy (the ``report`` extra), and
are worked out only where the figure is drawn.
"""

from __future__ import annotations

WORK = "own work per step (ms)"
STEP = "step time (ms)"


def stopped(data: dict) -> list[int]:
    """The ranks that stopped answering, as ``watch --json`` names them: in a job hpcdist ended
    for a hang, those its cause names (``stopped``); in one that runs, ``not_answering``."""
    snap = data["watch"]
    return sorted(snap.get("stopped") or snap.get("not_answering") or [])


def build(data: dict, values: bool = True) -> dict | None:
    """``{"rows": [(rank, node)], "edges": [s], "values": [[ms or nan]], "measure",
    "slow": [(s, row)], "hung": [(from s, to s)], "lines": [(s, label)],
    "stopped": [(row, its last step's s or None)]}``; None with fewer than two looks.
    ``values`` False: no "values" (and no numpy)."""
    looks = data["timeline"]
    if len(looks) < 2:
        return None
    nodes = {r["rank"]: r.get("node", "?") for r in data["watch"]["ranks"]}
    ranks = sorted({rank for look in looks for rank in look["rank"]} | set(nodes),
                   key=lambda rank: (nodes.get(rank, "?"), rank))
    row_of = {rank: k for k, rank in enumerate(ranks)}
    origin = data.get("run_started") or looks[0]["t"]
    edges = [look["t"] - origin for look in looks]
    measured = any(w is not None for look in looks for w in look["work"])
    slow = [(edges[col], row_of[rank]) for col, look in enumerate(looks) if col
            for rank in look.get("slow", []) if rank in row_of]
    last_steps = {r["rank"]: r.get("last_step") for r in data["watch"]["ranks"]}
    halted = [(row_of[rank], last_steps[rank] - origin
               if type(last_steps.get(rank)) in (int, float) else None)
              for rank in stopped(data) if rank in row_of]
    grid = {"rows": [(rank, nodes.get(rank, "?")) for rank in ranks], "edges": edges,
            "measure": WORK if measured else STEP, "slow": slow, "stopped": halted,
            "hung": _spans([look.get("hung") for look in looks], edges),
            "lines": _lines(data, origin)}
    if values:
        grid["values"] = _values(looks, row_of, edges, measured)
    return grid


def _values(looks: list, row_of: dict, edges: list, measured: bool) -> list:
    """Each rank's cells: its own work per step where measured, else its step time (ms); NaN where
    it made no step in the interval."""
    import numpy as np

    steps = np.full((len(row_of), len(looks)), np.nan)
    work = np.full((len(row_of), len(looks)), np.nan)
    for col, look in enumerate(looks):
        where = [row_of[rank] for rank in look["rank"]]
        steps[where, col] = look["step"]
        done = [(row_of[rank], w) for rank, w in zip(look["rank"], look["work"]) if w is not None]
        if done:
            rows, found = zip(*done)
            work[list(rows), col] = found
    made = np.diff(steps, axis=1)
    seconds = np.diff(np.array(edges))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = work[:, 1:] if measured else 1000 * seconds[None, :] / made
    return np.where(made > 0, values, np.nan).tolist()


def _spans(flags: list, edges: list) -> list:
    """The times the looks found the job hung, as (from, to) spans."""
    spans, start = [], None
    for flag, t in zip(flags + [False], edges + [edges[-1]]):
        if flag and start is None:
            start = t
        elif not flag and start is not None:
            spans.append((start, t))
            start = None
    return spans


def _lines(data: dict, origin: float) -> list:
    """Each restart of the launch, and the end where hpcdist ended the job, as (s, label)."""
    out = [(r["time"] - origin, f"restart {r.get('restart', '?')}") for r in data.get("restarts", [])
           if type(r.get("time")) in (int, float)]
    ended = data.get("ended_by") or {}
    if type(ended.get("time")) in (int, float):
        out.append((ended["time"] - origin, f"ended by --{ended.get('by', '?')}"))
    return out
