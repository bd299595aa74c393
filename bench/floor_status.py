#!/usr/bin/env python3
"""The floor of ``hpcdist status`` over recorded jobs: the reading no follower of hpcdist's job
folders can skip, and nothing else.

For each folder of ``.hpcdist/jobs`` (sorted, as hpcdist lists them): the folder's owner (one
stat), ``record.json`` opened, stat'ed (its owner), read and parsed, the ``runs`` file read;
then ``squeue -h -j ID,... -o '%i|%T|%r'`` for the ids and ``sacct`` for those it left out, as
hpcdist asks: as many ids per squeue as 64 KiB holds, one sacct after each squeue
(hpcdist.schedulers.batch's ``QUERY_CHARS`` and ``chunks``: 9,362 six-digit ids a call; one
argument may not pass Linux's 128 KiB, which 20,000 ids in one would); one line per job
printed, ``<id> <state>``. No check of what was read, no objects, no hpcdist import: what it
costs to read the same files and ask the same commands, which bench_status_many.py sets beside
``hpcdist status`` (and checks its states against hpcdist's). Not a test.
"""

import json
import os
import subprocess
import sys

#: Characters of ids (each with its comma) in one command, as hpcdist.schedulers.batch.QUERY_CHARS.
QUERY_CHARS = 64 * 1024


def chunks(ids: list) -> list:
    """``ids`` cut into runs of at most QUERY_CHARS characters, a separator each (batch.chunks)."""
    out, size = [[]], 0
    for job_id in ids:
        size += len(job_id) + 1
        if size > QUERY_CHARS and out[-1]:
            out.append([])
            size = len(job_id) + 1
        out[-1].append(job_id)
    return out if out[-1] else []


def main() -> int:
    root = os.path.abspath(os.path.join(".hpcdist", "jobs"))
    records = []
    for name in sorted(os.listdir(root)):
        folder = f"{root}/{name}"
        os.stat(folder)
        fd = os.open(f"{folder}/record.json", os.O_RDONLY)
        try:
            data = os.read(fd, os.fstat(fd).st_size + 1)
        finally:
            os.close(fd)
        fd = os.open(f"{folder}/runs", os.O_RDONLY)
        try:
            os.read(fd, 1 << 16)
        finally:
            os.close(fd)
        records.append(json.loads(data))
    ids = [record["job_id"] for record in records]
    states = {}
    for chunk in chunks(ids):  # as hpcdist: per chunk, squeue, then sacct for the ids it left out
        squeue = subprocess.run(["squeue", "-h", "-j", ",".join(chunk), "-o", "%i|%T|%r"],
                                capture_output=True, text=True)
        for line in squeue.stdout.splitlines():
            job_id, state, _ = line.split("|")
            states[job_id] = state
        left = [job_id for job_id in chunk if job_id not in states]
        if left:
            sacct = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(left), "-o", "JobID,State,ExitCode"],
                                   capture_output=True, text=True)
            for line in sacct.stdout.splitlines():
                job_id, state, _ = line.split("|")
                states[job_id] = state
    sys.stdout.write("".join(f"{job_id} {states.get(job_id, 'UNKNOWN')}\n" for job_id in ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
