"""submitit's API beyond its examples, on the real OpenPBS (tests/openpbs.py): what a submitit
user's code calls that the examples of tests/functions/test_submitit_pbs.py do not.

- ``job._interrupt()`` and ``job._interrupt(timeout=True)``, which submitit's checkpointing
  guide (docs/checkpointing.md in submitit's repository) tells users to call to test their
  checkpointing: a preemption (PBS's: SIGTERM, then the job requeued under its id) checkpoints
  without using up a timeout; a timeout (the walltime warning) checkpoints and uses one.

Each row's time here (2 shared cores, the suite's load aside) is in its docstring.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from pathlib import Path

import pytest

pytest.importorskip("submitit")
import submitit  # noqa: E402

import openpbs  # noqa: E402
from docblocks import blocks  # noqa: E402
# pbs: the fixture (the server as shipped: history off).
from test_submitit_pbs import PAGE, pbs, results_of, run_python  # noqa: E402,F401

@pytest.fixture
def stand_in_srun(tmp_path, monkeypatch):
    """A stand-in ``srun`` on PATH, which no row runs: submitit's SlurmExecutor refuses to start
    without one, and the row only reads the parameters and the script it would pass to sbatch."""
    (tmp_path / "srun").write_text("#!/bin/sh\necho 'the stand-in srun was run' >&2; exit 1\n")
    (tmp_path / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)


def test_installing_the_plugin_leaves_submitits_slurm_parameters_as_they_were(stand_in_srun):
    """Unprefixed names that the Slurm executor and the PBS one both take still reach Slurm with
    cluster="slurm", with submitit's own warning ("Use 'slurm_account' instead"): submitit maps
    an unprefixed name to the last executor that lists it. ``pbs_account`` still reaches PBS."""
    executor = submitit.AutoExecutor(folder="log_slurm", cluster="slurm")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        executor.update_parameters(account="acct", array_parallelism=3, job_name="jn",
                                   signal_delay_s=30)
    said = sorted(str(w.message) for w in said)
    assert said == [f"Setting '{name}' is deprecated. Use 'slurm_{name}' instead." for name in
                    ("account", "array_parallelism", "job_name", "signal_delay_s")], said
    params = executor._executor.parameters
    got = (params["account"], params["array_parallelism"], params["job_name"])
    assert got == ("acct", 3, "jn"), params
    script = executor._executor._make_submission_file_text("true", "uid")
    for line in ("#SBATCH --account=acct", "#SBATCH --job-name=jn", "#SBATCH --signal=USR2@30"):
        assert line in script, script
    # The PBS names, prefixed, are still known to AutoExecutor (it refuses unknown ones).
    executor.update_parameters(pbs_account="p", pbs_queue="q")


#: A stand-in qsub (the real OpenPBS cannot be made to refuse exactly the third array here, and
#: its server's cap can always be read there): it takes two arrays and refuses the third with
#: OpenPBS's words; no qmgr or qstat on PATH, so the server's cap cannot be read.
REFUSING_QSUB = """#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$0.count"
[ $n -le 2 ] && { echo "$((100 + n))[].pbshead"; exit 0; }
echo "qsub: Array job exceeds server or queue size limit" >&2; exit 1
"""


def test_a_refused_array_of_a_map_names_the_cap_and_keeps_the_arrays_that_run(tmp_path,
                                                                               monkeypatch):
    """map_array of 30 under pbs_max_array_size=10 where the third array is refused: the error
    says the scheduler's words and the ids of the two arrays that run on, and holds their 20 jobs;
    without the parameter (the cap unreadable, one array of 30 refused) it names
    pbs_max_array_size. No pickle is left behind either way."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qsub").write_text(REFUSING_QSUB)
    (bin_dir / "qsub").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setenv("HPCDIST_NO_DEFAULT_PROFILE", "1")
    monkeypatch.chdir(tmp_path)
    from hpcdist.functions.executor import MapSubmitError

    executor = submitit.AutoExecutor(folder="log_map", cluster="pbs")
    executor.update_parameters(timeout_min=5, pbs_max_array_size=10)
    with pytest.raises(MapSubmitError) as e:
        executor.map_array(abs, range(30))
    message = str(e.value)
    assert "array 3 of 3 (10 subjobs) was not submitted" in message, message
    assert "exceeds server" in message, message
    assert "(101, 102) run on" in message and len(e.value.jobs) == 20, message
    assert [j.job_id for j in e.value.jobs[:2]] == ["101_0", "101_1"], e.value.jobs[:2]
    assert all(j.paths.submitted_pickle.exists() for j in e.value.jobs)
    executor = submitit.AutoExecutor(folder="log_unread", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    (bin_dir / "qsub.count").write_text("2")  # the next is refused
    with pytest.raises(MapSubmitError) as e:
        executor.map_array(abs, range(30))
    assert "executor.update_parameters(pbs_max_array_size=N)" in str(e.value), str(e.value)
    assert not e.value.jobs, e.value.jobs
    assert not list((tmp_path / "log_unread").rglob("*.pkl")), list(tmp_path.rglob("*.pkl"))


#: A stand-in qsub that prints an id (a client-cost check: the real server is not what is measured).
PRINTS_AN_ID = "#!/bin/sh\necho 1234.pbshead\n"
#: What ``executor.submit()`` must not do for a PBS job: load Slurm's modules (the local backend's
#: imported its scheduler), or make JobSpec's dataclass twin (generated code, compiled).
SUBMIT_COST = textwrap.dedent("""
    import sys, submitit
    from hpcdist.frozen import DataclassFields
    from hpcdist.submission.spec import JobSpec
    executor = submitit.AutoExecutor(folder="log_cost", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    before = set(sys.modules)
    assert executor.submit(abs, 1).job_id == "1234"
    # (Slurm's id grammar, a few patterns, is loaded with every queued scheduler's: JobId.)
    slurm = sorted(name for name in set(sys.modules) - before if "slurm" in name
                   and name != "hpcdist.schedulers.slurm.ids")
    twin = not isinstance(vars(JobSpec)["__dataclass_fields__"], DataclassFields)
    print(slurm, twin)
""")


def test_a_pbs_submit_loads_no_slurm_module_and_makes_no_dataclass(tmp_path):
    """The client's cost of ``executor.submit()`` (bench/bench_submitit_client.py measures it): a
    PBS job's submit imports none of Slurm's scheduler modules and never makes JobSpec's dataclass
    twin. A stand-in qsub that prints an id."""
    (tmp_path / "qsub").write_text(PRINTS_AN_ID)
    (tmp_path / "qsub").chmod(0o755)
    (tmp_path / "main.py").write_text(SUBMIT_COST)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
               HPCDIST_NO_DEFAULT_PROFILE="1")
    proc = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] False", proc.stdout


