"""What every value check shares: :class:`ValidationError` and the small helpers that word a
rule (patterns compiled on first use are :mod:`hpcdist.patterns`')."""

from __future__ import annotations


class ValidationError(ValueError):
    """A job-spec value that would fail, or be misread, once queued.

    ``field`` is the flag as users type it (``"--walltime"``), ``value`` the
    value as given, ``rule`` one sentence saying what is wrong and ``fix`` one
    sentence saying what to write instead ("" when there is nothing better to
    say than the rule).  ``str(e)`` is ``f"{field} {value!r}: {rule} {fix}"``.
    """

    def __init__(self, field: str, value: object, rule: str, fix: str = "") -> None:
        self.field = field
        self.value = value
        self.rule = rule
        self.fix = fix
        message = f"{field} {value!r}: {rule}"
        if fix:
            message += f" {fix}"
        super().__init__(message)

    def __reduce__(self):  # picklable although __init__ takes four arguments
        return (type(self), (self.field, self.value, self.rule, self.fix))


class NotHere(ValidationError):
    """A setting valid in itself that the chosen scheduler, launcher or container does not take
    (``--walltime`` under ``--scheduler local``): leaving it out is a fix, so the job spec's
    builder leaves it out and looks on, to name every such setting in one message
    (:func:`hpcdist.submission.profiles.build`)."""


def require_str(value: object, field: str, what: str = "text") -> str:
    """``value`` if it is a str, else ValidationError naming its type."""
    if not isinstance(value, str):
        raise ValidationError(field, value, f"must be {what}, not {type(value).__name__}.")
    return value


def first_bad(text: str, allowed) -> tuple[int, str] | None:
    for i, ch in enumerate(text):
        if not allowed.fullmatch(ch):
            return i, ch
    return None


def bad_char_rule(bad: tuple[int, str], what: str, allowed_words: str) -> str:
    """The rule for a character ``bad`` = (index, character) that ``what`` may not contain."""
    i, ch = bad
    return f"character {ch!r} at position {i + 1} is not allowed: {what} may contain only {allowed_words}."
