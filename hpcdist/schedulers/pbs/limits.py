"""PBS's site limits as its commands print them, for :mod:`hpcdist.sweeps.limits` (cheap to
import: ``re`` only; the commands are run by the ``ask`` it hands in, which gives None where
one cannot run).

- The array cap: ``max_array_size`` of ``qmgr -c 'list server'``, else of ``qstat -Bf``
  (OpenPBS and PBS Pro; the server's default, 10,000, where it is not set); Torque's
  ``max_job_array_size`` (no cap unless set).
- The per-user job cap (each subjob counts; checked on OpenPBS 23.06: with ``max_queued =
  [u:PBS_GENERIC=5]`` a third array of 4 is refused "would exceed complex's per-user limit"):
  ``max_queued`` ``[u:USER=N]`` (a user's own entry wins over ``[u:PBS_GENERIC=N]``) or
  ``[o:PBS_ALL=N]``, on the server or the queue (``qstat -Qf QUEUE``); Torque's ``max_user_queuable``.
"""

from __future__ import annotations

import re

SERVER = ((["qmgr", "-c", "list server"], "qmgr -c 'list server'"), (["qstat", "-Bf"], "qstat -Bf"))
#: The server's default max_array_size (OpenPBS, PBS Pro).
DEFAULT_ARRAY_SIZE = 10000


def attribute(text: str | None, name: str) -> str | None:
    """``name = value`` in a qmgr or qstat -Bf/-Qf listing."""
    if not text:
        return None
    found = re.search(rf"^\s*{re.escape(name)}\s*=\s*(.+?)\s*$", text, re.M)
    return found.group(1) if found else None


def parse_array(text: str | None) -> tuple[int, str] | None:
    """(max_array_size or Torque's max_job_array_size, its name) in a server listing."""
    for name in ("max_array_size", "max_job_array_size"):
        value = attribute(text, name)
        if value is not None and value.isdigit():
            return int(value), name
    return None


def parse_queued(text: str | None, user: str) -> tuple[int, str] | None:
    """(the smallest per-user queued-jobs limit, its name) in a server or queue listing."""
    found = []
    entries = attribute(text, "max_queued")
    if entries:
        pairs = dict(re.findall(r"\[([ugpo]:[^=\]]+)=(\d+)\]", entries))
        for value in (pairs.get(f"u:{user}", pairs.get("u:PBS_GENERIC")), pairs.get("o:PBS_ALL")):
            if value is not None:
                found.append((int(value), "max_queued"))
    older = attribute(text, "max_user_queuable")
    if older and older.isdigit():
        found.append((int(older), "max_user_queuable"))
    return min(found) if found else None


def array_cap(ask, dialect: str | None = None) -> tuple[int | None, str] | None:
    """(cap, where it was read), (None, where) for a Torque server without one, or None when
    no command answered."""
    for argv, words in SERVER:
        text = ask(argv)
        if text is None:
            continue
        found = parse_array(text)
        if found is not None:
            return found[0], f"{words} {found[1]}"
        if dialect == "torque":
            return None, f"{words}: no max_job_array_size"
        return DEFAULT_ARRAY_SIZE, f"{words}: max_array_size not set, PBS's default"
    return None


def job_cap(ask, user: str, queue: str | None = None) -> tuple[int, str] | None:
    limits = []
    for argv, words in SERVER:
        text = ask(argv)
        if text is not None:
            found = parse_queued(text, user)
            if found is not None:
                limits.append((found[0], f"{words} {found[1]}"))
            break
    if queue:
        found = parse_queued(ask(["qstat", "-Qf", queue]), user)
        if found is not None:
            limits.append((found[0], f"qstat -Qf {queue} {found[1]}"))
    return min(limits) if limits else None


def queued_command(user: str) -> list[str]:
    """Lists the user's jobs, each subjob on a line of its own (an array's own ``123[]`` line too)."""
    return ["qstat", "-t", "-u", user]
