"""The full comparison (opt-in: ``HPCDIST_STAGE_COMPARE=1``; docs/testing.md gives the command): on the
Slurm test cluster and the real OpenPBS, 2 nodes x 2 ranks, torchrun and mpirun, the time to the
first step with the environment on a slow shared file system (tests/cluster/slowshare.sh: sshfs
without caches from a file server in a namespace of its own), and with ``--stage-env``; both
breakdowns, staging's own cost included. Then, without the slow share (this clone's .venv on the
local disk every node sees), what ``--stage-env`` costs on each cluster, as the squashfs image and
as the tar (``HPCDIST_STAGE_TAR=1``), against unstaged, twice each. The figures go to
test-output/stage-compare.json and into the report this prints (docs/guide/staging.md quotes them).

Staging must reach the first step sooner on the slow share (the ratio is printed). The submit
folder is one for all rows (``/tmp/hpcdist-stage-tests/compare``): the environment is packed from the
share once per machine (about 5 minutes here: reading 55,000 files through it is the login
node's one-time cost), and the slow share is taken down at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

import openpbs
import stage_clusters as sc
import testcluster

pytestmark = pytest.mark.skipif(os.environ.get("HPCDIST_STAGE_COMPARE") != "1",
                                reason="the slow-share comparison is opt-in: HPCDIST_STAGE_COMPARE=1")
OUT = testcluster.ROOT / "test-output" / "stage-compare.json"


def _save(name: str, figures: dict) -> None:
    OUT.parent.mkdir(exist_ok=True)
    found = json.loads(OUT.read_text()) if OUT.exists() else {}
    found[name] = figures
    OUT.write_text(json.dumps(found, indent=2))


def _one(submit, venv, launcher, staged, cwd):
    proc, job_id, row, took = submit(venv, launcher, staged, cwd)
    assert proc.returncode == 0, f"{testcluster.log_excerpt(proc.stdout)}\n{proc.stderr}"
    startup = row.get("startup") or {}
    assert startup.get("complete"), row
    expected = "/tmp/hpcdist-env-" if staged else venv
    assert all(prefix.startswith(expected) for _, prefix in sc.ran_from(proc.stdout).values()), proc.stdout[-3000:]
    return {"job_id": job_id, "first_step_s": startup["total_s"], "slowest_node": startup["slowest_node"],
            "nodes": startup["nodes"], "broadcast_s": startup.get("broadcast_s"), "wall_s": round(took, 1),
            "log": sc.startup_lines(proc.stdout),
            "staged_lines": [x for x in proc.stdout.splitlines() if ": environment staged into " in x]}


def _forget_old_jobs(cwd) -> None:
    """The job folders of earlier runs go: a cluster started again numbers its jobs from 1 again,
    and `hpcdist status ID` would find an old job of that number here (the packed files stay)."""
    shutil.rmtree(cwd / ".hpcdist" / "jobs", ignore_errors=True)


def _compare(name, submit, cwd, shared_venv):
    _forget_old_jobs(cwd)
    figures = {}
    for launcher in sc.LAUNCHERS:
        slow = _one(submit, shared_venv, launcher, False, cwd)
        staged = _one(submit, shared_venv, launcher, True, cwd)
        ratio = round(slow["first_step_s"] / staged["first_step_s"], 2)
        figures[launcher] = {"slow_share": slow, "staged": staged, "ratio": ratio}
        print(f"\n{name} {launcher}: first step {slow['first_step_s']:.1f} s on the slow share, "
              f"{staged['first_step_s']:.1f} s staged ({ratio}x)")
        for line in slow["log"] + staged["log"]:
            print("   ", line)
        assert staged["first_step_s"] < slow["first_step_s"], figures[launcher]
    _save(name, figures)


@pytest.fixture(scope="module")
def share():
    path = sc.slowshare("up", sys.prefix)
    try:
        yield path
    finally:
        sc.slowshare("down")


@pytest.mark.slurm_cluster
def test_slurm_slow_share_against_staged(cluster, share):
    cwd = sc.workdir("compare")
    _compare("slurm", lambda *a: sc.slurm_submit(cluster, *a), cwd, share)


def test_openpbs_slow_share_against_staged(openpbs_cluster, share):
    openpbs_cluster.history(False)
    for pid in sc.pbs_holders(openpbs_cluster):
        sc.slowshare("mount-in", str(pid))
    cwd = sc.workdir("compare")
    os.chmod(cwd, 0o755)
    _compare("openpbs", lambda *a: sc.pbs_submit(openpbs_cluster, *a), cwd, share)


def _tar_only(monkeypatch):
    """Submits from here on pack no image (``HPCDIST_STAGE_TAR=1``): the nodes unpack the tar."""
    client_env, on = testcluster.client_env, openpbs.on
    monkeypatch.setattr(testcluster, "client_env", lambda state, **x: client_env(state, HPCDIST_STAGE_TAR="1", **x))
    monkeypatch.setattr(openpbs, "on", lambda *a, **x: on(*a, **{**x, "HPCDIST_STAGE_TAR": "1"}))


def _local_disk(name, submit, cwd, monkeypatch):
    """This clone's .venv on the local disk the nodes share: staging's cost, measured, the image
    (squashfuse) and the tar each against unstaged, alternating, twice each."""
    _forget_old_jobs(cwd)
    figures = {}
    for _ in range(2):
        for how in ("unstaged", "image", "tar"):
            with monkeypatch.context() as m:
                if how == "tar":
                    _tar_only(m)
                got = _one(submit, sys.prefix, "torchrun", how != "unstaged", cwd)
            if how == "image":
                assert all(" an image, mounted by the launch)" in x for x in _staged_lines(got)), got
            figures.setdefault(how, []).append(got)
    best = {k: min(x["first_step_s"] for x in v) for k, v in figures.items()}
    figures["extra_s"] = {k: round(best[k] - best["unstaged"], 1) for k in ("image", "tar")}
    print(f"\n{name}, no slow share: first step {best['unstaged']:.1f} s unstaged, "
          f"{best['image']:.1f} s staged as an image (+{figures['extra_s']['image']} s), "
          f"{best['tar']:.1f} s staged as a tar (+{figures['extra_s']['tar']} s)")
    for how in ("unstaged", "image", "tar"):
        for got in figures[how]:
            print(f"  {how} job {got['job_id']}:")
            for line in got["log"]:
                print("   ", line)
    _save(f"{name}-local-disk", figures)


def _staged_lines(got):
    return got.get("staged_lines") or ["-"]


@pytest.mark.slurm_cluster
def test_slurm_staging_costs_little_without_a_slow_share(cluster, monkeypatch):
    _local_disk("slurm", lambda *a: sc.slurm_submit(cluster, *a), sc.workdir("compare-local"), monkeypatch)


def test_openpbs_staging_costs_little_without_a_slow_share(openpbs_cluster, monkeypatch):
    openpbs_cluster.history(False)
    cwd = sc.workdir("compare-local-pbs")
    os.chmod(cwd, 0o755)
    _local_disk("openpbs", lambda *a: sc.pbs_submit(openpbs_cluster, *a), cwd, monkeypatch)
