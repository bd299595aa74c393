"""``compress``: host names back into a Slurm node list, order and duplicates kept."""

from __future__ import annotations

from hpcdist.hostlist.errors import MAX_DIGITS, MAX_RANGE, HostlistError
from hpcdist.patterns import Pattern

TYPE_CHECKING = False  # importing typing costs milliseconds; checkers know this idiom
if TYPE_CHECKING:
    from collections.abc import Iterable

# (?s): "." matches a line break too (re.S, without importing re here).
_LAST_NUMBER = Pattern(r"(?s)(.*?)([0-9]+)([^0-9]*)")
_BAD_NAME = Pattern(r"[\s\[\]{,]")
_BAD_IN_JOINED = Pattern(r"[\s\[\]{]")


def compress(hosts: Iterable[str]) -> str:
    """Write host names as a Slurm node list, keeping their order.

    Runs of consecutive numbers in the names' last digit run that share
    prefix, suffix and zero padding become ranges; ``expand(compress(x))``
    gives back ``x`` exactly, duplicates and order included.

    >>> compress(["n1", "n2", "n3", "login"])
    'n[1-3],login'
    >>> compress(["n3", "n1", "n2"])
    'n[3,1-2]'

    A name that is empty or holds ``[ ] { ,`` or whitespace raises
    :class:`HostlistError`.  No input gives ``""``.
    """
    if isinstance(hosts, str):
        raise TypeError("compress() takes an iterable of host names, not a str")
    hosts = list(hosts)
    if not hosts:
        return ""
    joined = ",".join(hosts)
    if (
        _BAD_IN_JOINED.search(joined) is not None
        or joined.count(",") != len(hosts) - 1
        or "" in hosts
    ):
        _check_names(hosts)

    out: list[str] = []
    append = out.append
    # The compiled pattern's own method, taken once: Pattern.fullmatch per name added a
    # Python frame per name (+17% instructions over 100k names).
    match = _LAST_NUMBER.compiled().fullmatch
    # The group being built (when ranges is not empty): names prefix + number
    # + suffix, written prefix[ranges]suffix.  A range is the list
    # [lo_text, hi_text, count]; the last one is open, its high end and count kept in
    # locals (hi_text, hi: its value, count) and its width in width, stored when it closes.
    prefix = suffix = hi_text = ""
    ranges: list[list] = []
    hi = width = count = 0
    for name in hosts:
        m = match(name)
        if m is not None:
            pre, digits, suf = m.groups()
        if m is None or len(digits) > MAX_DIGITS:
            # no digits (or too many to parse back): the name as it is
            if ranges:
                ranges[-1][1:] = hi_text, count
                append(_group_text(prefix, suffix, ranges))
                ranges = []
            append(name)
            continue
        value = int(digits)
        if ranges and pre == prefix and suf == suffix:
            # a run goes on when the number is the next one and is written
            # as str(value).zfill(width of the run's first number)
            if (
                value == hi + 1
                and count < MAX_RANGE
                and (
                    len(digits) == width
                    or (len(digits) > width and digits[0] != "0")
                )
            ):
                hi_text = digits
                hi = value
                count += 1
                continue
            ranges[-1][1:] = hi_text, count
        else:
            if ranges:
                ranges[-1][1:] = hi_text, count
                append(_group_text(prefix, suffix, ranges))
                ranges = []
            prefix = pre
            suffix = suf
        hi_text = digits
        hi = value
        width = len(digits)
        count = 1
        ranges.append([digits, digits, 1])
    if ranges:
        ranges[-1][1:] = hi_text, count
        append(_group_text(prefix, suffix, ranges))
    return ",".join(out)


def _group_text(prefix: str, suffix: str, ranges: list[list]) -> str:
    if len(ranges) == 1 and ranges[0][2] == 1:
        return prefix + ranges[0][0] + suffix
    body = ",".join(
        [r[0] if r[2] == 1 else r[0] + "-" + r[1] for r in ranges]
    )
    return prefix + "[" + body + "]" + suffix


def _check_names(hosts: list[str]) -> None:
    for index, name in enumerate(hosts):
        if not isinstance(name, str):
            raise TypeError(
                f"host names must be str, not {type(name).__name__} (item {index})"
            )
        if not name:
            raise HostlistError(
                f"empty host name (item {index})", name, None, what="host name"
            )
        m = _BAD_NAME.search(name)
        if m is not None:
            char = m.group()
            kind = "whitespace" if char.isspace() else repr(char)
            raise HostlistError(
                f"{kind} is not allowed in a host name (item {index})",
                name,
                m.start(),
                what="host name",
            )
