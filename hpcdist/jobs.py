"""Job folders: ``.hpcdist/jobs/<name>-<time>/`` with the script, the spec and the record.

A folder appears whole or not at all: it is assembled under a temporary
name and renamed into place only after the scheduler accepted the job. A
submission that fails leaves nothing recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

JOBS_DIR = os.path.join(".hpcdist", "jobs")


class JobNotFound(LookupError):
    pass


class Job:
    """A submitted job's folder and its record (``record.json``)."""

    def __init__(self, path: str):
        self.path = path
        with open(os.path.join(path, "record.json"), encoding="utf-8") as f:
            self.record = json.load(f)

    @property
    def job_id(self) -> str:
        return self.record["job_id"]

    @property
    def scheduler(self) -> str:
        return self.record["scheduler"]

    @property
    def script(self) -> str:
        return os.path.join(self.path, "job.sh")

    @property
    def log(self) -> str:
        return self.record["log"]

    def update(self, **changes) -> None:
        self.record.update(changes)
        from hpcdist.atomic import write_text_atomic

        write_text_atomic(os.path.join(self.path, "record.json"), json.dumps(self.record, indent=2) + "\n", 0o600)


class Draft:
    """A job folder being assembled.

    :meth:`place` moves it to its final name (the scheduler must see the
    script where it stays); :meth:`commit` records the job once the scheduler
    took it; :meth:`discard` removes every trace of a submission that failed.
    """

    def __init__(self, root: str, name: str):
        os.makedirs(root, mode=0o700, exist_ok=True)
        self.root = root
        self.name = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.tmp = tempfile.mkdtemp(prefix=f".{self.name}.", dir=root)  # mode 0700
        self.final = os.path.join(root, self.name)
        n = 1
        while os.path.exists(self.final):
            n += 1
            self.final = os.path.join(root, f"{self.name}-{n}")

    def write(self, filename: str, text: str, mode: int = 0o600) -> str:
        path = os.path.join(self.tmp, filename)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def place(self) -> str:
        os.rename(self.tmp, self.final)
        self.tmp = self.final
        return self.final

    def commit(self, record: dict) -> Job:
        from hpcdist.atomic import write_text_atomic

        write_text_atomic(os.path.join(self.tmp, "record.json"), json.dumps(record, indent=2) + "\n", 0o600)
        return Job(self.tmp)

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


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
