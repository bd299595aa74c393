"""What every task of a submitit job on PBS runs: ``python task.py FOLDER``.

Where it runs: inside the job, once per task, on every node (started by the job script, by torchrun
or by mpirun). Its output goes to the task's own logs in submitit's folder (``<id>_<task>_log.out``
and ``.err``, which ``job.stdout()`` and ``job.stderr()`` read), as srun's ``--output`` does for
submitit on Slurm; then submitit's ``process_job`` loads the pickled call, runs it and pickles its
result, or the traceback of its exception.
"""

import os
import sys


def _own_logs(folder: str) -> None:
    from submitit.core.utils import JobPaths

    from hpcdist.functions.environment import PbsJobEnvironment
    from hpcdist.functions.parameters import STDERR_VARIABLE

    env = PbsJobEnvironment()
    paths = JobPaths(folder, job_id=env.job_id, task_id=env.global_rank)
    paths.folder.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    out = os.open(paths.stdout, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    err = out if os.environ.get(STDERR_VARIABLE) else os.open(
        paths.stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    print(f"hpcdist: task {env.global_rank} of job {env.job_id} on {env.hostname}: its output is in "
          f"{paths.stdout}", file=sys.stderr, flush=True)
    os.dup2(out, 1)
    os.dup2(err, 2)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m hpcdist.functions.task FOLDER (the submitit folder; the job script runs it)",
              file=sys.stderr)
        return 2
    _own_logs(argv[0])
    from submitit.core._submit import submitit_main

    sys.argv = [sys.argv[0], argv[0]]
    submitit_main()
    return 0


if __name__ == "__main__":
    # Run as a file (python .../hpcdist/functions/task.py): its folder is not a package root.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.exit(main())
