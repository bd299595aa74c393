"""A site's limits on arrays and on a user's jobs, and how a sweep is cut to fit them.

Read from the scheduler where it says them, and from ``--max-array-size``/``--max-submit-jobs`` or a
profile key (the lower wins: a queue's cap below the server's is given so); nothing is guessed. What
each scheduler's commands print is read in its own module (``hpcdist/schedulers/<name>/limits.py``:
PBS ``qmgr -c 'list server'``/``qstat -Bf`` ``max_array_size`` and ``max_queued``, Torque's
``max_job_array_size``; Slurm ``scontrol show config`` ``MaxArraySize`` and ``sacctmgr show
assoc`` ``MaxSubmitJobs``). Cheap to import: no hpcdist import at the top beyond
:mod:`hpcdist.frozen`; a scheduler's reader and ``subprocess`` only when a limit is asked for.

- :func:`array_cap`: how many subjobs one array may hold (PBS's default 10,000; Slurm's
  MaxArraySize default 1001, meaning indices 0..1000), or ``max_array_size`` given
  (``--max-array-size``, the profile key) where that is lower or the scheduler cannot be asked.
- :func:`job_cap`: how many jobs a user may have queued, each subjob counted; ``max_submit_jobs``
  given where that is lower or the scheduler says nothing.
- :func:`split`: a sweep cut into arrays under a cap.
"""

from __future__ import annotations

import os

from hpcdist.frozen import Frozen

#: The profile keys read where the scheduler does not say.
ARRAY_KEY = "max_array_size"
JOBS_KEY = "max_submit_jobs"

NO_LIMIT = "no limit known"
#: Seconds a query may take before the scheduler counts as not saying.
QUERY_TIMEOUT = 20.0
#: Names that are another's dialect: (the scheduler whose reader it is, the dialect).
ALIASES = {"torque": ("pbs", "torque"), "pbspro": ("pbs", "pro"), "openpbs": ("pbs", "pro")}


class Limit(Frozen):
    """A limit: ``value`` (``None``: no limit known) and ``source``, where it was read, in
    words a user can check (``"qmgr -c 'list server' max_array_size"``)."""

    __slots__ = ("value", "source")
    _compared = ("value", "source")

    def __init__(self, value: int | None, source: str):
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "source", source)

    def __repr__(self):
        return f"Limit(value={self.value!r}, source={self.source!r})"

    def __reduce__(self):
        return (Limit, (self.value, self.source))

    def words(self) -> str:
        """``10 (qmgr -c 'list server' max_array_size)``, or ``no limit known``."""
        return NO_LIMIT if self.value is None else f"{self.value} ({self.source})"


def _reader(scheduler: str, dialect: str | None):
    """(the scheduler's limits reader, its dialect), or (None, None) for a scheduler that has none
    (the local backend runs no arrays: only the profile key limits it)."""
    name, alias_dialect = ALIASES.get((scheduler or "").lower(), ((scheduler or "").lower(), None))
    try:
        from hpcdist.schedulers import part

        module = part(name, "limits")
    except ImportError:
        return None, None
    return module, dialect or alias_dialect


def ask(argv: list[str]) -> str | None:
    """The command's stdout, or None where it cannot run or fails (not installed, no
    permission, no server): the scheduler then does not say."""
    import subprocess

    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=QUERY_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _profile(values: dict | None, key: str) -> Limit | None:
    if not values or values.get(key) in (None, ""):
        return None
    value = int(values[key])
    if value < 1:
        raise ValueError(f"profile key {key} = {values[key]!r}: a limit is a whole number of 1 or more;"
                         f" set it to the site's limit, or remove it")
    # The spec holds the flag's value or the profile's: the two are not told apart there.
    return Limit(value, f"--{key.replace('_', '-')} or profile key {key}")


def array_cap(scheduler: str, values: dict | None = None, dialect: str | None = None) -> Limit:
    """How many subjobs one array may hold on this site, and where that was read.

    The lower of the scheduler's, where it says it (a listing without the attribute: the
    scheduler's default), and ``max_array_size`` of ``values`` (``--max-array-size`` or the
    profile key: a queue's cap below the server's); else no limit known (``value`` None). ``scheduler``:
    ``pbs``, ``slurm``, ``torque`` (or ``pbs`` with ``dialect="torque"``), ``local``."""
    reader, dialect = _reader(scheduler, dialect)
    found = reader.array_cap(ask, dialect) if reader else None
    return lower(Limit(*found) if found is not None and found[0] is not None else None, _profile(values, ARRAY_KEY))


def job_cap(scheduler: str, values: dict | None = None, queue: str | None = None,
            dialect: str | None = None) -> Limit:
    """How many jobs (each subjob counted) this user may have queued at once, and where that
    was read: the lower of the scheduler's, where it says it, and ``max_submit_jobs`` of
    ``values`` (``--max-submit-jobs`` or the profile key); else no limit known."""
    reader, _ = _reader(scheduler, dialect)
    found = reader.job_cap(ask, user(), queue) if reader else None
    return lower(Limit(*found) if found is not None else None, _profile(values, JOBS_KEY))


def lower(read: Limit | None, given: Limit | None) -> Limit:
    """The lower of the scheduler's limit and the one given (``--max-array-size``, a profile key):
    a queue's cap below the server's is one the user gives, and the server's still holds above a
    larger one given; no limit known where neither is."""
    known = [limit for limit in (read, given) if limit is not None and limit.value is not None]
    return min(known, key=lambda limit: limit.value) if known else Limit(None, NO_LIMIT)


def queued(scheduler: str) -> int | None:
    """How many jobs this user has queued or running, each subjob counted (an array's own line
    in PBS's listing is not a job of its own); None where the scheduler cannot be asked."""
    reader, _ = _reader(scheduler, None)
    text = ask(reader.queued_command(user())) if reader else None
    if text is None:
        return None
    ids = [line.split()[0] for line in text.splitlines() if line[:1].isdigit()]
    return sum(1 for i in ids if "[]" not in i)


def user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "")


def split(count: int, cap: int) -> list[range]:
    """Cut ``count`` sets (indices 0..count-1) into as few arrays as ``cap`` allows, each a
    range of consecutive indices, sizes as even as they can be (25 under 10: 9, 8, 8;
    never a tail of one where it can be helped: PBS refuses an array of one). Together they
    hold every index once."""
    if count < 0:
        raise ValueError(f"count {count}: a sweep holds 0 or more sets")
    if cap < 1:
        raise ValueError(f"cap {cap}: an array holds at least one job; check the site's limit")
    if count == 0:
        return []
    arrays = -(-count // cap)
    size, extra = divmod(count, arrays)
    ranges, start = [], 0
    for k in range(arrays):
        stop = start + size + (1 if k < extra else 0)
        ranges.append(range(start, stop))
        start = stop
    return ranges
