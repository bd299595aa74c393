"""The sweep's side of ``hpcdist submit`` and ``hpcdist status`` (:mod:`hpcdist.cli.jobs` and
:mod:`hpcdist.cli.status` call these): submit a sweep, resubmit its failed sets, show it."""

from __future__ import annotations

import sys

from hpcdist.cli.commands import CommandError


def submit(args, spec, command_line: str) -> int:
    """``hpcdist submit --sweep ...``: the arrays' ids, one a line (``--json``: one object)."""
    from hpcdist.schedulers.registry import get as get_scheduler
    from hpcdist.sweeps import arrays
    from hpcdist.sweeps.sets import parameter_sets

    sets = parameter_sets(spec.sweep, spec.sweep_file)  # ValidationError: the command prints it
    if args.dry_run:
        return render_first(spec, command_line, sets=sets)
    if args.wait and get_scheduler(spec.scheduler, spec.dialect).queued:  # a local sweep runs to its end
        raise CommandError("--wait: a sweep is followed with `hpcdist status JOB` (each set's state); leave --wait out")
    from hpcdist.submission import submit as sub

    try:
        done = arrays.submit_sweep(spec, sets, command_line=command_line)
    except (sub.SubmitError, sub.JobFolderError) as e:
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:
        return 130
    _print(spec.scheduler, done, len(sets), args.json)
    return 0


def _print(scheduler: str, done: list, count: int, as_json: bool) -> None:
    if as_json:
        import json

        import os

        print(json.dumps({"sweep": os.path.basename(done[0].path), "sets": count,
                          "job_ids": [job.job_id for job in done], "folders": [job.path for job in done],
                          "job_id": done[0].job_id}))
        return
    for job in done:
        print(job.job_id)
    print(f"hpcdist submit: {scheduler} sweep of {count} set(s) in {len(done)} array(s), first {done[0].job_id}; "
          f"each set's state: hpcdist status {done[0].job_id}", file=sys.stderr)


def render_first(spec, command_line: str, sets: list | None = None, dry_run: bool = True) -> int:
    """The script of the sweep's first array (``hpcdist render``, ``submit --dry-run``), and on
    stderr how many arrays the site's caps make."""
    import dataclasses

    from hpcdist.schedulers.registry import get as get_scheduler
    from hpcdist.submission.render import render
    from hpcdist.sweeps import arrays, limits
    from hpcdist.sweeps.sets import parameter_sets

    if sets is None:
        sets = parameter_sets(spec.sweep, spec.sweep_file)

    array_cap, job_cap = arrays.caps(spec)
    caps = [c.value for c in (array_cap, job_cap) if c.value]
    scheduler = get_scheduler(spec.scheduler, spec.dialect)
    here = not scheduler.queued  # each set a job of its own, one after another (arrays.submit_sweep)
    ranges = limits.split(len(sets), 1 if here else min(caps)) if caps or here else [range(len(sets))]
    first = ranges[0]
    part = arrays.Part("<sweep>", list(sets[0]), [(n, sets[n]) for n in first], scheduler.array_index_variable,
                       0, len(ranges))
    part_spec = dataclasses.replace(spec, sweep=(), sweep_file=None,
                                    array=arrays.array_of(len(first), spec.max_running))
    sys.stdout.write(render(part_spec, command_line=command_line, sweep=part))
    said = "hpcdist submit: dry run, nothing submitted; " if dry_run else "hpcdist render: "
    if here:
        print(f"{said}{len(sets)} set(s), run one after another on this machine, each a job of its own; the first "
              "shown", file=sys.stderr)
        return 0
    print(f"{said}{len(sets)} set(s) in {len(ranges)} array(s) (the array cap: {array_cap.words()}; the job cap: "
          f"{job_cap.words()}); the first shown", file=sys.stderr)
    return 0


def _find(ref: str):
    from hpcdist import jobs

    try:
        return jobs.find(ref)
    except (jobs.JobNotFound, jobs.JobFolderError) as e:
        raise CommandError(str(e)) from None


