"""submitit's PBS executor: ``submitit.AutoExecutor(folder, cluster="pbs")``.

Where it runs: the login node (the user's Python process).

A submission is one of hpcdist's jobs: the executor's parameters become hpcdist's job options
(:mod:`hpcdist.functions.parameters`, over the profile ``profile`` names), hpcdist renders the PBS
script (its template: directives by PBS's rules, the job's set-up, several tasks started on every
node by hpcdist's spread) and submits it (:func:`hpcdist.submission.submit.submit`), so that the
job has a folder in ``.hpcdist/jobs`` of the current directory (``hpcdist status``, ``hpcdist
logs`` know it) and its states are hpcdist's PBS status, true with job history on and off.
``map_array`` (and ``batch()``) submit one array job (``-J``, Torque ``-t``), or several where the
site's array cap (:mod:`hpcdist.sweeps.limits`) is smaller than the map; their results come back in
the order of the map.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import typing as tp
import uuid
from pathlib import Path

from submitit.core import core, utils

from hpcdist.functions import parameters as P

#: The program each task runs (a file: ``python -m`` cannot be every launcher's program).
TASK = str(Path(__file__).with_name("task.py"))
#: Beside submitit's pickles: for each PBS job, the hpcdist job folder that holds its record.
INDEX = ".hpcdist-jobs"


def _index_root(folder) -> Path:
    return utils.JobPaths.get_first_id_independent_folder(folder) / INDEX


def record_folder(index_root: Path, job_id: str) -> str | None:
    """The hpcdist job folder of submitit's job ``job_id`` (``123`` or ``123_4``), or None."""
    try:
        return (index_root / job_id.split("_")[0]).read_text().strip() or None
    except OSError:
        return None


class PbsInfoWatcher(core.InfoWatcher):
    """The states of every job the executor submitted, from hpcdist's PBS status: one ``qstat``
    for all of them (:func:`hpcdist.submission.submit.statuses`). A subjob of an array whose end
    its exit code file records is COMPLETED or FAILED by it; else it is in its array's state."""

    def __init__(self, delay_s: int = 60) -> None:
        super().__init__(delay_s)
        self._folders: dict[str, Path] = {}  # submitit id -> the index folder of its executor
        self._unknown_since: dict[str, float] = {}  # submitit id -> when its state became UNKNOWN

    def know(self, job_id: str, index_root: Path) -> None:
        self._folders[job_id] = index_root

    def _make_command(self):
        return None  # update() asks hpcdist, not a command

    def read_info(self, string):
        return {}

    def get_state(self, job_id: str, mode: str = "standard") -> str:
        return self.get_info(job_id, mode=mode).get("State") or "UNKNOWN"

    def update(self) -> None:
        from hpcdist import jobs
        from hpcdist.submission import submit as submission

        ids = sorted(self._registered - self._finished)
        by_record: dict[str, list[str]] = {}
        for job_id in ids:
            root = self._folders.get(job_id)
            path = record_folder(root, job_id) if root is not None else None
            if path is not None:
                by_record.setdefault(path, []).append(job_id)
        if not by_record:
            return
        self._num_calls += 1
        records, paths = [], []
        for path in by_record:
            try:
                records.append(jobs.Job(path))
                paths.append(path)
            except Exception as e:  # a folder removed by hand: its jobs' state says so
                for job_id in by_record[path]:
                    info = {"State": "UNKNOWN", "Reason": f"hpcdist job folder {path}: {e}"}
                    patience = submission.UNKNOWN_PATIENCE_S
                    self._info_dict[job_id] = self._bounded(job_id, info, patience)
        try:
            answers = submission.statuses(records)
        except Exception as e:  # as submitit does with sacct's errors: the next call may do better
            from submitit.core.logger import get_logger

            get_logger().warning(f"Call #{self.num_calls} - hpcdist status failed: {e}; states may be stale.")
            answers = [None] * len(records)
        for path, record, state in zip(paths, records, answers):
            info = {"JobID": record.current_id, "Folder": record.path}
            patience = submission.UNKNOWN_PATIENCE_S
            try:
                state = state or submission.status(record)
                info.update(State=state.state, ExitCode=state.exit_code, Reason=state.reason or "")
                patience = submission.unknown_patience(state)
            except Exception as e:  # this job's trouble alone (its scheduler refused to answer)
                info.update(State="UNKNOWN", Reason=str(e))
            # Subjobs (123_4) only come from an array this executor submitted: their exit code
            # files say how each ended, whatever form of id the qsub front end printed.
            codes = jobs.read_subjob_exit_codes(record.path) if any("_" in j for j in by_record[path]) else {}
            for job_id in by_record[path]:
                subjob = _subjob_info(info, job_id, codes)
                self._info_dict[job_id] = self._bounded(job_id, subjob, patience)
        self._last_status_check = time.time()
        for job_id in ids:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)

    def _bounded(self, job_id: str, info: dict, patience: float) -> dict:
        """``info``, or FAILED where its state has been UNKNOWN longer than ``patience`` (hpcdist's
        --wait gives up then too): submitit waits for ever on UNKNOWN, and PBS without job history
        forgets a job deleted while queued, or lost with its node, leaving no exit code."""
        if info.get("State") != "UNKNOWN":
            self._unknown_since.pop(job_id, None)
            return info
        since = self._unknown_since.setdefault(job_id, time.monotonic())
        if time.monotonic() - since <= patience:
            return info
        why = info.get("Reason") or "PBS no longer knows it"
        return dict(info, State="FAILED",
                    Reason=f"hpcdist gave up on the job after {patience:g} s in state UNKNOWN: "
                           f"{why}")


