"""Walltimes and memory as people write them (90m, 01:30:00, 16G), checked, and back as text.

* Walltimes are whole seconds (``int`` > 0, at most :data:`MAX_WALLTIME`, 365 days).
* Memory is whole megabytes with binary multiples, as Slurm and PBS count
  them: 1G = 1024M, 1T = 1024G, 1024K = 1M.
"""

from __future__ import annotations

import re

from hpcdist.patterns import Pattern
from hpcdist.validate.base import ValidationError

#: The longest walltime accepted: 365 days, in seconds.
MAX_WALLTIME = 365 * 86400
#: The most memory accepted per node: 1 PiB, in megabytes (more is a unit typo).
MAX_MEMORY_MB = 1024 ** 3
#: Values longer than this are rejected before any parsing (walltime, memory).
_MAX_FIELD_LEN = 64

_MINUTE = 60
_HOUR = 3600
_DAY = 86400

_NUMBER = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"


def _decimal(text: str) -> tuple[int, int]:
    """``"1.25"`` -> ``(125, 100)``: an exact fraction, ASCII digits only."""
    whole, _, frac = text.partition(".")
    return int((whole or "0") + frac), 10 ** len(frac)


# --------------------------------------------------------------------------
# walltime
# --------------------------------------------------------------------------

_UNITS = {
    "d": _DAY, "day": _DAY, "days": _DAY,
    "h": _HOUR, "hr": _HOUR, "hrs": _HOUR, "hour": _HOUR, "hours": _HOUR,
    "m": _MINUTE, "min": _MINUTE, "mins": _MINUTE, "minute": _MINUTE, "minutes": _MINUTE,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
}
_UNIT_TOKEN = Pattern(rf"\s*({_NUMBER})\s*([a-z]+)\s*", re.I | re.A)
_BARE_NUMBER = Pattern(rf"\s*{_NUMBER}\s*", re.A)
_CLOCK = Pattern(r"(?:([0-9]+)-)?([0-9]+):([0-9]+):([0-9]+)", re.A)        # [D-]HH:MM:SS
_DAY_CLOCK = Pattern(r"([0-9]+)-([0-9]+)(?::([0-9]+))?", re.A)             # D-HH[:MM]
_ONE_COLON = Pattern(r"([0-9]+):([0-9]+)", re.A)                           # MM:SS (ambiguous)

_WALLTIME_FORMS = ("Use units (90m, 1h30m, 2h, 1d12h, 1.5h) or a clock "
                   "(HH:MM:SS such as 01:30:00, or D-HH:MM:SS such as 1-12:00:00).")


