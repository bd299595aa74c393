"""hpcdist.signals: a stop request reaches the training loop, and every rank stops at the same step.

Two real ranks under torchrun (gloo). The request comes the ways a job
brings it: the job script's stop file (seen here by rank 0 only, as on a
cluster where the file is on the batch node), or SIGUSR2/SIGTERM sent to
one rank.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from launch import clean_env, torchrun

pytest.importorskip("torch")

LOOP = """
import os, sys, time
import torch.distributed as dist
import hpcdist.env
from hpcdist.signals import StopRequest

env = hpcdist.env.init_distributed(timeout=60)
# Rank 1 never sees the file: only the other rank's answer can stop it.
stop = StopRequest(stop_file=os.environ["STOP_FILE"] if env.rank == 0 else "")
open(os.path.join(os.environ["READY"], f"{env.rank}.{os.getpid()}"), "w").close()
for step in range(1, 4000):
    time.sleep(0.05 * (1 + env.rank))  # the ranks reach each check at different times
    if step == 2:  # the test asks for the stop once every rank is past its first check
        open(os.path.join(os.environ["READY"], f"step2.{env.rank}"), "w").close()
    if stop.agreed():
        sys.stdout.write(f"rank {env.rank} stopped at step {step}: {stop.reason}\\n")
        sys.stdout.flush()
        break
else:
    sys.stdout.write(f"rank {env.rank} was never asked\\n")
dist.barrier()
dist.destroy_process_group()
"""


def start(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    ready = tmp_path / "ready"
    ready.mkdir()
    env = clean_env(STOP_FILE=str(tmp_path / "stop"), READY=str(ready))
    proc = subprocess.Popen(torchrun(2, no_python=False) + [str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # Every rank at step 2 (past one check), however slowly the machine runs: no guessed sleep.
    deadline = time.monotonic() + 300
    while len(os.listdir(ready)) < 4:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc, {int(n.split(".")[0]): int(n.split(".")[1]) for n in os.listdir(ready) if not n.startswith("step")}


def stops(proc) -> list[tuple[int, int, str]]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    found = re.findall(r"rank (\d) stopped at step (\d+): (.*)", out)
    assert len(found) == 2, out + err
    return sorted((int(r), int(s), why) for r, s, why in found)


def test_the_job_scripts_stop_file_stops_every_rank_at_the_same_step(tmp_path):
    proc, _ = start(tmp_path)
    (tmp_path / "stop").write_text("walltime warning (SIGUSR2)\n")
    (rank0, step0, why0), (rank1, step1, why1) = stops(proc)
    assert step0 == step1 > 1
    assert why0 == "the job script asked: walltime warning (SIGUSR2)"
    assert why1 == "another rank was asked to stop"
    # The job script requeues only a training that stopped on the request: it left this file.
    assert (tmp_path / "stop.stopped").exists()


@pytest.mark.parametrize("sig", [signal.SIGUSR2, signal.SIGTERM])
def test_a_signal_to_one_rank_stops_every_rank_at_the_same_step(sig, tmp_path):
    proc, pids = start(tmp_path)
    os.kill(pids[1], sig)
    (_, step0, why0), (_, step1, why1) = stops(proc)
    assert step0 == step1 > 1
    assert why1 == f"{sig.name} received" and why0 == "another rank was asked to stop"


def test_without_a_process_group_it_answers_for_this_process(tmp_path):
    code = ("import os, signal\nfrom hpcdist.signals import StopRequest\n"
            "stop = StopRequest(stop_file='')\nassert not stop.agreed()\n"
            "os.kill(os.getpid(), signal.SIGUSR2)\nassert stop.agreed() and stop.reason == 'SIGUSR2 received'\n"
            "import sys; assert 'torch' not in sys.modules\nprint('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_only_a_training_that_stops_on_the_request_says_so_to_the_job_script(tmp_path):
    """The job script requeues when ``<stop file>.stopped`` exists: a training that ends on its own
    after the warning came (it never agreed to stop) leaves none, and is not run again."""
    code = ("import os, sys\nfrom hpcdist.signals import StopRequest\n"
            "stop = StopRequest(stop_file=sys.argv[1])\n"
            "assert not stop.agreed() and not os.path.exists(sys.argv[1] + '.stopped')\n"
            "open(sys.argv[1], 'w').write('walltime warning (SIGUSR2)')\n"
            "if sys.argv[2] == 'stops':\n    assert stop.agreed()\n"
            "print('ok')\n")
    for mode, left in (("stops", True), ("ends on its own", False)):
        folder = tmp_path / mode.replace(" ", "-")
        folder.mkdir()
        proc = subprocess.run([sys.executable, "-c", code, str(folder / "stop"), mode], env=clean_env(),
                              capture_output=True, text=True, timeout=60)
        assert proc.stdout.strip() == "ok", proc.stderr
        assert (folder / "stop.stopped").exists() is left, mode
