"""Write the reference pages that are generated from the code: every job option and profile key
(docs/reference/options.md, from hpcdist/submission/options.py's OPTIONS) and every command's --help
(docs/reference/commands.md).

    python scripts/docs_reference.py          # regenerate the pages (commit them)
    python scripts/docs_reference.py --check  # exit 1, with a diff, if a page differs from the code

tests/project/test_docs.py runs the check, so a flag renamed, added or described differently in the code
fails the tests until its page is regenerated.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS_PAGE = os.path.join(ROOT, "docs", "reference", "options.md")
COMMANDS_PAGE = os.path.join(ROOT, "docs", "reference", "commands.md")
REGENERATE = "python scripts/docs_reference.py"
#: The width --help is formatted for (argparse reads COLUMNS): the page must not depend on a terminal.
HELP_COLUMNS = "100"

_KINDS = {str: "text", int: "integer", bool: "switch", list: "text, repeatable", dict: "NAME=VALUE, repeatable"}
_TOML = {str: "string", int: "integer", bool: "true or false", list: "list of strings", dict: "table of strings"}


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text) -> str:
    return f"`{text}`" if text not in ("", None) else ""


def _default(option, required) -> str:
    if option.default is required:
        return "required"
    if option.default in (None, ()):
        return "—"
    if option.kind is bool:
        return "on" if option.default else "off"
    return _code(option.default)


def _type(option) -> str:
    kind = _KINDS[option.kind]
    if option.choices is not None:
        return "one of " + ", ".join(_code(c) for c in option.choices)
    return kind


def options_page(options=None) -> str:
    """The options page, from ``options`` (hpcdist.submission.options.OPTIONS when None)."""
    from hpcdist.submission import options as opts

    options = opts.OPTIONS if options is None else options
    out = [
        "# Options and profile keys",
        "",
        "<!-- Generated from hpcdist/submission/options.py by `" + REGENERATE + "`: do not edit by hand. -->",
        "",
        "Every option of `hpcdist render`, `hpcdist submit` and `hpcdist doctor`, generated from the",
        "one table that declares them (`OPTIONS` in `hpcdist/submission/options.py`). The same option is a flag,",
        "a profile key (in `hpcdist.toml`) and a keyword of `hpcdist.submit()`. **Owner**: the one",
        "scheduler, launcher or the container that reads it; given while its owner was not chosen, it",
        "is refused, naming the flag and its owner. A repeatable flag adds to a profile's list.",
        "",
        f"`hpcdist submit` adds `--dry-run`, `--wait` and `--json`; `{opts.PROFILE_FLAG} NAME` picks a",
        "profile or a site preset ([commands](commands.md)).",
        "",
    ]
    for group in opts.GROUPS:
        out += [f"## {group[0].upper()}{group[1:]}", "",
                "| flag | profile key | type | default | owner | help |", "| --- | --- | --- | --- | --- | --- |"]
        for o in options:
            if o.group != group:
                continue
            flags = ", ".join(_code(f + ("" if o.kind is bool else " " + (o.metavar or o.key.upper())))
                              for f in o.flags)
            key = _code(o.key) if o.profile else "—"
            out.append("| " + " | ".join(_cell(c) for c in (
                flags, key, _type(o), _default(o, opts.REQUIRED), _code(o.owner) or "every job", o.help or "")) + " |")
        out.append("")
    out += ["## The script and its arguments", "", "| argument | help |", "| --- | --- |"]
    out += [f"| {_code(o.metavar)} | {_cell(o.help or 'the training script')} |" for o in options if o.group is None]
    out += ["", "## Profile keys", "",
            "A profile is a table `[profiles.NAME]` in `./hpcdist.toml` or `~/.config/hpcdist/config.toml`",
            "(a top-level `default = \"NAME\"` picks one when `--profile` is not given); these are its keys,",
            "each the option of the same name above. Unknown keys are errors naming the key and the file.",
            "", "| key | TOML value | flag |", "| --- | --- | --- |"]
    out += [f"| {_code(o.key)} | {_TOML[o.kind]} | {', '.join(_code(f) for f in o.flags)} |"
            for o in sorted(options, key=lambda o: o.key) if o.profile]
    return "\n".join(out) + "\n"


def commands_page() -> str:
    """Every command's --help, as `hpcdist COMMAND --help` prints it."""
    from hpcdist.cli import COMMANDS

    env = {**os.environ, "COLUMNS": HELP_COLUMNS, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = ["# Commands", "",
           "<!-- Generated from the commands' own --help by `" + REGENERATE + "`: do not edit by hand. -->",
           "", "What `hpcdist COMMAND --help` prints, for every command (`hpcdist --help` lists them).",
           "`job-setup` and `agents` are what the job scripts call; you need not call them.", ""]
    for command in COMMANDS:
        done = subprocess.run([sys.executable, "-m", "hpcdist", command, "--help"], env=env, cwd=ROOT,
                              capture_output=True, text=True, check=True)
        out += [f"## hpcdist {command}", "", "```text", done.stdout.rstrip("\n"), "```", ""]
    return "\n".join(out)


def differences(path: str, text: str) -> str:
    """A unified diff of the page on disk against ``text``, or '' when they agree."""
    try:
        with open(path) as f:
            on_disk = f.read()
    except FileNotFoundError:
        on_disk = ""
    return "".join(difflib.unified_diff(on_disk.splitlines(True), text.splitlines(True),
                                        os.path.relpath(path, ROOT) + " (committed)", "from the code"))


def pages() -> dict[str, str]:
    return {OPTIONS_PAGE: options_page(), COMMANDS_PAGE: commands_page()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from the code")
    args = parser.parse_args(argv)
    status = 0
    for path, text in pages().items():
        if args.check:
            diff = differences(path, text)
            if diff:
                print(f"{os.path.relpath(path, ROOT)} differs from the code; regenerate it with "
                      f"`{REGENERATE}`:\n{diff}")
                status = 1
        else:
            with open(path, "w") as f:
                f.write(text)
    return status


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
