"""Slurm node lists: expand, compress, and the tasks-per-node count format.

This is hpcdist's own implementation of Slurm's 1-D host list syntax (the
``SLURM_JOB_NODELIST`` / ``scontrol show hostnames`` grammar).  It uses the
standard library only (``re`` and ``itertools``) so that importing it costs
next to nothing.

Grammar
-------
A node list is a sequence of *items* separated by commas and whitespace.
Runs of separators and leading or trailing ones are skipped (``a,,b`` is
``a b``); a comma inside ``[...]`` belongs to the bracket::

    nodelist := sep* item (sep+ item)* sep*        sep := "," | whitespace
    item     := text (("[" ranges "]") text)*      (at least one character)
    text     := any characters except , [ ] { and whitespace
    ranges   := range ("," range)*
    range    := DIGITS | DIGITS "-" DIGITS          (ASCII digits only)

* The zero-padding width of a range is the length of its low bound:
  ``n[009-011]`` gives n009 n010 n011, ``n[1-04]`` gives n1 n2 n3 n4,
  ``n[01-100]`` gives n01 ... n99 n100 (this is what Slurm itself prints).
* Digits written before ``[`` are literal text (``n1[0-2]`` is n10 n11 n12),
  and text may follow ``]`` (``cn[1-2]-ib`` is cn1-ib cn2-ib; Slurm accepts
  that since 23.02.5).
* A name without brackets is taken literally, ``-`` included (``tux0-5``).

Order
-----
Slurm's order, duplicates kept: items left to right, ranges left to right.
With several bracket groups G1..Gk in one item, Gk varies fastest; the others
are looped with G(k-1) outermost, then G(k-2), ..., G1 innermost of those.
For two groups that is plain lexicographic order (``r[1-2]n[1-2]`` gives
r1n1 r1n2 r2n1 r2n2); for three, ``[1-2][1-2][1-2]`` gives 111 112 211 212
121 122 221 222, as Slurm's recursion on the rightmost bracket of the prefix
does.  This order matters: the i-th host pairs with the i-th entry of
``SLURM_TASKS_PER_NODE`` (see :func:`expand_counts`).

Limits and strictness
---------------------
* At most :data:`MAX_RANGE` (65,536) hosts in one ``lo-hi`` range, as in
  Slurm (``n[1-65537]`` fails there with "Too many hosts in range").
* At most ``max_hosts`` names in all (default :data:`MAX_HOSTS`, 1,048,576);
  the count is checked before any name is built, so ``n[1-60000][1-60000]``
  fails at once instead of filling memory.
* Numbers in brackets have at most 64 digits.
* Stricter than Slurm, which forgives some typos: ``n[1-]`` (Slurm reads
  n1), a lone ``]`` or an unclosed ``[``, spaces inside brackets, empty range
  elements, and ``{`` (Slurm sends such lists to the controller to expand;
  not supported here) are all errors.  An empty node list is an error too.

Every error is a :class:`HostlistError`, a :class:`ValueError` that carries
the input (``text``) and the 0-based ``position`` of the problem.

Why not an existing library
---------------------------
* python-hostlist is GPL-2.0-or-later (hpcdist is Apache-2.0), removes
  duplicates by default, caps a list at 100,000 names, treats ``"a b"`` as
  one name, and orders three or more bracket groups lexicographically.
* ClusterShell sorts and de-duplicates (a ``NodeSet`` is a set), rejects
  Slurm's own output ``n[01-100]`` ("padding length mismatch"), ``a,,b`` and
  adjacent brackets, and is 3-8x slower to expand.

This module is written from Slurm's documented behaviour and observed
results, not from either library's (or Slurm's) code.
"""

from __future__ import annotations

from itertools import product, starmap

TYPE_CHECKING = False  # importing typing costs milliseconds; checkers know this idiom
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "MAX_HOSTS",
    "MAX_RANGE",
    "HostlistError",
    "compress",
    "expand",
    "expand_counts",
]

