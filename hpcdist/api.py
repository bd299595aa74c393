"""The Python API: ``hpcdist.submit(...)`` and the job handle it returns.

::

    import hpcdist

    job = hpcdist.submit("train.py", "--lr", "0.1", scheduler="slurm", nodes=2,
                         gpus_per_node=4, walltime="12h", modules=["cuda/12.1"])
    print(job.job_id, job.state())
    exit_code = job.wait()

Options are the job spec's fields, named as the CLI flags with underscores
(``gpus_per_node``, ``procs_per_node``, ``walltime``, ``mem``, ``queue``,
``modules``, ``env`` as a dict, ...), plus ``profile``.
"""

from __future__ import annotations

import io
import sys

from hpcdist import jobs
from hpcdist.submission import submit as _submission
from hpcdist import validate as v
from hpcdist.submission.profiles import build, load_profile


class JobHandle:
    def __init__(self, job: jobs.Job):
        self._job = job

    @property
    def job_id(self) -> str:
        return self._job.job_id

    @property
    def scheduler(self) -> str:
        return self._job.scheduler

    @property
    def folder(self) -> str:
        return self._job.path

    @property
    def script(self) -> str:
        return self._job.script

    def status(self):
        """The scheduler's answer: state, exit code, reason."""
        return _submission.status(self._job)

    def state(self) -> str:
        return self.status().state

    def wait(self, poll: float = 2.0, echo: bool = False) -> int:
        """Block until the job ends; its exit code. ``echo`` prints the log as it grows."""
        return _submission.wait(self._job, poll=poll, out=sys.stdout if echo else io.StringIO(),
                                quiet=not echo)

    def cancel(self) -> None:
        """The scheduler's cancel; nothing where the job has already ended."""
        try:
            _submission.cancel(self._job)
        except _submission.AlreadyEnded:
            pass

    def logs(self) -> str:
        return _submission.log_text(self._job) or ""

    def __repr__(self):
        return f"JobHandle({self.scheduler} job {self.job_id}, folder={self.folder!r})"


def submit(script: str, *script_args: str, profile: str | None = None, **options) -> JobHandle:
    """Render, write and submit a job for ``script``; see the module docstring."""
    return JobHandle(_submission.submit(job_spec(script, *script_args, profile=profile, **options)))


def job_spec(script: str, *script_args: str, profile: str | None = None, **options):
    """The :class:`~hpcdist.submission.spec.JobSpec` that :func:`submit` submits (render it with
    :func:`hpcdist.submission.render.render` to read the script first)."""
    if isinstance(options.get("env"), dict):
        options["env"] = [f"{k}={v}" for k, v in options["env"].items()]
    chosen = load_profile(profile)
    for note in chosen.notes:  # a profile file ignored (another user's), the default chosen
        print(f"hpcdist: {note}", file=sys.stderr)
    return build(chosen, {**options, "script": script, "script_args": list(script_args)})


def job(ref: str) -> JobHandle:
    """A handle for a job submitted earlier from this folder (by id or folder)."""
    return JobHandle(jobs.find(ref))


def submit_function(fn, *args, scheduler: str | None = None, nodes: int = 1, procs_per_node: int = 1,
                    gpus_per_node: int = 0, walltime: str | None = None, queue: str | None = None,
                    account: str | None = None, folder: str = ".hpcdist/submitit", profile: str | None = None,
                    **kwargs):
    """Run ``fn(*args, **kwargs)`` on every task of a multi-node job, through submitit.

    On Slurm submitit starts one srun task per process; on PBS hpcdist's submitit plugin
    (:mod:`hpcdist.functions`) renders the job through hpcdist (several tasks on every node by
    torchrun, ``profile`` a profile or site preset such as ``polaris``); locally submitit's
    LocalExecutor starts them on this host (one node). Inside, hpcdist.env resolves the ranks
    (``init_distributed()`` works as under any launcher).
    Returns submitit's job: ``.job_id``, ``.state``, ``.results()`` (one per task).
    """
    import submitit  # an optional dependency (the submitit extra): only this function needs it

    if scheduler not in (None, "slurm", "pbs", "local"):
        raise v.ValidationError("scheduler", scheduler, "submit_function runs on Slurm, PBS or locally.",
                                "Use scheduler='slurm', 'pbs' or 'local', or hpcdist.submit() with a script.")
    executor = submitit.AutoExecutor(folder=folder, cluster=scheduler)
    params = {"nodes": v.check_positive(nodes, "nodes"),
              "tasks_per_node": v.check_positive(procs_per_node, "procs_per_node")}
    if gpus_per_node:
        params["gpus_per_node"] = v.check_positive(gpus_per_node, "gpus_per_node")
    if walltime:
        params["timeout_min"] = max(1, v.parse_walltime(walltime, "walltime") // 60)
    if profile is not None and executor.cluster != "pbs":
        raise v.ValidationError("profile", profile, f"profiles reach submitit's {executor.cluster} executor only "
                                "through its own parameters.", "Leave profile out, or use scheduler='pbs'.")
    if executor.cluster in ("slurm", "pbs"):
        prefix = executor.cluster
        if queue:
            params[{"slurm": "slurm_partition", "pbs": "pbs_queue"}[prefix]] = v.check_name(queue, "queue")
        if account:
            params[f"{prefix}_account"] = v.check_name(account, "account")
        if profile is not None:
            params["pbs_profile"] = profile
    elif nodes != 1:
        raise v.ValidationError("nodes", str(nodes), "submitit's local executor runs one node.",
                                "Use procs_per_node for several processes, or Slurm or PBS for several nodes.")
    executor.update_parameters(**params)
    return executor.submit(fn, *args, **kwargs)
