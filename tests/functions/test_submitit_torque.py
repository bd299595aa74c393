"""submitit through hpcdist on the Slurm test cluster: submitit's own Slurm executor beside the PBS
plugin's Torque dialect, and the plugin's README, traceback, map over an array cap and
Checkpointable rows (tests/functions/test_submitit_pbs.py runs them on the real OpenPBS) through the
cluster's Torque stand-in: Slurm's qsub wrapper and the cluster's prolog, no Torque server (what
that does and does not prove is said below). Each row's time here is in its docstring.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import testcluster
from docblocks import blocks

pytest.importorskip("submitit")
from test_submitit_pbs import CHECKPOINTED, PAGE, results_of, went_on  # noqa: E402


# --------------------------------------------------------------------------
# On the Slurm test cluster: the parts the executors share
# --------------------------------------------------------------------------


SHARED = textwrap.dedent("""
    import json, socket
    import submitit
    import hpcdist

    def where():
        import hpcdist.env
        env = submitit.JobEnvironment()
        dist = hpcdist.env.current()
        return {"host": socket.gethostname(), "cluster": env.cluster,
                "submitit": [env.global_rank, env.local_rank, env.node, env.num_tasks, env.num_nodes],
                "hpcdist": [dist.rank, dist.local_rank, dist.node_rank, dist.world_size,
                            dist.world_size // dist.local_world_size]}

    slurm = hpcdist.submit_function(where, scheduler="slurm", nodes=2, procs_per_node=2, walltime="5m",
                                    folder="log_slurm")
    executor = submitit.AutoExecutor(folder="log_torque", cluster="pbs")
    executor.update_parameters(timeout_min=5, nodes=2, tasks_per_node=2, pbs_dialect="torque")
    torque = executor.submit(where)
    print("RESULT " + json.dumps({"slurm": slurm.results(), "torque": torque.results(),
                                  "torque_script": open(torque.paths.submission_file).read()}))
""")


@pytest.mark.slurm_cluster
def test_submit_function_on_slurm_and_the_torque_dialect_give_the_same_ranks(cluster, tmp_path):
    """hpcdist.submit_function(scheduler="slurm") (submitit's own Slurm executor, srun tasks) and
    the PBS executor's Torque dialect through the cluster's PBS personality (Slurm's qsub wrapper;
    Torque has no server here): 2 nodes x 2 tasks each, ranks 0-3 on node1 and node2,
    submitit.JobEnvironment() and hpcdist.env agreeing on every task. About 15 s here."""
    (tmp_path / "main.py").write_text(SHARED)
    proc = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=testcluster.client_env(cluster),
                          capture_output=True, text=True, timeout=400)
    out = results_of(proc)
    assert "#PBS -l nodes=2:ppn=2" in out["torque_script"], out["torque_script"]
    for name, expected in (("slurm", "slurm"), ("torque", "pbs")):
        results = out[name]
        assert [r["cluster"] for r in results] == [expected] * 4, results
        assert [r["submitit"][0] for r in results] == [0, 1, 2, 3], results
        assert all(r["submitit"] == r["hpcdist"] for r in results), results
        assert len({r["host"] for r in results}) == 2, results


# --------------------------------------------------------------------------
# On the Slurm test cluster, through its Torque stand-in
# --------------------------------------------------------------------------
# There is no Torque server here: the Torque dialect's qsub and qstat are Slurm's wrappers (package
# slurm-wlm-torque), which submit the #PBS script to Slurm, and the cluster's TaskProlog
# (tests/cluster/cluster.sh) exports in every task what a Torque mom would: PBS_JOBID (123, and
# 123[4] with PBS_ARRAYID=4 for a subjob of an array), PBS_NODEFILE, PBS_O_WORKDIR. These rows prove
# hpcdist's Torque script, its ids and its reading of a Torque job's environment; they do not prove
# Torque's own qsub, qstat or server: Torque's qsub prints an array as "123[].server", the wrapper a
# bare "123" (so a subjob's own qdel, "123[4].server", is not run here), nor its qstat -t listing, a
# max_job_array_size refusal, or pbs_mom's own environment: a real Torque may differ there.

#: A user's hpcdist.toml: the site's profile, chosen by default, says Torque (the dialect the
#: stand-in speaks); the README example itself is left as written.
TORQUE_SITE = 'default = "site"\n\n[profiles.site]\nscheduler = "pbs"\ndialect = "torque"\n'

#: A function that raises: its traceback, its print, submitit's error log.
FAILING = textwrap.dedent("""
    import json
    import submitit

    def divide(a, b):
        print(f"dividing {a} by {b}")
        return a / b

    executor = submitit.AutoExecutor(folder="log_fail", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    job = executor.submit(divide, 1, 0)
    out = {"exception": str(job.exception())}
    try:
        job.result()
        out["raised"] = None
    except Exception as e:
        out["raised"] = type(e).__name__
    out["stdout"], out["stderr"] = job.stdout(), job.stderr()
    out["script"] = open(job.paths.submission_file).read()
    pair = executor.map_array(divide, [1, 1], [1, 0])  # one array: its second subjob raises
    out["pair"] = [type(j.exception()).__name__ for j in pair]
    for j in (job, *pair):
        j.watcher.update()
    out["states"] = [j.state for j in (job, *pair)]
    print("RESULT " + json.dumps(out))
""")


def run_on_slurm(cluster, cwd, code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python main.py`` in ``cwd`` on this machine (the cluster's head), as a user runs it."""
    (cwd / "main.py").write_text(code)
    return subprocess.run([sys.executable, "main.py"], cwd=cwd, env=testcluster.client_env(cluster),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slurm_cluster
def test_submitits_readme_and_a_traceback_through_the_torque_stand_in(cluster, tmp_path):
    """submitit's README example as written, cluster="pbs" (the block of docs/guide/functions.md),
    in a folder whose hpcdist.toml chooses a Torque profile by default; then a function that
    raises: its traceback reaches the caller, its print is in stdout(), submitit's error log in
    stderr(), the job FAILED; and a map of two whose second raises: COMPLETED and FAILED, each
    subjob by its own exit code file. Through the Torque stand-in (Slurm's qsub wrapper and the
    cluster's prolog, see above): proves the Torque script and the plugin on a PBS-like job, not
    Torque's server. About 7-10 s here."""
    (tmp_path / "hpcdist.toml").write_text(TORQUE_SITE)
    (readme,) = [b for b in blocks(str(PAGE), PAGE.read_text()) if "def add(a, b)" in b.text]
    assert 'AutoExecutor(folder="log_test", cluster="pbs")' in readme.text
    proc = run_on_slurm(cluster, tmp_path, readme.text, timeout=180)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    job_id = proc.stdout.split()[0]
    assert job_id.isdigit() and (tmp_path / "log_test" / f"{job_id}_0_result.pkl").is_file(), proc.stdout
    script = (tmp_path / "log_test" / f"{job_id}_submission.sh").read_text()
    assert "#PBS -l nodes=1:ppn=1" in script and "#PBS -l walltime=00:01:00" in script, script
    out = results_of(run_on_slurm(cluster, tmp_path, FAILING, timeout=180))
    assert "ZeroDivisionError: division by zero" in out["exception"] and ", in divide" in out["exception"], out
    assert out["raised"] == "FailedJobError" and "dividing 1 by 0" in out["stdout"], out
    assert "ZeroDivisionError" in out["stderr"] and "Submitted job triggered an exception" in out["stderr"], out
    assert "#PBS -l nodes=1:ppn=1" in out["script"], out["script"]
    # Each subjob's state is its own (its exit code file), not its array's.
    assert out["pair"] == ["NoneType", "FailedJobError"] and out["states"] == ["FAILED", "COMPLETED", "FAILED"], out


#: map_array of 25 under the profile's array cap of 10; each subjob says who it is.
TORQUE_MAP = textwrap.dedent("""
    import json
    import submitit

    def square(x):
        env = submitit.JobEnvironment()
        return [x * x, env.job_id, env.array_job_id, env.array_task_id]

    executor = submitit.AutoExecutor(folder="log_map", cluster="pbs")
    executor.update_parameters(timeout_min=5)
    jobs = executor.map_array(square, range(25))
    out = {"ids": [j.job_id for j in jobs], "results": [j.result() for j in jobs]}
    out["scripts"] = [open(jobs[k].paths.submission_file).read() for k in (0, 9, 17)]
    for j in jobs:
        j.watcher.update()
    out["states"] = sorted({j.state for j in jobs})
    print("RESULT " + json.dumps(out))
""")


@pytest.mark.slurm_cluster
def test_a_map_over_the_profiles_array_cap_through_the_torque_stand_in(cluster, tmp_path):
    """map_array of 25 with the site profile's max_array_size = 10 (no Torque server here to ask):
    three arrays (qsub -t 0-8, 0-7, 0-7), 25 results in the order of the map, every subjob's
    submitit.JobEnvironment() naming the id the login side knows it by (123_4, from the stand-in's
    PBS_JOBID=123[4] and PBS_ARRAYID=4), all COMPLETED. Through the Torque stand-in (see above):
    Slurm runs the arrays; it does not prove a Torque server's array ids, its qstat -t listing or
    its refusal of an array over max_job_array_size (the cap comes from the profile). About 10-16 s here."""
    (tmp_path / "hpcdist.toml").write_text(TORQUE_SITE + "max_array_size = 10\n")
    proc = run_on_slurm(cluster, tmp_path, TORQUE_MAP, timeout=400)
    out = results_of(proc)
    assert ("map_array of 25: 3 arrays, at most 10 (--max-array-size or profile key "
            "max_array_size) subjobs each") in proc.stdout, proc.stdout
    arrays = {}
    for job_id in out["ids"]:
        seq, index = job_id.split("_")
        arrays.setdefault(seq, []).append(int(index))
    assert list(arrays.values()) == [list(range(9)), list(range(8)), list(range(8))], out["ids"]
    assert [r[0] for r in out["results"]] == [x * x for x in range(25)], out["results"]
    assert [r[1] for r in out["results"]] == out["ids"], out["results"]
    assert [r[2:] for r in out["results"]] == [job_id.split("_") for job_id in out["ids"]], out["results"]
    for script, array in zip(out["scripts"], ("0-8", "0-7", "0-7")):
        assert f"#PBS -t {array}" in script and "#PBS -l nodes=1:ppn=1" in script, script
    assert out["states"] == ["COMPLETED"], out["states"]


@pytest.mark.slurm_cluster
def test_a_checkpointable_function_stopped_by_the_walltime_goes_on_through_the_torque_stand_in(cluster, tmp_path):
    """The OpenPBS row's Checkpointable count (50 one-second steps, a 1-minute walltime, the
    script's own warning 25 s before it) with the Torque dialect: the first task checkpoints, the
    job script resubmits the job through qsub (-V, -W depend=afterany), the new job goes on from
    the checkpointed count and returns 50. Through the Torque stand-in (see above): Slurm's qsub
    wrapper turns -W depend into --dependency; it does not prove Torque's own dependency or its
    handling of a job that ends at its walltime. About 1 min here."""
    (tmp_path / "hpcdist.toml").write_text(TORQUE_SITE)
    out = results_of(run_on_slurm(cluster, tmp_path, CHECKPOINTED, timeout=420))
    went_on(out, tmp_path / "log_ckpt")
    script = (tmp_path / "log_ckpt" / f"{out['id']}_submission.sh").read_text()
    assert "#PBS -l nodes=1:ppn=1" in script, script
