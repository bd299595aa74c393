"""A sweep submitted: its sets cut into arrays the site allows, each array one hpcdist job
whose folder's ``sweep.json`` says which set each subjob runs; and ``--resubmit JOB --failed``.

How a subjob gets its set: the job script holds a ``case`` on the array index that sets one
variable per key (``sweep_lr=1e-3``), and the script's arguments end with ``--lr "$sweep_lr"``.
Arguments, not the environment: a training script reads its flags already (argparse), the
values show in its command line and log, and nothing in the script's code changes for a sweep.
The variables are exported and passed to every node as ``--propagate`` names are.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from hpcdist.shell import Shell, quote
from hpcdist.sweeps import limits
from hpcdist.sweeps.sets import flag, variable

#: The variable that holds a subjob's set number (its row in ``hpcdist status``), exported.
SET_VARIABLE = "HPCDIST_SWEEP_SET"
#: Seconds between looks at the queue while a sweep waits for room under a per-user job cap.
POLL_S = float(os.environ.get("HPCDIST_SWEEP_POLL_S", "30"))


class Part:
    """One array of a sweep: ``sets``, ``[(set number, {key: value})]`` by array index (from 0).
    What the renderer asks of it (:func:`hpcdist.submission.render.render`): :meth:`apply` (the
    spec with the set's flags after the script's arguments) and :meth:`context` (the template's
    ``sweep``); what the submission writes in the job folder: :meth:`record`."""

    def __init__(self, sweep_id: str | None, keys: list[str], sets: list, index_variable: str,
                 part: int = 0, parts: int = 1, everything: list | None = None, attempt: int = 0):
        self.sweep_id, self.keys, self.sets, self.index_variable = sweep_id, keys, sets, index_variable
        self.part, self.parts, self.everything, self.attempt = part, parts, everything, attempt

    @property
    def is_array(self) -> bool:
        """An array of one is no array (PBS refuses ``-J 0-0``): that job's index is taken as 0."""
        return len(self.sets) > 1

    def apply(self, spec):
        flags = [w for key in self.keys for w in (flag(key), Shell(f'"${variable(key)}"'))]
        names = [variable(key) for key in self.keys] + [SET_VARIABLE]
        return dataclasses.replace(spec, script_args=(*spec.script_args, *flags),
                                   propagate=tuple(dict.fromkeys((*spec.propagate, *names))))

    def context(self) -> dict:
        """The template's ``sweep``: ``lines``, each set's assignments as shell (its values quoted),
        by array index; written here, not in Jinja, as a 10,000-set sweep's script costs less so."""
        names = [variable(k) for k in self.keys]
        lines = [Shell(" ".join([f"{SET_VARIABLE}={number}",
                                 *(f"{n}={quote(one[k])}" for n, k in zip(names, self.keys))]))
                 for number, one in self.sets]
        index = self.index_variable if self.is_array else None
        return {"index": index, "index_ref": Shell(f"${{{index}:-}}") if index else None, "lines": lines,
                "numbers": [number for number, _ in self.sets],
                "variables": [variable(k) for k in self.keys], "set_variable": SET_VARIABLE,
                "part": self.part + 1, "parts": self.parts}

    def record(self, folder: str) -> dict:
        """sweep.json: the sweep it belongs to (the first array's folder name), this array's sets by
        index, and, in the sweep's first folder, every set of the sweep (its table)."""
        values = {"sweep": self.sweep_id or os.path.basename(folder), "part": self.part, "parts": self.parts,
                  "attempt": self.attempt, "array": self.is_array, "keys": self.keys,
                  "sets": [number for number, _ in self.sets]}
        if self.everything is not None:
            values["all"] = self.everything
        else:
            values["params"] = [one for _, one in self.sets]
        return values


def array_of(count: int, max_running: int | None) -> str | None:
    """The array's indices: ``0-5``, ``0-5%2`` (Slurm --array, PBS Pro -J, Torque -t all read %N:
    OpenPBS 23.06 takes ``-J 0-5%2`` as ``max_run_subjobs=2``); None for one set."""
    if count < 2:
        return None
    return f"0-{count - 1}" + (f"%{max_running}" if max_running else "")


