"""Issue 39 item 5: an array's subjobs each have a progress folder of their own.

They shared ``progress/``: their ranks overwrote each other's ``rank-N.json``, and each subjob's
monitor judged (and ended, and asked for stacks) the others' ranks. Now subjob ``i`` writes
``progress.<i>/`` (the array index: Slurm's ``SLURM_ARRAY_TASK_ID``, PBS Pro's
``PBS_ARRAY_INDEX``, Torque's ``PBS_ARRAYID``), its monitor's record of how it ended is
``ended.json.<i>``, and ``watch``/``stacks`` take ``--index i``.

On the 2-host Slurm test cluster: ``--array 0-1``, one node each; subjob 1 hangs after 20 steps,
subjob 0 runs its 150 steps (10 a second) to the end. Subjob 1 alone is ended by --hang-timeout.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import testcluster
from launch import wait_for

#: 10 steps/s; the subjob HANG_INDEX waits for ever after 20 of them.
TRAIN = """\
import os
import time

import hpcdist.env as henv

index = os.environ.get("SLURM_ARRAY_TASK_ID") or os.environ.get("PBS_ARRAY_INDEX") or os.environ.get("PBS_ARRAYID")
for step in range(150):
    if index == os.environ["HANG_INDEX"] and step == 20:
        time.sleep(600)
    henv.step()
    time.sleep(0.1)
"""


def test_subjob_files_carry_their_index():
    from hpcdist.jobs import PROGRESS, ending, subjobs

    assert subjobs.progress_dir("/j", None) == os.path.join("/j", PROGRESS)
    assert subjobs.progress_dir("/j", 3) == "/j/progress.3"
    assert subjobs.index_of("/j/progress.3", "progress") == 3 and subjobs.index_of("/j/progress", "progress") is None
    assert ending.path_of("/j", 3) == "/j/ended.json.3"


def test_subjobs_are_watched_and_ended_each_alone(cluster, tmp_path):
    env = testcluster.client_env(cluster)

    def run(*args, timeout=120):
        return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=timeout)
    (tmp_path / "train.py").write_text(TRAIN)
    proc = run("submit", "--scheduler", "slurm", "--launcher", "srun", "--nodes", "1", "--procs-per-node", "2",
               "--array", "0-1", "--hang-floor", "5s", "--hang-timeout", "25s", "--env", "HANG_INDEX=1",
               "--env", "HPCDIST_PROGRESS_INTERVAL=1", "--json", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = json.loads(proc.stdout)
    folder, job_id = job["folder"], job["job_id"]

    def subjob_log(index) -> str:
        found = [p for p in glob.glob(os.path.join(folder, f"*.{index}.log"))]
        return open(found[0], errors="replace").read() if found else ""

    # While subjob 1 hangs: watch and stacks of subjob 1 say where its own ranks wait.
    screen = wait_for(lambda: "LOOKS HUNG" in (out := run("watch", "--once", job_id, "--index", "1").stdout) and out,
                      180, f"a hang in subjob 1\n{run('watch', '--once', job_id, '--index', '1').stderr}")
    assert screen.startswith(f"job {job_id} subjob 1 (slurm, running): 2 rank(s) on 1 node(s)"), screen
    assert f"`hpcdist stacks {job_id} --index 1` shows where each rank waits" in screen, screen
    stacks = run("stacks", job_id, "--index", "1")
    assert stacks.returncode == 0 and stacks.stdout.startswith("ranks 0-1 in <module> at train.py:9"), (
        stacks.stdout, stacks.stderr)
    # status: the array's row names the hung subjob.
    row = next(line for line in run("status").stdout.splitlines() if line.startswith(job_id + " "))
    assert re.search(r"running +subjob 1 HUNG \d+s$", row), row
    # The array as a whole: a subjob must be named.
    bare = run("watch", "--once", job_id)
    assert bare.returncode == 1 and re.fullmatch(
        rf"hpcdist watch: error: job {job_id} is an array \(subjobs with progress so far: 0-1\): name a subjob "
        rf"with --index N \(as hpcdist watch {job_id} --index 0\)\n", bare.stderr), bare.stderr

    def ended():
        (row,) = json.loads(run("status", "--json", job_id).stdout)
        return row["state"] not in ("RUNNING", "PENDING") and row
    row = wait_for(ended, 180, "the array's end")
    # Each subjob's ranks in its own folder, with its own steps: none overwrote the other's.
    steps = {}
    for index in (0, 1):
        for rank in (0, 1):
            with open(os.path.join(folder, f"progress.{index}", f"rank-{rank}.json")) as f:
                steps[index, rank] = json.load(f)["step"]
    assert steps == {(0, 0): 150, (0, 1): 150, (1, 0): 20, (1, 1): 20}, steps
    assert not os.path.exists(os.path.join(folder, "progress")), os.listdir(folder)
    # Subjob 1 alone was ended, and said so; subjob 0 saw no hang.
    assert "hpcdist: ending the job: no rank has made a step for" in subjob_log(1), subjob_log(1)
    assert "looks hung" not in subjob_log(0) and "ending the job" not in subjob_log(0), subjob_log(0)
    assert os.path.exists(os.path.join(folder, "ended.json.1")) and not os.path.exists(
        os.path.join(folder, "ended.json.0")), os.listdir(folder)
    assert row["state"] == "FAILED" and re.fullmatch(
        r"ended by --hang-timeout after \d+ s without a step; ranks 0-1 in <module> at train.py:9 \(subjob 1\)",
        row["reason"]), row
    for index, words in ((0, "completed, exit 0"), (1, "failed, exit \\d+: ended by --hang-timeout after")):
        seen = run("watch", "--once", job_id, "--index", str(index))
        assert re.search(rf"\nthe job has ended: {words}", seen.stdout), seen.stdout + seen.stderr
        late = run("stacks", job_id, "--index", str(index))
        assert late.returncode == 1 and re.match(rf"hpcdist stacks: error: job {job_id} subjob {index} has ended "
                                                 rf"\({words}", late.stderr), late.stderr
    print(f"array {job_id}: subjob 1 {row['reason']}")
