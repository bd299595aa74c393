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
                    self._info_dict[job_id] = {"State": "UNKNOWN", "Reason": f"hpcdist job folder {path}: {e}"}
        try:
            answers = submission.statuses(records)
        except Exception as e:  # as submitit does with sacct's errors: the next call may do better
            from submitit.core.logger import get_logger

            get_logger().warning(f"Call #{self.num_calls} - hpcdist status failed: {e}; states may be stale.")
            answers = [None] * len(records)
        for path, record, state in zip(paths, records, answers):
            info = {"JobID": record.current_id, "Folder": record.path}
            try:
                state = state or submission.status(record)
                info.update(State=state.state, ExitCode=state.exit_code, Reason=state.reason or "")
            except Exception as e:  # this job's trouble alone (its scheduler refused to answer)
                info.update(State="UNKNOWN", Reason=str(e))
            # Subjobs (123_4) only come from an array this executor submitted: their exit code
            # files say how each ended, whatever form of id the qsub front end printed.
            codes = jobs.read_subjob_exit_codes(record.path) if any("_" in j for j in by_record[path]) else {}
            for job_id in by_record[path]:
                self._info_dict[job_id] = _subjob_info(info, job_id, codes)
        self._last_status_check = time.time()
        for job_id in ids:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)


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

    def cancel(self, check: bool = True) -> None:
        """hpcdist's cancel of the job (``qdel`` of its newest id, where it went on after the
        walltime warning), or ``qdel`` of the subjob alone (``123[4].server``)."""
        from hpcdist.schedulers.pbs.job import own_command
        from hpcdist.submission import submit as submission

        record = self._record()
        if "_" in self.job_id:
            target = P.subjob_id(record.job_id, int(self.job_id.split("_")[1]))
            (subprocess.check_call if check else subprocess.call)([own_command("qdel", os.environ), target])
            return
        try:
            submission.cancel(record)
        except Exception:
            if check:
                raise

    def _get_outcome_and_result(self) -> tp.Tuple[str, tp.Any]:
        try:
            return super()._get_outcome_and_result()
        except utils.UncompletedJobError as e:
            raise utils.UncompletedJobError(f"{e}\n{self._job_log()}") from None

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
        return set(P.DEFAULTS)

    def _internal_update_parameters(self, **kwargs: tp.Any) -> None:
        P.check_names(kwargs)
        self._spec({**self.parameters, **kwargs})  # refused here, not at submit: names the value and the fix
        super()._internal_update_parameters(**kwargs)

    def _spec(self, params: dict, count: int | None = None):
        from hpcdist.submission.profiles import build, load_profile

        profile = load_profile(params.get("profile"))
        options = P.job_options(params, task=TASK, folder=str(self.folder), python=self.python, count=count,
                                profile=profile, max_num_timeout=self.max_num_timeout, venv=self.venv)
        return build(profile, options), profile

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

    def _internal_process_submissions(self, delayed_submissions: tp.List[utils.DelayedSubmission]) -> tp.List[core.Job[tp.Any]]:
        if len(delayed_submissions) == 1:
            return super()._internal_process_submissions(delayed_submissions)
        folder = utils.JobPaths.get_first_id_independent_folder(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        timeout_min = self.parameters.get("timeout_min") or P.DEFAULT_TIMEOUT_MIN
        pickles = []
        for delayed in delayed_submissions:
            path = folder / f"{uuid.uuid4().hex}.pkl"
            delayed.set_timeout(timeout_min, self.max_num_timeout)
            delayed.dump(path)
            pickles.append(path)
        jobs: list = []
        for chunk in self.arrays(len(delayed_submissions)):
            self._throttle()
            self._last_job_submitted = time.time()
            found = self._submit(None if len(chunk) == 1 else len(chunk))
            for job, k in zip(found, chunk):
                job.paths.move_temporary_file(pickles[k], "submitted_pickle")
            jobs.extend(found)
        return jobs

    def arrays(self, count: int) -> list:
        """The ranges of the map each array job holds: one, or several under the site's cap
        (the ``max_array_size`` parameter, else the server's, else the profile's)."""
        from hpcdist.sweeps.limits import Limit, array_cap, split  # the sweeps' one reading of the cap

        spec, profile = self._spec(self.parameters)
        given = self.parameters.get("max_array_size")
        if given is not None:
            cap = Limit(P._whole("max_array_size", given, 1), "the max_array_size parameter")
        else:
            cap = array_cap(spec.scheduler, profile, dialect=spec.dialect)
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
