"""A page of ``hpcdist report`` as a person sees it, for tests/report/test_report.py and the clusters'
rows (tests/progress/test_cluster_watch.py, tests/remote/test_remote.py): opened in headless Chromium, its
screenshot read back (not blank), nothing fetched, and its numbers those of ``status --json``
and ``watch --json``."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path


def screenshot(page: Path, png: Path, height: int = 2000) -> None:
    """The page as headless Chromium draws it (no network, a profile of its own)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, ("chromium is not installed: bash scripts/bootstrap.sh tests installs it "
                      "(tests/cluster/packages.txt)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", f"--user-data-dir={png.parent / 'chromium-profile'}",
                    f"--screenshot={png}", f"--window-size=1400,{height}", page.resolve().as_uri()],
                   capture_output=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot of {page}"


def colours(png: Path) -> int:
    """How many distinct colours the screenshot has (a blank page: one or two)."""
    import matplotlib.image
    import numpy as np

    pixels = (matplotlib.image.imread(png)[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    return len(np.unique(pixels, axis=0))


class Cells(HTMLParser):
    """The page's cells that carry a key (``data-key``): key -> their texts, in order."""

    def __init__(self, text: str):
        super().__init__()
        self.found, self.key = {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.key = dict(attrs).get("data-key") if tag == "td" else None
        if self.key:
            self.found.setdefault(self.key, []).append("")

    def handle_data(self, data):
        if self.key:
            self.found[self.key][-1] += data

    def handle_endtag(self, tag):
        self.key = None


def opened(page: Path) -> tuple[str, dict]:
    """The page ``hpcdist report`` wrote, opened in Chromium: its text and its keyed cells."""
    text = page.read_text()
    # Nothing fetched: no script, no address to load (the SVG's xmlns names are names, not loads).
    assert not re.search(r"<script|(?:src|href)=[\"']?(?:https?:|//)|url\((?!#)|@import", text, re.I), text[:2000]
    shot = page.with_suffix(".png")
    screenshot(page, shot)
    assert colours(shot) > 200, "the screenshot is (nearly) blank"
    return text, Cells(text).found


def same_numbers(cells: dict, row: dict, snapshot: dict) -> None:
    """The page's figures are those of ``status --json`` (``row``) and ``watch --json`` (``snapshot``)."""
    assert cells["state"] == [row["state"]]
    assert cells["exit_code"] == [str(row["exit_code"])]
    assert cells.get("reason", [""]) == [row["reason"] or ""]
    nodes = (row.get("startup") or {}).get("nodes") or {}
    totals = sorted((n["total"] for n in nodes.values() if n.get("total") is not None), reverse=True)
    assert [float(t) for t in cells.get("startup.total", [])] == totals
    ranks = sorted(snapshot["ranks"], key=lambda r: (r.get("node", ""), r["rank"]))
    assert [int(r) for r in cells["rank"]] == [r["rank"] for r in ranks]
    assert [int(s) for s in cells["step"]] == [r["step"] for r in ranks]
    if snapshot["median_rate"]:
        assert cells["median_rate"] == [str(snapshot["median_rate"])]
    else:  # 0: the page leaves it out
        assert "median_rate" not in cells


def on_nodes(text: str, cells: dict, row: dict, nodes: tuple[str, ...]) -> None:
    """A cluster job's page: its start-up figure has a bar per node, ``nodes`` (the slowest first),
    as ``status --json`` gives them."""
    assert sorted(row["startup"]["nodes"]) == sorted(nodes), row["startup"]
    assert len(cells["startup.total"]) == len(nodes)
    figure = text[text.index("<h2>Start-up per node</h2>"):text.index("<h2>Steps over the run</h2>")]
    assert figure.count("<svg") == 1, figure[:2000]
    # The figure's axis names each node's bar (matplotlib's SVG keeps each text as a comment).
    bars = [node for node in re.findall(r"<!-- (\S+) -->", figure) if node in nodes]
    assert sorted(bars) == sorted(nodes), f"the start-up figure's bars: {bars}, not one for each of {nodes}"
