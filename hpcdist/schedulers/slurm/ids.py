"""Slurm's job ids (``123``, ``123_4``): their grammar, which
:class:`~hpcdist.schedulers.base.JobId` reads (through :func:`hpcdist.schedulers.part`) without
loading Slurm's submit side.

Where it runs: on the login node, wherever a Slurm job id is made or read.
"""

from hpcdist.patterns import Pattern
from hpcdist.schedulers.job_ids import IdGrammar

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


#: The grammar (``Slurm.ids``; base.JobId's for a "slurm" id).
GRAMMAR = SlurmIds()