def status(ref: str, as_json: bool) -> bool:
    """Show the sweep ``ref`` is an array of; False when it is no sweep's (a plain job's row then)."""
    import os

    from hpcdist import jobs
    from hpcdist.jobs.params import SWEEP

    # A stat per folder first: where no folder is a sweep's, `status JOB` reads no record twice.
    folders = [ref] if os.path.isdir(ref) else [os.path.join(jobs.JOBS_DIR, n) for n in _names(jobs.JOBS_DIR)]
    if not any(os.path.exists(os.path.join(folder, SWEEP)) for folder in folders):
        return False
    from hpcdist.sweeps import table

    try:
        job = jobs.find(ref)
    except (jobs.JobNotFound, jobs.JobFolderError):
        return False  # the job rows say what is wrong
    sweep = table.sweep_of(job)
    if sweep is None:
        return False
    found = table.rows(sweep)
    if as_json:
        import json

        print(json.dumps(table.as_json(sweep, found), indent=2))
    else:
        sys.stdout.write(table.text(sweep, found))
    return True


def _names(root: str) -> list[str]:
    import os

    try:
        return os.listdir(root)
    except OSError:
        return []


def _in_folder(output: str | None, job) -> bool:
    """Whether ``output`` (a recorded spec's log, relative to the job's working folder) lies in the
    job's own folder: hpcdist's default log, not one the user named."""
    import os

    if not output:
        return False
    where = os.path.join(job.record.get("workdir") or os.getcwd(), output)
    return os.path.dirname(os.path.abspath(where)) == os.path.abspath(job.path)


def resubmit(args, command_line: str) -> int:
    """``hpcdist submit --resubmit JOB --failed``: the sweep's failed, killed and never-submitted
    sets as new arrays of the same sweep, with the spec they were submitted with."""
    import dataclasses

    from hpcdist.submission.spec import JobSpec
    from hpcdist.sweeps import arrays, table

    if not args.resubmit or not args.failed:
        raise CommandError("--resubmit JOB --failed: both are needed (the sweep, and which of its sets: --failed, "
                           "those that failed, were killed or never ran)")
    if getattr(args, "script", None):
        raise CommandError(f"--resubmit {args.resubmit}: the sweep's own script runs again; leave {args.script} "
                           "(and its arguments) out")
    job = _find(args.resubmit)
    sweep = table.sweep_of(job)
    if sweep is None:
        raise CommandError(f"--resubmit {args.resubmit}: job {job.job_id} is no sweep's array (submitted without "
                           "--sweep); submit it again with hpcdist submit")
    found = table.rows(sweep)
    again = table.to_run_again(found)
    running = [r["set"] for r in found if r["state"] in ("PENDING", "RUNNING")]
    if not again:
        raise CommandError(f"--failed: no set of sweep {sweep['id']} failed or was killed"
                           + (f" ({len(running)} still queued or running)" if running else "")
                           + f"; `hpcdist status {args.resubmit}` shows them")
    first_job = sweep["arrays"][0][0]
    try:
        values = first_job.spec_values()
        spec = JobSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
        # Each array its own indices, dependency and log: the recorded output is the first array's
        # own (job.%a.log in its folder), and a new array writing there overwrote its subjobs' logs
        # (found on the Slurm test cluster). A user's --output, elsewhere, is kept.
        spec = dataclasses.replace(spec, array=None, dependency=None,
                                   output=None if _in_folder(spec.output, first_job) else spec.output)
    except (OSError, ValueError, TypeError) as e:
        raise CommandError(f"--resubmit: the sweep's spec in {first_job.path} cannot be read ({e}); submit the "
                           "sweep again") from None
    attempt = 1 + max(r.get("attempt", 0) for _, r in sweep["arrays"])
    from hpcdist.submission import submit as sub

    try:
        done = arrays.submit_sweep(spec, sweep["sets"], command_line=command_line, sweep_id=sweep["id"],
                                   numbers=again, attempt=attempt)
    except (sub.SubmitError, sub.JobFolderError) as e:
        raise CommandError(str(e)) from None
    except KeyboardInterrupt:
        return 130
    if args.json:
        import json

        print(json.dumps({"sweep": sweep["id"], "sets": again, "job_ids": [j.job_id for j in done],
                          "folders": [j.path for j in done], "job_id": done[0].job_id}))
    else:
        for j in done:
            print(j.job_id)
        print(f"hpcdist submit: set(s) {', '.join(map(str, again))} of sweep {sweep['id']} again, in "
              f"{len(done)} array(s); hpcdist status {args.resubmit} shows the sweep", file=sys.stderr)
    return 0