#: submitit's checkpointing guide, its "Training and checkpointing a model" recipe as written,
#: with cluster="pbs" and a model that is a count in a JSON file (the guide's `...` filled in):
#: the job is preempted, then timed out, by ``job._interrupt``, as the guide says to test it.
GUIDE = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    import submitit

    class NetworkTraining:

        def __init__(self):
            # this is the "state" which we will be able to access when checkpointing:
            self.model = None

        def __call__(self, checkpointpath: str):
            if not Path(checkpointpath).exists():
                self.model = {"step": 0, "runs": []}  # initialize your model
            else:
                self.model = json.loads(Path(checkpointpath).read_text())  # load your model
            self.model["runs"].append(os.environ["PBS_JOBID"])
            while self.model["step"] < 40:  # train your model
                time.sleep(1)
                self.model["step"] += 1
                Path("progress").write_text(str(self.model["step"]))
            return self.model

        def checkpoint(self, checkpointpath: str) -> submitit.helpers.DelayedSubmission:
            Path(checkpointpath).write_text(json.dumps(self.model))
            training_callable = NetworkTraining()
            return submitit.helpers.DelayedSubmission(training_callable, checkpointpath)

    def progress():
        try:
            return int(Path("progress").read_text())
        except (OSError, ValueError):
            return 0

    def past(step, job):
        while progress() < step:
            if job.done(force_check=True):  # what the watcher read, and the job's runs
                runs = Path(job._record().path, "runs").read_text()
                raise AssertionError(f"done at step {progress()}: {job.get_info(mode='cache')}"
                                     f"\\n{runs}\\n{job._job_log()}")
            time.sleep(1)

    executor = submitit.AutoExecutor(folder="logs_training", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    training_callable = NetworkTraining()
    job = executor.submit(training_callable, os.path.abspath("model.json"))
    past(5, job)
    job._interrupt(timeout=sys.argv[1] == "timeout")  # a preemption, or a timeout
    past(20, job)
    countdown = job.submission()._timeout_countdown
    model = job.result()
    while job.get_info(mode="force").get("State") in ("PENDING", "RUNNING"):  # the script's end
        time.sleep(1)
    err = job.paths.stderr.read_text()
    print("RESULT " + json.dumps({"id": job.job_id, "model": model, "state": job.state, "err": err,
                                  "countdowns": [countdown, job.submission()._timeout_countdown],
                                  "log": job._job_log()}))
""")


# History on alone (the suite's time): on this cluster every signal force-exits a root job in
# PBS's books (NOTES.md, "Test OpenPBS jobs run as root"), so the two rows proved the same path.
@pytest.mark.parametrize("history", [True], ids=["history-on"])
# ``_interrupt(timeout=True)``'s row runs the guide as a user (tests/schedulers/test_openpbs_as_user.py): this
# cluster's moms see no process of a root job, so ``qsig`` would end it in PBS's books while its
# script runs on and resubmits itself after a job the server has already ended.
@pytest.mark.parametrize("timeout", [False], ids=["preempted"])
def test_submitits_checkpointing_guide_interrupts_a_pbs_job(timeout, history, pbs, tmp_path):
    """The guide's recipe: ``_interrupt()`` (PBS's preemption: SIGTERM, then ``qrerun`` requeues
    the job under its id: root is PBS's manager here) checkpoints the model without using a
    timeout, and the job runs again from it, under its id; ``_interrupt(timeout=True)`` (the
    walltime warning by hand, ``qsig -s WINCH``) checkpoints, uses one of the 3 timeouts, and the
    job goes on as a new PBS job. The count finishes at 40 from two runs. About 1.5 min a row here."""
    pbs.history(history)
    (tmp_path / "main.py").write_text(GUIDE)
    line = f"{shlex.quote(sys.executable)} main.py {'timeout' if timeout else 'preempt'}"
    out = results_of(pbs.on(openpbs.HEAD, line, cwd=tmp_path, timeout=600))
    model, out["err"] = out["model"], out["err"][-3000:]
    assert model["step"] == 40 and len(model["runs"]) == 2, out
    assert (model["runs"][0] != model["runs"][1]) == timeout, out  # resubmitted, or run again
    assert out["countdowns"] == [2 if timeout else 3] * 2 and out["state"] == "COMPLETED", out
    said = ("walltime warning by hand (SIGWINCH): this job is timed-out" if timeout
            else "this job is preempted or cancelled")
    assert said in out["err"], out["err"]


#: A job deleted by ``qdel`` from a shell while it is queued (held from its submission, ``-h``,
#: so that it cannot start first): with job history off PBS forgets it, and it leaves no exit code.
FORGOTTEN = textwrap.dedent("""
    import json, subprocess, time
    import submitit

    executor = submitit.AutoExecutor(folder="log_forgotten", cluster="pbs")
    executor.update_parameters(timeout_min=5, pbs_options={"directives": ["-h"]})
    job = executor.submit(time.sleep, 1)
    pbs_id = job._record().current_id
    subprocess.run(["qdel", pbs_id], check=True)
    started = time.monotonic()
    try:
        job.result()
        raised = None
    except Exception as e:
        raised = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps({"after_s": time.monotonic() - started, "raised": raised,
                                  "state": job.state}))
