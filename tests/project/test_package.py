"""The package as users install it: light imports, a wheel with the templates, a fresh venv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

import hpcdist

from launch import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("torch", "mpi4py", "deepspeed", "jinja2")
#: Standard modules that cost milliseconds each; `import hpcdist.env; get_rank()` needs none
#: (nor ``__future__``: ``from __future__ import annotations`` imports it, ~2% of Python's start-up).
SLOW_STDLIB = ("dataclasses", "inspect", "typing", "re", "enum", "socket", "json", "argparse", "__future__")


def imported_modules(python: str, statement: str, cwd: str = ROOT) -> set[str]:
    proc = subprocess.run([python, "-X", "importtime", "-c", statement], capture_output=True,
                          text=True, timeout=60, env=clean_env(), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    # importtime lines: "import time: self | cumulative | <indent>module"
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.mark.parametrize("statement", [
    "import hpcdist",
    "import hpcdist.env; hpcdist.env.get_rank()",
    "import hpcdist.hostlist, hpcdist.allocation",
    "import hpcdist.cli",
])
def test_imports_stay_light(statement):
    modules = imported_modules(sys.executable, statement)
    assert "hpcdist" in modules
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], f"{statement!r} imported {heavy}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), ROOT],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = out.glob("hpcdist-*.whl")
    return path


def test_rank_lookup_imports_nothing_slow():
    modules = imported_modules(sys.executable, "import hpcdist.env; hpcdist.env.get_rank()")
    assert sorted(m for m in modules if m in SLOW_STDLIB) == []


def test_wheel_carries_templates_and_the_console_script(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    # The templates: the shared ones, and each scheduler's in its folder.
    assert {f"hpcdist/schedulers/{name}" for name in ("TEMPLATES.md", "job.sh.j2", "job_folder.sh.j2",
                                                        "slurm/slurm.sh.j2", "pbs/pbs.sh.j2",
                                                        "local/local.sh.j2")} <= set(names)
    # The site presets (--profile polaris) come with the package.
    assert {f"hpcdist/sites/{site}.toml" for site in ("polaris", "aurora", "derecho", "gadi", "torque")} <= set(names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "hpcdist = hpcdist.cli:main" in text
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # Runtime dependencies stay small: torch, deepspeed and mpi4py only as extras.
    assert [r for r in requires if "extra ==" not in r] == [
        "Requires-Dist: jinja2>=3.0", "Requires-Dist: tomli>=1.1; python_version < '3.11'"]


def test_fresh_venv_install_then_hpcdist_env(wheel, tmp_path):
    """The acceptance: pip install in a fresh venv, then `hpcdist env --json`."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    proc = subprocess.run([str(venv / "bin" / "hpcdist"), "env", "--json"], capture_output=True,
                          text=True, timeout=60, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["rank"], data["world_size"], data["launcher"]) == (0, 1, "single")
    module = subprocess.run([str(venv / "bin" / "python"), "-m", "hpcdist", "--version"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert module.stdout.strip() == f"hpcdist {hpcdist.__version__}"
    # Run outside the checkout, so the installed package is the one imported.
    modules = imported_modules(str(venv / "bin" / "python"), "import hpcdist.env", cwd=str(tmp_path))
    assert "hpcdist.env" in modules
    assert not [m for m in modules if m.split(".")[0] in HEAVY]
