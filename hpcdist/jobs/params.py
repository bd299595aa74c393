"""A sweep's array's ``sweep.json`` in its job folder (:mod:`hpcdist.jobs` owns the folder):
which parameter set each subjob runs, the sweep it belongs to, and in the sweep's first folder
every set (:mod:`hpcdist.sweeps.arrays` says what it holds)."""

from __future__ import annotations

import os

SWEEP = "sweep.json"


def write_sweep(draft, values: dict) -> str:
    """``sweep.json`` in a folder being assembled (:class:`hpcdist.jobs.Draft`), before the job is submitted."""
    import json  # not at the top: `hpcdist status` reads none for a plain job

    return draft.write(SWEEP, json.dumps(values, separators=(",", ":")) + "\n")


def read_sweep(folder: str) -> dict | None:
    """A sweep's array's ``sweep.json``, or None for a job that is no sweep's (or a file that
    cannot be read as one: the job is shown as a plain job)."""
    import json

    try:
        with open(os.path.join(folder, SWEEP), encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError):
        return None
    return values if isinstance(values, dict) else None
