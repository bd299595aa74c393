"""The heat map's grid, from the monitor's timeline (:mod:`hpcdist.progress.timeline`): ranks by
node against time, each cell one interval between two of the monitor's looks.

Where it runs: the login node or a laptop (``hpcdist report``). A cell is the rank's own work per
step in that interval (ms, outside the collectives: in synchronous training every rank steps at
the slowest one's rate, and the straggler is the one with the most work of its own), where the
ranks measured it; else its step time (the interval's seconds over its steps, in ms). A rank that
made no step in the interval has no value (drawn grey): a hang is a grey band across every rank.
"""

from __future__ import annotations

WORK = "own work per step (ms)"
STEP = "step time (ms)"


def build(data: dict) -> dict | None:
    """``{"rows": [(rank, node)], "edges": [s], "values": [[ms or nan]], "measure", "slow": [(s, row)],
    "hung": [(from s, to s)], "lines": [(s, label)]}``; None with fewer than two looks."""
    import numpy as np

    looks = data["timeline"]
    if len(looks) < 2:
        return None
    nodes = {r["rank"]: r.get("node", "?") for r in data["watch"]["ranks"]}
    ranks = sorted({rank for look in looks for rank in look["rank"]} | set(nodes),
                   key=lambda rank: (nodes.get(rank, "?"), rank))
    row_of = {rank: k for k, rank in enumerate(ranks)}
    origin = data.get("run_started") or looks[0]["t"]
    edges = [look["t"] - origin for look in looks]
    steps = np.full((len(ranks), len(looks)), np.nan)
    work = np.full((len(ranks), len(looks)), np.nan)
    measured = False
    for col, look in enumerate(looks):
        where = [row_of[rank] for rank in look["rank"]]
        steps[where, col] = look["step"]
        done = [(row_of[rank], w) for rank, w in zip(look["rank"], look["work"]) if w is not None]
        if done:
            measured = True
            rows, values = zip(*done)
            work[list(rows), col] = values
    made = np.diff(steps, axis=1)
    seconds = np.diff(np.array(edges))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = work[:, 1:] if measured else 1000 * seconds[None, :] / made
    values = np.where(made > 0, values, np.nan)
    slow = [(edges[col], row_of[rank]) for col, look in enumerate(looks) if col for rank in look.get("slow", [])
            if rank in row_of]
    return {"rows": [(rank, nodes.get(rank, "?")) for rank in ranks], "edges": edges,
            "values": values.tolist(), "measure": WORK if measured else STEP, "slow": slow,
            "hung": _spans([look.get("hung") for look in looks], edges), "lines": _lines(data, origin)}


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