#: Default cap on the number of names one call may produce.
MAX_HOSTS = 1_048_576
#: Most hosts in one ``lo-hi`` range (Slurm's ``MAX_RANGE``).
MAX_RANGE = 65_536
#: Most digits in one number inside brackets (and in a compressed range).
_MAX_DIGITS = 64
#: Most digits in one number of a count list.
_MAX_COUNT_DIGITS = 20


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


# --------------------------------------------------------------------------
# expand
# --------------------------------------------------------------------------

# One item: text characters and complete brackets holding only range
# characters.  Anything else (a stray bracket, '{', a bracket with other
# characters) stops it and is diagnosed by _diagnose().
_ITEM = r"(?:[^\s,\[\]{]+|\[[0-9,\-]*\])+"
_NUMBER = f"[0-9]{{1,{_MAX_DIGITS}}}"
_COUNT = f"[0-9]{{1,{_MAX_COUNT_DIGITS}}}"


class _Regexes:
    """The module's regular expressions, compiled on first use: importing re
    and compiling them at import time would make ``import hpcdist.hostlist``
    several times dearer, and most programs that import hpcdist never parse
    a node list."""

    def __init__(self) -> None:
        import re

        # expand
        self.item = re.compile(_ITEM)
        self.item_split = re.compile(f"({_ITEM})")
        self.only_seps = re.compile(r"[\s,]*")
        self.seps = re.compile(r"[\s,]+")
        self.ranges = re.compile(f"{_NUMBER}(?:-{_NUMBER})?(?:,{_NUMBER}(?:-{_NUMBER})?)*")
        # compress
        self.last_number = re.compile(r"(.*?)([0-9]+)([^0-9]*)", re.S)
        self.bad_name = re.compile(r"[\s\[\]{,]")
        self.bad_in_joined = re.compile(r"[\s\[\]{]")
        # expand_counts
        self.counts = re.compile(
            rf"{_COUNT}(?:\(x{_COUNT}\))?(?:,{_COUNT}(?:\(x{_COUNT}\))?)*"
        )


_RX: _Regexes | None = None


def _regexes() -> _Regexes:
    global _RX
    if _RX is None:
        _RX = _Regexes()
    return _RX


class _ItemError(Exception):
    """Internal: an error at a position relative to the current item."""

    def __init__(self, offset: int, problem: str) -> None:
        self.offset = offset
        self.problem = problem


def expand(nodelist: str, *, max_hosts: int = MAX_HOSTS) -> list[str]:
    """Expand a Slurm node list into host names, in Slurm's order.

    >>> expand("n[1-3],login1")
    ['n1', 'n2', 'n3', 'login1']
    >>> expand("rack[1-2]-node[01-02]")
    ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02']

    Duplicates are kept.  Raises :class:`HostlistError` on a malformed list,
    more than :data:`MAX_RANGE` hosts in one range, or more than
    ``max_hosts`` names in all.
    """
    if not isinstance(nodelist, str):
        raise TypeError(f"node list must be a str, not {type(nodelist).__name__}")
    text = nodelist
    rx = _RX or _regexes()
    if "{" in text:
        raise HostlistError(
            "'{' is not supported (Slurm expands such node lists in the controller)",
            text,
            text.index("{"),
        )

    if "[" not in text and "]" not in text:
        # Fast path: plain names.
        names = rx.seps.split(text)
        if names and not names[0]:
            del names[0]
        if names and not names[-1]:
            names.pop()
        if not names:
            raise HostlistError("empty node list", text, None)
        if len(names) > max_hosts:
            _too_many(text, max_hosts)
        return names

    pieces = rx.item_split.split(text)
    # pieces = [sep, item, sep, item, ..., sep]; every sep must be separators
    # only, or something in the text is not part of any well-formed item.
    if rx.only_seps.fullmatch("".join(pieces[0::2])) is None:
        _diagnose(text)
    items = pieces[1::2]
    if not items:
        raise HostlistError("empty node list", text, None)

    # Every item adds one string of its names joined by ',' (no name holds a
    # comma); one split at the end makes the list.  Joining and splitting run
    # in C and cost less than building 100,000 names one by one.
    parts: list[str] = []
    total = 0
    cache: dict[str, list] = {}
    for index, item in enumerate(items):
        try:
            if "[" not in item:
                total += 1
                if total > max_hosts:
                    _too_many(text, max_hosts, _item_start(pieces, index))
                parts.append(item)
                continue
            texts, groups = _split_item(item, cache)
            count = 1
            for group in groups:
                count *= group[1]
            total += count
            if total > max_hosts:
                _too_many(text, max_hosts, _item_start(pieces, index))
            parts.append(_item_names(texts, groups))
        except _ItemError as exc:
            raise HostlistError(
                exc.problem, text, _item_start(pieces, index) + exc.offset
            ) from None
    return ",".join(parts).split(",")


