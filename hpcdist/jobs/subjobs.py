"""An array job's subjobs in its job folder: each writes a log and an exit-code file of its own,
named by its array index (one shared file would be overwritten by each subjob in turn).

:mod:`hpcdist.jobs` reads and writes the job folder; this module names the subjobs' files:

- the log of subjob ``i`` is ``<prefix><i><suffix>``, ``[prefix, suffix]`` being the record's
  ``subjob_logs`` (the scheduler puts the index there: ``Scheduler.array_log``);
- its exit code is in ``exit_code.<i>``: the job script's exit-code file, the index appended
  (``of_subjob`` in hpcdist/schedulers/job_folder.sh.j2);
- its ranks' progress is in ``progress.<i>/`` (:func:`progress_dir`), and how its monitor ended it
  in ``ended.json.<i>`` (:mod:`hpcdist.jobs.ending`): each subjob is watched, and ended, alone.
"""

from __future__ import annotations

import os

#: The record's key for ``[prefix, suffix]`` of the subjobs' logs.
LOGS = "subjob_logs"


def indexed(prefix: str, suffix: str = "") -> list[tuple[int, str]]:
    """``(index, path)`` of each file ``<prefix><index><suffix>`` there is, by index (none when
    the folder cannot be read)."""
    folder, start = os.path.split(prefix)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return []
    found = []
    for name in names:
        index = name[len(start):len(name) - len(suffix)] if name.startswith(start) and name.endswith(suffix) else ""
        # ASCII digits only, and few: an index, not some other file that shares the prefix.
        if (index.isascii() and index.isdigit() and len(index) <= 9
                and len(name) == len(start) + len(index) + len(suffix)):
            found.append((int(index), os.path.join(folder, name)))
    return sorted(found)


def logs_of(record: dict) -> list[tuple[int, str]] | None:
    """``(index, log)`` of the subjobs whose log is there, for a record of an array job whose
    subjobs write logs of their own; None for any other record."""
    pattern = record.get(LOGS)
    if not (isinstance(pattern, list) and len(pattern) == 2 and all(isinstance(p, str) for p in pattern)):
        return None
    return indexed(*pattern)


def of_subjob(name: str, index: int | None) -> str:
    """``name`` (a file or folder of the job folder) as subjob ``index`` has its own: ``name.<index>``;
    ``name`` itself for a job that is no array."""
    return name if index is None else f"{name}.{int(index)}"


def progress_dir(job_folder: str, index: int | None = None) -> str:
    """The ranks' progress folder of subjob ``index`` (``progress.3``), or of the job (``progress``:
    :data:`hpcdist.jobs.PROGRESS`)."""
    return os.path.join(job_folder, of_subjob("progress", index))


def index_of(path: str, name: str) -> int | None:
    """The subjob index in ``path``'s last part (``.../progress.3`` and ``progress``: 3); None without one."""
    index = os.path.basename(os.path.normpath(path)).removeprefix(name + ".")
    return int(index) if index.isascii() and index.isdigit() and len(index) <= 9 else None


def array_indices(array: str | None) -> list[int] | None:
    """The indices of an array as ``--array`` gave them (``0-15``, ``1,3,5``, ``0-15:2%4``: Slurm's,
    PBS Pro's and Torque's form), sorted; None when ``array`` is empty or not of that form."""
    if not isinstance(array, str) or not array:
        return None
    found: set[int] = set()
    for part in array.partition("%")[0].split(","):
        span, _, step = part.partition(":")
        first, dash, last = span.partition("-")
        words = [first, last if dash else first, step or "1"]
        if not all(w.isascii() and w.isdigit() and len(w) <= 9 for w in words) or int(words[2]) == 0:
            return None
        found.update(range(int(words[0]), int(words[1]) + 1, int(words[2])))
    return sorted(found)


def missing_exit_codes(job, codes: dict[int, int]) -> list[int]:
    """The subjobs of array job ``job`` (a :class:`hpcdist.jobs.Job`) whose exit code file is not
    in ``codes``; none where its spec cannot be read."""
    try:
        indices = array_indices(job.spec_values().get("array"))
    except (OSError, ValueError, AttributeError):
        return []
    return [i for i in indices or () if i not in codes]
