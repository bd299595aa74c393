"""``hpcdist report``: a job's (or a sweep's) page, written where it is typed (:mod:`hpcdist.report`).

Its parser in :func:`add_parsers`, its run in :func:`run_report`, which imports the report's
modules (and matplotlib, where installed: without it the page has its tables alone) only when
it runs. From a laptop (``--remote``, or a job sent from there) :mod:`hpcdist.cli.remote` asks
the login node for the data (``report --data``) and writes the page with :func:`write_page`,
its arguments read by :func:`laptop_args`.
"""

from __future__ import annotations

import os
import sys

from hpcdist.cli.commands import CommandError

DESCRIPTION = ("Write one self-contained HTML page of a job: its facts, the start-up per node, "
               "each rank's steps over the run as a heat map with stragglers, hangs and restarts "
               "marked, and tables of the same numbers; of a sweep: its sets by state. The "
               "figures need matplotlib (pip install 'hpcdist[report]'); without it the page has "
               "its tables. From a laptop (--remote CLUSTER, or a job sent from there) the login "
               "node gives the data and the page is written on the laptop.")


def add_parsers(sub, only: str | None, command: str | None = None) -> None:
    from hpcdist.cli.common import help_end  # the parser's, which `hpcdist status` builds none of

    if only in (None, "report"):
        report = sub.add_parser("report", help="one page (HTML, offline) of a job: start-up, each rank's steps, "
                                "stragglers and hangs; a sweep's sets",
                                description=DESCRIPTION,
                                **help_end("report"))
        report.add_argument("job", metavar="JOB")
        report.add_argument("-o", "--output", metavar="FILE", default=None,
                            help="the page's path (default: report-JOB.html here)")
        report.add_argument("--format", choices=("html", "png"), default="html",
                            help="png: also a PNG of each figure beside the page (FILE's name, "
                                 "-startup.png ...; needs matplotlib, the report extra)")
        report.add_argument("--index", type=int, default=None, metavar="N", help="an array's subjob N")
        report.add_argument("--data", action="store_true",
                            help="print the page's data as JSON instead (what a laptop's --remote reads)")
        report.set_defaults(run=run_report)


def run_report(args) -> int:
    from hpcdist.report import data as gathered

    if not args.data and args.format == "png":
        from hpcdist.report import figures

        figures.require("--format png")
    found = gathered.gather(args.job, args.index)
    if args.data:
        import json

        print(json.dumps(found))
        return 0
    return write_page(found, args.output, args.format)


def laptop_args(words: list[str]):
    """``report``'s arguments as typed on a laptop (its --remote settings taken out), read by the
    parser the login node's command has; -o and matplotlib (for --format png) checked here,
    before anything is asked."""
    from hpcdist.cli.common import new_parser

    parser = new_parser(prog="hpcdist")
    add_parsers(parser.add_subparsers(dest="command", prog="hpcdist"), "report")
    args = parser.parse_args(["report", *words])
    if not args.data:
        if args.format == "png":
            from hpcdist.report import figures

            figures.require("--format png")
        if args.output is not None:
            check_output(args.output)
    return args


def check_output(path: str) -> None:
    """-o names a file in a folder that exists (CommandError, saying the fix, if not)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CommandError(f"-o {path}: the folder {folder} does not exist; create it, or name a file in one "
                           f"that does (as -o report.html)")
    if os.path.isdir(path):
        raise CommandError(f"-o {path}: a folder; name the page's file (as -o {os.path.join(path, 'report.html')})")


def write_page(found: dict, output: str | None, fmt: str) -> int:
    """The page of ``found`` (gathered here or on a login node) at ``output``; its paths printed.
    Without matplotlib here the page has its tables alone, and stderr says which figures it left
    out and what draws them."""
    name = found["job_id"] if found["kind"] == "job" else found["sweep"]
    path = output or f"report-{name}.html"
    check_output(path)
    from hpcdist.report import figures, write

    lacking = figures.missing()
    try:
        written, left_out = write.write(found, path, fmt, draw=lacking is None)
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror or e}") from None
    for written_path in written:
        print(written_path)
    if left_out:
        print(f"hpcdist report: {lacking} is not installed here: the page has its tables but not "
              f"its figures ({'; '.join(left_out)}); {figures.INSTALL} draws them", file=sys.stderr)
    print(f"hpcdist report: open {path} in a browser (it needs no network)", file=sys.stderr)
    return 0
