"""``expand``: a Slurm node list (``n[01-04],gpu[1-2]-ib``) into host names, in Slurm's order.

The grammar, order and limits are described in :mod:`hpcdist.hostlist`.

A list without whitespace whose items are all well formed (what Slurm's
variables hold) is read without ``re``: every rank reads its job's node list,
and importing ``re`` would cost it about 60% of Python's start. The regular
expressions find the items in any other list, or what is wrong with it.
"""

from itertools import product, starmap

from hpcdist.hostlist.errors import MAX_DIGITS, MAX_HOSTS, MAX_RANGE, HostlistError

# One item: text characters and complete brackets holding only range
# characters.  Anything else (a stray bracket, '{', a bracket with other
# characters) stops it and is diagnosed by _diagnose().
_ITEM = r"(?:[^\s,\[\]{]+|\[[0-9,\-]*\])+"


class _Regexes:
    """The module's regular expressions, compiled on first use: importing re
    and compiling them at import time would make ``import hpcdist.hostlist``
    several times dearer, and most programs that import hpcdist never parse
    a node list. (Compiled together, not as :class:`hpcdist.patterns.Pattern` each: expand's
    loop reads them once per item, where Pattern's lookup would cost.)"""

    def __init__(self) -> None:
        import re

        self.item = re.compile(_ITEM)
        self.item_split = re.compile(f"({_ITEM})")
        self.only_seps = re.compile(r"[\s,]*")
        self.seps = re.compile(r"[\s,]+")


_RX: "_Regexes | None" = None


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


def expand(nodelist: str, *, max_hosts: int = MAX_HOSTS) -> "list[str]":
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
    if "{" in text:
        raise HostlistError(
            "'{' is not supported (Slurm expands such node lists in the controller)",
            text,
            text.index("{"),
        )

    plain = text.split() == [text]  # no whitespace: commas alone separate the items
    if "[" not in text and "]" not in text:
        # Fast path: plain names.
        if plain:
            names = [name for name in text.split(",") if name]
        else:
            names = (_RX or _regexes()).seps.split(text)
            if names and not names[0]:
                del names[0]
            if names and not names[-1]:
                names.pop()
        if not names:
            raise HostlistError("empty node list", text, None)
        if len(names) > max_hosts:
            _too_many(text, max_hosts)
        return names

    # pieces = [sep, item, sep, item, ..., sep]; every sep must be separators
    # only, or something in the text is not part of any well-formed item.
    pieces = _comma_pieces(text) if plain else None
    if pieces is None:
        rx = _RX or _regexes()
        pieces = rx.item_split.split(text)
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
            head, _, rest = item.partition("[")
            body, _, tail = rest.partition("]")
            if "[" in tail:  # several bracket groups
                texts, groups = _split_item(item, cache)
                count = 1
                for group in groups:
                    count *= group[1]
            else:  # one, as in most lists: read here, a third of the cost of the general way
                group = cache.get(body)
                if group is None:
                    group = cache[body] = [*_parse_ranges(body, len(head) + 1), None]
                groups, count = None, group[1]
            total += count
            if total > max_hosts:
                _too_many(text, max_hosts, _item_start(pieces, index))
            if groups is not None:
                parts.append(_item_names(texts, groups))
            elif group[2] is not None:  # a small group's numbers, made for an earlier item
                parts.append(head + (tail + "," + head).join(group[2]) + tail)
            else:
                parts.append(_item_names([head, tail], [group]))
        except _ItemError as exc:
            raise HostlistError(
                exc.problem, text, _item_start(pieces, index) + exc.offset
            ) from None
    return ",".join(parts).split(",")


def _comma_pieces(text: str) -> "list[str] | None":
    """``item_split.split(text)`` for a list without whitespace (nor '{') whose brackets are all
    whole and hold range characters only; None for any other (the regexes read it then)."""
    if "\0" in text:
        return None
    head, *segments = text.split("[")
    if "]" in head:
        return None
    masked = [head]
    for segment in segments:
        body, close, after = segment.partition("]")
        if not close or body.strip("0123456789,-") or "]" in after:
            return None
        # The commas of a bracket belong to it: hidden from the split below.
        masked.append("[" + body.replace(",", "\0") + "]" + after)
    joined = "".join(masked)
    chunks = joined.split(",")
    if "\0" in joined:
        chunks = [chunk.replace("\0", ",") for chunk in chunks]
    if "" not in chunks:  # one comma between items, none around them
        pieces = [","] * (2 * len(chunks) + 1)
        pieces[1::2] = chunks
        pieces[0] = pieces[-1] = ""
        return pieces
    pieces = []
    commas = 0  # since the last item
    for index, chunk in enumerate(chunks):
        commas += index > 0
        if chunk:
            pieces += ["," * commas, chunk]
            commas = 0
    pieces.append("," * commas)
    return pieces


def _item_start(pieces: "list[str]", index: int) -> int:
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
    if not _well_formed_ranges(body):
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


def _well_formed_ranges(body: str) -> bool:
    """``N[-N](,N[-N])*``, each N 1 to MAX_DIGITS ASCII digits (``body`` holds digits, ',' and '-' only)."""
    for element in body.split(","):
        lo_text, dash, hi_text = element.partition("-")
        for number in (lo_text, hi_text) if dash else (lo_text,):
            if not 0 < len(number) <= MAX_DIGITS or not number.isdigit():
                return False
    return True


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
        if len(lo_text) > MAX_DIGITS or len(hi_text) > MAX_DIGITS:
            raise _ItemError(
                pos, f"number in range {element!r} has more than {MAX_DIGITS} digits"
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