def _subjob_info(info: dict, job_id: str, codes: dict) -> dict:
    if "_" not in job_id:
        return dict(info)
    index = int(job_id.split("_")[1])
    out = dict(info, JobID=P.subjob_id(info["JobID"], index) if "[]" in info["JobID"] else info["JobID"])
    if index in codes:
        out.update(State="COMPLETED" if codes[index] == 0 else "FAILED", ExitCode=codes[index])
    return out


class PbsJob(core.Job[core.R]):
    """A PBS job (or subjob) of the executor, as submitit's ``Job``."""

    _cancel_command = "qdel"
    watcher = PbsInfoWatcher(delay_s=60)

    def __init__(self, folder: tp.Union[Path, str], job_id: str, tasks: tp.Sequence[int] = (0,)) -> None:
        self._index = _index_root(folder)
        super().__init__(folder=folder, job_id=job_id, tasks=tasks)

    def _register_in_watcher(self) -> None:
        if not self._tasks[0]:
            self.watcher.know(self.job_id, self._index)
            self.watcher.register_job(self.job_id)

    def _record(self):
        from hpcdist import jobs

        path = record_folder(self._index, self.job_id)
        if path is None:
            raise utils.UncompletedJobError(f"Job {self.job_id}: no hpcdist job folder is recorded in {self._index}")
        return jobs.Job(path)

    def _pbs_id(self, record) -> str:
        """PBS's id of this job: its newest (it went on as a new job after the walltime warning),
        or the subjob's (``123[4].server``)."""
        if "_" in self.job_id:
            return P.subjob_id(record.job_id, int(self.job_id.split("_")[1]))
        return record.current_id

    def cancel(self, check: bool = True) -> None:
        """hpcdist's cancel of the job (``qdel`` of its newest id, where it went on after the
        walltime warning), or ``qdel`` of the subjob alone (``123[4].server``)."""
        from hpcdist.schedulers.pbs.job import own_command
        from hpcdist.submission import submit as submission

        record = self._record()
        if "_" in self.job_id:
            target = self._pbs_id(record)
            (subprocess.check_call if check else subprocess.call)([own_command("qdel", os.environ), target])
            return
        try:
            submission.cancel(record)
        except submission.AlreadyEnded:  # as scancel of an ended job: nothing to do
            pass
        except Exception:
            if check:
                raise

    def _interrupt(self, timeout: bool = False) -> None:
        """Interrupt the running job, to test its checkpointing (as submitit's SlurmJob does).

        ``timeout=True``: the walltime warning by hand (``qsig -s WINCH``: qsig signals every
        process of the job, and a USR2 would kill the user's login shell above the job script,
        which ends the job): the first task checkpoints a ``Checkpointable`` and the job goes on
        as a new PBS job, using up one of ``max_num_timeout``. Else a preemption as PBS preempts
        by requeue (``qrerun``: SIGTERM to the job, then the job queued again under its id): the
        first task checkpoints without using up a timeout and the job runs again from there;
        ``qrerun`` needs PBS's operator or manager privilege."""
        from hpcdist.schedulers.pbs.job import own_command
        from hpcdist.schedulers.pbs.submit import Pbs

        target = self._pbs_id(self._record())
        argv = ["qsig", "-s", Pbs.stop_by_hand_signal, target] if timeout else ["qrerun", target]
        proc = subprocess.run([own_command(argv[0], os.environ), *argv[1:]], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            why = (proc.stderr or proc.stdout).strip()
            fix = ("" if timeout else " (qrerun needs PBS operator or manager privilege: ask your "
                   "admin, or test the timeout's path with job._interrupt(timeout=True), which any "
                   "user may)")
            raise utils.UncompletedJobError(f"Job {self.job_id}: {' '.join(argv)} failed: "
                                            f"{why}{fix}")

    def _get_outcome_and_result(self) -> tp.Tuple[str, tp.Any]:
        try:
            return super()._get_outcome_and_result()
        except utils.UncompletedJobError as e:
            why = self.watcher.get_info(self.job_id, mode="cache").get("Reason")
            why = f"\n{why}" if why and why.startswith("hpcdist gave up") else ""
            raise utils.UncompletedJobError(f"{e}{why}\n{self._job_log()}") from None

    def _job_log(self) -> str:
        """The end of the PBS job's own log (the job script's lines: its set-up, a task that never
        started), and hpcdist's word on the job."""
        from hpcdist.submission import submit as submission

        try:
            record = self._record()
            state = submission.status(record)
            text = submission.log_text(record) or ""
        except Exception as e:
            return f"(hpcdist could not read the job's folder: {e})"
        tail = "\n".join(text.splitlines()[-40:])
        why = f" ({state.reason})" if state.reason else ""
        return (f"hpcdist: job {record.current_id} is {state.state}{why}; its log ({record.log}), "
                f"last lines:\n{'-' * 40}\n{tail}")


class MapSubmitError(RuntimeError):
    """A map (``map_array``, ``batch()``) whose array was refused: ``jobs`` holds the submitit jobs
    of the arrays submitted before it, which run on."""

    def __init__(self, message: str, jobs: list) -> None:
        super().__init__(message)
        self.jobs = jobs


def _refused(count: int, ranges: list, n: int, jobs: list, cap, error: Exception) -> str:
    """What a user reads when array ``n`` of a map of ``count`` was refused: the scheduler's
    words, the arrays that run on, and the cap to give where the server's could not be read."""
    lines = [f"map_array of {count}: array {n + 1} of {len(ranges)} ({len(ranges[n])} subjobs) "
             f"was not submitted: {error}"]
    if jobs:
        ids = ", ".join(sorted({job.job_id.split("_")[0] for job in jobs}, key=int))
        lines.append(f"The {len(jobs)} subjobs of the arrays submitted before it ({ids}) run on: "
                     f"their jobs are this error's .jobs (cancel them with job.cancel(), or wait "
                     f"for them).")
    if cap.value is None:
        lines.append(f"The server's cap on an array's size could not be read ({cap.source}): "
                     f"where PBS caps arrays (the server's max_array_size, which `qmgr -c 'list "
                     f"server'` shows where it may be read), give that cap: "
                     f"executor.update_parameters(pbs_max_array_size=N), and the map is cut into "
                     f"arrays of at most N.")
    return "\n".join(lines)


class ParameterNames(frozenset):
    """The PBS executor's parameter names: all of them are in it, but going through it gives only
    those submitit's own executors lack. submitit's AutoExecutor sends an unprefixed name that is
    not generic (``account``) to the last executor whose names, gone through, hold it: Slurm's
    ``account``, ``job_name``, ``array_parallelism``, ``signal_delay_s`` stay Slurm's, as they were
    before this plugin was installed; ``pbs_account`` is checked with ``in``, and reaches PBS."""

    def __iter__(self):
        from submitit.local.local import LocalExecutor
        from submitit.slurm.slurm import SlurmExecutor

        theirs = SlurmExecutor._valid_parameters() | LocalExecutor._valid_parameters()
        return iter(sorted(name for name in frozenset.__iter__(self) if name not in theirs))


class PbsExecutor(core.PicklingExecutor):
    """PBS Pro / OpenPBS and Torque through hpcdist. Parameters: :mod:`hpcdist.functions.parameters`.

    ``folder``: where the pickles, results and each task's logs go (a folder every node sees);
    ``max_num_timeout``: how many times a ``Checkpointable`` function goes on as a new job after
    the walltime warning; ``python``: the job's interpreter (default: this one).
    """

    job_class = PbsJob

    def __init__(self, folder: tp.Union[str, Path], max_num_timeout: int = 3, max_pickle_size_gb: float = 1.0,
                 python: tp.Optional[str] = None) -> None:
        super().__init__(folder, max_num_timeout=max_num_timeout, max_pickle_size_gb=max_pickle_size_gb)
        self.python = python or sys.executable
        # This python's virtual environment, for the job to activate (torchrun lies beside it).
        self.venv = sys.prefix if python is None and sys.prefix != sys.base_prefix else None
        if self.affinity() < 0:
            raise RuntimeError("Could not find PBS's qsub on PATH: are you on a PBS login node? "
                               "(put PBS's bin folder on PATH, e.g. /opt/pbs/bin)")

    @classmethod
    def _equivalence_dict(cls):
        return dict(P.EQUIVALENCE)

    @classmethod
    def _valid_parameters(cls) -> tp.Set[str]:
        return ParameterNames(P.DEFAULTS)

    def _internal_update_parameters(self, **kwargs: tp.Any) -> None:
        P.check_names(kwargs)
        self._spec({**self.parameters, **kwargs})  # refused here, not at submit: names the value and the fix
        super()._internal_update_parameters(**kwargs)

    def _spec(self, params: dict, count: int | None = None):
        from hpcdist.submission.profiles import build, load_profile

        profile = load_profile(params.get("profile"))
        options = P.job_options(params, task=TASK, folder=str(self.folder), python=self.python, count=count,
                                profile=profile, max_num_timeout=self.max_num_timeout,
                                venv=self.venv, launchers=self._launchers(params, profile))
        return build(profile, options), profile

    def _launchers(self, params: dict, profile: dict) -> tuple:
        """The launchers that can start several tasks, torchrun first: all of them unless the job
        runs this python (not a profile's environment or a python given), where torchrun needs
        torch to be installed (a submitit user's plain functions may have none) and mpirun an
        MPI on PATH."""
        options = params.get("options") or {}
        elsewhere = self.python != sys.executable or params.get("python") or options.get("venv") \
            or options.get("conda") or any(profile.get(k) for k in ("python", "venv", "conda"))
        chosen = params.get("launcher") or profile.get("launcher")
        if elsewhere or chosen or P.total_tasks(params) == 1:
            return P.TASK_LAUNCHERS
        import importlib.util

        found = (("torchrun",) if importlib.util.find_spec("torch") else ()) + \
            (("mpirun",) if shutil.which("mpirun") else ())
        return found

    def _num_tasks(self) -> int:
        return P.total_tasks(self.parameters)

    def _make_submission_file_text(self, command: str, uid: str) -> str:
        from hpcdist.submission.render import render

        return render(self._spec(self.parameters)[0])

    def _make_submission_command(self, submission_file_path: Path) -> tp.List[str]:
        return ["qsub", str(submission_file_path)]

    @staticmethod
    def _get_job_id_from_submission_command(string: tp.Union[bytes, str]) -> str:
        from hpcdist.schedulers.pbs.submit import parse_qsub

        return P.submitit_id(parse_qsub(string).id)

    def _submit_command(self, command: str) -> core.Job[tp.Any]:
        return self._submit(None)[0]

    def _submit(self, count: int | None) -> list:
        """Submit the job (``count`` None) or an array of ``count`` subjobs through hpcdist; its
        submitit jobs."""
        from hpcdist.submission import submit as submission

        spec, _ = self._spec(self.parameters, count)
        record = submission.submit(spec)
        seq = P.sequence(record.job_id)
        index = _index_root(self.folder)
        index.mkdir(parents=True, exist_ok=True)
        (index / seq).write_text(record.path + "\n")
        tasks = list(range(self._num_tasks()))
        ids = [seq] if count is None else [P.submitit_id(record.job_id, a) for a in range(count)]
        found = [PbsJob(folder=self.folder, job_id=job_id, tasks=tasks) for job_id in ids]
        script = found[0].paths.submission_file
        script.parent.mkdir(parents=True, exist_ok=True)
        if not script.exists():
            script.symlink_to(record.script)
        return found

    def _internal_process_submissions(
            self, delayed_submissions: tp.List[utils.DelayedSubmission]
    ) -> tp.List[core.Job[tp.Any]]:
        if len(delayed_submissions) == 1:
            return super()._internal_process_submissions(delayed_submissions)
        folder = utils.JobPaths.get_first_id_independent_folder(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        timeout_min = self.parameters.get("timeout_min") or P.DEFAULT_TIMEOUT_MIN
        cap = self._array_cap()
        ranges = self.arrays(len(delayed_submissions), cap)
        jobs: list = []
        for n, chunk in enumerate(ranges):
            # Each array's pickles just before its qsub: a refused one leaves none behind.
            pickles = [folder / f"{uuid.uuid4().hex}.pkl" for _ in chunk]
            for path, k in zip(pickles, chunk):
                delayed_submissions[k].set_timeout(timeout_min, self.max_num_timeout)
                delayed_submissions[k].dump(path)
            self._throttle()
            self._last_job_submitted = time.time()
            try:
                found = self._submit(None if len(chunk) == 1 else len(chunk))
            except Exception as e:
                for path in pickles:
                    path.unlink(missing_ok=True)
                message = _refused(len(delayed_submissions), ranges, n, jobs, cap, e)
                raise MapSubmitError(message, jobs) from e
            for job, path in zip(found, pickles):
                job.paths.move_temporary_file(path, "submitted_pickle")
            jobs.extend(found)
        return jobs

    def _array_cap(self):
        """The site's cap on an array's size: the ``max_array_size`` parameter, else the server's,
        else the profile's (hpcdist.sweeps.limits: the sweeps' one reading of it)."""
        from hpcdist.sweeps.limits import Limit, array_cap

        given = self.parameters.get("max_array_size")
        if given is not None:
            return Limit(P._whole("max_array_size", given, 1), "the max_array_size parameter")
        spec, profile = self._spec(self.parameters)
        return array_cap(spec.scheduler, profile, dialect=spec.dialect)

    def arrays(self, count: int, cap=None) -> list:
        """The ranges of the map each array job holds: one, or several under the site's cap
        (:meth:`_array_cap`)."""
        from hpcdist.sweeps.limits import split

        cap = cap or self._array_cap()
        if cap.value is None or count <= cap.value:
            return [range(count)]
        from submitit.core.logger import get_logger

        ranges = split(count, cap.value)
        get_logger().info(f"map_array of {count}: {len(ranges)} arrays, at most {cap.words()} subjobs each")
        return ranges

    @classmethod
    def affinity(cls) -> int:
        """-1 without ``qsub``; 2 where PBS itself is installed (``/etc/pbs.conf``, ``qmgr``); else 1
        (a ``qsub`` that may be another scheduler's wrapper: Slurm's Torque commands)."""
        if shutil.which("qsub") is None:
            return -1
        return 2 if os.path.exists("/etc/pbs.conf") or shutil.which("qmgr") else 1
