"""The code blocks of the README and the documentation's pages, as tests/project/test_docs_commands.py runs them.

A block is run by its fence's language, in a folder of its page's own where the blocks before it
ran (so `hpcdist status` sees the job a block above submitted):

- ``bash``: its lines as one bash script (``set -e``); it must exit 0;
- ``console``: ``$ COMMAND`` lines (a line ending in ``\\`` goes on), each followed by the output
  the page shows; each command runs in bash, and each line shown must be a line of its output
  (standard output and error together; ``...`` or ``…`` in a line stands for any text, a line
  of its own for any lines; runs of spaces match any run of spaces);
- ``python``: run with the tests' python; it must exit 0.

An HTML comment on the line before the fence changes that: ``<!-- file: NAME -->`` writes the
block into NAME (a profile, a template, the script a later block runs), and ``<!-- not run here:
WHY -->`` skips it, saying why (a real cluster, an excerpt). A bash, console or python block with
neither is run; a fence without a language is shown output, and may not hold a command to paste.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RUN = ("bash", "console", "python")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*(file|not run here):\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    path: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    mark: str | None = None  # "file" or "not run here"
    arg: str = ""  # the file's name, or why it is not run

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def blocks(path: str, text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, each with the mark on the line before it."""
    found, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.match(before)
        found.append(Block(path, start + 1, lang, "\n".join(body) + "\n",
                           mark.group(1) if mark else None, mark.group(2) if mark else ""))
        i += 1
    return found


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """A console block's (command, the output lines shown after it)."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"output before any command: {lines[i]!r}")
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + "\n" + lines[i]
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        steps.append((command, shown))
    return steps


def _pattern(line: str) -> re.Pattern:
    """A shown line as a pattern over an output line, both with runs of spaces made one."""
    return re.compile(".*".join(re.escape(part) for part in re.split(r"\.\.\.|…", " ".join(line.split()))))


def missing_lines(shown: list[str], output: str) -> list[str]:
    """The lines shown that no line of ``output`` matches."""
    got = [" ".join(line.split()) for line in output.splitlines()]
    missing = []
    for line in shown:
        if line.strip() in ("", "...", "…"):
            continue
        pattern = _pattern(line)
        if not any(pattern.fullmatch(g) for g in got):
            missing.append(line)
    return missing
