"""scripts/bootstrap.sh takes torch's CPU build where a user has pip's defaults: from a wheel pip
finds without an index (our machines', so the test command downloads nothing large), else from
torch's CPU index (HPCDIST_TORCH_INDEX), else, where that index cannot be reached, from pip's own
index after one line that says so and what it costs. It says the size before each download.

Simulated, offline, in a few seconds each: `bash scripts/bootstrap.sh torch` (torch alone) runs
from a copy of the script in a temporary folder, with pip's defaults (no configuration file, no
find-links), a real venv and a real pip. Fakes, because the real ones are several GB and a network
away: a tiny `torch` wheel, version 2.13.0+cpu, served over http by a local server standing in for
torch's CPU index; a tiny `torch` 2.13.0 in a file:// index standing in for PyPI's (CUDA) build;
an address nothing listens on for the index that cannot be reached.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import pathlib
import shutil
import subprocess
import threading
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNREACHABLE = "http://127.0.0.1:1/whl/cpu"  # port 1: nothing listens there, the connection is refused


def _wheel(folder: pathlib.Path, version: str) -> pathlib.Path:
    """A wheel of a package named torch, VERSION, whose module says its version."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
    return path


class _Index:
    """torch's CPU index, served over http from a folder: /whl/cpu/torch/ lists the wheel. It
    records each path asked for, and what bootstrap had printed when the wheel was asked for."""

    def __init__(self, root: pathlib.Path, printed: pathlib.Path):
        _wheel(root / "whl" / "cpu" / "torch", "2.13.0+cpu")
        self.asked: list[str] = []
        self.printed_before_wheel: str | None = None
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(root), **kw)

            def do_GET(self):
                index.asked.append(self.path)
                if self.path.endswith(".whl") and index.printed_before_wheel is None:
                    index.printed_before_wheel = printed.read_text() if printed.exists() else ""
                super().do_GET()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/whl/cpu"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tree(tmp_path):
    """A folder with scripts/bootstrap.sh, a "PyPI" (file://) whose torch 2.13.0 stands in for the
    CUDA build, and pip's defaults otherwise."""
    (tmp_path / "repo" / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "repo" / "scripts" / "bootstrap.sh")
    pypi = tmp_path / "pypi"
    wheel = _wheel(pypi / "torch", "2.13.0")
    (pypi / "torch" / "index.html").write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "HPCDIST_", "VIRTUAL_ENV"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=pypi.as_uri(), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1", PATH=os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                                      if not p.startswith(str(ROOT / ".venv"))))
    return tmp_path, env


def _bootstrap(tmp_path, env, printed=None) -> subprocess.CompletedProcess:
    out = printed or tmp_path / "printed.txt"
    with open(out, "w") as f:
        done = subprocess.run(["bash", "scripts/bootstrap.sh", "torch"], cwd=tmp_path / "repo", env=env,
                              stdout=f, stderr=subprocess.PIPE, text=True, timeout=180, stdin=subprocess.DEVNULL)
    done.stdout = out.read_text()
    return done


def _torch_in_venv(tmp_path) -> str:
    python = tmp_path / "repo" / ".venv" / "bin" / "python"
    return subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_cpu_index_gives_the_cpu_build_and_the_size_comes_first(tree):
    tmp_path, env = tree
    index = _Index(tmp_path / "cpu-index", tmp_path / "printed.txt")
    try:
        done = _bootstrap(tmp_path, dict(env, HPCDIST_TORCH_INDEX=index.url + "/"))
    finally:
        index.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"bootstrap: torch 2.13.0, CPU build, from {index.url}: about 190 MB to download (750 MB installed),"
        " a minute at 30 Mbit/s",
        f"bootstrap: pip install --extra-index-url {index.url} torch==2.13.0+cpu",
    ]
    assert _torch_in_venv(tmp_path) == "2.13.0+cpu"  # not the "PyPI" 2.13.0 beside it
    assert "/whl/cpu/torch/" in index.asked
    assert "/whl/cpu/torch/torch-2.13.0%2Bcpu-py3-none-any.whl" in index.asked
    assert "about 190 MB to download" in index.printed_before_wheel  # said before the download


def test_an_unreachable_index_falls_back_to_pip_s_own_with_one_clear_line(tree):
    tmp_path, env = tree
    done = _bootstrap(tmp_path, dict(env, HPCDIST_TORCH_INDEX=UNREACHABLE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"bootstrap: torch's CPU index {UNREACHABLE} cannot be reached ([Errno 111] Connection refused);"
        " falling back to pip's own index, whose torch 2.13.0 on Linux x86_64 is the CUDA build: about 3.6 GB"
        " to download (torch 0.9 GB, nvidia-* packages 2.7 GB), 15 minutes or more at 30 Mbit/s. For the CPU"
        " build, stop now (Ctrl-C) and set HPCDIST_TORCH_INDEX to a mirror of that index.",
        "bootstrap: pip install torch==2.13.0",
    ]
    assert _torch_in_venv(tmp_path) == "2.13.0"  # the "PyPI" build, as the line said


def test_a_wheel_pip_finds_without_an_index_is_taken_and_no_index_is_asked(tree):
    """What the test command does on our machines (pip's find-links hold torch 2.13.0+cpu): the
    wheel on disk, and not one request to the CPU index."""
    tmp_path, env = tree
    wheel = _wheel(tmp_path / "wheels", "2.13.0+cpu")
    index = _Index(tmp_path / "cpu-index", tmp_path / "printed.txt")
    try:
        done = _bootstrap(tmp_path, dict(env, PIP_FIND_LINKS=str(wheel.parent), HPCDIST_TORCH_INDEX=index.url))
    finally:
        index.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "bootstrap: torch 2.13.0 from a wheel on this machine, nothing to download: "
        + wheel.as_uri().replace("+", "%2B"),
    ]
    assert _torch_in_venv(tmp_path) == "2.13.0+cpu"
    assert index.asked == []
    # Run again: torch is there, nothing is said or asked.
    again = _bootstrap(tmp_path, dict(env, HPCDIST_TORCH_INDEX=UNREACHABLE))
    assert (again.returncode, again.stdout) == (0, "")


def test_a_wrong_choice_is_named_with_the_fix(tree):
    tmp_path, env = tree
    done = _bootstrap(tmp_path, dict(env, HPCDIST_TORCH="gpu"))
    assert done.returncode == 2
    assert done.stderr == ("bootstrap: error: HPCDIST_TORCH='gpu': give cpu (the CPU build, the default) or pypi"
                           " (pip's own choice: the CUDA build on Linux x86_64)\n")
    assert not (tmp_path / "repo" / ".venv").exists()