def _item_start(pieces: list[str], index: int) -> int:
    """Offset in the text of the item pieces[2 * index + 1]."""
    return sum(map(len, pieces[: 2 * index + 1]))


def _too_many(text: str, max_hosts: int, position: int | None = None) -> None:
    raise HostlistError(
        f"expands to more than max_hosts={max_hosts} names", text, position
    )


def _split_item(item: str, cache: dict) -> tuple[list[str], list]:
    """Split 'a[r1]b[r2]c' into texts [a, b, c] and parsed groups [r1, r2]."""
    texts = []
    groups = []
    start = 0
    i = item.find("[")
    while i >= 0:
        j = item.find("]", i)  # present: _ITEM only matches whole brackets
        body = item[i + 1 : j]
        group = cache.get(body)
        if group is None:
            ranges, count = _parse_ranges(body, i + 1)
            group = [ranges, count, None]
            cache[body] = group
        texts.append(item[start:i])
        groups.append(group)
        start = j + 1
        i = item.find("[", start)
    texts.append(item[start:])
    return texts, groups


def _parse_ranges(body: str, offset: int) -> tuple[list[tuple[int, int, str]], int]:
    """Parse '1-3,07,9-10' into [(lo, hi, lo_text), ...] and the host count.

    offset is body's position in its item (for error positions).
    """
    if (_RX or _regexes()).ranges.fullmatch(body) is None:
        _diagnose_ranges(body, offset)
    ranges = []
    count = 0
    pos = offset
    for element in body.split(","):
        lo_text, dash, hi_text = element.partition("-")
        lo = int(lo_text)
        hi = int(hi_text) if dash else lo
        if lo > hi:
            raise _ItemError(
                pos, f"range {element!r} has its low bound above its high bound"
            )
        if hi - lo >= MAX_RANGE:
            raise _ItemError(
                pos,
                f"range {element!r} has {hi - lo + 1} hosts, more than "
                f"{MAX_RANGE} in one range",
            )
        ranges.append((lo, hi, lo_text))
        count += hi - lo + 1
        pos += len(element) + 1
    return ranges, count


def _diagnose_ranges(body: str, offset: int) -> None:
    """Raise _ItemError for the first problem in a bracket's contents."""
    if not body:
        raise _ItemError(offset - 1, "empty brackets '[]'")
    for k, char in enumerate(body):
        if char.isspace():
            raise _ItemError(offset + k, "whitespace inside brackets")
        if char not in "0123456789,-":
            raise _ItemError(
                offset + k,
                f"invalid character {char!r} inside brackets "
                "(only digits, ',' and '-' are allowed)",
            )
    pos = offset
    for element in body.split(","):
        if not element:
            raise _ItemError(pos, "empty range element")
        lo_text, dash, hi_text = element.partition("-")
        if not lo_text:
            raise _ItemError(pos, f"range {element!r} has no lower bound")
        if dash and not hi_text:
            raise _ItemError(pos, f"range {element!r} has no upper bound")
        if "-" in hi_text:
            raise _ItemError(
                pos + len(lo_text) + 1 + hi_text.index("-"),
                f"range {element!r} has more than one '-'",
            )
        if len(lo_text) > _MAX_DIGITS or len(hi_text) > _MAX_DIGITS:
            raise _ItemError(
                pos, f"number in range {element!r} has more than {_MAX_DIGITS} digits"
            )
        pos += len(element) + 1
    raise _ItemError(offset, "invalid range list")  # not reached


