"""Each queued scheduler's job-id grammar (Slurm's ``123_4``, PBS's ``123[].server``), in the
order an id without a scheduler is tried.

Where it runs: on the login node, wherever a :class:`~hpcdist.schedulers.base.JobId` is made.

Below :mod:`~hpcdist.schedulers.base`, whose ``JobId`` reads them: a grammar in its scheduler's
module would have base load every scheduler, which import base (an import circle). Each
scheduler's class names its own (``Scheduler.ids``).
"""

from __future__ import annotations

import re

from hpcdist.patterns import Pattern
from hpcdist.schedulers import QUEUED


class IdGrammar:
    """How one scheduler writes its job ids (each scheduler with ids of its own has one:
    ``Scheduler.ids``); :class:`~hpcdist.schedulers.base.JobId` asks the grammar of its ``scheduler``."""

    #: What the error says an id of this grammar looks like.
    expected: str = ""
    title: str = ""

    def split(self, text: str) -> tuple[str, str | None] | None:
        """(sequence number, array index or None) when ``text`` is wholly an id, else None."""
        raise NotImplementedError

    def matches(self, job, other: str) -> bool:
        """Whether ``other`` (stripped text) names ``job`` (a JobId)."""
        raise NotImplementedError


# ASCII digits only: Python's \d also matches other scripts' digits.
SLURM_ID = Pattern(r"([0-9]+)(?:_([0-9]+))?")


class SlurmIds(IdGrammar):
    title = "Slurm"
    expected = "123 or 123_4"

    def split(self, text):
        m = SLURM_ID.fullmatch(text)
        return (m.group(1), m.group(2)) if m else None

    def matches(self, job, other):
        return other == job.id


_PBS_ID = Pattern(r"([0-9]+)(\[[0-9]*\])?(\.[A-Za-z0-9_.-]+)?")
# What qstat or PBS_JOBID may show for a PBS id: an optional "N:" prefix
# (dask-jobqueue#134), and any (possibly truncated, "*"-ended) server part.
_PBS_ID_LOOSE = Pattern(r"(?:[0-9]+:)?([0-9]+)(\[[0-9]*\])?(?:\..*)?", re.S)


class PbsIds(IdGrammar):
    title = "PBS"
    expected = "123.server or 123[].server"

    def split(self, text):
        m = _PBS_ID.fullmatch(text)
        if m is None:
            return None
        return m.group(1), (m.group(2)[1:-1] if m.group(2) else None)

    def matches(self, job, other):
        m = _PBS_ID_LOOSE.fullmatch(other)
        if m is None:
            return False
        other_index = m.group(2)[1:-1] if m.group(2) else None
        return m.group(1) == job.number and other_index == job.array_index


_BY_NAME = {"slurm": SlurmIds(), "pbs": PbsIds()}
#: The grammars by scheduler name, in the order an id without a scheduler is tried (QUEUED's:
#: ``123`` reads as Slurm's).
GRAMMARS = {name: _BY_NAME[name] for name in QUEUED}
