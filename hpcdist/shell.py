"""Shell words for job scripts: every value a user gave is quoted, once, here.

:class:`Shell` marks text that is shell syntax already (a variable reference,
a line built from quoted words): the renderer and :func:`words_to_line` do not
quote it again.
"""

from __future__ import annotations

#: The characters shlex.quote leaves unquoted: a word of these alone is written as it is.
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


class Shell(str):
    """A word that is shell syntax already (a variable reference): not quoted again."""


def var(name: str) -> Shell:
    return Shell(f'"${name}"')


def quote(value: str) -> str:
    """A shell word for ``value``: shlex.quote, except that a value holding a
    line break is written in bash's ``$'...'`` form, its control characters
    escaped, so that the script has no line the value began: sbatch reads an
    ``#SBATCH`` line wherever it stands, and refuses a script with a carriage
    return before a newline ("DOS line breaks"). (Directive values never hold
    a line break: it is refused there, and schedulers do not read ``$'...'``.)"""
    if "\n" not in value and "\r" not in value:
        # shlex.quote's rule, without shlex (and re): the job's set-up quotes what it writes.
        if value and all(c in _SAFE for c in value):
            return value
        return "'" + value.replace("'", "'\"'\"'") + "'"
    escaped = []
    for c in value:
        if c in "\\'":
            escaped.append("\\" + c)
        elif ord(c) < 32 or ord(c) == 127:
            escaped.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}"))
        else:
            escaped.append(c)
    return "$'" + "".join(escaped) + "'"


class _Break(Shell):
    """Where a command's line may break (:func:`command_lines`); nothing on one line."""


#: A place in a command's words where its line breaks: before the program a launcher starts, and
#: before the training script.
BREAK = _Break("")

#: How long a script's lines may grow before a command goes on on the next line.
WIDTH = 100


def words_to_line(words) -> str:
    return " ".join(w if isinstance(w, Shell) else quote(str(w)) for w in words if w is not BREAK)


def command_lines(words, indent: str = "  ", first: str = "", width: int = WIDTH) -> str:
    """The words as one command over lines that end with `` \\``, as people write long commands:
    a line breaks at each :data:`BREAK`, and before a word that would take it past ``width``
    (keeping a flag with its value: ``-np 2``). The first line starts with ``first``, the others
    with ``indent``. A word of several lines (a ``bash -c`` script) ends its line."""
    lines, current = [], []

    def flush():
        if current:
            lines.append(" ".join(current))
            current.clear()

    for word in words:
        if word is BREAK:
            flush()
            continue
        text = word if isinstance(word, Shell) else quote(str(word))
        start = len(indent if lines else first)
        if current and start + len(" ".join(current)) + 1 + len(text.split("\n")[0]) > width - 2:
            carried = []
            if len(current) > 2 and current[-2] in TWO_VALUES:  # `-genv NAME` before VALUE
                carried = current[-2:]
            elif _is_flag(current[-1]) and not text.startswith("-") and len(current) > 1:
                carried = current[-1:]
            del current[len(current) - len(carried):]
            flush()
            current.extend(carried)
        current.append(text)
        if "\n" in text:
            flush()
    flush()
    return first + f" \\\n{indent}".join(lines)


#: Flags that take two values (MPICH's and Intel MPI's Hydra: ``-genv NAME VALUE``).
TWO_VALUES = frozenset({"-genv", "-env"})


def _is_flag(text: str) -> bool:
    """A word that takes the next one as its value, as far as a line break can tell (``-np``)."""
    return text.startswith("-") and "=" not in text and len(text) > 1


def single_quoted(text: str) -> str:
    """``text`` as one single-quoted shell word, line breaks kept (a ``bash -c`` script of lines
    built from quoted words: a value of the user's never starts a line)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"
