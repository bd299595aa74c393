"""Shell words for job scripts: every value a user gave is quoted, once, here.

:class:`Shell` marks text that is shell syntax already (a variable reference,
a line built from quoted words): the renderer and :func:`words_to_line` do not
quote it again.
"""

from __future__ import annotations

import shlex


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
        return shlex.quote(value)
    escaped = []
    for c in value:
        if c in "\\'":
            escaped.append("\\" + c)
        elif ord(c) < 32 or ord(c) == 127:
            escaped.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}"))
        else:
            escaped.append(c)
    return "$'" + "".join(escaped) + "'"


def words_to_line(words) -> str:
    return " ".join(w if isinstance(w, Shell) else quote(str(w)) for w in words)