def caps(spec) -> tuple:
    """``(array cap, job cap)``: :class:`~hpcdist.sweeps.limits.Limit` each."""
    values = {limits.ARRAY_KEY: spec.max_array_size, limits.JOBS_KEY: spec.max_submit_jobs}
    return (limits.array_cap(spec.scheduler, values, dialect=spec.dialect),
            limits.job_cap(spec.scheduler, values, spec.queue, dialect=spec.dialect))


def submit_sweep(spec, sets: list, *, command_line: str | None = None, root: str | None = None,
                 sweep_id: str | None = None, numbers: list[int] | None = None, attempt: int = 0,
                 limits_found: tuple | None = None, submit=None, count_queued=None, out=sys.stderr) -> list:
    """Submit ``sets`` (every set of the sweep; only those numbered ``numbers`` on a resubmission
    of ``sweep_id``) as few arrays as the site allows; the jobs, in order. ``submit``,
    ``count_queued``, ``limits_found``: given by the benchmark and the tests (the
    scheduler's submission, its queue, the caps); the real ones otherwise."""
    from hpcdist.schedulers.registry import get as get_scheduler

    if submit is None:
        from hpcdist.submission import submit as sub

        submit = sub.submit
    array_cap, job_cap = limits_found or caps(spec)
    size = min(c.value for c in (array_cap, job_cap) if c.value) if array_cap.value or job_cap.value else len(sets)
    numbers = list(range(len(sets))) if numbers is None else numbers
    keys = list(sets[0]) if sets else []
    here = not get_scheduler(spec.scheduler, spec.dialect).queued
    if here:  # no queue and no array: each set a job of its own, run to its end before the next
        size = 1
        print(f"hpcdist submit: the {spec.scheduler} backend runs the sweep's {len(numbers)} set(s) one after "
              f"another, here (Ctrl-C stops it; `hpcdist submit --resubmit JOB --failed` runs the rest)",
              file=out, flush=True)
    ranges = limits.split(len(numbers), size) if numbers else []
    if len(ranges) > 1 and not here:
        why = min((c for c in (array_cap, job_cap) if c.value), key=lambda c: c.value)
        print(f"hpcdist submit: {len(numbers)} sets in {len(ranges)} arrays: the site allows {why.value} in one "
              f"({why.source})", file=out)
    index_variable = get_scheduler(spec.scheduler, spec.dialect).array_index_variable
    spec = dataclasses.replace(spec, sweep=(), sweep_file=None)
    done = []
    for k, chosen in enumerate(ranges):
        part_sets = [(numbers[i], sets[numbers[i]]) for i in chosen]
        part = Part(sweep_id, keys, part_sets, index_variable, k, len(ranges),
                    everything=sets if (sweep_id is None and k == 0) else None, attempt=attempt)
        if job_cap.value:
            _wait_for_room(spec, len(chosen), job_cap, count_queued, k, len(ranges), out)
        part_spec = dataclasses.replace(spec, array=array_of(len(chosen), spec.max_running))
        if spec.max_running and done and not spec.dependency:
            # --max-running over several arrays: each starts once the one before has ended, so that
            # no more than N of the sweep run at once.
            part_spec = dataclasses.replace(part_spec, dependency=f"afterany:{done[-1].job_id}")
        job = _submit_waiting(submit, part_spec, part, command_line, root, (array_cap, job_cap), count_queued, out)
        done.append(job)
        if sweep_id is None:
            sweep_id = os.path.basename(job.path)
        if here:
            _run_to_end(job, part_sets[0], out)
    return done


