"""Fewer nodes without spares (issue 51, ``--min-nodes M`` with ``--max-restarts N``): when a node
is left out and no spare is left, hpcdist's restart goes on with the nodes left if at least M, else
the job ends naming the node. What the job script says (the launch's counts read from the set-up,
--no-kill, tolerate_node_failures) is read from rendered scripts; the decision is ``hpcdist
restart`` run for real on a node list with a host that cannot be reached; the lost node itself is
tests/injob/test_restarts_cluster.py's, on the real clusters."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from test_restarts import pbs_job_setup, render

#: Each launcher's words for the launch's count: none left as a number.
COUNTS = {
    ("slurm", "torchrun"): ['srun --nodes="$HPCDIST_NNODES" --ntasks="$HPCDIST_NNODES" --overlap '
                            '--nodelist="$HPCDIST_NODEFILE"', 'torchrun --nnodes="$HPCDIST_NNODES"'],
    ("slurm", "srun"): ['srun --nodes="$HPCDIST_NNODES" --ntasks-per-node=2 --overlap '
                        '--nodelist="$HPCDIST_NODEFILE"'],
    ("slurm", "mpirun"): ['-np "$((HPCDIST_NNODES * 2))"'],
    ("slurm", "accelerate"): ['--num_machines="$HPCDIST_NNODES"', '--num_processes="$((HPCDIST_NNODES * 2))"'],
    ("slurm", "deepspeed"): ['deepspeed --hostfile "$HPCDIST_HOSTFILE"'],
    ("pbs", "torchrun"): ['mpirun --hostfile "$HPCDIST_NODEFILE" -np "$HPCDIST_NNODES" --map-by ppr:1:node',
                          'torchrun --nnodes="$HPCDIST_NNODES"'],
    ("pbs", "mpirun"): ['mpirun --hostfile "$HPCDIST_HOSTFILE" -np "$((HPCDIST_NNODES * 2))"'],
    ("pbs", "accelerate"): ['--num_machines="$HPCDIST_NNODES"'],
    ("pbs", "deepspeed"): ['deepspeed --hostfile "$HPCDIST_HOSTFILE"'],
}


@pytest.mark.parametrize("scheduler,launcher", list(COUNTS), ids=[f"{s}-{name}" for s, name in COUNTS])
def test_a_job_that_may_go_on_with_fewer_nodes_launches_on_the_count_its_set_up_chose(scheduler, launcher):
    script = render("--scheduler", scheduler, "--nodes", "2", "--procs-per-node", "2", "--launcher",
                    launcher, "--min-nodes", "1", "--max-restarts", "2")
    assert f"job-setup --scheduler {scheduler} --nodes 2 --min-nodes 1 " in script
    for words in COUNTS[scheduler, launcher]:
        assert words in script, script
    assert "--nnodes=2" not in script and "--nnodes=1:2" not in script  # not torchrun's elastic size
    assert "--max-restarts=" not in script and "hpcdist restart --dir" in script
    assert "with no spare left, the launch goes on with the nodes left, if at least 1 (--min-nodes)" in \
        " ".join(line.lstrip("# ") for line in script.splitlines())
    # The scheduler keeps the job when a node fails.
    assert ("#SBATCH --no-kill\n" if scheduler == "slurm" else "#PBS -W tolerate_node_failures=all\n") in script


def test_without_max_restarts_min_nodes_stays_torchrun_s_elastic_size():
    script = render("--scheduler", "slurm", "--nodes", "2", "--min-nodes", "1")
    assert "torchrun --nnodes=1:2" in script and "hpcdist restart" not in script
    assert "HPCDIST_NNODES" not in script


def test_a_job_without_min_nodes_keeps_its_counts_as_numbers():
    script = render("--scheduler", "pbs", "--nodes", "2", "--spare-nodes", "1", "--max-restarts", "2")
    assert "--nnodes=2 " in script and "HPCDIST_NNODES" not in script and "--min-nodes" not in script


def restart(tmp_path, hosts: list, min_nodes: int) -> tuple:
    """The set-up of a PBS job of ``len(hosts)`` nodes on ``hosts`` (``--min-nodes``), then
    ``hpcdist restart`` after a failed launch: its run and the environment."""
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{host}\n" for host in hosts))
    env, setup = pbs_job_setup(tmp_path, nodefile)
    setup[setup.index("--nodes") + 1] = str(len(hosts))
    setup += ["--min-nodes", str(min_nodes)]
    first = subprocess.run(setup, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert f"export HPCDIST_NNODES={len(hosts)}\n" in (tmp_path / "job.env").read_text()
    env["HPCDIST_NODEFILE"] = str(tmp_path / "nodes")
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "restart", "--dir", str(tmp_path), "--status", "137",
                           "--max", "2", "--job-dir", str(job_dir)], env=env, capture_output=True, text=True,
                          timeout=120)
    return proc, job_dir


def test_no_spare_left_the_launch_goes_on_with_the_nodes_left_where_min_nodes_allows(tmp_path):
    """A node that does not answer (a name that does not resolve: ssh's quickest failure), no spare:
    the next launch runs on this host alone, its count 1, and the record says so."""
    here = socket.gethostname()
    proc, job_dir = restart(tmp_path, [here, "node-gone.invalid"], min_nodes=1)
    assert proc.returncode == 0, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("hpcdist: restart 1 of 2 at "), proc.stderr
    assert "node-gone.invalid did not answer" in line
    assert (f"left out: node-gone.invalid, no spare left: going on with 1 node; nodes: {here} "
            f"(1 of --nodes 2: no spare left); master: {here}:29999") in line, line
    assert (tmp_path / "nodes").read_text() == f"{here}\n"
    assert "export HPCDIST_NNODES=1\n" in (tmp_path / "job.env").read_text()
    record = json.loads((job_dir / "restarts").read_text())
    assert (record["left_out"], record["nodes"], record["fewer"]) == (["node-gone.invalid"], [here], True)
    assert (job_dir / "bad_nodes").read_text() == "node-gone.invalid\n"
    from hpcdist.jobs import launch_restarts

    assert launch_restarts.words([record]) == "restart 1 of 2, left out: node-gone.invalid, on 1 node"


def test_below_min_nodes_the_job_ends_naming_the_lost_nodes(tmp_path):
    here = socket.gethostname()
    proc, job_dir = restart(tmp_path, [here, "node-gone.invalid", "other-gone.invalid"], min_nodes=2)
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "no node left to take the place of node-gone.invalid, other-gone.invalid" in line, line
    assert "the job ends" in line and "fewer than --min-nodes 2" in line, line
    assert not (job_dir / "restarts").exists()
