"""Where the start-up went: from the job's start to the first step, per node.

Where it runs: the job's monitor (on the first node: the lines at the end of the log, and
``summary.json``'s ``startup`` for ``hpcdist status --json``), ``hpcdist watch`` (login node);
:func:`record_setup` in the job's set-up (``hpcdist job-setup``, once per job).

From what the job records in its progress folder, nothing else:

- ``setup.json`` (:func:`record_setup`): when the batch shell started (the job's start, from
  /proc) and when the set-up ended;
- ``stage-HOST.json`` (:mod:`hpcdist.injob.stage`, ``--stage-env``): when each node's staging ended
  (``stage-broadcast.json``: Slurm's sbcast);
- ``rank-N.json`` (:mod:`hpcdist.progress`): each rank's process start (``proc_started``), the
  recorder's start once ``python -m hpcdist.rank`` has imported (``started``), the rendezvous
  (``rdzv_started``, ``rdzv_ended``: ``hpcdist.env.init_distributed``) and the first step.

Each node's segments follow one another, so they add up to its total: set-up (the job's, before
any node is asked for anything), staging (this node's copy and unpack, or its image's copy; from
the set-up's end), launcher (from there to the node's rank process start: the launcher's own start,
the image's mount, and the wait for the other nodes' staging), rank start (python and hpcdist),
imports (the script's, up to ``init_distributed``), rendezvous, first step (from the rendezvous to
the first step's end). A node's figures are those of its rank that stepped last. The slowest
node is the one whose first step came last. Cheap to import: os (json where records are read).
"""

import os

from hpcdist.progress import process_start

SETUP = "setup.json"
#: The columns, in order: (key, heading).
SEGMENTS = (("setup", "set-up"), ("staging", "staging"), ("launcher", "launcher"), ("rank_start", "rank start"),
            ("imports", "imports"), ("rendezvous", "rendezvous"), ("first_step", "first step"))
#: The most nodes the log lists one by one: past it, the slowest ones and the median node.
LISTED = 8


def record_setup(environ, now: float, shell_pid: int, run: str | None) -> None:
    """``setup.json`` in the job's progress folder: the batch shell's start and the set-up's end
    (``run``: the run folder's name, :func:`hpcdist.progress.run_id`)."""
    folder = environ.get("HPCDIST_PROGRESS_DIR")
    if not folder:
        return
    from hpcdist.progress import _json, _replace

    try:
        os.makedirs(folder, 0o700, exist_ok=True)
    except OSError:
        return
    _replace(os.path.join(folder, SETUP), _json({"job_started": process_start(shell_pid), "setup_ended": now,
                                                "run": run}))


def _load(path: str):
    import json  # where records are read, not at import

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def records(folder: str, run: str | None = None) -> dict:
    """``{"setup": ..., "stage": {node: record}, "broadcast": ...}`` of this run."""
    found = {"setup": None, "stage": {}, "broadcast": None}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        if not (name.startswith("stage-") or name == SETUP) or not name.endswith(".json"):
            continue
        data = _load(os.path.join(folder, name))
        if data is None or run and data.get("run") not in (None, run):
            continue
        if name == SETUP:
            found["setup"] = data
        elif name == "stage-broadcast.json":
            found["broadcast"] = data
        elif isinstance(data.get("node"), str):
            found["stage"][data["node"]] = data
    return found


def _number(value):
    return value if type(value) in (int, float) else None


def _span(end, start):
    return round(end - start, 2) if end is not None and start is not None else None