""")


def test_result_gives_up_on_a_job_pbs_forgot(pbs, tmp_path):
    """Job history off: a queued job deleted from a shell leaves qstat and leaves no exit code;
    ``result()`` raises within hpcdist's --wait patience (60 s) and a watcher's turn, naming what
    happened, instead of waiting for ever in state UNKNOWN. About 2.5 min here."""
    out = results_of(run_python(pbs, tmp_path, FORGOTTEN, timeout=420))
    assert out["raised"] is not None and out["raised"].startswith("UncompletedJobError"), out
    assert out["state"] == "FAILED" and out["after_s"] < 240, out
    assert "hpcdist gave up on the job after 60 s in state UNKNOWN" in out["raised"], out


def test_torch_distributed_environment_export_on_two_nodes_of_two_tasks(pbs, tmp_path):
    """docs/guide/functions.md's TorchDistributedEnvironment block, run as written: 2 nodes x 2
    tasks started by torchrun, each exports submitit's variables over torchrun's (the same
    values), initialises gloo and sums the ranks. About 30 s here."""
    (block,) = [b for b in blocks(str(PAGE), PAGE.read_text())
                if "TorchDistributedEnvironment" in b.text]
    proc = run_python(pbs, tmp_path, block.text, timeout=300)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "[(0, 4, 6), (1, 4, 6), (2, 4, 6), (3, 4, 6)]" in proc.stdout, proc.stdout


def test_several_tasks_with_no_launcher_at_hand_are_refused_naming_the_fix():
    """No torch and no mpirun for the job's python: refused before the queue, saying what to
    install; mpirun where only it is found; one task needs none."""
    from hpcdist.functions import parameters as P

    with pytest.raises(P.ParameterError) as e:
        P.launcher_of({"nodes": 2, "tasks_per_node": 2}, ())
    assert "nodes=2, tasks_per_node=2" in str(e.value) and "pip install torch" in str(e.value)
    assert P.launcher_of({"nodes": 2}, ("mpirun",)) == "mpirun"
    assert P.launcher_of({"nodes": 1}, ()) == "none"


#: What a submitit user with plain Python functions has: hpcdist (its plugin's entry points),
#: submitit, mpi4py and what they need; no torch.
WITHOUT_TORCH = ("_editable_impl_hpcdist.pth", "hpcdist-*.dist-info", "jinja2", "markupsafe",
                 "submitit", "submitit-*.dist-info", "cloudpickle", "typing_extensions.py",
                 "mpi4py")


def venv_without_torch(where) -> str:
    """A virtual environment of its own (not --system-site-packages) whose site-packages holds
    WITHOUT_TORCH, linked from this venv's (the same files pip installed there; a stand-in for a
    pip install, which would need the network here); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = next(Path(where).glob("lib/python*/site-packages"))
    for pattern in WITHOUT_TORCH:
        for path in ours.glob(pattern):
            (theirs / path.name).symlink_to(path)
    python = str(Path(where) / "bin" / "python")
    probe = subprocess.run([python, "-c", "import hpcdist, submitit, mpi4py, importlib.util as u; "
                            "print(u.find_spec('torch'))"], capture_output=True, text=True,
                           check=True)
    assert probe.stdout.strip() == "None", probe
    return python


