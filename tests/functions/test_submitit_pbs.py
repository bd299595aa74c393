"""submitit on PBS through hpcdist's plugin (hpcdist/functions/): ``AutoExecutor(cluster="pbs")``.

The unit rows need no scheduler: the parameters' table, the ids, the plugin's registration, the
script hpcdist renders for it. The cluster rows run on the real OpenPBS 23.06 (tests/openpbs.py):
a user's Python script on the head (``pbshead``), jobs on ``pbsn1``/``pbsn2``, job history off
(the server's default) and on; the README, a traceback, a map over the array cap and a
Checkpointable also run on the Slurm test cluster through its Torque stand-in
(tests/functions/test_submitit_torque.py). Each row's time here (2 shared cores, the suite's load aside) is
in its docstring.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time

import pytest

import openpbs
import testcluster
from docblocks import blocks

pytest.importorskip("submitit")
import submitit  # noqa: E402
from submitit.core import plugins  # noqa: E402

from hpcdist.functions import parameters as P  # noqa: E402

ROOT = testcluster.ROOT
PAGE = ROOT / "docs" / "guide" / "functions.md"


# --------------------------------------------------------------------------
# Units: no scheduler
# --------------------------------------------------------------------------


def test_the_plugin_is_registered_under_submitits_entry_points():
    """pyproject's entry points, as `pip install hpcdist[submitit]` installs them."""
    assert plugins.get_executors()["pbs"].__name__ == "PbsExecutor"
    assert type(plugins.get_job_environments()["pbs"]).__name__ == "PbsJobEnvironment"


def test_submitits_parameters_become_hpcdists_options():
    options = P.job_options({"job_name": "sq", "nodes": 2, "tasks_per_node": 4, "cpus_per_task": 8,
                             "gpus_per_node": 4, "mem_gb": 1.5, "timeout_min": 30, "queue": "debug",
                             "account": "proj", "options": {"exclusive": True, "env": {"A": "1"}}},
                            task="/t/task.py", folder="/f", python="/py")
    assert options["launcher"] == "torchrun"
    assert (options["nodes"], options["procs_per_node"], options["cpus_per_proc"],
            options["gpus_per_node"]) == (2, 4, 8, 4)
    assert (options["mem"], options["walltime"], options["queue"], options["account"]) == (
        "1536M", "30m", "debug", "proj")
    assert options["exclusive"] is True and "A=1" in options["env"] and "SUBMITIT_EXECUTOR=pbs" in options["env"]
    assert (options["script"], options["script_args"], options["python"], options["job_name"]) == (
        "/t/task.py", ["/f"], "/py", "sq")
    # A single job gets the walltime warning and submitit's 3 restarts; a quarter of a short walltime.
    assert (options["requeue"], options["signal_margin"]) == (3, "90s")
    assert P.job_options({"timeout_min": 1}, task="t", folder="f", python="p")["signal_margin"] == "15s"
    one = P.job_options({}, task="t", folder="f", python="p", count=25)
    assert (one["launcher"], one["array"], one["walltime"]) == ("none", "0-24", "5m") and "requeue" not in one
    assert P.job_options({"array_parallelism": 4}, task="t", folder="f", python="p", count=25)["array"] == "0-24%4"
    # A profile's walltime and environment are the profile's; its mpirun launches several tasks.
    chosen = P.job_options({"nodes": 2}, task="t", folder="f", python="p",
                           profile={"walltime": "1h", "conda": "base", "launcher": "mpirun"})
    assert "walltime" not in chosen and "python" not in chosen and chosen["launcher"] == "mpirun"
    # The login node's virtual environment is the job's (torchrun lies in its bin/), unless a profile says.
    ours = P.job_options({}, task="t", folder="f", python="/v/bin/python", venv="/v")
    assert ours["venv"] == "/v" and "python" not in ours
    assert "venv" not in P.job_options({}, task="t", folder="f", python="p", venv="/v", profile={"conda": "base"})


@pytest.mark.parametrize("params,words", [
    ({"bogus": 1}, ["Unavailable parameter(s): ['bogus']", "options={...}"]),
    ({"launcher": "srun"}, ["launcher='srun'", "torchrun or mpirun"]),
    ({"nodes": 0}, ["nodes=0", "at least 1"]),
    ({"mem_gb": -1}, ["mem_gb=-1", "e.g. mem_gb=16"]),
    ({"options": {"array": "0-3"}}, ["sets array itself", "remove it from options"]),
])
def test_a_parameter_it_cannot_take_is_named_with_its_value_and_the_fix(params, words):
    with pytest.raises(P.ParameterError) as e:
        P.job_options(params, task="t", folder="f", python="p")
    assert all(w in str(e.value) for w in words), str(e.value)