def _diagnose(text: str) -> None:
    """Find the first character of text that is not part of a valid item and
    raise a HostlistError about it (or about the bracket it opens)."""
    pos = 0
    n = len(text)
    rx = _RX or _regexes()
    item_match = rx.item.match
    while pos < n:
        m = rx.only_seps.match(text, pos)  # always matches, maybe empty
        pos = m.end() if m is not None else pos
        if pos >= n:
            break
        m = item_match(text, pos)
        if m is not None:
            pos = m.end()
            if pos >= n or text[pos].isspace() or text[pos] == ",":
                continue
        char = text[pos]
        if char == "]":
            raise HostlistError("unmatched ']'", text, pos)
        if char == "[":
            close = text.find("]", pos + 1)
            reopen = text.find("[", pos + 1)
            if close < 0:
                raise HostlistError("unclosed '['", text, pos)
            if 0 <= reopen < close:
                raise HostlistError(
                    f"nested '[' (the '[' at position {pos} is not closed)",
                    text,
                    reopen,
                )
            try:
                _diagnose_ranges(text[pos + 1 : close], pos + 1)
            except _ItemError as exc:
                raise HostlistError(exc.problem, text, exc.offset) from None
        raise HostlistError(f"unexpected character {char!r}", text, pos)
    raise HostlistError("invalid node list", text, None)  # not reached


# Groups with at most this many names keep their number strings for reuse
# by later items with the same brackets (r0n[0-9],r1n[0-9],...).
_SMALL_GROUP = 64
_LOWS: list[str] = []  # '000' .. '999'
_SMALL: dict[int, list[str]] = {}  # width -> str(i).zfill(width) for i < 1000


def _low_digits() -> list[str]:
    if not _LOWS:
        _LOWS.extend([str(i)[1:] for i in range(1000, 2000)])
    return _LOWS


def _small_numbers(width: int) -> list[str]:
    table = _SMALL.get(width)
    if table is None:
        table = _SMALL[width] = [str(i).zfill(width) for i in range(1000)]
    return table


def _range_text(head: str, tail: str, lo: int, hi: int, width: int) -> str:
    """head + str(i).zfill(width) + tail for lo <= i <= hi, joined by ','.

    Converting every int to text costs more than building the names in
    blocks of 1000: the numbers b*1000 .. b*1000+999 are str(b) (padded to
    width - 3) followed by '000' .. '999', so one str.join writes a block.
    """
    glue = tail + ","
    pieces = []
    first = lo // 1000
    last = hi // 1000
    for block in range(first, last + 1):
        start = lo - block * 1000 if block == first else 0
        stop = hi - block * 1000 + 1 if block == last else 1000
        if block == 0 and width < 4:
            table = _small_numbers(width)
            lead = head
        else:
            table = _low_digits()
            lead = head + str(block).zfill(width - 3)
        pieces.append(lead + (glue + lead).join(table[start:stop]) + tail)
    return ",".join(pieces)


def _numbers(group: list) -> list[str]:
    """The number strings of a parsed bracket group, made once per call."""
    nums = group[2]
    if nums is None:
        nums = ",".join(
            [_range_text("", "", lo, hi, len(lo_text)) for lo, hi, lo_text in group[0]]
        ).split(",")
        group[2] = nums
    return nums


