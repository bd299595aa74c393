"""The report's files: the page, and with ``--format png`` a PNG of each figure beside it.

Where it runs: the login node or a laptop (``hpcdist report``). Everything is drawn before a
byte is written, then each file is written whole (a temporary file renamed): a failure leaves
no half page.
"""

from __future__ import annotations

import os

from hpcdist.report import page

FORMATS = ("html", "png")


def render(data: dict) -> tuple[str, dict]:
    """``(the page's HTML, {figure name: matplotlib Figure})`` for the gathered ``data``."""
    from hpcdist.report import figures

    if data["kind"] == "sweep":
        fig = figures.sweep_grid(data["sets"]) if data["sets"] else None
        shown = {"sets": fig} if fig is not None else {}
        svgs = {name: figures.svg(f) for name, f in shown.items()}
        return page.page(f"hpcdist report: sweep {data['sweep']}", [page.sweep(data, svgs.get("sets"))]), shown
    from hpcdist.report import grid as grids

    breakdown = data["status"].get("startup")
    grid = grids.build(data)
    shown = {}
    if breakdown and breakdown.get("nodes"):
        shown["startup"] = figures.startup(breakdown)
    if grid is not None:
        shown["steps"] = figures.heat_map(grid)
    svgs = {name: figures.svg(f) for name, f in shown.items()}
    which = data["job_id"] + (f" subjob {data['index']}" if data.get("index") is not None else "")
    sections = [page.facts(data), page.startup(breakdown, svgs.get("startup")),
                page.steps(data, grid, svgs.get("steps"))]
    return page.page(f"hpcdist report: job {which} ({data['name']})", sections), shown


def write(data: dict, path: str, fmt: str = "html") -> list[str]:
    """The page at ``path`` (and its figures as ``STEM-NAME.png`` beside it with ``fmt`` png);
    the paths written."""
    from hpcdist.report import figures

    text, shown = render(data)
    files = {path: text.encode("utf-8")}
    if fmt == "png":
        stem = os.path.splitext(path)[0]
        files.update((f"{stem}-{name}.png", figures.png(fig)) for name, fig in shown.items())
    for target, content in files.items():
        temporary = f"{target}.{os.getpid()}.tmp"
        try:
            with open(temporary, "wb") as f:
                f.write(content)
            os.replace(temporary, target)
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    return list(files)
