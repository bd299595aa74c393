"""``hpcdist status``: the state of submitted jobs, as a table or as JSON (also what a laptop's
``status``, :mod:`hpcdist.cli.remote`, and a report, :mod:`hpcdist.report.data`, read of them).
Runs where the user types ``hpcdist`` (the login node).

A module of its own, not :mod:`hpcdist.cli.jobs`'s: the command typed most loads no other
command's module, and with no jobs none of the job folders' or schedulers' code either.
"""

from __future__ import annotations

import os

from hpcdist import STATE_DIR
from hpcdist.cli.commands import CommandError


def run_status(args: Namespace) -> int:
    if len(args.jobs) == 1:  # a sweep's array: every set's row (hpcdist.sweeps.table)
        from hpcdist.sweeps import cli as sweeps

        if sweeps.status(args.jobs[0], args.json):
            return 0
    rows = [] if _nothing_submitted_here(args) else status_rows(args.jobs)
    if not rows and not args.jobs and not args.json:  # not a table with no rows: what to do first
        folder = os.environ.get("HPCDIST_JOBS_DIR")  # where hpcdist.jobs keeps them, when not here
        print(f"no jobs {f'in {folder}' if folder else f'submitted from {os.getcwd()}'} yet; submit one with: "
              "hpcdist submit --scheduler local --nodes 2 --wait train.py (hpcdist render shows its job script first)")
        return 0
    show_rows(rows, args.json)
    return 0


def _nothing_submitted_here(args: Namespace) -> bool:
    """Plain ``hpcdist status`` where no ``.hpcdist`` is: no job folder, and none that could be
    wrong, so hpcdist.jobs is not loaded to say so (it would cost the first command a user
    types 5% more than all the rest)."""
    return not (args.jobs or args.json or os.environ.get("HPCDIST_JOBS_DIR")
                or os.path.lexists(STATE_DIR))


def status_rows(refs: list[str]) -> list[dict]:
    """``hpcdist status``'s rows for the jobs ``refs`` names (all from here when none)."""
    from hpcdist import jobs  # not at the top: `hpcdist status` with nothing submitted here needs none

    try:
        selected = jobs.select(refs)
    except (jobs.JobNotFound, jobs.JobFolderError) as e:
        raise CommandError(str(e)) from None
    states = []
    if selected:  # the schedulers' code, and json (launch_restarts), only for jobs to ask about
        from hpcdist.cli import watch  # a running job's progress
        from hpcdist.jobs import launch_restarts
        from hpcdist.submission import submit as sub

        # All at once: one command per scheduler (and cluster) for many jobs, none for a job whose
        # end is recorded, and one controller that cannot be reached answers for all its jobs.
        states = sub.statuses(selected)
    rows = []
    for job, state in zip(selected, states):
        if isinstance(job, jobs.Broken):  # one row saying what is wrong; the other jobs go on
            rows.append(job.row())
            continue
        try:
            state = sub.status(job) if state is None else state  # None: a record to ask about alone
            state, exit_code, reason = state.state, state.exit_code, state.reason
        except sub.SubmitError as e:
            state, exit_code, reason = "UNKNOWN", None, str(e)
        # Read after the state: the runs file, once per job, then as new as the state.
        runs = job.history()
        if runs.restarts:
            now = f", now job {runs.current_id}" if runs.current_id != job.job_id else ""
            reason = f"restarted {runs.restarts} time(s){now}" + (f"; {reason}" if reason else "")
        if state == "FAILED" and not reason:  # the scheduler says nothing: the log does
            reason = sub.reason_in_log(job)
        relaunched = launch_restarts.read(job.path)  # --max-restarts: the launch's restarts in the job
        if relaunched:
            reason = launch_restarts.words(relaunched) + (f"; {reason}" if reason else "")
        record = job.record
        rows.append({"job_id": record["job_id"], "name": record.get("job_name", ""), "scheduler": record["scheduler"],
                     "state": state, "exit_code": exit_code, "reason": reason, "restarts": runs.restarts,
                     "current_job_id": runs.current_id, "launch_restarts": relaunched, "folder": job.path,
                     "log": runs.logs[-1][1],
                     "progress": watch.status_column(job, state)})
    return rows


def with_startup(rows: list[dict]) -> list[dict]:
    """``status --json``'s rows: each with where the start-up went, per node
    (:mod:`hpcdist.progress.startup`), as the monitor wrote it."""
    from hpcdist.cli import watch

    for row in rows:
        if row.get("folder") and "startup" not in row:
            row["startup"] = watch.startup_of(row["folder"])
    return rows


def show_rows(rows: list[dict], as_json: bool) -> None:
    """The rows as a table, or as JSON (what a laptop's hpcdist reads from the login node's)."""
    if as_json:
        with_startup(rows)
        import json  # not at the top: it would cost `hpcdist status` 7%

        print(json.dumps(rows, indent=2))
        return
    lines = [f"{'JOB':<12} {'NAME':<24} {'SCHEDULER':<9} {'STATE':<10} {'EXIT':<5} REASON"]
    for r in rows:
        exit_code = "" if r["exit_code"] is None else str(r["exit_code"])
        # A running job's progress (hpcdist watch) before its reason: PBS's comment of a running job
        # ("Job run at ...") once hid the step rate and HUNG there.
        reason = r.get("progress") or r["reason"] or ""
        lines.append(f"{r['job_id']:<12} {r['name'][:24]:<24} {r['scheduler']:<9} {r['state'].lower():<10} "
                     f"{exit_code:<5} {reason}")
    print("\n".join(lines))  # one write: a print per row costs 2,000 jobs' status 5%
