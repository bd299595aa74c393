"""The report's figures, drawn with matplotlib (the ``report`` extra): each a Figure, saved as
SVG for the page or as PNG beside it.

Where it runs: the login node or a laptop, for ``hpcdist report`` alone (matplotlib is imported
here only, when a page is drawn; where it is not installed the page has its tables alone,
:func:`missing`). ``Figure`` directly, not pyplot: no window system, no backend
chosen from the environment.
"""

from __future__ import annotations

import io

from hpcdist.progress.startup import SEGMENTS

#: The heat map's rows named one by one up to this many ranks; past it, by node.
NAMED_RANKS = 40
#: The start-up figure's bars: the slowest nodes, up to this many (the table lists them all).
STARTUP_BARS = 16
#: A sweep's set states and their colours (another state: grey).
STATE_COLOURS = {"COMPLETED": "#4c9a2a", "RUNNING": "#2a6fb0", "PENDING": "#9ab8d6", "FAILED": "#c0392b",
                 "CANCELLED": "#e67e22", "TIMEOUT": "#e67e22", "ENDED": "#8e44ad", "NOT SUBMITTED": "#dddddd"}
#: A rank that stopped answering: its row's outline, its last step and its name.
STOPPED_COLOUR = "#ff00ff"
SEGMENT_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#1f77b4", "#ff7f0e")


#: What draws the figures where they are missing.
INSTALL = "pip install 'hpcdist[report]'"


def missing() -> str | None:
    """The module the figures need and this Python lacks (matplotlib, or numpy, which it brings),
    or None: without them the page is written with its tables alone."""
    for name in ("matplotlib", "numpy"):
        try:
            __import__(name)
        except ImportError:
            return name
    return None


def require(flag: str) -> None:
    """The figures drawable here, for ``flag`` (``--format png``), which asks for them alone;
    else a CommandError that says how, before anything is gathered or asked of a login node."""
    name = missing()
    if name is not None:
        from hpcdist.cli.commands import CommandError

        raise CommandError(f"{flag}: the figures need matplotlib ({name} is not installed): "
                           f"{INSTALL} here, where the page is drawn (without {flag} the page is "
                           "written with its tables)")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def svg(fig) -> str:
    """The figure as inline SVG (no XML header, no date: the same job gives the same page)."""
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    text = text[text.index("<svg"):]
    start, end = text.find("<metadata>"), text.find("</metadata>")  # its RDF names no one reads
    return text[:start] + text[end + len("</metadata>"):] if 0 <= start < end else text


def png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=150, metadata={"Software": None})
    return out.getvalue()


def startup(breakdown: dict):
    """Stacked bars, one per node, the slowest node at the top: each start-up segment's seconds."""
    nodes = breakdown["nodes"]
    order = sorted(nodes, key=lambda n: (nodes[n].get("total") is None, -(nodes[n].get("total") or 0), n))
    shown = order[:STARTUP_BARS]
    fig = _figure(9, 1.6 + 0.3 * len(shown))
    ax = fig.add_subplot()
    left = [0.0] * len(shown)
    for (key, heading), colour in zip(SEGMENTS, SEGMENT_COLOURS):
        widths = [nodes[n].get(key) or 0.0 for n in shown]
        ax.barh(range(len(shown)), widths, left=left, color=colour, label=heading)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(range(len(shown)), shown)
    ax.invert_yaxis()  # the slowest node first, at the top
    ax.set_xlabel("seconds from the job's start")
    more = f" (the {len(shown)} slowest of {len(nodes)} nodes)" if len(nodes) > len(shown) else ""
    ax.set_title(f"Start-up per node, slowest first{more}")
    # Below the axes, not over the bars (a legend inside covered the last node's bar).
    fig.legend(ncols=len(SEGMENTS), fontsize="small", loc="outside lower center")
    return fig


