#!/usr/bin/env python3
"""Print hpcdist's answer next to each peer's for the environments of tests/peer_envs.py (issue 13).

Not a test and not a timing: a markdown table, one row per vector. Each environment is resolved
with ``hpcdist.env.resolve(environ)`` (a pure function of the mapping, never ``os.environ``);
the files a vector names are written to a temporary folder first, and ``socket.gethostname``
answers the vector's ``hostname`` where the peer's test mocks it.

``same?`` compares only the fields the peer gives. A ``master_port`` the peer derives from the
job id is its own convention: it counts only when ``MASTER_PORT`` is set in the vector.
"""

import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # this checkout's hpcdist
sys.path.insert(0, os.path.join(REPO, "tests"))  # peer_envs

from hpcdist.env.model import FIELDS  # noqa: E402
from peer_envs import PEER_ENVS, hpcdist_answer, verdict  # noqa: E402

SHORT = {"rank": "r", "local_rank": "lr", "world_size": "ws", "local_world_size": "lws",
         "node_rank": "nr", "master_addr": "addr", "master_port": "port"}


def show(values: dict) -> str:
    return " ".join(f"{SHORT[f]}={values[f]}" for f in FIELDS if f in values) or "-"


def main() -> int:
    rows = ["| name | peer answer | hpcdist answer | same? |", "|---|---|---|---|"]
    counts = {}
    with tempfile.TemporaryDirectory() as folder:
        for vector in PEER_ENVS:
            answer = hpcdist_answer(vector, folder)
            shown = show(answer) if isinstance(answer, dict) else "DistEnvError: " + answer[:100]
            peer = show(vector["peer_answer"])
            if vector.get("peer_error"):
                peer += " (raises: " + vector["peer_error"][:60] + ")"
            same = verdict(vector, answer)
            kind = same.split(":")[0].split(" (")[0]
            counts[kind] = counts.get(kind, 0) + 1
            rows.append(f"| {vector['name']} | {peer} | {shown.replace('|', '/')} | {same} |")
    print("\n".join(rows))
    print()
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), f"(of {len(PEER_ENVS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
