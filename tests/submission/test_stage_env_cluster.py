"""--stage-env on the real clusters, one row each (the full comparison with a slow shared file
system: tests/submission/test_stage_env_compare.py, opt-in).

2 nodes x 2 ranks under torchrun: the environment packed at submit, copied to each node (Slurm:
sbcast; OpenPBS: each node reads it once, started one per node by Open MPI), unpacked into the
node's /tmp (the squashfs image mounted where mksquashfs and squashfuse are here, as
scripts/bootstrap.sh installs them; else the tar unpacked), every rank's interpreter the node's own
copy, the copies and mounts gone at the end, and the log ending with the start-up's breakdown,
staging included, for both nodes.
"""

from __future__ import annotations

import re
import os
import shutil
import sys

import pytest

import stage_clusters as sc
import testcluster


IMAGE = bool(shutil.which("mksquashfs") and shutil.which("squashfuse") and os.access("/dev/fuse", os.W_OK))


def left_mounted(job_id, mountinfos) -> list[str]:
    """The job's staged images still mounted, in each of these mount namespaces."""
    found = []
    for path in mountinfos:
        with open(path, encoding="utf-8") as f:
            found += [line.split()[4] for line in f if f"/hpcdist-env-{job_id}-" in line.split()[4]]
    return found


def check_staged(proc, job_id, row, nodes, log_excerpt, mountinfos=("/proc/self/mountinfo",)):
    out = proc.stdout
    assert proc.returncode == 0, f"{log_excerpt(out)}\n{proc.stderr}"
    ran = sc.ran_from(out)
    assert sorted(ran) == [0, 1, 2, 3], log_excerpt(out)
    for rank, (node, prefix) in ran.items():
        # Each rank's interpreter is its own node's copy, not the shared .venv.
        assert prefix == f"/tmp/hpcdist-env-{job_id}-{node}", (rank, node, prefix)
    assert sorted({node for node, _ in ran.values()}) == list(nodes)
    for node in nodes:
        said = f"hpcdist: {node}: environment staged into /tmp/hpcdist-env-{job_id}-{node}"
        assert said in out, log_excerpt(out)
        (line,) = [x for x in out.splitlines() if said in x]
        assert line.endswith("an image, mounted by the launch)" if IMAGE else "unpacked)"), line
    breakdown = sc.startup_lines(out)
    # Two nodes whose totals are equal have no slowest (hpcdist.progress.startup).
    assert breakdown and re.search(r"from the job's start to the first step; (slowest node: |2 nodes alike)",
                                   breakdown[0]), log_excerpt(out)
    for node in nodes:
        (line,) = [x for x in breakdown if x.split()[1:2] == [node]]
        staging = line.split()[3]
        assert staging != "-" and float(staging) > 0, breakdown
    startup = row.get("startup") or {}
    assert startup.get("complete") and startup.get("slowest_node") in nodes, row
    assert sc.leftovers(job_id) == [], "the staged copies outlived the job"
    assert left_mounted(job_id, mountinfos) == [], "the staged images outlived the job"


@pytest.mark.slurm_cluster
def test_slurm_stages_the_environment_with_sbcast(cluster):
    cwd = sc.workdir("slurm")
    proc, job_id, row, _ = sc.slurm_submit(cluster, sys.prefix, "torchrun", True, cwd)
    check_staged(proc, job_id, row, ("node1", "node2"), testcluster.log_excerpt)
    assert "the broadcast (sbcast) took" in sc.startup_lines(proc.stdout)[0]


def test_openpbs_stages_the_environment_once_per_node(openpbs_cluster):
    openpbs_cluster.history(False)
    cwd = sc.workdir("openpbs")
    os.chmod(cwd, 0o755)
    proc, job_id, row, _ = sc.pbs_submit(openpbs_cluster, sys.prefix, "torchrun", True, cwd)
    check_staged(proc, job_id, row, openpbs_cluster.NODES, testcluster.log_excerpt,
                 [f"/proc/{pid}/mountinfo" for pid in sc.pbs_holders(openpbs_cluster)])
