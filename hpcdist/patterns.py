"""Regular expressions compiled on first use: importing a module that holds some (the value
checks, a scheduler's output parsers) compiles nothing, and ``re`` is imported only then."""


class Pattern:
    """A regular expression, compiled the first time one of its methods is asked for."""

    __slots__ = ("text", "flags", "_compiled")

    def __init__(self, text: str, flags: int = 0) -> None:
        self.text, self.flags, self._compiled = text, flags, None

    def _compile(self):
        import re

        self._compiled = re.compile(self.text, self.flags)
        return self._compiled

    def compiled(self):
        """The compiled ``re.Pattern`` (compiled now if it was not yet). For a loop: take its
        bound method once (``match = p.compiled().fullmatch``) and call that per item; each call
        of :meth:`fullmatch` here passes through one more Python frame."""
        return self._compiled or self._compile()

    # The two that run once per job in `hpcdist status` (ids, lines of output), spelled out:
    # reaching them through __getattr__ costs four times the match.
    def fullmatch(self, *args):
        return (self._compiled or self._compile()).fullmatch(*args)

    def match(self, *args):
        return (self._compiled or self._compile()).match(*args)

    def __getattr__(self, name: str):  # search, finditer, sub, ...
        return getattr(self._compiled or self._compile(), name)


def is_id_word(text) -> bool:
    """A job id as the schedulers give them (``12345``, ``12345_3``, ``123[].server``), or a
    cluster's name: one word that no command reads as an option. Here, not with the schedulers:
    the job folder checks its records with it, and `hpcdist status` of no jobs loads no scheduler."""
    return isinstance(text, str) and _ID_WORD.fullmatch(text) is not None


_ID_WORD = Pattern(r"[A-Za-z0-9][A-Za-z0-9._\[\]+@:-]{0,199}")
