"""Slurm's site limits as its commands print them, for :mod:`hpcdist.sweeps.limits` (cheap to
import: ``re`` only; the commands are run by the ``ask`` it hands in, which gives None where
one cannot run).

- The array cap: ``MaxArraySize`` of ``scontrol show config`` (default 1001: indices 0..1000, so
  an array indexed from 0 holds that many at most).
- The per-user job cap: the smallest ``MaxSubmitJobs`` of the user's associations (``sacctmgr
  show assoc``, where accounting runs); each array task counts.
"""

from __future__ import annotations

import re


def parse_array(text: str | None) -> int | None:
    found = re.search(r"^\s*MaxArraySize\s*=\s*(\d+)", text or "", re.M)
    return int(found.group(1)) if found else None


def parse_sacctmgr(text: str | None) -> int | None:
    """``sacctmgr -n -P``: one value a line, empty where none is set."""
    values = [int(line) for line in (text or "").split() if line.strip().isdigit()]
    return min(values) if values else None


def array_cap(ask, dialect: str | None = None) -> tuple[int, str] | None:
    value = parse_array(ask(["scontrol", "show", "config"]))
    return None if value is None else (value, "scontrol show config MaxArraySize")


def job_cap(ask, user: str, queue: str | None = None) -> tuple[int, str] | None:
    value = parse_sacctmgr(ask(["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=MaxSubmitJobs"]))
    return None if value is None else (value, f"sacctmgr show assoc user={user} MaxSubmitJobs")


def queued_command(user: str) -> list[str]:
    """Lists the user's jobs, each array task on a line of its own."""
    return ["squeue", "-h", "-r", "-u", user, "-o", "%i"]
