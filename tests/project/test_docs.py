"""The documentation: the site builds with `mkdocs build --strict` (a broken link, a missing page or
anchor, a file a page includes that is gone: each fails it), the reference pages are what the code
generates (scripts/docs_reference.py), and every command's --help ends with examples and a page
that exists. The pages' commands themselves run in tests/project/test_docs_commands.py."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "docs_reference.py"


def _env() -> dict[str, str]:
    return clean_env(PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), NO_MKDOCS_2_WARNING="1")


def _run(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300, **kw)


def test_the_site_builds_with_strict(tmp_path):
    """pip install '.[docs]' (scripts/bootstrap.sh does) gives mkdocs and the Material theme."""
    done = _run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")])
    assert done.returncode == 0, done.stdout + done.stderr
    # The pages the README links to are in the site (a page left out of the nav is a warning, so an error).
    for page in ("guide/first-job", "reference/options", "reference/commands", "design", "testing"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_the_readme_is_a_door_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README.md links to {target}, which is not there"


def test_the_reference_pages_are_what_the_code_generates():
    done = _run([sys.executable, str(GENERATOR), "--check"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_flag_renamed_without_its_page_fails_the_check():
    """The check can fail: with --gpus-per-node renamed in the code (and the page as committed), the
    check exits 1 and its diff names the old flag and the new."""
    rename = ("import sys; sys.argv[1:] = ['--check']; "
              "from hpcdist.submission import options; o = options.BY_NAME['gpus_per_node']; o.flags = ('--gpus',); "
              f"import runpy; runpy.run_path({str(GENERATOR)!r}, run_name='__main__')")
    done = _run([sys.executable, "-c", rename])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "docs/reference/options.md differs from the code; regenerate it with" in done.stdout
    assert "-| `--gpus-per-node GPUS_PER_NODE`" in done.stdout and "+| `--gpus GPUS_PER_NODE`" in done.stdout


def test_every_option_and_profile_key_is_in_the_reference():
    """Said apart from the generator: each flag, and each profile key, of OPTIONS is on the page."""
    from hpcdist.submission.options import OPTIONS

    page = (ROOT / "docs" / "reference" / "options.md").read_text()
    for option in OPTIONS:
        for flag in option.flags:
            assert f"`{flag}" in page, flag
        if option.profile:
            assert re.search(rf"^\| `{option.key}` \|", page, re.M), option.key


def _slugs(markdown: str) -> set[str]:
    """The anchors MkDocs gives a page's headings (its toc extension's default slugs)."""
    slugs = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.M):
        text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
        slugs.add(re.sub(r"[-\s]+", "-", text))
    return slugs


def test_every_command_s_help_ends_with_examples_and_its_page():
    from hpcdist.cli.commands import BY_HAND, COMMANDS
    from hpcdist.cli.common import DOCS  # docs/: the page in the source (no site is published)

    for command in COMMANDS:
        if command in BY_HAND:  # the job scripts': their help is their usage, printed by hand
            continue
        done = _run([sys.executable, "-m", "hpcdist", command, "--help"])
        assert done.returncode == 0, done.stderr
        end = done.stdout.rstrip("\n").split("\n\n")
        examples, docs = end[-2], end[-1]
        assert examples.startswith("examples:\n  hpcdist "), (command, done.stdout)
        assert docs.startswith(f"docs: {DOCS}"), (command, done.stdout)
        assert docs.endswith(" in hpcdist's source"), (command, docs)
        page, _, anchor = docs.removeprefix(f"docs: {DOCS}").removesuffix(" in hpcdist's source").partition("#")
        text = (ROOT / "docs" / page).read_text()
        assert not anchor or anchor in _slugs(text), f"hpcdist {command} --help: {docs}: no such heading"


def test_every_site_preset_is_in_the_readme_and_the_sites_guide():
    from hpcdist.submission.profiles import presets

    readme = (ROOT / "README.md").read_text()
    guide = (ROOT / "docs" / "guide" / "sites.md").read_text()
    for name in presets():
        assert re.search(rf"^- `{name}`: ", readme, re.M), f"README.md's presets lack {name}"
        assert re.search(rf"^\| `{name}` \|", guide, re.M), f"docs/guide/sites.md's preset tables lack {name}"