PLAIN = textwrap.dedent("""
    import json, socket
    import submitit

    def where(x):
        env = submitit.JobEnvironment()
        return [env.global_rank, env.num_tasks, socket.gethostname(), x * x]

    executor = submitit.AutoExecutor(folder="log_plain", cluster="pbs")
    executor.update_parameters(timeout_min=5, nodes=2, tasks_per_node=2)
    job = executor.submit(where, 3)
    print("RESULT " + json.dumps({"results": job.results(),
                                  "script": open(job.paths.submission_file).read()}))
""")


def test_several_tasks_of_plain_functions_run_without_torch(pbs, tmp_path):
    """A venv with hpcdist, submitit and mpi4py, no torch: 2 nodes x 2 tasks start with mpirun
    (torchrun is torch's), every task's answer comes back in rank order. About 30 s here."""
    python = venv_without_torch(tmp_path / "venv")
    (tmp_path / "main.py").write_text(PLAIN)
    line = f"{shlex.quote(python)} main.py"
    out = results_of(pbs.on(openpbs.HEAD, line, cwd=tmp_path, timeout=300))
    assert [r[0] for r in out["results"]] == [0, 1, 2, 3], out["results"]
    assert all(r[1] == 4 and r[3] == 9 for r in out["results"]), out["results"]
    assert sorted({r[2] for r in out["results"]}) == ["pbsn1", "pbsn2"], out["results"]
    assert "mpirun" in out["script"] and "torchrun" not in out["script"], out["script"]


#: A map of three, its middle subjob cancelled by its own ``cancel()`` once it runs.
SUBJOB_CANCEL = textwrap.dedent("""
    import json, time
    import submitit

    def slow(k):
        time.sleep(5 if k != 1 else 300)
        return k

    executor = submitit.AutoExecutor(folder="log_subjob", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    jobs = executor.map_array(slow, range(3))
    while jobs[1].get_info(mode="force").get("State") != "RUNNING":
        time.sleep(1)
    jobs[1].cancel()
    started = time.monotonic()
    while not jobs[1].done(force_check=True):
        time.sleep(1)
    out = {"after_s": time.monotonic() - started, "others": [jobs[0].result(), jobs[2].result()]}
    out["cancelled"] = [jobs[1].state, type(jobs[1].exception()).__name__]
    print("RESULT " + json.dumps(out))
""")


@pytest.mark.parametrize("history", [False, True], ids=["history-off", "history-on"])
def test_a_subjobs_own_cancel_ends_it_alone(history, pbs, tmp_path):
    """``jobs[1].cancel()`` of a map_array of three (``qdel 123[1].server``): that subjob ends
    within a watcher's turn, its exception is submitit's UncompletedJobError, and the other two
    return their results. About 40 s a row here."""
    pbs.history(history)
    out = results_of(run_python(pbs, tmp_path, SUBJOB_CANCEL, timeout=300))
    assert out["others"] == [0, 2], out
    assert out["cancelled"][0] in ("CANCELLED", "FAILED"), out
    assert out["cancelled"][1] == "UncompletedJobError" and out["after_s"] < 90, out