def parse_walltime(text: str, field: str = "--walltime") -> int:
    """A walltime as whole seconds (> 0, at most 365 days).

    Accepted, case-insensitive, spaces optional:

    * units, largest first, each at most once: ``90m``, ``1h30m``, ``2h``,
      ``45s``, ``1d``, ``1d12h``, ``2 hours``, ``30 min``; a decimal is
      allowed when there is a single unit (``1.5h``, ``.5d``), and the result
      is rounded to the nearest second (halves up);
    * clocks: ``HH:MM:SS`` (hours may exceed 23: ``48:00:00``),
      ``D-HH:MM:SS``, ``D-HH:MM`` and ``D-HH`` (Slurm's day forms; the hours
      after a day are 0..23).

    Rejected: a bare number (minutes to Slurm, seconds to PBS), ``MM:SS``
    with one colon (Slurm reads minutes:seconds, people mean hours:minutes),
    zero or negative times, minutes or seconds of 60 or more in a clock, and
    more than 365 days.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValidationError(field, text, f"must be text such as 90m or 01:30:00, not {type(text).__name__}.")
    raw = text
    s = str(text).strip()
    if not s:
        raise ValidationError(field, raw, "is empty.", _WALLTIME_FORMS)
    if len(s) > _MAX_FIELD_LEN:
        raise ValidationError(field, raw, f"is too long to be a walltime ({len(s)} characters).", _WALLTIME_FORMS)
    if s.startswith("-") and len(s) > 1 and (s[1].isascii() and (s[1].isdigit() or s[1] == ".")):
        raise ValidationError(field, raw, "is negative; a walltime must be more than zero.",
                              "Write it without the minus sign, e.g. 90m or 01:30:00.")
    seconds = _walltime_seconds(s, raw, field)
    if seconds <= 0:
        raise ValidationError(field, raw, "comes to 0 seconds; a walltime must be more than zero.",
                              "Ask for the time the job needs, e.g. 30m or 02:00:00.")
    if seconds > MAX_WALLTIME:
        raise ValidationError(field, raw,
                              f"is {describe_walltime(seconds)}, more than the 365-day limit hpcdist accepts.",
                              "Check the unit (m is minutes, d is days); most queues allow a few days at most.")
    return seconds


def _walltime_seconds(s: str, raw: str, field: str) -> int:
    # Each form is tried only when ``s`` has the character it needs (a number ends in a digit,
    # a clock has a colon or a dash): a pattern is compiled when first used, and most
    # walltimes (90m, 2h) need one only.
    if s[-1] in "0123456789" and _BARE_NUMBER.fullmatch(s):
        n, d = _decimal(s)
        if n == 0:
            return 0
        minutes_clock = format_clock((2 * n * _MINUTE + d) // (2 * d)) if n * _MINUTE >= d else None
        fix = f"Write {s}m, {s}s" + (f" or {minutes_clock}." if minutes_clock else ".")
        raise ValidationError(field, raw, "a bare number is minutes to Slurm but seconds to PBS.", fix)

    m = ":" in s and _CLOCK.fullmatch(s)
    if m:
        days, hours, minutes, secs = (int(g) if g is not None else None for g in m.groups())
        _check_clock(raw, field, days, hours, minutes, secs)
        return (days or 0) * _DAY + hours * _HOUR + minutes * _MINUTE + secs

    m = "-" in s and _DAY_CLOCK.fullmatch(s)
    if m:
        days, hours, minutes = (int(g) if g is not None else None for g in m.groups())
        _check_clock(raw, field, days, hours, minutes or 0, 0)
        return days * _DAY + hours * _HOUR + (minutes or 0) * _MINUTE

    m = ":" in s and _ONE_COLON.fullmatch(s)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        if a == 0 and b == 0:
            return 0
        options = []
        if b < 60 and (a or b):
            as_minutes = f"{a}m{b}s" if b else f"{a}m"
            options.append(f"if you meant {a} min {b} s, write {format_clock(a * _MINUTE + b)} "
                           f"or {as_minutes}")
            if a * _HOUR + b * _MINUTE <= MAX_WALLTIME:
                as_hours = f"{a}h{b}m" if b else f"{a}h"
                options.append(f"if you meant {a} h {b} min, write {format_clock(a * _HOUR + b * _MINUTE)} "
                               f"or {as_hours}")
        if not options:
            raise ValidationError(field, raw, f"is not a clock: one colon reads as MM:SS, and {b} is not 00 to 59.",
                                  _WALLTIME_FORMS)
        joined = "; ".join(options)
        raise ValidationError(field, raw,
                              "one colon is ambiguous: Slurm reads MM:SS as minutes:seconds, "
                              "but it is usually meant as hours:minutes.", joined[0].upper() + joined[1:] + ".")

    return _unit_seconds(s, raw, field)


def _check_clock(raw, field, days, hours, minutes, secs) -> None:
    if minutes >= 60:
        raise ValidationError(field, raw, f"has {minutes} minutes; minutes in a clock must be 00 to 59.",
                              "Carry whole hours into the hours field (90 min is 01:30:00) or write 90m.")
    if secs >= 60:
        raise ValidationError(field, raw, f"has {secs} seconds; seconds in a clock must be 00 to 59.",
                              "Carry whole minutes into the minutes field (90 s is 00:01:30) or write 90s.")
    if days is not None and hours >= 24:
        total = days * _DAY + hours * _HOUR + minutes * _MINUTE + secs
        raise ValidationError(field, raw, f"has {hours} hours after the day; in D-HH:MM:SS the hours must be 0 to 23.",
                              f"Write {format_clock(total, days=True)} or {format_clock(total)}.")


def _unit_seconds(s: str, raw: str, field: str) -> int:
    pos = 0
    parts: list[tuple[str, str, int]] = []
    while pos < len(s):
        m = _UNIT_TOKEN.match(s, pos)
        if not m:
            break
        parts.append((m.group(1), m.group(2), m.start(2)))
        pos = m.end()
    if pos < len(s) or not parts:
        rest = s[pos:].strip()
        if parts and _BARE_NUMBER.fullmatch(rest):
            last_unit = _UNITS.get(parts[-1][1].lower())
            hint = {_DAY: "h", _HOUR: "m", _MINUTE: "s"}.get(last_unit, "")
            fix = f"Write {s}{hint}." if hint else _WALLTIME_FORMS
            raise ValidationError(field, raw, f"the last number {rest} has no unit.", fix)
        raise ValidationError(field, raw, "is not a walltime hpcdist understands.", _WALLTIME_FORMS)

    total_num, total_den = 0, 1
    last = None
    for number, unit, _ in parts:
        size = _UNITS.get(unit.lower())
        if size is None:
            raise ValidationError(field, raw, f"has the unknown unit {unit!r}.",
                                  "Use d (days), h (hours), m (minutes) or s (seconds), e.g. 1h30m.")
        if last is not None and size >= last:
            raise ValidationError(field, raw, "units must appear once each, largest first (d, h, m, s).",
                                  "Write for example 1d12h or 1h30m.")
        last = size
        if "." in number and len(parts) > 1:
            raise ValidationError(field, raw, "a decimal is allowed only with a single unit.",
                                  "Write whole numbers (1h30m) or one decimal unit (1.5h).")
        n, d = _decimal(number)
        total_num = total_num * d + n * size * total_den
        total_den *= d
    # nearest whole second, halves up
    return (2 * total_num + total_den) // (2 * total_den)


def describe_walltime(seconds: int) -> str:
    """A walltime for people: ``1 h 30 min``, ``2 d 0 h 5 min``, ``45 s``.

    From the largest non-zero unit down to the smallest non-zero one, zeros in
    between included.
    """
    seconds = int(seconds)
    if seconds < 0:
        return "-" + describe_walltime(-seconds)
    days, rest = divmod(seconds, _DAY)
    hours, rest = divmod(rest, _HOUR)
    minutes, secs = divmod(rest, _MINUTE)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    nonzero = [i for i, (v, _) in enumerate(parts) if v]
    if not nonzero:
        return "0 s"
    return " ".join(f"{v} {u}" for v, u in parts[nonzero[0]:nonzero[-1] + 1])


def positive_int(value: object, what: str) -> int:
    """``value`` if it is a positive int, else ValueError (a caller's mistake, not a user's)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive int, not {value!r}")
    return value


