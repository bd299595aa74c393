"""What a queued scheduler's job-id grammar is (:class:`IdGrammar`): each scheduler's own is in its
folder (``<name>/ids.py``: Slurm's ``123_4``, PBS's ``123[].server``), as ``GRAMMAR``.

Where it runs: on the login node, wherever a :class:`~hpcdist.schedulers.base.JobId` is made.

Below :mod:`~hpcdist.schedulers.base`, whose ``JobId`` loads each queued scheduler's ``ids`` by
name (:func:`hpcdist.schedulers.part`), in the order an id without a scheduler is tried: a grammar
in its scheduler's submit side would have base load every scheduler, which import base (an
import circle). Each scheduler's class names its own (``Scheduler.ids``).
"""

from __future__ import annotations


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
