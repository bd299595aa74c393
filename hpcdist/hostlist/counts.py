"""``expand_counts``: Slurm's run-length count lists (``SLURM_TASKS_PER_NODE=2(x3),1``)."""

from hpcdist.hostlist.errors import MAX_HOSTS, HostlistError
from hpcdist.patterns import Pattern

#: Most digits in one number of a count list.
_MAX_COUNT_DIGITS = 20
_COUNT = f"[0-9]{{1,{_MAX_COUNT_DIGITS}}}"
_COUNTS = Pattern(rf"{_COUNT}(?:\(x{_COUNT}\))?(?:,{_COUNT}(?:\(x{_COUNT}\))?)*")


def _number(text: str) -> bool:
    return 0 < len(text) <= _MAX_COUNT_DIGITS and text.isascii() and text.isdigit()


def _well_formed(text: str) -> bool:
    """:data:`_COUNTS`'s test, with string methods: ``re`` costs the job's set-up more than the
    rest of its reading (the pattern still says what is wrong, when something is)."""
    for item in text.split(","):
        if item.endswith(")"):
            value, x, repeat = item[:-1].partition("(x")
            if not (x and _number(value) and _number(repeat)):
                return False
        elif not _number(item):
            return False
    return True


def expand_counts(text: str, *, max_hosts: int = MAX_HOSTS) -> list[int]:
    """Expand Slurm's run-length count list, e.g. ``SLURM_TASKS_PER_NODE``.

    The format (also ``SLURM_JOB_CPUS_PER_NODE``) is ``item ("," item)*``
    with ``item = UINT ["(x" UINT ")"]``:

    >>> expand_counts("2(x3),1")
    [2, 2, 2, 1]

    Whitespace, empty items, ``(x0)``, signs, decimals and more than
    ``max_hosts`` entries in all raise :class:`HostlistError`.
    """
    if not isinstance(text, str):
        raise TypeError(f"count list must be a str, not {type(text).__name__}")
    if not _well_formed(text):
        _diagnose_counts(text)
    items = text.split(",")
    parsed = []
    total = 0
    pos = 0
    for item in items:
        if item[-1] == ")":
            value_text, _, rest = item.partition("(x")
            repeat = int(rest[:-1])
            if repeat == 0:
                raise HostlistError(
                    "repetition count (x0) is not allowed",
                    text,
                    pos + len(value_text) + 2,
                    what="count list",
                )
        else:
            value_text = item
            repeat = 1
        total += repeat
        if total > max_hosts:
            raise HostlistError(
                f"expands to more than max_hosts={max_hosts} entries",
                text,
                pos,
                what="count list",
            )
        parsed.append((int(value_text), repeat))
        pos += len(item) + 1
    out: list[int] = []
    for value, repeat in parsed:
        if repeat == 1:
            out.append(value)
        else:
            out.extend([value] * repeat)
    return out


def _diagnose_counts(text: str) -> None:
    """Raise HostlistError for the first problem in a count list."""

    def fail(problem: str, position: int | None) -> None:
        raise HostlistError(problem, text, position, what="count list")

    def describe(position: int) -> str:
        char = text[position]
        if char.isspace():
            return "whitespace is not allowed"
        if char == "-":
            return "negative numbers are not allowed"
        if char == ".":
            return "only whole numbers are allowed"
        return f"unexpected character {char!r}"

    if not text:
        fail("empty count list", None)
    n = len(text)
    pos = 0
    while True:
        start = pos
        while pos < n and "0" <= text[pos] <= "9":
            pos += 1
        if pos == start:
            if pos == n:
                fail("trailing ','", pos - 1)
            if text[pos] == ",":
                fail("empty item", pos)
            fail(describe(pos) + ", expected a number", pos)
        if pos - start > _MAX_COUNT_DIGITS:
            fail(f"number with more than {_MAX_COUNT_DIGITS} digits", start)
        if pos < n and text[pos] == "(":
            if not text.startswith("(x", pos):
                fail("a repetition is written '(xN)'", pos)
            pos += 2
            start = pos
            while pos < n and "0" <= text[pos] <= "9":
                pos += 1
            if pos == start:
                fail("a repetition is written '(xN)' with a number N", pos)
            if pos - start > _MAX_COUNT_DIGITS:
                fail(f"number with more than {_MAX_COUNT_DIGITS} digits", start)
            if pos >= n or text[pos] != ")":
                fail("a repetition is written '(xN)': missing ')'", pos)
            pos += 1
        if pos == n:
            break
        char = text[pos]
        if char == ",":
            pos += 1
            if pos == n:
                fail("trailing ','", pos - 1)
            continue
        if char in "xX":
            fail("a repetition is written '(xN)'", pos)
        fail(describe(pos), pos)
    fail("invalid count list", None)  # not reached
