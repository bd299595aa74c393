"""A job that hpcdist itself ended, and why: ``ended.json`` (:data:`ENDED`) in its folder.

Where it runs: written inside the job by its monitor (:mod:`hpcdist.progress.monitor`) when
``--hang-timeout`` or ``--start-timeout`` ends the job (on a full disk too: the monitor keeps
room for it at its start, :func:`reserve`); read on the login node by ``status``,
``logs``, ``--wait`` and ``watch``, which then say the true cause, not the signal the launcher
died of. Each run of the job script (a requeue, a run by hand) starts with none: its monitor
removes the last run's (:func:`clear`).
"""

from __future__ import annotations

import json
import os

ENDED = "ended.json"


def path_of(folder: str, index: int | None = None) -> str:
    """``ended.json``, or an array's subjob ``index``'s ``ended.json.<index>`` (:mod:`hpcdist.jobs.subjobs`)."""
    from hpcdist.jobs.subjobs import of_subjob

    return os.path.join(folder, of_subjob(ENDED, index))


def write(folder: str, by: str, cause: str, when: float, index: int | None = None,
          stopped: list[int] | None = None) -> None:
    """Record that ``by`` (``hang-timeout``, ``start-timeout``) ended the job: ``cause`` is the one
    line the user sees (``ended by --hang-timeout after 30 s without a step; ...``), ``stopped``
    the ranks it names as not answering (``hpcdist report`` marks them). Best effort: a full disk
    must not keep the monitor from ending the job."""
    from hpcdist.jobs.atomic import write_text_atomic

    record = {"by": by, "cause": cause, "time": when, **({"stopped": stopped} if stopped else {})}
    text = json.dumps(record) + "\n"
    try:
        write_text_atomic(path_of(folder, index), text, 0o600)
    except OSError:
        _into_room(folder, text, index)


#: The room :func:`reserve` keeps for the record on a disk that may fill (bytes); a longer cause is cut.
ROOM_BYTES = 8192


def room_of(folder: str, index: int | None = None) -> str:
    return os.path.join(folder, f".{os.path.basename(path_of(folder, index))}.room")


def reserve(folder: str, index: int | None = None) -> None:
    """Keep room for the record while the disk has some: a file of :data:`ROOM_BYTES` spaces
    that :func:`write` overwrites and renames to ``ended.json`` when the disk is full. Best effort."""
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(room_of(folder, index), flags, 0o600)
        try:
            os.write(fd, b" " * ROOM_BYTES)
        finally:
            os.close(fd)
    except OSError:
        pass


def _into_room(folder: str, text: str, index: int | None) -> None:
    """``text`` written over the room :func:`reserve` kept (its blocks are there: a full disk
    takes it), then renamed to ``ended.json`` whole."""
    data = text.encode("utf-8")
    if len(data) > ROOM_BYTES:
        found = json.loads(text)
        found["cause"] = found["cause"][:600] + " ..."  # json escapes a character in 12 bytes at most
        if "stopped" in found:  # the first of thousands: the cause names a few
            found["stopped"] = found["stopped"][:256]
        data = (json.dumps(found) + "\n").encode("utf-8")
    try:
        fd = os.open(room_of(folder, index), os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            os.write(fd, data)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        os.replace(room_of(folder, index), path_of(folder, index))
    except OSError:
        pass


def clear(folder: str, index: int | None = None) -> None:
    """A new run: the last run's end is not this one's (nor the room kept for it)."""
    for path in (path_of(folder, index), room_of(folder, index)):
        try:
            os.unlink(path)
        except OSError:
            pass


def read(folder: str, index: int | None = None) -> dict | None:
    """``{"by", "cause", "time"}`` as :func:`write` wrote them, or None (none, or not of that shape)."""
    try:
        with open(path_of(folder, index), encoding="utf-8", errors="replace") as f:
            found = json.loads(f.read(64 << 10))
    except (OSError, ValueError):
        return None
    if not (isinstance(found, dict) and isinstance(found.get("cause"), str) and isinstance(found.get("by"), str)):
        return None
    return found


def cause(folder: str, index: int | None = None) -> str | None:
    """The line that says why hpcdist ended the job (or its subjob ``index``), or None when it did
    not. An array (no ``index``): the first subjob it ended, named (``... (subjob 3)``)."""
    found = read(folder, index)
    if found or index is not None:
        return found["cause"] if found else None
    from hpcdist.jobs.subjobs import indexed

    ended = [(i, found["cause"]) for i, _ in indexed(path_of(folder, 0)[:-1]) if (found := read(folder, i))]
    if not ended:
        return None
    more = f"; {len(ended) - 1} more subjob(s) ended so" if len(ended) > 1 else ""
    return f"{ended[0][1]} (subjob {ended[0][0]}{more})"


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