def format_clock(seconds: int, *, days: bool = False) -> str:
    """``HH:MM:SS`` with hours unbounded (``49:00:00``); with ``days``, ``D-HH:MM:SS`` from a
    day on. (Each scheduler's format names one: :mod:`hpcdist.schedulers`.)"""
    seconds = positive_int(seconds, "seconds")
    day_count, rest = divmod(seconds, _DAY) if days else (0, seconds)
    hours, rest = divmod(rest, _HOUR)
    minutes, secs = divmod(rest, _MINUTE)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{day_count}-{clock}" if day_count else clock


# --------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------

# unit -> (numerator, denominator) in MB
_MEM_UNITS = {
    "k": (1, 1024), "kb": (1, 1024), "kib": (1, 1024),
    "m": (1, 1), "mb": (1, 1), "mib": (1, 1),
    "g": (1024, 1), "gb": (1024, 1), "gib": (1024, 1),
    "t": (1024 ** 2, 1), "tb": (1024 ** 2, 1), "tib": (1024 ** 2, 1),
}
_MEMORY = Pattern(rf"\s*(-?)\s*({_NUMBER})\s*([a-z]*)\s*", re.I | re.A)


def parse_memory(text: str, field: str = "--mem") -> int:
    """Memory per node as whole megabytes (> 0).

    ``16G``, ``16GB``, ``16gb``, ``16GiB``, ``500M``, ``1T``, ``1.5G``
    (rounded up to a whole MB), ``2048K``; units are binary (1G = 1024M) and
    case-insensitive.  A bare number is rejected (Slurm reads MB, PBS bytes),
    as is anything under 1 MB or over 1 PiB.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValidationError(field, text, f"must be text such as 16G or 500M, not {type(text).__name__}.")
    raw = text
    s = str(text).strip()
    forms = "Write a number with a unit: 16G, 500M, 1.5G or 1T."
    if not s:
        raise ValidationError(field, raw, "is empty.", forms)
    if len(s) > _MAX_FIELD_LEN:
        raise ValidationError(field, raw, f"is too long to be an amount of memory ({len(s)} characters).", forms)
    m = _MEMORY.fullmatch(s)
    if not m:
        raise ValidationError(field, raw, "is not an amount of memory hpcdist understands.", forms)
    sign, number, unit = m.groups()
    if not unit:
        raise ValidationError(field, raw, "a bare number is megabytes to Slurm but bytes to PBS.",
                              f"Write {number}M for megabytes or {number}G for gigabytes (e.g. 16G, 500M).")
    scale = _MEM_UNITS.get(unit.lower())
    if scale is None:
        raise ValidationError(field, raw, f"has the unknown unit {unit!r}.",
                              "Use K, M, G or T (optionally followed by B), e.g. 16G or 500M.")
    if sign:
        raise ValidationError(field, raw, "is negative; memory must be more than zero.", f"Write {number}{unit}.")
    n, d = _decimal(number)
    num, den = n * scale[0], d * scale[1]
    if num == 0:
        raise ValidationError(field, raw, "is zero; memory must be more than zero.", forms)
    if num < den:
        raise ValidationError(field, raw, "is less than 1 MB; schedulers count memory in whole megabytes.",
                              "Check the unit: 16G is 16 gigabytes, 500M is 500 megabytes.")
    mb = -(-num // den)  # rounded up
    if mb > MAX_MEMORY_MB:
        raise ValidationError(field, raw, "is more than 1 PB per node.",
                              "Check the unit: 16G is 16 gigabytes, 500M is 500 megabytes.")
    return mb
