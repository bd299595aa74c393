"""Job folders: ``.hpcdist/jobs/<name>-<time>/`` with the script, the spec and the record.

A job is recorded only when its ``record.json`` exists, written (atomically)
after the scheduler accepted it; a submission that fails leaves nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import NamedTuple

JOBS_DIR = os.path.join(".hpcdist", "jobs")


class JobNotFound(LookupError):
    pass


class History(NamedTuple):
    """A job's runs so far (its folder's ``runs`` file)."""
    restarts: int
    current_id: str  # the newest resubmission's id, else the submitted one
    logs: list[tuple[str, str]]  # (job id, log), oldest first; the last one is being written


class Job:
    """A submitted job's folder and its record (``record.json``)."""

    def __init__(self, path: str):
        self.path = path
        with open(os.path.join(path, "record.json"), encoding="utf-8") as f:
            self.record = json.load(f)

    @property
    def job_id(self) -> str:
        return self.record["job_id"]

    def history(self) -> History:
        """What the ``runs`` file says, read once: ``start <time> <id> <host>`` for each run of
        the script, ``resubmitted <time> <id> <log>`` for each new PBS job it submitted
        (:mod:`hpcdist.requeue`; the log, a path, is the rest of the line)."""
        try:
            with open(os.path.join(self.path, "runs"), encoding="utf-8", errors="replace") as f:
                lines = [line.rstrip("\n").split(" ", 3) for line in f if line.endswith("\n")]
        except OSError:
            lines = []
        starts = 0
        # A resubmitted PBS job writes its own log (it would replace the earlier one).
        logs = [(self.job_id, self.record.get("log", ""))]
        for words in lines:
            if len(words) < 3:
                continue
            if words[0] == "start":
                starts += 1
            elif words[0] == "resubmitted":
                logs.append((words[2], words[3] if len(words) > 3 and words[3] else logs[-1][1]))
        return History(restarts=max(0, starts - 1), current_id=logs[-1][0], logs=logs)

    @property
    def current_id(self) -> str:
        """The id that goes on: the newest resubmission's, else the submitted one."""
        return self.history().current_id

    @property
    def restarts(self) -> int:
        return self.history().restarts

    @property
    def logs(self) -> list[tuple[str, str]]:
        """``(job id, log)`` of the submitted job and of each job it resubmitted, oldest first."""
        return self.history().logs

    @property
    def scheduler(self) -> str:
        return self.record["scheduler"]

    @property
    def script(self) -> str:
        return os.path.join(self.path, "job.sh")

    @property
    def log(self) -> str:
        """The log being written now (the newest run's)."""
        return self.logs[-1][1]

    def update(self, **changes) -> None:
        self.record.update(changes)
        from hpcdist.atomic import write_text_atomic

        write_text_atomic(os.path.join(self.path, "record.json"), json.dumps(self.record, indent=2) + "\n", 0o600)


class Draft:
    """A job folder being assembled.

    The folder's name is reserved with one ``mkdir`` (atomic, so jobs
    submitted in the same second never share one); the job exists only once
    :meth:`commit` writes ``record.json``, after the scheduler took it.
    :meth:`discard` removes every trace of a submission that failed.
    """

    def __init__(self, root: str, name: str):
        _make_private_dirs(root)
        base = os.path.join(root, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.path, n = base, 1
        while True:
            try:
                os.mkdir(self.path, 0o700)
                break
            except FileExistsError:
                n += 1
                self.path = f"{base}-{n}"

    def write(self, filename: str, text: str, mode: int = 0o600) -> str:
        path = os.path.join(self.path, filename)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def commit(self, record: dict) -> Job:
        from hpcdist.atomic import write_text_atomic

        write_text_atomic(os.path.join(self.path, "record.json"), json.dumps(record, indent=2) + "\n", 0o600)
        return Job(self.path)

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _make_private_dirs(path: str) -> None:
    """Create ``path`` and its missing parents 0700 (``os.makedirs`` gives the parents the
    umask's mode: with umask 0, a world-writable ``.hpcdist`` where anyone could swap ``jobs``)."""
    missing, here = [], os.path.abspath(path)
    while not os.path.isdir(here):
        missing.append(here)
        here = os.path.dirname(here)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:  # another submit made it meanwhile
            pass


def find(ref: str, root: str = JOBS_DIR) -> Job:
    """A job by its id, its folder name, or a folder path."""
    if os.path.isfile(os.path.join(ref, "record.json")):
        return Job(os.path.abspath(ref))
    for job in all_jobs(root):
        if ref in (job.job_id, os.path.basename(job.path)):
            return job
    raise JobNotFound(f"no job {ref!r} in {root}: `hpcdist status` lists the jobs submitted from here")


def all_jobs(root: str = JOBS_DIR) -> list[Job]:
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        return []
    jobs = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not name.startswith(".") and os.path.isfile(os.path.join(path, "record.json")):
            jobs.append(Job(path))
    return jobs
