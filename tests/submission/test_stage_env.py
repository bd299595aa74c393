"""--stage-env without a cluster: packing once per content, the script's staging block, the in-job
unpack on this host (a real venv, real tar and zstd), a node that cannot stage, and a whole local
job whose ranks run from the staged copy. The clusters: tests/submission/test_stage_env_cluster.py."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

from hpcdist.submission import stage
from hpcdist.submission.render import render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError
from launch import clean_env

SITE_PACKAGES = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def small_venv(folder) -> str:
    """A real venv of a few files, which imports torch and hpcdist from this one (a .pth), and
    console scripts whose #! names it, as pip writes them (its own torchrun among them)."""
    path = os.path.join(folder, "env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    (site,) = glob.glob(os.path.join(path, "lib", "python*", "site-packages"))
    with open(os.path.join(site, "shared.pth"), "w") as f:
        f.write(f"{SITE_PACKAGES}\n{REPO}\n")
    for name, body in (("where", "import sys\nprint(sys.prefix)\n"),
                       ("torchrun", "import sys\nfrom torch.distributed.run import main\nsys.exit(main())\n")):
        script = os.path.join(path, "bin", name)
        with open(script, "w") as f:
            f.write(f"#!{path}/bin/python\n{body}")
        os.chmod(script, 0o755)
    return path


def spec(**values):
    values = {"script": "train.py", "scheduler": "slurm", "nodes": 2, "procs_per_node": 2, "stage_env": True,
              **values}
    return build_spec(values, check_files=False)


def test_packed_once_per_content_and_again_when_it_changes(tmp_path):
    env = small_venv(tmp_path)
    plan = stage.plan(spec(venv=env), str(tmp_path))
    took = stage.pack(plan)
    assert took > 0 and os.path.isfile(plan.archive) and os.access(plan.wrapper, os.X_OK)
    made = os.stat(plan.archive).st_mtime_ns
    assert stage.pack(stage.plan(spec(venv=env), str(tmp_path))) == 0.0  # unchanged: nothing packed
    assert os.stat(plan.archive).st_mtime_ns == made
    time.sleep(0.01)
    open(os.path.join(env, "bin", "new-tool"), "w").close()  # an install changes bin/ or site-packages
    again = stage.plan(spec(venv=env), str(tmp_path))
    assert again.archive != plan.archive and stage.pack(again) > 0


def test_the_script_stages_before_the_launch_and_cleans_at_the_end(tmp_path):
    env = small_venv(tmp_path)
    os.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    slurm = flat(render(spec(venv=env), workdir=str(tmp_path)))
    plan = stage.plan(spec(venv=env), str(tmp_path))
    assert f"-m hpcdist.injob.stage broadcast --archive {plan.archive}" in slurm
    assert slurm.index("stage_started=1") < slurm.index("# Start torchrun") and "--copied" in slurm
    assert f"{plan.wrapper} torchrun" in slurm
    assert "trap 'clean_stage; rm -rf \"$run_dir\"' EXIT" in slurm
    pbs = flat(render(spec(venv=env, scheduler="pbs", launcher="mpirun"), workdir=str(tmp_path)))
    assert "broadcast" not in pbs and "--map-by ppr:1:node" in pbs.split("# Start")[0]
    assert f"{plan.wrapper} python -m hpcdist.rank" in pbs
    for text in (slurm, pbs):
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def flat(script: str) -> str:
    """The script with its continued lines joined (where a line breaks depends on the paths' length)."""
    return re.sub(r"[ ]*\\\n[ ]*", " ", script)


def test_refused_where_it_cannot_work(tmp_path):
    with pytest.raises(ValidationError, match="--venv.*is not a venv environment"):
        stage.plan(spec(venv=str(tmp_path)), str(tmp_path))
    with pytest.raises(ValidationError, match="--stage-dir.*not an absolute path"):
        spec(venv=str(tmp_path), stage_dir="scratch/env")
    assert spec(stage_dir="$PBS_JOBFS/env").stage_dir == "$PBS_JOBFS/env"
    env = small_venv(tmp_path)
    (tmp_path / "train.py").write_text("")
    with pytest.raises(ValidationError, match="DeepSpeed's pdsh runner"):
        render(spec(venv=env, launcher="deepspeed"), workdir=str(tmp_path))


def _in_job(*args, **env):
    return subprocess.run([sys.executable, "-m", "hpcdist.injob.stage", *args], capture_output=True, text=True,
                          env=clean_env(**env))


def test_unpacked_on_a_node_its_scripts_moved_and_removed(tmp_path):
    env = small_venv(tmp_path)
    plan = stage.plan(spec(venv=env, stage_dir=str(tmp_path / "local")), str(tmp_path))
    stage.pack(plan)
    (tmp_path / "local").mkdir()
    progress = tmp_path / "progress"
    job = {"HPCDIST_JOB_ID": "77", "HPCDIST_PROGRESS_DIR": str(progress)}
    proc = _in_job("unpack", "--archive", plan.archive, "--root", str(tmp_path / "local"), "--origin", env,
                   "--decompress", plan.compressor, **job)
    node = os.uname().nodename
    copy = tmp_path / "local" / f"hpcdist-env-77-{node}"
    assert proc.returncode == 0 and f"hpcdist: {node}: environment staged into {copy}" in proc.stderr, proc.stderr
    assert (copy / "bin" / "where").read_text().startswith(f"#!{copy}/bin/python\n")
    record = json.loads((progress / f"stage-{node}.json").read_text())
    assert record["node"] == node and record["ended"] >= record["started"]
    # The wrapper: the command runs from this node's copy.
    ran = subprocess.run([plan.wrapper, "where"], capture_output=True, text=True, env=clean_env(**job))
    assert ran.stdout.strip() == str(copy), ran.stderr
    assert _in_job("clean", "--root", str(tmp_path / "local"), **job).returncode == 0
    assert not copy.exists()
    # Gone: the wrapper says so, naming the node.
    ran = subprocess.run([plan.wrapper, "where"], capture_output=True, text=True, env=clean_env(**job))
    assert ran.returncode == 1 and f"hpcdist: {node}: no staged environment in {copy}" in ran.stderr


def test_a_node_that_cannot_stage_says_so_naming_itself(tmp_path):
    bad = tmp_path / "env.tar.zst"
    bad.write_bytes(b"not an archive")
    proc = _in_job("unpack", "--archive", str(bad), "--root", str(tmp_path), "--origin", "/nowhere",
                   HPCDIST_JOB_ID="5")
    node = os.uname().nodename
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"hpcdist: {node}: staging the environment failed (--stage-env): cannot unpack "
                                  f"{bad} into {tmp_path}/hpcdist-env-5-{node}"), proc.stderr
    assert not (tmp_path / f"hpcdist-env-5-{node}").exists()
    proc = _in_job("unpack", "--archive", str(bad), "--root", "$NOT_SET_HERE", "--origin", "/x", HPCDIST_JOB_ID="5")
    assert "--stage-dir $NOT_SET_HERE: a variable in it is not set on this node" in proc.stderr


