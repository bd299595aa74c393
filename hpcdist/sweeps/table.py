"""``hpcdist status JOB`` of a sweep: every set's state and parameters, over all the sweep's
arrays (split under the site's cap, and resubmitted), as a table or as JSON; and which sets
``--resubmit JOB --failed`` runs again.

A set's state comes from the newest array that ran it: its subjob's exit-code file in that
array's folder when it ended (``hpcdist.jobs``), else the array's state from the scheduler (one
query for all the arrays), a subjob whose log is there counted as running.
"""

from __future__ import annotations

import os

#: A set's states, besides the scheduler's (PENDING, RUNNING, COMPLETED, FAILED ...).
NOT_SUBMITTED, ENDED = "NOT SUBMITTED", "ENDED"
#: The states ``--failed`` runs again: failed or killed, or never run.
AGAIN = ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         ENDED, NOT_SUBMITTED)


def sweep_of(job) -> dict | None:
    """The sweep the job is an array of: ``{"id", "keys", "sets", "arrays": [(job, its sweep.json)]}``
    (arrays oldest first), or None for a job that is no sweep's."""
    from hpcdist import jobs
    from hpcdist.jobs.params import read_sweep

    mine = read_sweep(job.path)
    if mine is None:
        return None
    sweep_id, root = mine.get("sweep"), os.path.dirname(job.path)
    arrays = []
    for other in jobs.all_jobs(root):
        record = mine if other.path == job.path else read_sweep(other.path)
        if record is not None and record.get("sweep") == sweep_id:
            arrays.append((other, record))
    arrays.sort(key=lambda pair: (pair[0].record.get("submitted_at") or 0, pair[1].get("part", 0)))
    everything = next((r["all"] for _, r in arrays if isinstance(r.get("all"), list)), None)
    if everything is None:  # the first folder is gone: the sets its arrays hold
        found = {}
        for _, r in arrays:
            found.update(zip(r.get("sets", []), r.get("params", [])))
        everything = [found.get(n, {}) for n in range(max(found, default=-1) + 1)]
    return {"id": sweep_id, "keys": mine.get("keys", []), "sets": everything, "arrays": arrays}


def rows(sweep: dict, states: list | None = None) -> list[dict]:
    """One row per set: ``set``, ``state``, ``exit_code``, ``job_id`` (the array's) and ``index``
    (its subjob), ``params``, ``log``. ``states``: each array's JobStatus (asked when None)."""
    from hpcdist import jobs
    from hpcdist.jobs.subjobs import logs_of

    arrays = sweep["arrays"]
    if states is None:
        states = array_states([job for job, _ in arrays])
    out = {n: {"set": n, "state": NOT_SUBMITTED, "exit_code": None, "job_id": None, "index": None,
               "params": one, "log": None, "reason": None} for n, one in enumerate(sweep["sets"])}
    for (job, record), state in zip(arrays, states):
        numbers = record.get("sets", [])
        is_array = record.get("array", len(numbers) > 1)
        codes = jobs.read_subjob_exit_codes(job.path) if is_array else {}
        if not is_array:
            code = jobs.read_exit_code(job.path)
            codes = {} if code is None else {0: code}
        logs = dict(logs_of(job.record) or []) if is_array else {0: job.record.get("log")}
        for index, number in enumerate(numbers):
            if number not in out:
                continue
            code = codes.get(index)
            if code is not None:
                word, reason = ("COMPLETED", None) if code == 0 else ("FAILED", _why(code))
            elif state is None:
                word, reason = "UNKNOWN", None
            elif state.finished:
                word, reason = ENDED, "no exit code: killed before it ended, or never started"
                if state.state in ("CANCELLED", "TIMEOUT"):
                    word = state.state
            else:
                started = index in logs and os.path.exists(logs[index] or "")
                word = "RUNNING" if state.state == "RUNNING" and started else "PENDING" if state.state in (
                    "RUNNING", "PENDING") else state.state
                reason = state.reason if word == "PENDING" else None
            out[number].update(state=word, exit_code=code, job_id=job.job_id, index=index if is_array else None,
                               log=logs.get(index), reason=reason)
    return [out[n] for n in sorted(out)]


def _why(code: int) -> str | None:
    if code > 128:
        import signal

        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:
            return None
    return None


def array_states(arrays: list) -> list:
    """Each array job's state, one scheduler query for them all (None where it cannot be told)."""
    if not arrays:
        return []
    from hpcdist.submission import submit as sub

    states = sub.statuses(arrays)
    out = []
    for job, state in zip(arrays, states):
        try:
            out.append(sub.status(job) if state is None else state)
        except sub.SubmitError:
            out.append(None)
    return out


def summary(sweep: dict, table: list[dict]) -> str:
    counts = {}
    for row in table:
        counts[row["state"].lower()] = counts.get(row["state"].lower(), 0) + 1
    arrays = len(sweep["arrays"])
    said = ", ".join(f"{n} {word}" for word, n in counts.items())
    return f"sweep {sweep['id']}: {len(table)} sets in {arrays} array(s); {said}"


def text(sweep: dict, table: list[dict]) -> str:
    """The table a person reads: one line per set."""
    from hpcdist.sweeps.sets import words

    head = ["SET", "STATE", "EXIT", "JOB", "PARAMETERS"]
    lines = []
    for row in table:
        job = row["job_id"] or "-"
        if row["index"] is not None:
            job = f"{job} [{row['index']}]"
        params = words(row["params"])
        if row["reason"]:
            params += f"  ({row['reason']})"
        lines.append([str(row["set"]), row["state"].lower(), "" if row["exit_code"] is None else str(row["exit_code"]),
                      job, params])
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(4)]
    shown = [summary(sweep, table)]
    shown += ["  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(r)).rstrip()
              for r in [head, *lines]]
    return "\n".join(shown) + "\n"


def as_json(sweep: dict, table: list[dict]) -> list[dict]:
    """``status --json``: a row per set, with the keys of every job's row (``job_id`` the array's,
    ``log`` the subjob's; "-" for a set never submitted) and the sweep's own: ``sweep``, ``set``,
    ``index`` (the subjob), ``params``. A list, as for any job: a laptop's hpcdist reads it too."""
    folders = {job.job_id: job for job, _ in sweep["arrays"]}
    out = []
    for row in table:
        job = folders.get(row["job_id"])
        out.append({"job_id": row["job_id"] or "-", "name": job.record.get("job_name", "") if job else "",
                    "scheduler": job.scheduler if job else "-", "state": row["state"], "exit_code": row["exit_code"],
                    "reason": row["reason"], "restarts": 0, "current_job_id": row["job_id"],
                    "folder": job.path if job else None, "log": row["log"], "sweep": sweep["id"], "set": row["set"],
                    "index": row["index"], "params": row["params"]})
    return out


def to_run_again(table: list[dict]) -> list[int]:
    """The sets ``--failed`` runs again: failed, killed, or never submitted."""
    return [row["set"] for row in table if row["state"] in AGAIN]