def test_submitits_ids_are_pbs_sequence_numbers_on_both_sides():
    assert P.submitit_id("123.pbshead") == "123" and P.submitit_id("123[].pbshead", 4) == "123_4"
    assert P.subjob_id("123[].pbshead", 4) == "123[4].pbshead"
    assert P.id_in_job({"PBS_JOBID": "0:77.srv"}) == ("77", None, None)
    assert P.id_in_job({"PBS_JOBID": "123[4].pbshead", "PBS_ARRAY_INDEX": "4"}) == ("123_4", "123", "4")
    assert P.id_in_job({"PBS_JOBID": "123[4].server"}) == ("123_4", "123", "4")  # Torque: PBS_ARRAYID too
    # A job that went on after the walltime warning keeps the first run's id.
    assert P.id_in_job({"PBS_JOBID": "130.pbshead", "SUBMITIT_PBS_JOB_ID": "123.pbshead"})[0] == "123"


@pytest.fixture
def stand_in_qsub(tmp_path, monkeypatch):
    """A stand-in ``qsub`` on PATH that no row runs: the executor refuses to start where PBS has
    none, and these rows only render."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qsub").write_text("#!/bin/sh\necho 'the stand-in qsub was run' >&2; exit 1\n")
    (bin_dir / "qsub").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCDIST_NO_DEFAULT_PROFILE", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _script(executor) -> str:
    from hpcdist.submission.render import render

    return render(executor._executor._spec(executor._executor.parameters)[0])


def test_the_script_is_hpcdists_pbs_script_for_both_dialects(stand_in_qsub):
    executor = submitit.AutoExecutor(folder="log_test", cluster="pbs")
    executor.update_parameters(timeout_min=10, nodes=2, tasks_per_node=2, mem_gb=4, pbs_queue="workq", name="sq")
    script = _script(executor)
    for line in ("#PBS -N sq", "#PBS -l select=2:ncpus=2:mpiprocs=2:mem=4gb", "#PBS -l walltime=00:10:00",
                 "#PBS -q workq", "export SUBMITIT_EXECUTOR=pbs", "--nproc-per-node=2", "hpcdist/functions/task.py"):
        assert line in script, line
    executor.update_parameters(pbs_dialect="torque")
    assert "#PBS -l nodes=2:ppn=2" in _script(executor)
    with pytest.raises(NameError, match="pbs_bogus"):
        executor.update_parameters(pbs_bogus=1)


def test_the_polaris_preset_is_one_parameter_away(stand_in_qsub):
    """docs/guide/functions.md's Polaris block, run as written: the preset's request, queue and
    environment, the account given."""
    (block,) = [b for b in blocks(str(PAGE), PAGE.read_text()) if "polaris" in b.text]
    namespace = {"submitit": submitit}
    exec(block.text, namespace)
    script = _script(namespace["executor"])
    for line in ("#PBS -l select=2:system=polaris", "#PBS -A MYPROJECT", "#PBS -q debug", "conda activate base",
                 "mpirun"):
        assert line in script, line


def test_a_map_larger_than_the_cap_is_cut_into_arrays(stand_in_qsub):
    executor = submitit.AutoExecutor(folder="log_test", cluster="pbs")
    executor.update_parameters(pbs_max_array_size=10)
    assert [len(r) for r in executor._executor.arrays(25)] == [9, 8, 8]
    assert [len(r) for r in executor._executor.arrays(10)] == [10]


def test_the_job_environment_gives_hpcdist_envs_ranks(tmp_path):
    """In a task (a fresh process: hpcdist.env resolves once per process) started by torchrun."""
    code = ("import json, submitit, hpcdist.env as h\ne = submitit.JobEnvironment()\nd = h.current()\n"
            "print(json.dumps([type(e).__name__, e.job_id, e.global_rank, e.local_rank, e.num_tasks, e.node, "
            "e.num_nodes, d.rank, d.local_rank, d.world_size, d.node_rank]))\n")
    env = dict(os.environ, SUBMITIT_EXECUTOR="pbs", PBS_JOBID="123[4].pbshead", PBS_ARRAY_INDEX="4",
               RANK="3", LOCAL_RANK="1", WORLD_SIZE="4", LOCAL_WORLD_SIZE="2", GROUP_RANK="1",
               TORCHELASTIC_RUN_ID="x", MASTER_ADDR="pbsn1", MASTER_PORT="29400")
    for name in [n for n in env if n.startswith("SLURM_")]:
        del env[name]
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["PbsJobEnvironment", "123_4", 3, 1, 4, 1, 2, 3, 1, 4, 1]


STOPPED = textwrap.dedent("""
    import json, os, sys
    import submitit
    from submitit.core import utils
    from hpcdist.functions.environment import PbsJobEnvironment, StopHandler

    class Count(submitit.helpers.Checkpointable):
        def __call__(self):
            return 1

    def plain():
        return 1

    folder, reason, which = sys.argv[1:]
    os.makedirs(folder)
    paths = utils.JobPaths(folder, job_id="7")
    delayed = utils.DelayedSubmission(Count() if which == "checkpointable" else plain)
    delayed.set_timeout(1, 3)
    handler = StopHandler(PbsJobEnvironment(), paths, delayed)
    handler.reason = reason
    try:
        handler.stop(None, None)
        outcome = "went on"
    except SystemExit as e:
        outcome = f"exit {e.code}"
    except utils.UncompletedJobError as e:
        outcome = str(e)
    print(json.dumps([outcome, os.path.exists(os.environ["HPCDIST_STOP_FILE"] + ".stopped"),
                      paths.submitted_pickle.exists()]))