def _run_to_end(job, numbered: tuple, out) -> None:
    """A set run here followed to its end, its log shown as it runs (on ``out``: stdout keeps the
    jobs' ids), so that the next starts after it."""
    from hpcdist.submission.submit import wait

    number, values = numbered
    words = " ".join(f"{key}={value}" for key, value in values.items())
    print(f"hpcdist submit: set {number} ({words}) runs as local job {job.job_id}", file=out, flush=True)
    code = wait(job, poll=0.2, out=out, quiet=True)
    print(f"hpcdist submit: set {number} ended: " + ("completed" if code == 0 else f"failed {code}"), file=out,
          flush=True)


def _submit_waiting(submit, spec, part, command_line, root, caps, count_queued, out):
    """One array's submission; refused for a per-user limit (PBS "would exceed ... per-user
    limit", Slurm "QOSMaxSubmitJob", "AssocMaxSubmitJobLimit") while jobs of the user's are
    queued, it waits for room and tries again: the sweep waits rather than stopping half-way.
    Refused for the array's size, or for a job limit with nothing of the user's queued (it would
    never fit), it stops, naming the cap hpcdist read and where, and the fix."""
    from hpcdist.schedulers.batch import SubmitError

    array_cap, job_cap = caps
    count = len(part.sets)
    while True:
        try:
            kwargs = {"command_line": command_line, "sweep": part}
            if root is not None:
                kwargs["root"] = root
            return submit(spec, **kwargs)
        except SubmitError as e:
            # The scheduler's own words: hpcdist's message around them starts "qsub did not submit".
            said = " ".join((e.said or str(e)).split())
            if size_refusal(said):
                raise SubmitError(f"{e}\nThe array of {count} sets was refused for its size; the array cap hpcdist "
                                  f"read is {array_cap.words()}. Give --max-array-size N (or the profile key "
                                  f"max_array_size) with the site's limit, e.g. the queue's (qstat -Qf).") from None
            if not limit_refusal(said):
                raise
            queued = (count_queued or queued_jobs)(spec)
            if queued == 0:
                raise SubmitError(f"{e}\nThe array of {count} sets was refused for a per-user job limit with none of "
                                  f"your jobs queued: the limit is below {count}; hpcdist read {job_cap.words()}. Give "
                                  f"--max-submit-jobs N (or the profile key max_submit_jobs) with "
                                  f"the site's limit.") from None
            print(f"hpcdist submit: the scheduler holds no more of your jobs now ({said}); array {part.part + 1} of "
                  f"{part.parts} waits {POLL_S:g} s for room", file=out, flush=True)
            time.sleep(POLL_S)


def size_refusal(message: str) -> bool:
    """A refusal for an array's size: PBS "Array job exceeds server or queue size limit", Slurm
    "Invalid job array specification"."""
    return any(w in message.lower() for w in ("array job exceeds", "invalid job array specification"))


#: Words of a scheduler's refusal for a per-user job limit.
LIMIT_WORDS = ("per-user limit", "would exceed", "MaxSubmitJob", "AssocMaxSubmitJobLimit", "QOSMaxSubmitJob",
               "job submit limit", "maximum number of jobs")


def limit_refusal(message: str) -> bool:
    return any(w.lower() in message.lower() for w in LIMIT_WORDS)


def _wait_for_room(spec, count: int, job_cap, count_queued, k: int, parts: int, out) -> None:
    """Until ``count`` more jobs fit under the per-user cap (each subjob counted)."""
    if count_queued is None:
        count_queued = queued_jobs
    said = False
    while True:
        queued = count_queued(spec)
        if queued is None or queued + count <= job_cap.value:
            return
        if not said:
            print(f"hpcdist submit: {queued} of your jobs are queued and the site allows {job_cap.words()}: array "
                  f"{k + 1} of {parts} ({count} sets) waits for room (Ctrl-C stops here; the arrays submitted go on, "
                  f"and `hpcdist submit --resubmit JOB --failed` submits the rest)", file=out, flush=True)
            said = True
        time.sleep(POLL_S)


def queued_jobs(spec) -> int | None:
    """How many jobs this user has in the queue, each subjob counted (None: cannot tell)."""
    return limits.queued(spec.scheduler)
