"""PBS's job ids (``123.server``, ``123[].server``): their grammar, which
:class:`~hpcdist.schedulers.base.JobId` reads (through :func:`hpcdist.schedulers.part`) without
loading PBS's submit side.

Where it runs: on the login node, wherever a PBS job id is made or read.
"""

import re

from hpcdist.patterns import Pattern
from hpcdist.schedulers.job_ids import IdGrammar

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


#: The grammar (``Pbs.ids``; base.JobId's for a "pbs" id).
GRAMMAR = PbsIds()