""")


@pytest.mark.parametrize("reason,which,expected", [
    ("walltime warning (SIGUSR2)", "checkpointable", ["exit 0", True, True]),
    ("walltime warning (SIGUSR2)", "plain",
     ["Job not requeued because: timed-out and not checkpointable.", False, False]),
    ("walltime warning by hand (SIGWINCH)", "checkpointable", ["exit 0", True, True]),
    ("SIGTERM", "checkpointable", ["went on", False, False]),
], ids=["checkpointed", "not-checkpointable", "by-hand-checkpointed", "sigterm-bypassed"])
def test_the_walltime_warning_checkpoints_or_fails_as_submitit_does_on_slurm(reason, which, expected, tmp_path):
    """The first task, told to stop by the job script's stop file: a Checkpointable function's
    checkpointed call is written over the job's pickle and the task leaves the ``.stopped`` mark
    (the script then resubmits the job); another function ends with submitit's own error; a
    SIGTERM (qdel) is let pass, as submitit's Slurm handler lets it."""
    (tmp_path / "stop.py").write_text(STOPPED)
    env = {name: value for name, value in os.environ.items() if not name.startswith(("SLURM_", "OMPI_", "PMI"))}
    env.update(SUBMITIT_EXECUTOR="pbs", PBS_JOBID="7.pbshead", HPCDIST_STOP_FILE=str(tmp_path / "stop"))
    proc = subprocess.run([sys.executable, "stop.py", str(tmp_path / "log"), reason, which], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == expected, proc.stdout + proc.stderr


def test_interrupt_timeout_asks_for_the_warning_by_hand_with_qsig_winch(tmp_path, monkeypatch):
    """``job._interrupt(timeout=True)`` runs ``qsig -s WINCH <job's newest PBS id>``: qsig's USR2
    would end the job on a real PBS (tests/schedulers/test_pbs_stop_by_hand.py). qsig is a STAND-IN on PATH
    that records its words: the test OpenPBS's moms see no process of a root job to signal."""
    from hpcdist.functions.executor import INDEX, PbsJob

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qsig").write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "qsig.argv"}\n')
    (bin_dir / "qsig").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PBS_CONF_FILE", raising=False)
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "record.json").write_text(json.dumps({"job_id": "123.pbshead", "scheduler": "pbs"}))
    (folder / "runs").write_text("start 1 123.pbshead n1\nresubmitted 2 130.pbshead\n")
    (tmp_path / "log" / INDEX).mkdir(parents=True)
    (tmp_path / "log" / INDEX / "123").write_text(str(folder))
    PbsJob(tmp_path / "log", "123")._interrupt(timeout=True)
    assert (tmp_path / "qsig.argv").read_text() == "-s WINCH 130.pbshead\n"


# --------------------------------------------------------------------------
# On the real OpenPBS
# --------------------------------------------------------------------------


@pytest.fixture
def pbs(openpbs_cluster):
    """The server as shipped (history off, flatuid True, no array cap): a row sets what it needs."""
    openpbs_cluster.history(False)
    return openpbs_cluster


