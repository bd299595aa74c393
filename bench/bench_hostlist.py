#!/usr/bin/env python3
"""Benchmark hpcdist.hostlist against python-hostlist, ClusterShell and scontrol.

Not a test: run it through ``bash bench/run.sh`` (which installs the other
libraries into bench/.venv) or directly with any Python that has them.
Tools that are missing show up as "not installed".

Every tool runs on the same inputs in one process, repetitions interleaved
(tool A, B, C, D, then A, B, C, D again, ...), and the table shows the median.
Python tools are timed in-process with the garbage collector paused during
each call (as ``timeit`` does), imports excluded.  ``scontrol`` is timed as a
subprocess: exec, parsing and printing through a pipe.  Before timing, every
tool's output is checked against hpcdist's (same names as a set, and whether
the order is the same).

Prints a markdown section on stdout.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hpcdist import hostlist as hpcdist_hostlist  # noqa: E402

TARGET = 1.5  # python-hostlist time / hpcdist time, for the cases below
MAX_ARG = 128 * 1024  # Linux MAX_ARG_STRLEN: longest single argv string
BIG = 10_000_000  # max_hosts for hpcdist when verifying other tools' output


class Unavailable(Exception):
    """This tool cannot run this case (the message says why)."""


# --------------------------------------------------------------------------
# the tools
# --------------------------------------------------------------------------


class Tool:
    name = ""
    version = ""
    missing = ""  # why the tool is not available, or ""

    def expand(self, text: str) -> list[str]:
        raise NotImplementedError

    def compress(self, names: list[str]) -> str:
        raise NotImplementedError

    def expand_counts(self, text: str) -> list[int]:
        raise Unavailable("no such function")

    def prepare_compress(self, names: list[str]):
        """Work done once, outside the timing (scontrol: write the file)."""
        return names


class Hpcdist(Tool):
    name = "hpcdist"

    def __init__(self) -> None:
        self.version = "(this repo)"

    def expand(self, text):
        return hpcdist_hostlist.expand(text)

    def compress(self, names):
        return hpcdist_hostlist.compress(names)

    def expand_counts(self, text):
        return hpcdist_hostlist.expand_counts(text)


class PythonHostlist(Tool):
    name = "python-hostlist"

    def __init__(self) -> None:
        try:
            import hostlist
        except ImportError:
            self.missing = "not installed"
            return
        self.mod = hostlist
        self.version = _dist_version("python-hostlist") or getattr(hostlist, "__version__", "")

    def expand(self, text):
        # expand_hostlist(hostlist, allow_duplicates=False, sort=False)
        return self.mod.expand_hostlist(text, allow_duplicates=True)

    def compress(self, names):
        return self.mod.collect_hostlist(names)

    def expand_counts(self, text):
        return self.mod.parse_slurm_tasks_per_node(text)


class ClusterShellTool(Tool):
    name = "ClusterShell"

    def __init__(self) -> None:
        try:
            from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet
        except ImportError:
            self.missing = "not installed"
            return
        self.NodeSet = NodeSet
        self.resolver = RESOLVER_NOGROUP
        self.version = _dist_version("ClusterShell")

    def expand(self, text):
        return list(self.NodeSet(text, resolver=self.resolver))

    def compress(self, names):
        return str(self.NodeSet.fromlist(names, resolver=self.resolver))


class Scontrol(Tool):
    name = "scontrol"

    def __init__(self, tmpdir: Path) -> None:
        self.path = shutil.which("scontrol")
        self.tmpdir = tmpdir
        if self.path is None:
            self.missing = "not installed"
            return
        self.env = dict(os.environ)
        conf = self.env.get("SLURM_CONF")
        if not conf or not os.access(conf, os.R_OK):
            # scontrol is fatal without a readable slurm.conf, even for
            # 'show hostnames', which needs no controller.
            conf_path = tmpdir / "slurm.conf"
            conf_path.write_text(
                "ClusterName=bench\n"
                "SlurmctldHost=localhost\n"
                "NodeName=localhost CPUs=1\n"
                "PartitionName=p Nodes=localhost\n"
            )
            self.env["SLURM_CONF"] = str(conf_path)
        try:
            out = subprocess.run(
                [self.path, "--version"], capture_output=True, text=True, env=self.env
            )
            self.version = out.stdout.strip().replace("slurm ", "")
            self._run("show", "hostnames", "n[1-2]")
        except (OSError, Unavailable) as exc:
            self.missing = f"does not run: {exc}"

    def _run(self, *args: str) -> str:
        proc = subprocess.run(
            [self.path, *args], capture_output=True, text=True, env=self.env
        )
        # scontrol exits 0 on an invalid host list: look at the output too.
        if proc.returncode != 0 or not proc.stdout.strip():
            raise Unavailable(
                (proc.stderr.strip().splitlines() or ["no output"])[0][:100]
            )
        return proc.stdout

    def expand(self, text):
        if len(text.encode()) >= MAX_ARG:
            raise Unavailable("argument > 128 KiB")
        return self._run("show", "hostnames", text).split()

    def prepare_compress(self, names):
        # 'show hostlist /path' reads the names from a file (up to 1 MiB)
        path = self.tmpdir / f"names-{len(names)}-{hash(tuple(names[:5]))}.txt"
        path.write_text("\n".join(names) + "\n")
        if path.stat().st_size > 1024 * 1024:
            raise Unavailable("file > 1 MiB")
        return str(path)

    def compress(self, path):
        return self._run("show", "hostlist", path).strip()


def _dist_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001 - any failure: no version to show
        return ""


# --------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------


def make_cases() -> list[dict]:
    names = [f"n{i:06d}" for i in range(1, 100_001)]
    shuffled = names[:]
    random.Random(0).shuffle(shuffled)
    return [
        {
            "title": "expand 100k nodes `n[000001-050000,050001-100000]`",
            "kind": "expand",
            "input": "n[000001-050000,050001-100000]",
            "target": True,
        },
        {
            "title": "expand 10,000 bracket groups `r0n[0-9],...,r9999n[0-9]` (100k)",
            "kind": "expand",
            "input": ",".join(f"r{i}n[0-9]" for i in range(10_000)),
            "target": True,
        },
        {
            "title": "expand one bracket with 10,000 ranges `n[0-9,20-29,...]` (100k)",
            "kind": "expand",
            "input": "n[" + ",".join(f"{i * 20}-{i * 20 + 9}" for i in range(10_000)) + "]",
            "target": False,
        },
        {
            "title": "compress 100k names `n000001..n100000`, in order",
            "kind": "compress",
            "input": names,
            "target": True,
        },
        {
            "title": "compress 100k names, shuffled (seed 0)",
            "kind": "compress",
            "input": shuffled,
            "target": False,
        },
        {
            "title": "expand_counts `1(x100000)`",
            "kind": "counts",
            "input": "1(x100000)",
            "target": False,
        },
    ]


def call(tool: Tool, case: dict, prepared):
    if case["kind"] == "expand":
        return tool.expand(case["input"])
    if case["kind"] == "compress":
        return tool.compress(prepared)
    return tool.expand_counts(case["input"])


def verify(tool: Tool, case: dict, result, reference, checker) -> str:
    """Compare a tool's result with what it should be; return a short note.

    checker(text) expands a compressed result in order with duplicates kept
    and no cap (python-hostlist, or hpcdist's own expand when that is missing).
    """
    suffix = ""
    if case["kind"] == "counts":
        return "same" if list(result) == reference else "DIFFERENT"
    if case["kind"] == "expand":
        names = list(result)
    else:
        reference = case["input"]
        try:
            names = hpcdist_hostlist.expand(result, max_hosts=BIG)
        except hpcdist_hostlist.HostlistError as exc:
            # Slurm caps one range at 65,536 names, and so does hpcdist
            suffix = f"; not valid for Slurm or hpcdist ({exc.problem.split(',')[-1].strip()})"
            try:
                names = checker(result)
            except Exception as exc2:  # noqa: BLE001
                return f"could not check ({exc2})"[:100] + suffix
    if names == reference:
        note = "same names, same order"
    elif len(names) == len(reference) and sorted(names) == sorted(reference):
        note = "same names, other order"
    elif set(names) == set(reference):
        note = f"same set, {len(names)} names (duplicates differ)"
    else:
        note = f"DIFFERENT ({len(names)} names)"
    return note + suffix


def _checker(tools: list[Tool]):
    for tool in tools:
        if isinstance(tool, PythonHostlist) and not tool.missing:
            return lambda text: tool.mod.expand_hostlist(text, allow_duplicates=True)
    return lambda text: hpcdist_hostlist.expand(text, max_hosts=BIG)


def timed(fn, *args) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start
    finally:
        gc.enable()


def run(reps: int, only: set[str] | None = None) -> str:
    tmp = tempfile.TemporaryDirectory(prefix="hpcdist-bench-")
    tmpdir = Path(tmp.name)
    tools: list[Tool] = [Hpcdist(), PythonHostlist(), ClusterShellTool(), Scontrol(tmpdir)]
    cases = make_cases()
    if only:
        cases = [c for c in cases if c["kind"] in only]

    checker = _checker(tools)
    rows = []
    checks = []
    for case in cases:
        # reference: hpcdist's own result, verified by the test suite
        if case["kind"] == "expand":
            reference = hpcdist_hostlist.expand(case["input"])
        elif case["kind"] == "counts":
            reference = hpcdist_hostlist.expand_counts(case["input"])
        else:
            reference = case["input"]
        runnable = {}
        cells = {}
        for tool in tools:
            if tool.missing:
                cells[tool.name] = tool.missing
                continue
            try:
                prepared = None
                if case["kind"] == "compress":
                    prepared = tool.prepare_compress(case["input"])
                result = call(tool, case, prepared)
            except Unavailable as exc:
                cells[tool.name] = f"n/a ({exc})"
                continue
            except Exception as exc:  # noqa: BLE001 - a tool's own error
                cells[tool.name] = f"error: {type(exc).__name__}: {str(exc)[:60]}"
                continue
            note = verify(tool, case, result, reference, checker)
            checks.append((case["title"], tool.name, note, _short(result, case)))
            runnable[tool.name] = (tool, prepared)

        times: dict[str, list[float]] = {name: [] for name in runnable}
        order = list(runnable)
        for rep in range(reps):
            # rotate who goes first, so no tool always runs on a cold cache
            for name in order[rep % len(order):] + order[: rep % len(order)]:
                tool, prepared = runnable[name]
                times[name].append(timed(call, tool, case, prepared))
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        for name, value in medians.items():
            cells[name] = f"{value * 1e3:.1f} ms"
        ratio = ""
        verdict = ""
        if "hpcdist" in medians and "python-hostlist" in medians:
            r = medians["python-hostlist"] / medians["hpcdist"]
            ratio = f"{r:.2f}x"
            if case["target"]:
                verdict = "yes" if r >= TARGET else "**no**"
            else:
                verdict = "(no target)"
        rows.append((case["title"], cells, ratio, verdict))
    tmp.cleanup()

    lines = []
    lines.append("## Host lists: expand and compress")
    lines.append("")
    versions = ", ".join(
        f"{t.name} {t.version}".strip() if not t.missing else f"{t.name}: {t.missing}"
        for t in tools
    )
    lines.append(
        f"Median of {reps} interleaved repetitions; Python {platform.python_version()}; "
        f"{versions}.  Python tools in-process, import excluded, GC paused during "
        "each call; scontrol as a subprocess (exec + parse + print through a pipe; "
        "compress reads a file: `scontrol show hostlist /path`)."
    )
    lines.append("")
    names = [t.name for t in tools]
    header = ["case", *names, "python-hostlist / hpcdist", f"target {TARGET}x met"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for title, cells, ratio, verdict in rows:
        lines.append(
            "| " + " | ".join([title, *(cells.get(n, "") for n in names), ratio, verdict]) + " |"
        )
    lines.append("")
    lines.append("Output checks (before timing; compress outputs expanded back):")
    lines.append("")
    lines.append("| case | tool | result | output |")
    lines.append("|---|---|---|---|")
    for title, tool_name, note, short in checks:
        lines.append(f"| {title} | {tool_name} | {note} | {short} |")
    lines.append("")
    return "\n".join(lines)


def _short(result, case) -> str:
    if case["kind"] == "compress":
        text = str(result)
        if len(text) > 40:
            text = text[:37] + "..."
        return f"`{text}` ({len(str(result))} chars)"
    return f"{len(result)} items"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reps", type=int, default=9, help="repetitions (median; at least 7 recommended)"
    )
    parser.add_argument(
        "--only", action="append", choices=["expand", "compress", "counts"],
        help="run only these kinds of case (repeatable)",
    )
    args = parser.parse_args(argv)
    print(run(max(1, args.reps), set(args.only) if args.only else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