def heat_map(grid: dict):
    """Ranks (by node) against time: each cell the rank's own work per step (or its step time),
    grey where it made no step; stragglers marked, hangs shaded, restarts and the end as lines."""
    import numpy as np

    values = np.array(grid["values"], dtype=float)
    rows, edges = grid["rows"], grid["edges"]
    fig = _figure(11, min(9.0, 2.6 + 0.18 * len(rows)))
    ax = fig.add_subplot()
    from matplotlib import colormaps

    cmap = colormaps["viridis"].with_extremes(bad="#555555")
    masked = np.ma.masked_invalid(values)
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
    mesh = ax.pcolormesh(edges, np.arange(len(rows) + 1), masked, cmap=cmap, vmin=0, vmax=top or 1.0,
                         rasterized=True, shading="flat")
    fig.colorbar(mesh, ax=ax, label=grid["measure"], shrink=0.8)
    if grid["slow"]:
        xs, ys = zip(*grid["slow"])
        ax.scatter(xs, [y + 0.5 for y in ys], marker="x", s=16, color="#ff3030", linewidths=1, label="straggler")
    for start, end in grid["hung"]:
        ax.axvspan(start, end, color="#ff3030", alpha=0.18, label="looks hung")
    _stopped(ax, grid)
    for t, label in grid["lines"]:
        ax.axvline(t, color="#d62728", linestyle="--", linewidth=1.2)
        ax.annotate(label, (t, len(rows)), xytext=(2, 4), textcoords="offset points", fontsize="small",
                    color="#d62728", annotation_clip=False)
    if len(rows) <= NAMED_RANKS:
        halted = {k for k, _ in grid["stopped"]}
        names = [f"rank {r} ({n})" + (": stopped" if k in halted else "")
                 for k, (r, n) in enumerate(rows)]
        ax.set_yticks([k + 0.5 for k in range(len(rows))], names, fontsize="small")
        for k in halted:
            ax.get_yticklabels()[k].set(color=STOPPED_COLOUR, fontweight="bold")
    else:
        ticks, names, start = [], [], 0
        for k in range(1, len(rows) + 1):
            if k == len(rows) or rows[k][1] != rows[start][1]:
                ticks.append((start + k) / 2)
                names.append(rows[start][1])
                if k < len(rows) and len(names) < NAMED_RANKS:  # more lines would hide the cells
                    ax.axhline(k, color="white", linewidth=0.3)
                start = k
        step = max(1, len(names) // NAMED_RANKS)
        ax.set_yticks(ticks[::step], names[::step], fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the run's start")
    ax.set_title(f"Each rank's {grid['measure']} over the run (grey: no step in that interval)")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        kept = dict(zip(labels, handles))  # one entry per label
        ax.legend(kept.values(), kept.keys(), loc="upper left", fontsize="small", framealpha=0.8)
    return fig


def _stopped(ax, grid: dict) -> None:
    """Each rank that stopped answering (a hang's cause): its row outlined from its last step to
    the run's last look, and its last step marked."""
    from matplotlib.patches import Rectangle

    end = grid["edges"][-1]
    for row, last in grid["stopped"]:
        start = grid["edges"][0] if last is None else min(max(last, grid["edges"][0]), end)
        ax.add_patch(Rectangle((start, row + 0.05), end - start, 0.9, fill=False,
                               edgecolor=STOPPED_COLOUR, linewidth=2, label="stopped answering"))
        if last is not None:
            ax.plot([start], [row + 0.5], marker=">", markersize=7, color=STOPPED_COLOUR,
                    linestyle="none", label="its last step")


def sweep_grid(sets: list[dict]):
    """One square per set, coloured by its state, with its number and parameters."""
    count = len(sets)
    columns = max(1, min(8, int(count ** 0.5 + 0.999)))
    lines = (count + columns - 1) // columns
    fig = _figure(1.6 * columns + 1.5, 1.0 * lines + 1.0)
    ax = fig.add_subplot()
    from matplotlib.patches import Patch, Rectangle

    for k, row in enumerate(sets):
        x, y = k % columns, k // columns
        colour = STATE_COLOURS.get(row["state"], "#aaaaaa")
        ax.add_patch(Rectangle((x + 0.04, y + 0.04), 0.92, 0.92, color=colour))
        params = "\n".join(f"{key}={value}" for key, value in (row.get("params") or {}).items())
        ax.text(x + 0.5, y + 0.5, f"set {row['set']}\n{params}", ha="center", va="center", fontsize="small",
                color="white" if row["state"] in ("FAILED", "COMPLETED", "RUNNING", "ENDED") else "black")
    ax.set_xlim(0, columns)
    ax.set_ylim(lines, 0)
    ax.set_axis_off()
    seen = list(dict.fromkeys(row["state"] for row in sets))
    ax.legend([Patch(color=STATE_COLOURS.get(s, "#aaaaaa")) for s in seen], [s.lower() for s in seen],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.set_title("The sweep's sets by state")
    return fig
