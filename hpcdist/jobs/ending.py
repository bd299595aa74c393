"""A job that hpcdist itself ended, and why: ``ended.json`` (:data:`ENDED`) in its folder.

Where it runs: written inside the job by its monitor (:mod:`hpcdist.progress.monitor`) when
``--hang-timeout`` or ``--start-timeout`` ends the job; read on the login node by ``status``,
``logs``, ``--wait`` and ``watch``, which then say the true cause, not the signal the launcher
died of. Each run of the job script (a requeue, a run by hand) starts with none: its monitor
removes the last run's (:func:`clear`).
"""

from __future__ import annotations

import json
import os

ENDED = "ended.json"


def path_of(folder: str) -> str:
    return os.path.join(folder, ENDED)


def write(folder: str, by: str, cause: str, when: float) -> None:
    """Record that ``by`` (``hang-timeout``, ``start-timeout``) ended the job: ``cause`` is the one
    line the user sees (``ended by --hang-timeout after 30 s without a step; ...``). Best effort: a
    full disk must not keep the monitor from ending the job."""
    from hpcdist.jobs.atomic import write_text_atomic

    try:
        write_text_atomic(path_of(folder), json.dumps({"by": by, "cause": cause, "time": when}) + "\n", 0o600)
    except OSError:
        pass


def clear(folder: str) -> None:
    """A new run: the last run's end is not this one's."""
    try:
        os.unlink(path_of(folder))
    except OSError:
        pass


def read(folder: str) -> dict | None:
    """``{"by", "cause", "time"}`` as :func:`write` wrote them, or None (none, or not of that shape)."""
    try:
        with open(path_of(folder), encoding="utf-8", errors="replace") as f:
            found = json.loads(f.read(64 << 10))
    except (OSError, ValueError):
        return None
    if not (isinstance(found, dict) and isinstance(found.get("cause"), str) and isinstance(found.get("by"), str)):
        return None
    return found


def cause(folder: str) -> str | None:
    """The line that says why hpcdist ended the job, or None when it did not."""
    found = read(folder)
    return found["cause"] if found else None


def spec_value(folder: str, name: str):
    """One value of the job's spec (``spec.json``), for the monitor inside the job; None."""
    from hpcdist.jobs import SPEC

    try:
        with open(os.path.join(folder, SPEC), encoding="utf-8") as f:
            return json.load(f).get(name)
    except (OSError, ValueError, AttributeError):
        return None


def start_timeout(folder: str) -> float | None:
    """The job's ``--start-timeout`` in seconds, as its spec holds it; None."""
    value = spec_value(folder, "start_timeout_s")
    return float(value) if type(value) in (int, float) and value > 0 else None
