"""The report's HTML: one file, its figures inline (SVG), no script and nothing fetched.

Where it runs: the login node or a laptop (``hpcdist report``). Each figure stands beside a
table with its numbers and the words that explain its marks, so the page reads without the
figures (a browser without SVG, a screen reader, ``grep``). Cells that hold a number the
``status --json`` or ``watch --json`` of the job gives carry its key (``data-key``).
"""

from __future__ import annotations

import time
from html import escape

STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:left}td.n{text-align:right}.pair{display:flex;gap:1.5em;align-items:flex-start;flex-wrap:wrap}
.figure svg{max-width:100%;height:auto}.notes{max-width:420px}.bad{color:#b00020;font-weight:bold}
.wide{max-height:30em;overflow:auto}"""


def _cell(value, key: str | None = None, number: bool = False, bad: bool = False) -> str:
    kind = " ".join(name for name, on in (("n", number), ("bad", bad)) if on)
    attrs = (f' data-key="{escape(key)}"' if key else "") + (f' class="{kind}"' if kind else "")
    return f"<td{attrs}>{'' if value is None else escape(str(value))}</td>"


def _when(epoch) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if type(epoch) in (int, float) else None


def _table(head: list[str], rows: list[str], wide: bool = False) -> str:
    table = ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
             + "".join(f"<tr>{row}</tr>" for row in rows) + "</table>")
    return f'<div class="wide">{table}</div>' if wide else table


def page(title: str, sections: list[str]) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>\n" + "\n".join(sections)
            + f"\n<p><small>hpcdist report, written {escape(_when(time.time()) or '')}</small></p></body></html>\n")


def figure(svg: str | None, notes: str, left_out: str | None = None) -> str:
    """The figure beside its notes; ``left_out`` (its name in words): matplotlib was not there to
    draw it, said where it would be, with what draws it."""
    from hpcdist.report.figures import INSTALL

    shown = f'<div class="figure">{svg}</div>' if svg else ""
    if left_out:
        shown = (f'<p class="bad">The figure of {escape(left_out)} is left out: matplotlib is '
                 "not installed where this page was written; "
                 f"<code>{escape(INSTALL)}</code> there draws it. The table below has its "
                 "numbers.</p>")
    return f'<div class="pair">{shown}<div class="notes">{notes}</div></div>'


def facts(data: dict) -> str:
    row, snap = data["status"], data["watch"]
    ended = data.get("ended_by") or {}
    lines = [("job", data["job_id"] + (f" subjob {data['index']}" if data.get("index") is not None else ""), None),
             ("name", data["name"], "name"), ("state", row["state"], "state"),
             ("exit code", row["exit_code"], "exit_code"), ("cause", row["reason"], "reason"),
             ("command", data["command"], None), *((h, v, None) for h, v in data["facts"]),
             ("ranks", snap["ranks"] and len(snap["ranks"]), None),
             ("steps", f"{snap['step_min']}-{snap['step_max']}", None),
             ("median steps/s", snap["median_rate"] or None, "median_rate"),  # 0: no step yet
             ("submitted", _when(data.get("submitted_at")), None),
             ("run started", _when(data.get("run_started")), None),
             ("ended", _when(ended.get("time") or data.get("ended_at")), None),
             ("restarts of the launch", len(data.get("restarts") or []) or None, None),
             ("log", row.get("log"), None)]
    rows = [f"<th>{escape(h)}</th>{_cell(v, key)}" for h, v, key in lines if v not in (None, "")]
    said = []
    if ended.get("cause"):
        said.append(f'<p class="bad">hpcdist ended this job: {escape(ended["cause"])}</p>')
    if snap.get("hung"):
        said.append(f'<p class="bad">{escape(snap["hung"])}</p>')
    if data.get("error_line"):
        said.append(f"<p>The last error line in its log: <code>{escape(data['error_line'])}</code></p>")
    elif data.get("log_end"):  # a failed job whose log has no error line: what it does say
        said.append(f"<p>Its log: {escape(data['log_end'])}</p>")
    return "<h2>The job</h2>" + _table([], rows) + "".join(said)


def startup(breakdown: dict | None, svg: str | None, left_out: str | None = None) -> str:
    from hpcdist.progress.startup import SEGMENTS

    if not breakdown or not breakdown.get("nodes"):
        return "<h2>Start-up</h2><p>No start-up recorded (the job's monitor wrote none).</p>"
    nodes = breakdown["nodes"]
    order = sorted(nodes, key=lambda n: (nodes[n].get("total") is None, -(nodes[n].get("total") or 0), n))
    rows = [_cell(n) + "".join(_cell(nodes[n].get(k), f"startup.{k}", True) for k, _ in SEGMENTS)
            + _cell(nodes[n].get("total"), "startup.total", True) for n in order]
    head = (f"{breakdown['total_s']} s from the job's start to the first step; slowest node: "
            f"{breakdown['slowest_node']}" if breakdown.get("slowest_node") else "no node has made its first step")
    bars = "Each bar is one node, the slowest first: its" if svg else "Each node's"
    notes = (f"<p>{escape(head)}.</p><p>{bars} set-up, staging, launcher, rank start, imports, "
             "rendezvous and first step follow one another and add up to its total (seconds).</p>")
    table = _table(["node", *(h for _, h in SEGMENTS), "total"], rows, wide=len(rows) > 20)
    return "<h2>Start-up per node</h2>" + figure(svg, notes, left_out) + table


def steps(data: dict, grid: dict | None, svg: str | None, left_out: str | None = None) -> str:
    """The heat map (or, ``left_out``, where it would be) beside what its marks say, and each
    rank at the job's last look."""
    from hpcdist.report.grid import stopped

    halted = stopped(data)
    ended = (data.get("ended_by") or {}).get("cause")
    notes = _step_notes(data, grid, bool(svg), halted, ended)
    return ("<h2>Steps over the run</h2>" + figure(svg, notes, left_out)
            + "<p>Each rank at the job's last look (as <code>hpcdist watch --json</code> gives "
            "it):</p>"
            + _ranks(data, grid, halted, ended))


def _step_notes(data: dict, grid: dict | None, drawn: bool, halted: list, ended: str | None) -> str:
    """The heat map's marks in words (each named as the figure marks it, where it is drawn)."""
    from hpcdist.progress import watch

    snap = data["watch"]
    notes = []
    if grid is None:
        notes.append("<p>No timeline: the job's monitor recorded fewer than two looks at its ranks "
                     "(a job too short, or submitted by an hpcdist older than its report).</p>")
    elif drawn:
        notes.append("<p>Each row is a rank (by node), each column an interval between two of "
                     "the monitor's looks; the colour is the rank's "
                     f"{escape(grid['measure'])}. Grey: no step in that interval.</p>")
    if halted:
        notes.append(_stopped_note(halted, snap["ranks"], bool(ended), drawn))
    if grid is not None and grid["slow"]:
        ranks = watch.ranges(sorted({grid["rows"][k][0] for _, k in grid["slow"]}))
        notes.append(f"<p>{'Marked x: the' if drawn else 'The'} monitor's looks named rank(s) "
                     f"{escape(ranks)} a straggler (trailing the median by "
                     f"{watch.STRAGGLER_FACTOR}x or more, as <code>hpcdist watch</code> says "
                     "it) at those times.</p>")
    if snap.get("slowest"):
        said = ("trail the median now" if data["status"]["state"] in ("RUNNING", "PENDING")
                else "trailed the median at the job's last look")
        notes.append(f"<p>Rank(s) {escape(watch.ranges(sorted(snap['slowest'])))} {said}.</p>")
    line = watch.end_line(snap["ranks"])
    if line:
        notes.append(f"<p>Over the whole run: {escape(line.removeprefix('hpcdist: progress: '))}.</p>")
    if grid is not None and grid["hung"]:
        spans = ", ".join(f"{a:.0f}-{b:.0f} s" for a, b in grid["hung"])
        shaded = "Shaded: the" if drawn else "The"
        notes.append(f'<p class="bad">{shaded} job looked hung ({spans}): no rank made a step for '
                     f"{watch.HANG_MULTIPLE}x the recent step time (or the hang floor).</p>")
    for r in data.get("restarts") or []:
        notes.append(f"<p>Restart {escape(str(r.get('restart')))} of the launch: "
                     f"{escape(str(r.get('cause')))}</p>")
    if ended:
        lead = "The dashed line" if drawn else "The end"
        notes.append(f'<p class="bad">{lead}: {escape(ended)}.</p>')
    return "".join(notes)


def _stopped_note(halted: list, ranks: list, ended: bool, drawn: bool) -> str:
    """The ranks that stopped answering, each with its last step (where it stopped)."""
    from hpcdist.progress import watch

    last = {r["rank"]: r.get("step") for r in ranks}
    steps_at = ", ".join(f"rank {r} at step {last[r]}" for r in halted[:8]
                         if last.get(r) is not None)
    lead = "Outlined in magenta: rank(s)" if drawn else "Rank(s)"
    when = ", not answering when hpcdist ended the job" if ended else ", not answering now"
    where = f"; its last step: {steps_at}" + (" (the arrow)" if drawn else "") if steps_at else ""
    return (f'<p class="bad">{lead} {escape(watch.ranges(halted))} stopped answering{when}'
            f"{escape(where)}.</p>")


def _ranks(data: dict, grid: dict | None, halted: list, ended: str | None) -> str:
    """Each rank's row at the last look, and what marks it: stopped answering, a straggler."""
    snap = data["watch"]
    slow = set(snap.get("slowest") or [])
    named = {grid["rows"][k][0] for _, k in grid["slow"]} if grid is not None else set()
    rows = []
    for r in sorted(snap["ranks"], key=lambda r: (r.get("node", ""), r["rank"])):
        work = round(r["work"] * 1000, 1) if r.get("work") is not None else None
        if r["rank"] in halted:
            mark = "stopped answering" + (" (hpcdist ended the job)" if ended else "")
        else:
            mark = ("straggler" if r["rank"] in slow
                    else "not answering" if r["rank"] in snap["not_answering"]
                    else "a straggler during the run" if r["rank"] in named else "")
        rows.append(_cell(r.get("node")) + _cell(r["rank"], "rank", True) + _cell(r.get("step"), "step", True)
                    + _cell(r.get("rate"), "rate", True) + _cell(work, "work_ms", True) + _cell(r.get("phase"))
                    + _cell(mark, "mark", bad=r["rank"] in halted))
    head = ["node", "rank", "step", "steps/s", "own work/step (ms)", "phase", ""]
    return _table(head, rows, wide=len(rows) > 20)


def sweep(data: dict, svg: str | None, left_out: str | None = None) -> str:
    rows = []
    for s in data["sets"]:
        job = s["job_id"] + (f" [{s['index']}]" if s.get("index") is not None else "")
        params = " ".join(f"{k}={v}" for k, v in (s.get("params") or {}).items())
        rows.append(_cell(s["set"], "set", True) + _cell(s["state"].lower(), "state")
                    + _cell(s["exit_code"], "exit_code") + _cell(job) + _cell(params)
                    + _cell(_when(s.get("last_output"))) + _cell(s.get("error_line"), "error_line"))
    table = _table(["set", "state", "exit", "job", "parameters", "last output", "last error line"], rows)
    notes = "<p>One square per set, coloured by its state.</p>" if svg else ""
    return f"<p>{escape(data['summary'])}</p>" + figure(svg, notes, left_out) + table
