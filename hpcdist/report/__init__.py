"""``hpcdist report JOB``: one page, a picture of a run, that opens offline.

Where it runs: the login node, or a laptop (``--remote``: the login node's hpcdist gathers the
data, :func:`hpcdist.report.data.gather`, and the page is drawn on the laptop).

Three parts, each its own module: :mod:`~hpcdist.report.data` gathers what the page shows,
through the readers ``status --json`` and ``watch --json`` use (one reader, so the page's
numbers are theirs) and the monitor's timeline (:mod:`hpcdist.progress.timeline`), as one
JSON-able object; :mod:`~hpcdist.report.figures` draws the figures with matplotlib (the
``report`` extra, imported only here); :mod:`~hpcdist.report.page` writes the HTML: the job's
facts, the figures inline as SVG, and tables with the same numbers, so the page reads without
the figures too. No script, no font, no address outside the page: it opens from a job folder
or a laptop without a network.
"""
