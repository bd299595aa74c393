"""Regular expressions compiled on first use: importing a module that holds some (the value
checks, a scheduler's output parsers) compiles nothing, and ``re`` is imported only then."""

from __future__ import annotations


class Pattern:
    """A regular expression, compiled the first time one of its methods is asked for."""

    __slots__ = ("text", "flags", "_compiled")

    def __init__(self, text: str, flags: int = 0) -> None:
        self.text, self.flags, self._compiled = text, flags, None

    def __getattr__(self, name: str):  # match, fullmatch, search, finditer, sub, ...
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.text, self.flags)
        return getattr(self._compiled, name)
