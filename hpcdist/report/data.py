"""What a report shows, gathered from a job's folder as one JSON-able object.

Where it runs: the login node (``hpcdist report``, and ``hpcdist report --data`` for a laptop's
``--remote``). Every number comes through the readers of ``status --json``
(:func:`hpcdist.cli.status.status_rows`), ``watch --json`` (:func:`hpcdist.cli.watch.snapshot`) and
a sweep's ``status --json`` (:mod:`hpcdist.sweeps.table`); the steps over the run from the
monitor's timeline (:mod:`hpcdist.progress.timeline`).
"""

from __future__ import annotations

import json
import os

from hpcdist.cli.commands import CommandError

#: The bytes of a log's end searched for its last error line (as ``hpcdist logs`` reads it).
ERROR_TAIL = 256 << 10
#: The job spec's values the page lists as the job's facts, with their headings.
FACTS = (("scheduler", "scheduler"), ("nodes", "nodes"), ("procs_per_node", "processes per node"),
         ("gpus_per_node", "GPUs per node"), ("launcher", "launcher"), ("hang_timeout_s", "--hang-timeout (s)"),
         ("max_restarts", "--max-restarts"))


def gather(ref: str, index: int | None = None) -> dict:
    """The page's data for the job (or sweep) ``ref``; CommandError for a job not found."""
    from hpcdist import jobs

    try:
        job = jobs.find(ref)
    except (jobs.JobNotFound, jobs.JobFolderError) as e:
        raise CommandError(str(e)) from None
    from hpcdist.sweeps import table

    sweep = table.sweep_of(job) if index is None else None
    return _sweep(sweep) if sweep is not None else _job(job, index)


def _job(job, index: int | None) -> dict:
    from hpcdist.cli import status as status_command
    from hpcdist.cli import watch as watch_commands
    from hpcdist.jobs import ending, launch_restarts
    from hpcdist.progress import timeline

    index = watch_commands.subjob_index(job, index, "report")
    (row,) = status_command.with_startup(status_command.status_rows([job.path]))
    status, view = watch_commands.view_of(job, index)
    snapshot = watch_commands.snapshot(job, view, status, index)
    run, started = watch_commands.this_run(job, index)
    try:
        spec = job.spec_values()
    except (OSError, ValueError):
        spec = {}
    ended_by = _read_json(ending.path_of(job.path, index))
    return {"kind": "job", "job_id": job.job_id, "index": index, "name": job.record.get("job_name", ""),
            "command": job.record.get("command_line") or " ".join([spec.get("script") or "?",
                                                                   *spec.get("script_args", [])]),
            "facts": [(heading, spec.get(key)) for key, heading in FACTS if spec.get(key) is not None],
            "submitted_at": job.record.get("submitted_at"), "run_started": started, "run": run,
            "ended_at": _mtime(os.path.join(job.path, "exit_code")), "ended_by": ended_by,
            "status": row, "watch": snapshot, "restarts": launch_restarts.read(job.path),
            "timeline": timeline.read(watch_commands.progress_dir(job, index), run),
            **(_log_end(row.get("log"), row.get("exit_code"))
               if row.get("state") not in ("COMPLETED", "RUNNING") else {})}


def _sweep(sweep: dict) -> dict:
    """The sweep's sets as ``status --json`` gives them, each with its log's last write (when it
    last said anything) and, for one that failed, its log's last error line."""
    from hpcdist.sweeps import table

    found = table.rows(sweep)
    rows = table.as_json(sweep, found)
    for row in rows:
        row["last_output"] = _mtime(row["log"]) if row.get("log") else None
        if row["state"] in table.AGAIN:  # its error line, else what its log says (never blank)
            end = _log_end(row.get("log"), row["exit_code"])
            row["error_line"] = end.get("error_line") or end["log_end"]
        else:
            row["error_line"] = None
    return {"kind": "sweep", "sweep": sweep["id"], "keys": sweep["keys"], "summary": table.summary(sweep, found),
            "sets": rows}


def _log_end(log: str | None, exit_code) -> dict:
    """``{"error_line": ...}``, the log's last error line as ``hpcdist logs`` finds it; else
    ``{"log_end": ...}``, what is true instead: ``no error line; exit 3; the log's last line: ...``
    (or ``the log is empty``), ``no log; exit 3`` (none written, or none recorded)."""
    from hpcdist.failures import error_line
    from hpcdist.jobs.logfiles import read_tail

    code = "no exit code" if exit_code is None else f"exit {exit_code}"
    try:
        text = read_tail(log, ERROR_TAIL) if log else None
    except FileNotFoundError:
        text = None
    except OSError as e:
        return {"log_end": f"its log not read ({log}: {e.strerror or e}); {code}"}
    if text is None:
        return {"log_end": f"no log; {code}"}
    found = error_line(text)
    if found:
        return {"error_line": found}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = f"the log's last line: {lines[-1][:300]}" if lines else "the log is empty"
    return {"log_end": f"no error line; {code}; {last}"}


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
