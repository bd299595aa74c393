"""The laptop's records of what it sent: its jobs (``.hpcdist/remote/jobs``: id, host, remote folder,
one JSON line each) and the snapshots it sent where (``.hpcdist/remote/sent``).

Where it runs: on the laptop.

A line that is not a record (cut short by a full disk, changed by hand) is skipped with one
warning naming the file and the line: the other jobs, and the jobs run here, are still found. A
submit whose answer was lost is recorded as ``pending`` (its token, the cluster, the time); the
next ``hpcdist status`` asks the login node for its answer (:mod:`hpcdist.remote.script` kept it
there) and records the job it got, or that there was none.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time

from hpcdist.remote import RECORDS, Target, marks
from hpcdist.remote.script import SUBMITS

JOBS = os.path.join(RECORDS, "jobs")
SENT = os.path.join(RECORDS, "sent")
#: The lines already warned about, in this process (one warning each, however often they are read).
_warned: set = set()


def _path(name: str) -> str:
    os.makedirs(RECORDS, mode=0o700, exist_ok=True)
    return os.path.join(RECORDS, name)


def _append(path: str, line: str) -> None:
    """``line`` at the end of ``path``, on a line of its own even after a line cut short."""
    with open(path, "a+b") as f:
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = "\n" + line
        f.write(line.encode())


def new_token() -> str:
    return secrets.token_hex(8)


def record_job(target: Target, job: dict, snapshot: str, token: str = "") -> None:
    """What the laptop keeps of a job sent to ``target``: how to find it there, nothing more."""
    entry = {"job_id": job["job_id"], "scheduler": job.get("scheduler"), "job_name": job.get("job_name"),
             **target.as_record(), "folder": job.get("folder"), "code": snapshot, "submitted_at": time.time()}
    if token:
        entry["token"] = token
    _append(_path("jobs"), json.dumps(entry) + "\n")


def record_pending(target: Target, snapshot: str, token: str) -> None:
    """A submit whose answer did not come: it may have submitted a job."""
    entry = {"job_id": "", "pending": token, **target.as_record(), "code": snapshot, "submitted_at": time.time()}
    _append(_path("jobs"), json.dumps(entry) + "\n")


def record_not_submitted(token: str) -> None:
    _append(_path("jobs"), json.dumps({"job_id": "", "settled": token}) + "\n")


def _usable(entry) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("job_id"), str):
        return False
    if "settled" in entry:
        return isinstance(entry["settled"], str)
    return all(isinstance(entry.get(key), str) for key in ("remote", "remote_folder", "remote_hpcdist"))


def all_entries() -> list[dict]:
    """Every record, pending and settled ones included; a line that is none is warned about once."""
    try:
        with open(JOBS, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    except OSError as e:
        _warn(f"{JOBS} cannot be read ({e.strerror or e}); the jobs sent from here are not shown")
        return []
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if _usable(entry):
            entries.append(entry)
        else:
            _warn(f"{JOBS} line {number} is not a record hpcdist wrote (cut short, or changed by hand); skipped")
    return entries


def _warn(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        command = sys.argv[1] if len(sys.argv) > 1 else ""
        print(f"hpcdist {command}: warning: {text}", file=sys.stderr)


def recorded_jobs() -> list[dict]:
    """The jobs sent from here, oldest first (not the pending submits)."""
    return [e for e in all_entries() if e["job_id"]]


def pending() -> list[dict]:
    """The submits whose answer has not come, and whose job (or its absence) is not recorded yet."""
    entries = all_entries()
    done = {e.get("token") for e in entries} | {e.get("settled") for e in entries}
    return [e for e in entries if e.get("pending") and e["pending"] not in done]


def find_job(ref: str) -> dict | None:
    """The newest record of job ``ref`` (its id, or its folder's name there)."""
    for entry in reversed(recorded_jobs()):
        if ref in (entry["job_id"], os.path.basename(entry.get("folder") or "")):
            return entry
    return None


def sent_before(target: Target, digest: str) -> bool:
    try:
        with open(SENT, encoding="utf-8", errors="replace") as f:
            return f"{target.host}\t{target.folder}\t{digest}\n" in f.readlines()
    except FileNotFoundError:
        return False


def record_sent(target: Target, digest: str) -> None:
    _append(_path("sent"), f"{target.host}\t{target.folder}\t{digest}\n")


def settle(target, stderr: str, kept: list[dict]) -> None:
    """The answers the login node kept of submits whose answer was lost: the job recorded here."""
    by_token = {e.get("pending"): e for e in kept if e.get("pending")}
    for mark in marks(stderr):
        word, token, status, answer = (mark.split(" ", 3) + ["", "", ""])[:4]
        if word != "answer" or token not in by_token:
            continue
        when = time.strftime("%H:%M", time.localtime(by_token[token].get("submitted_at") or 0))
        try:
            job = json.loads(answer) if status == "0" else None
        except ValueError:
            job = None
        if isinstance(job, dict) and isinstance(job.get("job_id"), str):
            record_job(target, job, by_token[token].get("code"), token)
            print(f"hpcdist status: recorded job {job['job_id']} on {target.name}: the submit of {when} whose answer "
                  f"was lost did submit it", file=sys.stderr)
        else:
            record_not_submitted(token)
            print(f"hpcdist status: the submit of {when} to {target.name} whose answer was lost submitted nothing "
                  f"(its message: {target.host}:{target.folder}/{SUBMITS}/{token}.err)", file=sys.stderr)