def _item_names(texts: list[str], groups: list) -> str:
    """The names of one item (texts around parsed groups), joined by ','."""
    k = len(groups)
    if k == 1:
        head, tail = texts
        group = groups[0]
        if group[2] is None and group[1] > _SMALL_GROUP:
            return ",".join(
                [_range_text(head, tail, lo, hi, len(lo_text)) for lo, hi, lo_text in group[0]]
            )
        return head + (tail + "," + head).join(_numbers(group)) + tail
    if k == 2:
        firsts = [texts[0] + s + texts[1] for s in _numbers(groups[0])]
        seconds = _numbers(groups[1])
        tail = texts[2]
        glue = tail + ","
        return ",".join([a + (glue + a).join(seconds) + tail for a in firsts])
    # k >= 3: loop G(k-1) outermost, ..., G1, then Gk fastest (Slurm's order).
    order = [_numbers(groups[j]) for j in range(k - 2, -1, -1)]
    order.append(_numbers(groups[k - 1]))
    # where group j's value sits in a product() tuple
    slot = [k - 2 - j for j in range(k - 1)] + [k - 1]
    template = _braces(texts[0])
    for j in range(k):
        template += f"{{{slot[j]}}}" + _braces(texts[j + 1])
    return ",".join(starmap(template.format, product(*order)))


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


# --------------------------------------------------------------------------
# compress
# --------------------------------------------------------------------------

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
    rx = _RX or _regexes()
    joined = ",".join(hosts)
    if (
        rx.bad_in_joined.search(joined) is not None
        or joined.count(",") != len(hosts) - 1
        or "" in hosts
    ):
        _check_names(hosts)

    out: list[str] = []
    append = out.append
    match = rx.last_number.fullmatch
    # The group being built (when ranges is not empty): names prefix + number
    # + suffix, written prefix[ranges]suffix.  A range is the list
    # [lo_text, hi_text, hi, width, count]; last is the last range.
    prefix = suffix = ""
    ranges: list[list] = []
    last: list = []
    for name in hosts:
        m = match(name)
        if m is None or len(m.group(2)) > _MAX_DIGITS:
            # no digits (or too many to parse back): the name as it is
            if ranges:
                append(_group_text(prefix, suffix, ranges))
                ranges = []
            append(name)
            continue
        pre, digits, suf = m.groups()
        value = int(digits)
        if ranges and pre == prefix and suf == suffix:
            # a run goes on when the number is the next one and is written
            # as str(value).zfill(width of the run's first number)
            if (
                value == last[2] + 1
                and last[4] < MAX_RANGE
                and (
                    len(digits) == last[3]
                    or (len(digits) > last[3] and digits[0] != "0")
                )
            ):
                last[1] = digits
                last[2] = value
                last[4] += 1
                continue
        else:
            if ranges:
                append(_group_text(prefix, suffix, ranges))
                ranges = []
            prefix = pre
            suffix = suf
        last = [digits, digits, value, len(digits), 1]
        ranges.append(last)
    if ranges:
        append(_group_text(prefix, suffix, ranges))
    return ",".join(out)


def _group_text(prefix: str, suffix: str, ranges: list[list]) -> str:
    if len(ranges) == 1 and ranges[0][4] == 1:
        return prefix + ranges[0][0] + suffix
    body = ",".join(
        [r[0] if r[4] == 1 else r[0] + "-" + r[1] for r in ranges]
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
        m = (_RX or _regexes()).bad_name.search(name)
        if m is not None:
            char = m.group()
            kind = "whitespace" if char.isspace() else repr(char)
            raise HostlistError(
                f"{kind} is not allowed in a host name (item {index})",
                name,
                m.start(),
                what="host name",
            )


# --------------------------------------------------------------------------
# expand_counts
# --------------------------------------------------------------------------

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
    if (_RX or _regexes()).counts.fullmatch(text) is None:
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
