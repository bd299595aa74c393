"""The error every node-list parser raises, and the limits they share."""

#: Default cap on the number of names one call may produce.
MAX_HOSTS = 1_048_576
#: Most hosts in one ``lo-hi`` range (Slurm's ``MAX_RANGE``).
MAX_RANGE = 65_536
#: Most digits in one number inside brackets (and in a compressed range).
MAX_DIGITS = 64


class HostlistError(ValueError):
    """A node list, host name or count list that cannot be parsed.

    ``text`` is the whole input (for :func:`compress`, the offending host
    name) and ``position`` the 0-based index into it where the problem is,
    or ``None`` when no single place is to blame (an empty list).
    ``problem`` is the bare description.
    """

    def __init__(
        self,
        problem: str,
        text: str | None = None,
        position: int | None = None,
        *,
        what: str = "node list",
    ) -> None:
        self.problem = problem
        self.text = text
        self.position = position
        self.what = what
        if text is None:
            message = problem
        else:
            message = f"invalid {what} {_excerpt(text, position)}: {problem}"
        if position is not None:
            message += f" (at position {position})"
        super().__init__(message)

    def __reduce__(self):  # keep the attributes through pickle / multiprocessing
        return (
            _rebuild_error,
            (self.problem, self.text, self.position, self.what),
        )


def _rebuild_error(problem, text, position, what):
    return HostlistError(problem, text, position, what=what)


def _excerpt(text: str, position: int | None, width: int = 60) -> str:
    """repr() of text, cut around position when it is long."""
    if len(text) <= 2 * width:
        return repr(text)
    center = 0 if position is None else position
    lo = max(0, center - width)
    hi = min(len(text), center + width)
    head = "..." if lo > 0 else ""
    tail = "..." if hi < len(text) else ""
    return f"{head}{text[lo:hi]!r}{tail} ({len(text)} characters)"
