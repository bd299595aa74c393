"""Every command block of the README, CONTRIBUTING.md and the documentation's pages runs as written,
and shows what it prints (tests/docblocks.py says how a block is run and how a page marks one that
needs a real cluster). A flag renamed in the code without its pages fails here: the pages' own
`hpcdist render ...` lines are what runs.

Each page runs in a temporary folder of its own that holds `train.py` (a copy of
examples/quickstart.py, which the pages tell a newcomer to make) and `examples/`, with a HOME of
its own (no ~/.config/hpcdist/config.toml of the machine's) and this checkout's hpcdist first on
PATH and PYTHONPATH.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from docblocks import RUN, blocks, console_steps, missing_lines
from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])
#: A block's time limit: a local job with --wait trains for real (a few seconds to a minute here).
TIMEOUT = 300


def _page_blocks(page: pathlib.Path):
    return blocks(str(page.relative_to(ROOT)), page.read_text())


def _folder(tmp_path: pathlib.Path) -> dict[str, str]:
    """The page's folder, and the environment its blocks run in."""
    shutil.copy(ROOT / "examples" / "quickstart.py", tmp_path / "train.py")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    home = tmp_path.parent / (tmp_path.name + "-home")
    home.mkdir()
    env = clean_env(HOME=str(home), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    NO_MKDOCS_2_WARNING="1")
    env.pop("XDG_CONFIG_HOME", None)
    if os.geteuid() == 0:  # Open MPI's mpirun refuses root otherwise (install.md says so)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def _run(argv: list[str], cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def test_every_runnable_block_is_run_or_says_why_not():
    """A block a user would paste is run, or its page says why not (a cluster, an excerpt); a fence
    without a language holds output, never a command to paste."""
    problems = []
    for page in PAGES:
        for block in _page_blocks(page):
            first = block.text.lstrip().split("\n", 1)[0]
            if block.lang == "" and first.startswith(("$ ", "hpcdist ")):
                problems.append(f"{block.where}: a command in a fence without a language: mark it bash or console")
            if block.mark == "not run here" and not block.arg:
                problems.append(f"{block.where}: 'not run here' says no reason")
            if block.mark == "file" and not block.arg:
                problems.append(f"{block.where}: 'file:' names no file")
    assert not problems, "\n".join(problems)


def _ran_pages():
    return [p for p in PAGES if any(b.lang in RUN and b.mark is None for b in _page_blocks(p))]


@pytest.mark.parametrize("page", _ran_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_s_commands_run_as_written(page, tmp_path):
    env = _folder(tmp_path)
    for block in _page_blocks(page):
        if block.mark == "file":
            (tmp_path / block.arg).write_text(block.text)
            continue
        if block.mark == "not run here" or block.lang not in RUN:
            continue
        if block.lang == "bash":
            done = _run(["bash", "-e", "-o", "pipefail", "-c", block.text], tmp_path, env)
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{block.text}\n{done.stdout}"
        elif block.lang == "python":
            script = tmp_path / "_block.py"
            script.write_text(block.text)
            done = _run([sys.executable, str(script)], tmp_path, env)
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{block.text}\n{done.stdout}"
        else:
            for command, shown in console_steps(block.text):
                done = _run(["bash", "-c", command], tmp_path, env)
                missing = missing_lines(shown, done.stdout)
                assert not missing, (f"{block.where}: `{command}` (exit {done.returncode}) did not print, as the "
                                     f"page shows:\n" + "\n".join(missing) + f"\n--- it printed:\n{done.stdout}")


def test_a_console_block_fails_when_the_output_differs(tmp_path):
    """The check can fail: a page that shows what the command does not print."""
    env = _folder(tmp_path)
    page = tmp_path / "page.md"
    page.write_text("```console\n$ hpcdist render --scheduler slurm --nodes 2 train.py\n#SBATCH --nodes=3\n```\n")
    (block,) = blocks("page.md", page.read_text())
    ((command, shown),) = console_steps(block.text)
    done = _run(["bash", "-c", command], tmp_path, env)
    assert done.returncode == 0, done.stdout
    assert missing_lines(shown, done.stdout) == ["#SBATCH --nodes=3"]
    assert missing_lines(["#SBATCH --nodes=2"], done.stdout) == []