def run_python(pbs, cwd, code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python main.py`` on the head, as a user on the login node runs it."""
    (cwd / "main.py").write_text(code)
    return pbs.on(openpbs.HEAD, f"{shlex.quote(sys.executable)} main.py", cwd=cwd, timeout=timeout)


def results_of(proc) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT "):])


#: A user's script: an exception's traceback, stdout(), map_array over the server's cap, batch(),
#: cancel() and the states, each against what submitit promises on Slurm.
MANY = textwrap.dedent("""
    import json, time
    import submitit

    def divide(a, b):
        print(f"dividing {a} by {b}")
        return a / b

    def square(x):
        return x * x

    executor = submitit.AutoExecutor(folder="log_many", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    out = {}
    job = executor.submit(divide, 1, 0)
    out["exception"] = str(job.exception())
    try:
        job.result()
        out["raised"] = None
    except Exception as e:
        out["raised"] = type(e).__name__
    out["stdout"], out["stderr"] = job.stdout(), job.stderr()
    jobs = executor.map_array(square, range(25))
    out["map"] = [j.result() for j in jobs]
    out["map_ids"] = [j.job_id for j in jobs]
    executor.update_parameters(pbs_array_parallelism=2)
    with executor.batch():
        batch = [executor.submit(square, k) for k in range(3)]
    out["batch"] = [j.result() for j in batch]
    out["batch_ids"] = [j.job_id for j in batch]
    out["batch_script"] = open(batch[0].paths.submission_file).read()
    slow = executor.submit(time.sleep, 300)
    while slow.get_info(mode="force").get("State") != "RUNNING":
        time.sleep(1)
    slow.cancel()
    while not slow.done(force_check=True):
        time.sleep(1)
    out["cancelled"] = [slow.state, type(slow.exception()).__name__]
    for j in (job, jobs[0], jobs[-1], batch[0]):
        j.watcher.update()
    out["states"] = [job.state, jobs[0].state, jobs[-1].state, batch[0].state]
    print("RESULT " + json.dumps(out))
""")


@pytest.mark.parametrize("history", [False, True], ids=["history-off", "history-on"])
def test_submitits_readme_a_traceback_and_a_map_over_the_array_cap(history, pbs, tmp_path):
    """submitit's README example with cluster="pbs" (the block of docs/guide/functions.md, run as
    written); then, with the server's max_array_size set to 10: a function that raises (its
    traceback reaches the caller, its print is in stdout(), submitit's error log in stderr()),
    map_array of 25 (three arrays, 25 results in order), batch() of 3 with array_parallelism 2
    (one array, -J 0-2%2), a running job cancelled; the states as hpcdist's PBS status says them.
    About 40 s a row here."""
    pbs.history(history)
    (readme,) = [b for b in blocks(str(PAGE), PAGE.read_text()) if "def add(a, b)" in b.text]
    assert 'AutoExecutor(folder="log_test", cluster="pbs")' in readme.text
    started = time.monotonic()
    proc = run_python(pbs, tmp_path, readme.text, timeout=180)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    job_id = proc.stdout.split()[0]
    assert job_id.isdigit() and (tmp_path / "log_test" / f"{job_id}_0_result.pkl").is_file(), proc.stdout
    before = pbs.qmgr("list server")
    pbs.qmgr("set server max_array_size = 10")
    try:
        out = results_of(run_python(pbs, tmp_path, MANY, timeout=600))
    finally:
        old = [line.split("=", 1)[1].strip() for line in before.splitlines()
               if line.strip().startswith("max_array_size")]
        pbs.qmgr(f"set server max_array_size = {old[0]}" if old else "unset server max_array_size")
    # The job's own traceback (a function of __main__ travels by value: no source line, as on Slurm).
    assert "ZeroDivisionError: division by zero" in out["exception"] and ", in divide" in out["exception"], out
    assert out["raised"] == "FailedJobError" and "dividing 1 by 0" in out["stdout"], out
    assert "ZeroDivisionError" in out["stderr"] and "Submitted job triggered an exception" in out["stderr"], out
    assert out["map"] == [x * x for x in range(25)], out
    arrays = {}
    for job_id in out["map_ids"]:
        seq, index = job_id.split("_")
        arrays.setdefault(seq, []).append(int(index))
    assert list(arrays.values()) == [list(range(9)), list(range(8)), list(range(8))], out["map_ids"]
    assert out["batch"] == [0, 1, 4] and len({i.split("_")[0] for i in out["batch_ids"]}) == 1, out
    assert "#PBS -J 0-2%2" in out["batch_script"], out["batch_script"]
    assert out["cancelled"][0] in ("CANCELLED", "FAILED") and out["cancelled"][1] == "UncompletedJobError", out
    assert out["states"] == ["FAILED", "COMPLETED", "COMPLETED", "COMPLETED"], out
    print(f"history {'on' if history else 'off'}: {time.monotonic() - started:.0f} s")


RANKS = textwrap.dedent("""
    import json, socket
    import submitit

    def where():
        import hpcdist.env
        env = submitit.JobEnvironment()
        dist = hpcdist.env.current()
        return {"host": socket.gethostname(), "job_id": env.job_id, "hosts": list(env.hostnames),
                "submitit": [env.global_rank, env.local_rank, env.node, env.num_tasks, env.num_nodes],
                "hpcdist": [dist.rank, dist.local_rank, dist.node_rank, dist.world_size,
                            dist.world_size // dist.local_world_size], "launcher": dist.launcher}

    executor = submitit.AutoExecutor(folder="log_ranks", cluster="pbs")
    executor.update_parameters(timeout_min=5, nodes=2, tasks_per_node=2)
    job = executor.submit(where)
    print("RESULT " + json.dumps({"id": job.job_id, "results": job.results()}))
""")


def test_two_nodes_of_two_tasks_have_ranks_0_to_3_on_both_hosts(pbs, tmp_path):
    """nodes=2, tasks_per_node=2: torchrun started on pbsn1 and pbsn2 by hpcdist's spread (Open
    MPI's launcher); in every task submitit.JobEnvironment() and hpcdist.env agree; results() has
    the 4 tasks' answers in rank order. Job history on. About 15 s here."""
    pbs.history(True)
    out = results_of(run_python(pbs, tmp_path, RANKS, timeout=300))
    results = out["results"]
    assert [r["submitit"][0] for r in results] == [0, 1, 2, 3], results
    assert all(r["submitit"] == r["hpcdist"] for r in results), results
    assert all(r["submitit"][3:] == [4, 2] and r["job_id"] == out["id"] for r in results), results
    hosts = [r["host"] for r in results]
    assert sorted(set(hosts)) == ["pbsn1", "pbsn2"] and hosts[0] == hosts[1] and hosts[2] == hosts[3], hosts
    assert [r["submitit"][1] for r in results] == [0, 1, 0, 1] and [r["submitit"][2] for r in results] == [0, 0, 1, 1]
    assert all(r["hosts"] == hosts[::2] for r in results), results


CHECKPOINTED = textwrap.dedent("""
    import json, os, time
    import submitit

    class Count(submitit.helpers.Checkpointable):
        def __init__(self):
            self.done = 0
            self.runs = []

        def __call__(self, steps):
            self.runs.append(os.environ["PBS_JOBID"])
            while self.done < steps:
                time.sleep(1)
                self.done += 1
            return self.done, self.runs

    executor = submitit.AutoExecutor(folder="log_ckpt", cluster="pbs")
    executor.update_parameters(timeout_min=1, pbs_signal_delay_s=25)
    job = executor.submit(Count(), 50)
    done, runs = job.result()
    while job.get_info(mode="force").get("State") in ("PENDING", "RUNNING"):  # the job script's last lines
        time.sleep(1)
    print("RESULT " + json.dumps({"id": job.job_id, "done": done, "runs": runs, "state": job.state}))
""")


def test_a_checkpointable_function_stopped_by_the_walltime_goes_on_and_finishes(pbs, tmp_path):
    """A Checkpointable count of 50 one-second steps under a 1-minute walltime: the script's own
    warning 25 s before it, the first task's checkpoint(), the job resubmitted from pbsn1 (qsub
    -V, -W depend=afterany), the new job goes on from the checkpointed count and returns 50.
    Job history off: the state follows the job to its new id all the same. About 1 min here."""
    went_on(results_of(run_python(pbs, tmp_path, CHECKPOINTED, timeout=420)), tmp_path / "log_ckpt")


def went_on(out: dict, folder) -> None:
    """CHECKPOINTED's answer: 50 steps over two runs or more, each a job of its own, the state
    COMPLETED, and submitit's lines of the checkpoint in the first task's logs."""
    assert out["done"] == 50 and len(out["runs"]) >= 2 and len(set(out["runs"])) == len(out["runs"]), out
    assert out["id"] == P.submitit_id(out["runs"][0]) and out["state"] == "COMPLETED", out
    # submitit's logger: warnings in the task's .err, the rest in its .out (both runs append to them).
    err, log = (folder / f"{out['id']}_0_log.err").read_text(), (folder / f"{out['id']}_0_log.out").read_text()
    assert "walltime warning (SIGUSR2): this job is timed-out" in err, err
    assert "Calling checkpoint method" in log and "Checkpointed; the job script resubmits the job" in log, log