def breakdown(ranks: list[dict], found: dict, job_started: float | None = None) -> dict | None:
    """The start-up, per node: ``{"total_s", "slowest_node", "complete", "nodes": {node: {segment: s}}}``;
    None before anything is known. ``complete``: every rank recorded has made its first step."""
    setup = found.get("setup") or {}
    start = _number(setup.get("job_started")) or job_started
    setup_end = _number(setup.get("setup_ended"))
    if start is None:
        return None
    by_node: dict[str, list[dict]] = {}
    for r in ranks:
        by_node.setdefault(r.get("node", "?"), []).append(r)
    for node in found.get("stage", {}):
        by_node.setdefault(node, [])
    nodes, raw = {}, {}
    for node, node_ranks in sorted(by_node.items()):
        stage = found.get("stage", {}).get(node) or {}
        stage_end = _number(stage.get("ended"))
        stepped = [r for r in node_ranks if _number(r.get("first_step")) is not None]
        last = max(stepped, key=lambda r: r["first_step"]) if stepped and len(stepped) == len(node_ranks) else None
        r = last or (max(node_ranks, key=lambda r: r.get("started") or 0) if node_ranks else {})
        proc, begun = _number(r.get("proc_started")), _number(r.get("started"))
        rdzv, rdzv_end, first = (_number(r.get("rdzv_started")), _number(r.get("rdzv_ended")),
                                 _number(r.get("first_step")))
        before_launch = stage_end if stage_end is not None else setup_end
        row = {"setup": _span(setup_end, start), "staging": _span(stage_end, setup_end),
               "launcher": _span(proc, before_launch), "rank_start": _span(begun, proc),
               "imports": _span(rdzv, begun) if rdzv is not None else None,
               "rendezvous": _span(rdzv_end, rdzv) if rdzv is not None else None,
               "first_step": _span(first, rdzv_end if rdzv_end is not None else begun) if last else None,
               "total": _span(first, start) if last else None}
        if row["launcher"] is None and row["rank_start"] is None and begun is not None:
            row["launcher"] = _span(begun, before_launch)  # no process start known: launcher and rank start as one
        if stage:
            row["staging_detail"] = {"unpack_s": _span(_number(stage.get("ended")), _number(stage.get("started"))),
                                     "bytes": _number(stage.get("bytes")),
                                     "how": stage.get("how") if stage.get("how") in ("image", "tar") else None}
        nodes[node] = row
        if last:
            raw[node] = first  # the slowest by the clock, not by its rounded total
    slowest = max(raw, key=raw.get) if raw else None
    totals = {n: nodes[n]["total"] for n in raw}
    complete = bool(ranks) and all(_number(r.get("first_step")) is not None for r in ranks)
    result = {"total_s": totals[slowest] if slowest else None, "slowest_node": slowest, "complete": complete,
              "nodes": nodes}
    if found.get("broadcast"):
        b = found["broadcast"]
        result["broadcast_s"] = _span(_number(b.get("ended")), _number(b.get("started")))
    return result


def of_folder(folder: str, run: str | None, ranks: list[dict], job_started: float | None = None) -> dict | None:
    return breakdown(ranks, records(folder, run), job_started)


def _cell(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def lines(result: dict | None) -> list[str]:
    """The breakdown as the log and ``watch`` show it: a line with the total and the slowest node,
    then a table of seconds, one row per node (the slowest :data:`LISTED` and the median past that)."""
    if not result or not result["nodes"]:
        return []
    nodes = result["nodes"]
    shown_total = _cell(result["total_s"])
    alike = [n for n, row in nodes.items()
             if row["total"] is not None and _cell(row["total"]) == shown_total]
    if result["slowest_node"] and len(alike) > 1:  # none slower than another as shown: none named
        head = (f"start-up: {result['total_s']:.1f} s from the job's start to the first step; "
                f"{len(alike)} nodes alike, none the slowest")
    elif result["slowest_node"]:
        head = (f"start-up: {result['total_s']:.1f} s from the job's start to the first step; slowest node: "
                f"{result['slowest_node']}")
    else:
        head = "start-up so far (no node has made its first step yet)"
    if result.get("broadcast_s") is not None:
        head += f"; the broadcast (sbcast) took {result['broadcast_s']:.1f} s"
    width = max(8, *(len(n) for n in nodes))
    table = [f"{'node':<{width}} " + " ".join(f"{h:>10}" for _, h in SEGMENTS) + f" {'total':>8}"]
    order = sorted(nodes, key=lambda n: (nodes[n]["total"] is None, -(nodes[n]["total"] or 0), n))
    shown = sorted(nodes) if len(nodes) <= LISTED else order[:LISTED]
    for n in shown:
        row = nodes[n]
        table.append(f"{n:<{width}} " + " ".join(f"{_cell(row[k]):>10}" for k, _ in SEGMENTS)
                     + f" {_cell(row['total']):>8}")
    if len(nodes) > LISTED:
        known = sorted(row["total"] for row in nodes.values() if row["total"] is not None)
        median = f"{known[len(known) // 2]:.1f} s" if known else "-"
        table.append(f"(the {LISTED} slowest of {len(nodes)} nodes; the median node's total: {median})")
    return [head] + ["  " + line for line in table]
