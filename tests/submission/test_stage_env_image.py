"""--stage-env's two ways on one node, without a cluster: the squashfs image (mksquashfs at submit,
squashfuse on the node: nothing unpacked, mounted by the wrapper, unmounted at the end), the tar
where a node cannot mount it (no squashfuse, an image that will not mount) or the submit asks for
the tar only; and a conda-like environment (the closest stand-in for conda here, which has no
conda: see test_a_conda_like_prefix_is_staged_from_the_tar). The clusters:
tests/submission/test_stage_env_cluster.py."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from hpcdist.submission import stage
from launch import clean_env, need
from test_stage_env import flat, small_venv, spec

NODE = os.uname().nodename


def _in_job(*args, **env):
    return subprocess.run([sys.executable, "-m", "hpcdist.injob.stage", *args], capture_output=True, text=True,
                          env=clean_env(**env))


def _unpack(plan, root, env, job="91", **extra):
    image = ["--image", plan.image] if plan.image else []
    return _in_job("unpack", "--archive", plan.archive, *image, "--root", str(root), "--origin", env,
                   "--decompress", plan.compressor, HPCDIST_JOB_ID=job, **extra)


def _mounted_under(folder) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(str(folder))]


def _fuse_processes(folder) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "squashfuse" in os.path.basename(words[0]) and any(str(folder) in w for w in words):
            found.append(" ".join(words))
    return found


@pytest.fixture
def packed(tmp_path):
    need("mksquashfs"), need("squashfuse")
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        pytest.skip("no /dev/fuse here: the nodes would unpack the tar (the tests below that need no FUSE say so)")
    env = small_venv(tmp_path)
    plan = stage.plan(spec(venv=env, stage_dir=str(tmp_path / "local")), str(tmp_path))
    assert plan.image and stage.pack(plan) > 0 and os.path.isfile(plan.image) and os.path.isfile(plan.archive)
    (tmp_path / "local").mkdir()
    return env, plan, tmp_path / "local"


def test_an_image_is_mounted_by_the_launch_and_gone_at_the_end(packed):
    env, plan, local = packed
    proc = _unpack(plan, local, env)
    copy = local / f"hpcdist-env-91-{NODE}"
    assert proc.returncode == 0, proc.stderr
    assert f"hpcdist: {NODE}: environment staged into {copy} in " in proc.stderr
    assert "read once; an image, mounted by the launch)" in proc.stderr
    # Nothing unpacked: the copy's lib is the image's, its bin/ a real folder with the #! moved.
    assert os.readlink(copy / "lib") == os.path.join(".image", "lib") and not (copy / "bin").is_symlink()
    assert (copy / "bin" / "where").read_text().startswith(f"#!{copy}/bin/python\n")
    assert _mounted_under(copy) == []  # the staging step mounted it to check it, and let go
    # Two commands through the wrapper at once (a node's launcher and rank): one mount, both run from the copy.
    job = clean_env(HPCDIST_JOB_ID="91")
    runs = [subprocess.Popen([plan.wrapper, "where"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=job) for _ in range(2)]
    for run in runs:
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0 and out.strip() == str(copy), err
    assert _mounted_under(copy) == [str(copy / ".image")]
    ran = subprocess.run([plan.wrapper, "python", "-c", "import json, sys; print(json.__file__, sys.prefix)"],
                         capture_output=True, text=True, env=job)
    assert ran.stdout.split()[1] == str(copy), ran.stderr
    assert _in_job("clean", "--root", str(local), HPCDIST_JOB_ID="91").returncode == 0
    assert not copy.exists() and _mounted_under(copy) == [] and _fuse_processes(copy) == []


def test_a_node_without_squashfuse_unpacks_the_tar(packed, tmp_path):
    env, plan, local = packed
    bare = tmp_path / "bare-bin"  # this node's PATH: tar and zstd, no squashfuse
    bare.mkdir()
    for tool in ("tar", "zstd", "rm", "sh", "uname"):
        os.symlink(shutil.which(tool), bare / tool)
    proc = _unpack(plan, local, env, PATH=str(bare))
    copy = local / f"hpcdist-env-91-{NODE}"
    assert proc.returncode == 0 and "read once; unpacked)" in proc.stderr, proc.stderr
    assert (copy / "lib").is_dir() and not (copy / "lib").is_symlink() and not (copy / ".hpcdist-mount").exists()
    ran = subprocess.run([plan.wrapper, "where"], capture_output=True, text=True, env=clean_env(HPCDIST_JOB_ID="91"))
    assert ran.stdout.strip() == str(copy), ran.stderr
    assert _in_job("clean", "--root", str(local), HPCDIST_JOB_ID="91").returncode == 0 and not copy.exists()


def test_an_image_that_will_not_mount_falls_back_to_the_tar(packed):
    env, plan, local = packed
    with open(plan.image, "r+b") as f:  # its superblock broken: squashfuse refuses it
        f.write(b"\0" * 4096)
    proc = _unpack(plan, local, env)
    copy = local / f"hpcdist-env-91-{NODE}"
    assert proc.returncode == 0, proc.stderr
    assert f"hpcdist: {NODE}: the environment's image did not mount, unpacking instead: cannot mount" in proc.stderr
    assert "read once; unpacked)" in proc.stderr and (copy / "lib").is_dir() and _mounted_under(copy) == []
    assert _in_job("clean", "--root", str(local), HPCDIST_JOB_ID="91").returncode == 0 and not copy.exists()


def test_the_tar_only_when_asked_and_the_script_names_the_image_where_there_is_one(tmp_path, monkeypatch):
    from hpcdist.submission.render import render

    env = small_venv(tmp_path)
    os.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    monkeypatch.setenv("HPCDIST_STAGE_TAR", "1")
    plan = stage.plan(spec(venv=env), str(tmp_path))
    assert plan.image is None and "--image" not in flat(render(spec(venv=env), workdir=str(tmp_path)))
    monkeypatch.delenv("HPCDIST_STAGE_TAR")
    if not shutil.which("mksquashfs"):
        pytest.skip("no mksquashfs here: the tar only")
    plan = stage.plan(spec(venv=env), str(tmp_path))
    slurm = flat(render(spec(venv=env), workdir=str(tmp_path)))
    assert f"broadcast --archive {plan.archive} --image {plan.image} --to" in slurm
    assert f"unpack --archive {plan.archive} --image {plan.image} --copied" in slurm


def conda_like(folder) -> str:
    """The closest to a conda environment this machine can make without conda: a prefix of its own
    (this interpreter's binary and standard library copied in, as conda installs python into each
    environment, so that it runs from wherever the prefix is), ``conda-meta/`` with a package's
    record (what hpcdist and conda-pack take a conda environment by), and a console script whose
    #! names the prefix. What it does not stand in for: conda's activation scripts
    (etc/conda/activate.d), prefixes written into other text and binary files (conda-pack's
    conda-unpack rewrites those; this prefix has none), and conda itself (the job script's
    ``conda activate``: this test runs the node's side, not a whole job)."""
    prefix = os.path.join(folder, "conda-env")
    stdlib = sysconfig.get_paths(vars={"base": sys.base_prefix, "installed_base": sys.base_prefix})["stdlib"]
    version = os.path.basename(stdlib)
    shutil.copytree(stdlib, os.path.join(prefix, "lib", version), symlinks=True,
                    ignore=shutil.ignore_patterns("test", "site-packages", "idlelib", "tkinter", "turtledemo",
                                                  "ensurepip", "__pycache__"))
    os.makedirs(os.path.join(prefix, "lib", version, "site-packages"))
    for lib in glob.glob(os.path.join(sys.base_prefix, "lib", "libpython*")):
        shutil.copy2(lib, os.path.join(prefix, "lib"), follow_symlinks=False)
    os.makedirs(os.path.join(prefix, "bin"))
    real = os.path.realpath(os.path.join(sys.base_prefix, "bin", version))
    shutil.copy2(real, os.path.join(prefix, "bin", version))
    os.symlink(version, os.path.join(prefix, "bin", "python"))
    os.makedirs(os.path.join(prefix, "conda-meta"))
    with open(os.path.join(prefix, "conda-meta", "python-3.11.7-0.json"), "w") as f:
        json.dump({"name": "python", "version": "3.11.7", "files": [f"bin/{version}"]}, f)
    with open(os.path.join(prefix, "bin", "where"), "w") as f:
        f.write(f"#!{prefix}/bin/python\nimport os, sys\nprint(sys.prefix, os.environ.get('CONDA_PREFIX'))\n")
    os.chmod(os.path.join(prefix, "bin", "where"), 0o755)
    return prefix


def test_a_conda_like_prefix_is_staged_from_the_tar(tmp_path):
    prefix = conda_like(tmp_path)
    assert stage.environment(spec(conda=prefix)) == (prefix, "conda")
    plan = stage.plan(spec(conda=prefix, stage_dir=str(tmp_path / "local")), str(tmp_path))
    assert plan.image is None  # a conda prefix is rewritten in place (conda-unpack): the tar, never the image
    assert stage.pack(plan) > 0
    (tmp_path / "local").mkdir()
    proc = _unpack(plan, tmp_path / "local", prefix, job="92")
    copy = tmp_path / "local" / f"hpcdist-env-92-{NODE}"
    assert proc.returncode == 0 and "read once; unpacked)" in proc.stderr, proc.stderr
    assert plan.wrapper and "CONDA_PREFIX=$env_dir" in open(plan.wrapper).read()
    ran = subprocess.run([plan.wrapper, "where"], capture_output=True, text=True, env=clean_env(HPCDIST_JOB_ID="92"))
    assert ran.returncode == 0 and ran.stdout.split() == [str(copy), str(copy)], ran.stderr
    assert _in_job("clean", "--root", str(tmp_path / "local"), HPCDIST_JOB_ID="92").returncode == 0
    assert not copy.exists()


def test_the_script_names_what_was_packed_when_an_install_changes_the_environment_during_the_pack(tmp_path):
    """A pip install beside a long pack (minutes, the first time): the submit's render names the files
    it packed, not a key of the changed environment that nothing packed (its sbcast would fail)."""
    env = small_venv(tmp_path)
    plan = stage.plan(spec(venv=env), str(tmp_path))
    real = stage._pack_tar

    def pack_during_an_install(p):
        real(p)
        open(os.path.join(env, "bin", "installed-meanwhile"), "w").close()

    stage._pack_tar = pack_during_an_install
    try:
        stage.pack(plan)
    finally:
        stage._pack_tar = real
    assert stage.plan(spec(venv=env), str(tmp_path)).archive == plan.archive  # the render, right after
    os.utime(os.path.join(env, "bin"), ns=(1, 1))  # a later change: packed again under its own key
    assert stage.plan(spec(venv=env), str(tmp_path)).archive != plan.archive
