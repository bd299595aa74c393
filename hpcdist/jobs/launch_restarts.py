"""A job's restarts of its launch (``--max-restarts``): its folder's ``restarts`` (:data:`RESTARTS`).

Where it runs: written inside the job by ``hpcdist restart`` (:mod:`hpcdist.injob.restart`), one
JSON object a line, appended at each restart; read on the login node by ``status`` (its REASON:
``restart 1 of 2, left out: node2``) and ``status --json`` (``launch_restarts``).

A line: ``restart`` (1 for the first), ``of`` (--max-restarts), ``time``, ``status`` (the failed
launch's exit status), ``cause`` (one line), ``step`` (the failed launch's last step),
``left_out`` (the nodes left out), ``spares`` (those that took their places), ``nodes`` (the next
launch's), and ``fewer`` (true where no spare was left and the launch went on with the nodes left:
``--min-nodes``).
"""

from __future__ import annotations

import json
import os

RESTARTS = "restarts"
#: The nodes the restarts left out, one a line: a follow-up job passes it back
#: (``--exclude-nodes @<job folder>/bad_nodes``).
BAD_NODES = "bad_nodes"


def append(folder: str, record: dict) -> None:
    """One restart's line (one write: a reader never sees half of it), and the bad nodes so far."""
    from hpcdist.jobs.atomic import write_text_atomic

    with open(os.path.join(folder, RESTARTS), "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    left = sorted({node for done in read(folder) for node in done.get("left_out", [])})
    if left:
        write_text_atomic(os.path.join(folder, BAD_NODES), "\n".join(left) + "\n")


def read(folder: str) -> list:
    """The restarts the job recorded, oldest first (none: no such file)."""
    found = []
    try:
        with open(os.path.join(folder, RESTARTS), encoding="utf-8") as f:
            for line in f:
                try:
                    found.append(json.loads(line))
                except ValueError:  # a line cut by a full disk
                    continue
    except OSError:
        pass
    return found


def words(records: list) -> str:
    """The restarts as REASON says them: ``restart 2 of 3, left out: node2 node4``, and ``, on 1
    node`` where a restart went on with fewer nodes."""
    if not records:
        return ""
    last = records[-1]
    left = [node for record in records for node in record.get("left_out", [])]
    count = len(last.get("nodes") or ())
    fewer = any(record.get("fewer") for record in records) and count
    return f"restart {last.get('restart')} of {last.get('of')}" + (
        f", left out: {' '.join(left)}" if left else ""
    ) + (f", on {count} node{'s' * (count > 1)}" if fewer else "")