def test_a_local_job_runs_its_ranks_from_the_staged_copy(tmp_path):
    env = small_venv(tmp_path)
    (tmp_path / "probe.py").write_text(
        "import sys, torch, hpcdist.env\n"
        "e = hpcdist.env.init_distributed(timeout=60)\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    o.zero_grad(); m(torch.ones(1, 2)).sum().backward(); o.step()\n"
        "print(f'rank {e.rank} prefix {sys.prefix}', flush=True)\n"
        "import time; time.sleep(3)\n")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--nodes", "2",
                           "--procs-per-node", "1", "--venv", env, "--stage-env", "--stage-dir", str(tmp_path),
                           "--wait", "--json", "probe.py"], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    job_id = json.loads(proc.stdout.splitlines()[0])["job_id"]
    copy = f"{tmp_path}/hpcdist-env-{job_id}-{os.uname().nodename}"
    assert sorted(proc.stdout.count(f"rank {r} prefix {copy}") for r in (0, 1)) == [1, 1], proc.stdout[-3000:]
    # The monitor's last lines, or --wait's after the log where the job ended before the monitor's next look.
    assert "hpcdist: start-up:" in proc.stdout + proc.stderr and not os.path.exists(copy)


def test_a_job_whose_node_cannot_stage_fails_at_once_naming_it(tmp_path):
    env = small_venv(tmp_path)
    (tmp_path / "probe.py").write_text("print('the training ran')\n")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--nodes", "2",
                           "--venv", env, "--stage-env", "--stage-dir", "$HPCDIST_NOT_ON_THE_NODES/env",
                           "--wait", "probe.py"], cwd=tmp_path, capture_output=True, text=True, env=clean_env(),
                          timeout=300)
    node = os.uname().nodename
    assert proc.returncode != 0 and "the training ran" not in proc.stdout
    assert (f"hpcdist: {node}: staging the environment failed (--stage-env): --stage-dir "
            f"$HPCDIST_NOT_ON_THE_NODES/env: a variable in it is not set on this node") in proc.stdout, proc.stdout


def test_a_hostile_stage_dir_is_refused_or_plain(tmp_path):
    """--stage-dir reaches every node's shell (expanded there: $TMPDIR, $PBS_JOBFS): each payload of
    the hostile corpus (tests/hostile.py) is refused, naming --stage-dir, or is an absolute path of
    plain characters and $NAME parts, which nothing in a shell can turn into a command."""
    import hostile

    accepted = []
    for payload in hostile.corpus(str(tmp_path / "PWNED")):
        try:
            held = spec(venv=str(tmp_path), stage_dir=payload.value).stage_dir
        except ValidationError as e:
            assert "--stage-dir" in str(e), e
            continue
        accepted.append(held)
        assert re.fullmatch(r"(/|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)([A-Za-z0-9._/-]|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)*",
                            held), held
    assert len(accepted) < len(hostile.corpus(str(tmp_path / "PWNED")))


def test_stage_env_says_what_it_left_on_disk_and_how_to_free_it(tmp_path):
    """Issue 50 item 4: --stage-env left 762 MB in .hpcdist/stage without a word on size or
    clean-up. A real local job with a real venv: the line gives the sizes on disk."""
    (tmp_path / "train.py").write_text("print('trained')\n")
    small_venv(str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--stage-env",
                           "--venv", "env", "--stage-dir", str(tmp_path), "--wait", "train.py"],
                          cwd=tmp_path, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    stage = tmp_path / ".hpcdist" / "stage"
    archives = [f for f in stage.iterdir() if ".tar." in f.name or f.name.endswith(".sqfs")]

    def size(files):
        return sum(f.stat().st_size for f in files)

    def in_kb(n):
        return f"{n / 1e3:,.0f} kB"

    said = (f"hpcdist submit: --stage-env: {in_kb(size(archives))} packed; .hpcdist/stage holds "
            f"{in_kb(size(stage.iterdir()))} (1 environment, kept for the next submit). To free it once "
            "no queued or running job uses it: rm -r .hpcdist/stage (a later --stage-env submit packs "
            "again)")
    assert said in proc.stderr.splitlines(), proc.stderr
