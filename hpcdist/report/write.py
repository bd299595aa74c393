"""The report's files: the page, and with ``--format png`` a PNG of each figure beside it.

Where it runs: the login node or a laptop (``hpcdist report``). Everything is drawn before a
byte is written, then each file is written whole (a temporary file renamed): a failure leaves
no half page. Without matplotlib (no ``report`` extra) the page is written with its tables, each
figure's place saying it was left out and how to draw it.
"""

from __future__ import annotations

import os

from hpcdist.report import page

FORMATS = ("html", "png")
#: Each figure's name in words (a PNG's name is its key), as the page and stderr say it left out.
TITLES = {"startup": "the start-up per node", "steps": "each rank's steps over the run",
          "sets": "the sweep's sets by state"}


def render(data: dict, draw: bool = True) -> tuple[str, dict, list]:
    """``(the page's HTML, {figure name: matplotlib Figure}, [the figures left out])`` for the
    gathered ``data``; ``draw`` False: no figure (matplotlib is not installed), each left out."""
    if data["kind"] == "sweep":
        wanted = ["sets"] if data["sets"] else []
        shown = _drawn(data, wanted, None, None) if draw else {}
        svgs, left = _svgs(shown), [TITLES[n] for n in wanted if n not in shown]
        sections = [page.sweep(data, svgs.get("sets"), _left_out("sets", wanted, shown))]
        return page.page(f"hpcdist report: sweep {data['sweep']}", sections), shown, left
    from hpcdist.report import grid as grids

    breakdown = data["status"].get("startup")
    grid = grids.build(data, values=draw)
    wanted = [name for name, there in (("startup", bool(breakdown and breakdown.get("nodes"))),
                                       ("steps", grid is not None)) if there]
    shown = _drawn(data, wanted, breakdown, grid) if draw else {}
    svgs, left = _svgs(shown), [TITLES[n] for n in wanted if n not in shown]
    which = data["job_id"] + (f" subjob {data['index']}" if data.get("index") is not None else "")
    sections = [page.facts(data),
                page.startup(breakdown, svgs.get("startup"), _left_out("startup", wanted, shown)),
                page.steps(data, grid, svgs.get("steps"), _left_out("steps", wanted, shown))]
    return page.page(f"hpcdist report: job {which} ({data['name']})", sections), shown, left


def _drawn(data: dict, wanted: list, breakdown, grid) -> dict:
    from hpcdist.report import figures

    draw = {"startup": lambda: figures.startup(breakdown), "steps": lambda: figures.heat_map(grid),
            "sets": lambda: figures.sweep_grid(data["sets"])}
    return {name: draw[name]() for name in wanted}


def _svgs(shown: dict) -> dict:
    from hpcdist.report import figures

    return {name: figures.svg(f) for name, f in shown.items()}


def _left_out(name: str, wanted: list, shown: dict) -> str | None:
    return TITLES[name] if name in wanted and name not in shown else None


def write(data: dict, path: str, fmt: str = "html", draw: bool = True) -> tuple[list, list]:
    """The page at ``path`` (and its figures as ``STEM-NAME.png`` beside it with ``fmt`` png);
    ``(the paths written, the figures left out)``."""
    from hpcdist.report import figures

    text, shown, left = render(data, draw)
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
    return list(files), left
