"""Fewer nodes without spares, for real on both test clusters (issue 51): 2 nodes x 2 ranks,
torchrun, ``--min-nodes 1 --max-restarts 2``, no spare; node 2 is lost at step 20 of the DDP
example's 60 (every process of the job on it killed, its link down: tests/injob/test_restarts_cluster.py's
way and helpers). The job goes on on node 1 alone from the last checkpoint and completes; the log,
``status`` and the job's folder name node 2 and say it went on with 1 node. One row a cluster (PBS:
history off, the suite's default); the rows with spares, a fault in the code and no spare without
``--min-nodes`` are test_restarts_cluster.py's."""

from __future__ import annotations

import os
import re

import testcluster
from test_restarts_cluster import (  # noqa: F401 - slurm3, pbs3: the module's 3-node clusters
    DDP, TRAINING, figure, first_step_after, lines_of, lose, pbs3, pbs_end, pbs_node2_back,
    pbs_submit, restarted_in_the_allocation, slurm3, slurm_end, slurm_idle, slurm_submit, wait_for_step)

MIN_NODES = ["--launcher", "torchrun", "--min-nodes", "1", "--max-restarts", "2"]


def went_on_alone(row: dict, log: str, lost: str, first: str) -> None:
    """The job completed on ``first`` alone after ``lost`` was left out, from a checkpoint, and said so."""
    text = open(log, errors="replace").read()
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), testcluster.log_excerpt(text)
    (restart,) = lines_of(log, "hpcdist: restart ")
    assert "restart 1 of 2" in restart and f"{lost} did not answer" in restart, restart
    assert f"left out: {lost}, no spare left: going on with 1 node; nodes: {first} (1 of --nodes 2" in restart, restart
    assert row["reason"].startswith(f"restart 1 of 2, left out: {lost}, on 1 node"), row
    assert open(os.path.join(row["folder"], "bad_nodes")).read() == f"{lost}\n"
    # The training started on 4 ranks and went on with node 1's 2, from a checkpoint, to its end.
    sizes = re.findall(r"^DDP on (\d+) ranks?\b", text, re.M)
    assert sizes[0] == "4" and sizes[-1] == "2", testcluster.log_excerpt(text)
    resumed = lines_of(log, "resumed from ")
    assert resumed and re.search(r"at step (1[5-9]|20) \(restart 1\)$", resumed[-1]), resumed
    assert lines_of(log, "step 60 epoch"), testcluster.log_excerpt(text)


def lost_at_step_20(name: str, cluster, job: dict, tmp_path, end, restore, where: tuple, first: str) -> None:
    """Node 2 (``where``: its namespace, its link, its name) lost at step 20: the job goes on on
    ``first`` alone; the time from the fault to the first step after it printed."""
    try:
        wait_for_step(job["log"], 20)
        fault = lose(*where[:2])
        row = end(cluster, job, tmp_path)
    finally:
        restore(cluster)
    went_on_alone(row, job["log"], where[2], first)
    restarted_in_the_allocation(job["log"], name)
    figure(f"{name} torchrun --min-nodes 1: fault to the first step after it",
           first_step_after(job["log"], fault))
    left = testcluster.leftover_processes(f"checkpoint-dir {tmp_path}")
    assert not left, left


def test_slurm_no_spare_left_the_job_goes_on_with_the_one_node_left(slurm3, tmp_path):
    slurm_idle(slurm3)
    job = slurm_submit(slurm3, tmp_path, "--directive=--nodelist=node1,node2", *MIN_NODES, DDP, *TRAINING,
                       "--checkpoint-dir", str(tmp_path / "ckpt"))
    lost_at_step_20("slurm", slurm3, job, tmp_path, slurm_end, slurm_idle, ("hpcdist-node2", "hpcv2", "node2"),
                    "node1")


def test_pbs_no_spare_left_the_job_goes_on_with_the_one_node_left(pbs3, tmp_path):
    pbs_node2_back(pbs3)  # job history off: the session's default
    job = pbs_submit(pbs3, tmp_path, *MIN_NODES, DDP, *TRAINING, "--checkpoint-dir", str(tmp_path / "ckpt"))
    lost_at_step_20("pbs", pbs3, job, tmp_path, pbs_end, pbs_node2_back, ("pbsx-n2", "pbsxv-n2", "pbsn2"), "pbsn1")
