"""Setup lines, job-time expansion and binding (issue 15, items 1 and 3).

The local jobs here run for real on this machine (bash, Open MPI's mpirun, hpcdist.rank);
what each test asserts is what the job printed or left behind. The renders check the words
each launcher is given, which the cluster rows cannot show without GPUs or CPU masks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from launch import clean_env, need

from hpcdist import rank
from hpcdist.submission.render import render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError

SHOW = """
import os, sys
import hpcdist.env
env = hpcdist.env.resolve()
# A file per rank: ranks share one output, where their lines can run together.
with open(f"show-{env.rank}", "w") as f:
    f.write(f"rank={env.rank} cuda={os.environ.get('CUDA_VISIBLE_DEVICES')} cpus={len(os.sched_getaffinity(0))} "
            f"data={os.environ.get('DATA')}")
"""


def submit(tmp_path, *flags, env=None):
    script = tmp_path / "show.py"
    script.write_text(SHOW)
    env = env or clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--wait", *flags,
                           "show.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    shows = [p.read_text() for p in sorted(tmp_path.glob("show-*"))]
    for p in tmp_path.glob("show-*"):
        p.unlink()
    return proc, shows


def spec(**values):
    return build_spec(dict(script="train.py", **values), check_files=False)


# --- setup lines and job-time expansion ----------------------------------------------

def test_setup_lines_and_an_expanded_value_run_in_the_job(tmp_path):
    (tmp_path / "more.sh").write_text('echo "from the file: $DATA" > from-file.txt\n')
    proc, shows = submit(tmp_path, "--launcher", "none", "--env", "BASE=/data root",
                         "--env-expand", "DATA=${BASE}/set-${HPCDIST_JOB_ID:+in-job}",
                         # An unset variable is empty there, as in the user's shell (not -u's error).
                         "--env-expand", "EMPTY=${NOT_SET_ANYWHERE}x", "--setup", 'test "$EMPTY" = x',
                         "--setup", "mkdir -p staged && echo $((6 * 7)) > staged/answer",
                         "--setup-file", "more.sh")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # --env stays literal; --env-expand expanded in the job, from a variable the job set.
    assert shows == ["rank=0 cuda=None cpus=2 data=/data root/set-in-job"]
    assert (tmp_path / "staged" / "answer").read_text() == "42\n"
    assert (tmp_path / "from-file.txt").read_text() == "from the file: /data root/set-in-job\n"


def test_setup_on_every_node_runs_once_per_node_before_the_launch(tmp_path):
    proc, shows = submit(tmp_path, "--nodes", "2", "--setup-on", "every-node", "--setup",
                         'echo "$NODE_RANK" >> nodes-set-up; test ! -e ranks-started')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((tmp_path / "nodes-set-up").read_text().split()) == ["0", "1"]
    assert len(shows) == 2


def test_a_failing_setup_line_ends_the_job_before_the_training(tmp_path):
    proc, shows = submit(tmp_path, "--setup", "false", "--launcher", "none")
    assert proc.returncode != 0 and shows == []


def test_setup_lines_are_marked_as_the_users_and_every_other_value_stays_quoted():
    text = render(spec(scheduler="slurm", setup=("cp $HOME/data /tmp",), env={"A": "$HOME"}.items(),
                       env_expand={"B": "$HOME/x"}.items()))
    assert "# Your setup lines (--setup), as you wrote them: hpcdist does not quote them.\n" \
           "cp $HOME/data /tmp\nset -u\n" in text
    assert "export A='$HOME'\n" in text and 'export B="$HOME/x"\n' in text


@pytest.mark.parametrize("value, bad", [("X=$(id)", "$("), ("X=`id`", "`"), ('X=a"b', '"'), ("X=a\\b", "\\")])
def test_env_expand_refuses_what_would_run_a_command(value, bad):
    with pytest.raises(ValidationError) as e:
        spec(env_expand=(value,))
    assert e.value.field == "--env-expand" and f"holds {bad}" in str(e.value)


def test_setup_conflicts_are_caught_before_the_queue(tmp_path):
    with pytest.raises(ValidationError, match="also given with --env"):
        spec(env=("A=1",), env_expand=("A=$HOME",))
    with pytest.raises(ValidationError, match="none are given"):
        spec(setup_on="every-node")
    with pytest.raises(ValidationError, match="would end the setup file"):
        spec(setup=("HPCDIST_SETUP_END",))
    with pytest.raises(ValidationError, match="does not exist"):
        build_spec(dict(script=__file__, setup_file=str(tmp_path / "missing.sh")))


# --- binding --------------------------------------------------------------------------

def test_cpu_bind_reaches_open_mpi_and_binds_each_rank(tmp_path):
    need("mpirun.openmpi")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to tell a bound rank from an unbound one")
    free, unbound = submit(tmp_path, "--launcher", "mpirun", "--procs-per-node", "2")
    bound, shows = submit(tmp_path, "--launcher", "mpirun", "--procs-per-node", "2", "--cpu-bind", "core")
    assert free.returncode == 0 and bound.returncode == 0, bound.stdout + bound.stderr
    # Unbound by default (hpcdist's --bind-to none), one core each with --cpu-bind core.
    assert [s.split()[2] for s in unbound] == ["cpus=2", "cpus=2"]
    assert [s.split()[2] for s in shows] == ["cpus=1", "cpus=1"]


def test_visible_devices_gives_each_rank_its_local_rank_gpu(tmp_path):
    need("mpirun.openmpi")
    proc, shows = submit(tmp_path, "--launcher", "mpirun", "--procs-per-node", "2", "--gpu-map", "visible-devices")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [s.split()[:2] for s in shows] == [["rank=0", "cuda=0"], ["rank=1", "cuda=1"]]


@pytest.mark.parametrize("listed, local, seen", [("", "1", "1"), ("4,5,6,7", "2", "6"), ("3", "2", "3")])
def test_own_gpu_picks_from_what_the_scheduler_listed(monkeypatch, listed, local, seen):
    monkeypatch.setattr(os.path, "exists", lambda p: False if p == "/dev/kfd" else os.path.lexists(p))
    environ = {"LOCAL_RANK": local, "CUDA_VISIBLE_DEVICES": listed}
    assert rank.own_gpu(environ) == []
    assert environ["CUDA_VISIBLE_DEVICES"] == seen


@pytest.mark.parametrize("values, words", [
    (dict(scheduler="slurm", launcher="srun", cpu_bind="mask_cpu:0xfe,0xfe00", gpu_map="per-task", gpu_bind="closest"),
     "srun --nodes=1 --ntasks-per-node=4 --kill-on-bad-exit=1 --cpu-bind=mask_cpu:0xfe,0xfe00 --gpus-per-task=1 "
     "--gpu-bind=closest python -m hpcdist.rank train.py"),
    (dict(scheduler="slurm", launcher="srun", gpu_map="visible-devices"),
     "srun --nodes=1 --ntasks-per-node=4 --kill-on-bad-exit=1 python -m hpcdist.rank --own-gpu train.py"),
    (dict(scheduler="pbs", launcher="mpirun", mpi="pals", cpu_bind="list:0:16:32:48", cpus_per_proc=16),
     'mpiexec --hostfile "$HPCDIST_HOSTFILE" -n 4 --ppn 4 --cpu-bind list:0:16:32:48 --envall python -m hpcdist.rank'),
    (dict(scheduler="pbs", launcher="mpirun", mpi="pals", cpu_bind="depth", cpus_per_proc=8, gpu_map="per-task"),
     "--ppn 4 --depth 8 --cpu-bind depth --envall python -m hpcdist.rank --own-gpu train.py"),
    (dict(launcher="mpirun", mpi="mpich", cpu_bind="core:4"), "-bind-to core:4 -genv MASTER_ADDR"),
    (dict(launcher="mpirun", mpi="intel", cpu_bind="socket"), "-genv I_MPI_PIN_DOMAIN socket"),
    (dict(launcher="deepspeed", gpu_map="per-task"), "--module hpcdist.rank --own-gpu train.py"),
])
def test_each_launcher_writes_the_binding_in_its_own_words(values, words):
    # A long command goes on over lines (`` \\`` continuations): read as one line, as bash does.
    assert words in re.sub(r" \\\n\s*", " ", render(spec(gpus_per_node=4, **values)))


@pytest.mark.parametrize("values, field", [
    (dict(cpu_bind="cores"), "--cpu-bind"),                       # torchrun starts its workers unbound
    (dict(launcher="deepspeed", cpu_bind="cores"), "--cpu-bind"),
    (dict(gpu_map="per-task"), "--gpu-map"),                      # torchrun's workers see every GPU
    (dict(scheduler="slurm", launcher="mpirun", gpu_bind="closest"), "--gpu-bind"),
    (dict(scheduler="pbs", gpu_bind="closest", launcher="mpirun"), "--gpu-bind"),
    (dict(scheduler="pbs", constraint="gpu"), "--constraint"),
    (dict(scheduler="pbs", hint="nomultithread"), "--hint"),
    (dict(launcher="mpirun", cpu_bind="core; rm -rf /"), "--cpu-bind"),
])
def test_a_binding_no_launcher_would_apply_is_refused(values, field):
    with pytest.raises(ValidationError) as e:
        spec(gpus_per_node=4, **values)
    assert e.value.field == field


def test_slurm_constraint_and_hint_are_directives():
    text = render(spec(scheduler="slurm", constraint="gpu&hbm80g", hint="nomultithread"))
    assert '#SBATCH --constraint=gpu&hbm80g\n#SBATCH --hint=nomultithread\n' in text
