"""Checks and normalisers for job-spec values, run before anything is queued.

A typo in a walltime or a job name costs a PhD student hours in a queue, so
every value that a scheduler would reject (or, worse, silently misread) is
checked here, when the job spec is built (the rules of one scheduler, such as its job
names and directives, are its module's: :mod:`hpcdist.schedulers`).  Every failure is a
:class:`ValidationError` that names the flag, the value as given, the rule
and the fix::

    --walltime '90': a bare number is minutes to Slurm but seconds to PBS. Write 90m, 90s or 01:30:00.

The functions are pure (no I/O, no environment) and use the standard library
only; importing this module costs ``re`` and nothing else (``difflib`` is
imported only when a choice is wrong).

Units
-----
* Walltimes are whole seconds (``int`` > 0, at most :data:`MAX_WALLTIME`,
  365 days).
* Memory is whole megabytes with binary multiples, as Slurm and PBS count
  them: 1G = 1024M, 1T = 1024G, 1024K = 1M.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_WALLTIME",
    "ValidationError",
    "bad_char_rule",
    "check_array",
    "check_choice",
    "check_dependency",
    "check_env_name",
    "check_env_settable",
    "check_mail",
    "check_name",
    "check_positive",
    "check_program",
    "check_text",
    "check_utf8",
    "check_word",
    "describe_walltime",
    "format_clock",
    "parse_env_assignment",
    "parse_memory",
    "parse_walltime",
    "positive_int",
    "require_str",
]

#: The longest walltime accepted: 365 days, in seconds.
MAX_WALLTIME = 365 * 86400
#: The most memory accepted per node: 1 PiB, in megabytes (more is a unit typo).
MAX_MEMORY_MB = 1024 ** 3
#: Values longer than this are rejected before any parsing (walltime, memory).
_MAX_FIELD_LEN = 64

_MINUTE = 60
_HOUR = 3600
_DAY = 86400


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


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------

class _Lazy:
    """A regular expression compiled on first use (through ``re``'s own
    cache), so that importing this module compiles nothing."""

    __slots__ = ("pattern", "flags")

    def __init__(self, pattern: str, flags: int = re.A) -> None:
        self.pattern = pattern
        self.flags = flags

    def __getattr__(self, name: str):  # match, fullmatch, sub, ...
        return getattr(re.compile(self.pattern, self.flags), name)


_NUMBER = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"


def _decimal(text: str) -> tuple[int, int]:
    """``"1.25"`` -> ``(125, 100)``: an exact fraction, ASCII digits only."""
    whole, _, frac = text.partition(".")
    return int((whole or "0") + frac), 10 ** len(frac)


def require_str(value: object, field: str, what: str = "text") -> str:
    """``value`` if it is a str, else ValidationError naming its type."""
    if not isinstance(value, str):
        raise ValidationError(field, value, f"must be {what}, not {type(value).__name__}.")
    return value


def _first_bad(text: str, allowed: _Lazy) -> tuple[int, str] | None:
    for i, ch in enumerate(text):
        if not allowed.fullmatch(ch):
            return i, ch
    return None


def bad_char_rule(bad: tuple[int, str], what: str, allowed_words: str) -> str:
    """The rule for a character ``bad`` = (index, character) that ``what`` may not contain."""
    i, ch = bad
    return f"character {ch!r} at position {i + 1} is not allowed: {what} may contain only {allowed_words}."


# --------------------------------------------------------------------------
# walltime
# --------------------------------------------------------------------------

_UNITS = {
    "d": _DAY, "day": _DAY, "days": _DAY,
    "h": _HOUR, "hr": _HOUR, "hrs": _HOUR, "hour": _HOUR, "hours": _HOUR,
    "m": _MINUTE, "min": _MINUTE, "mins": _MINUTE, "minute": _MINUTE, "minutes": _MINUTE,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
}
_UNIT_TOKEN = _Lazy(rf"\s*({_NUMBER})\s*([a-z]+)\s*", re.I | re.A)
_BARE_NUMBER = _Lazy(rf"\s*{_NUMBER}\s*", re.A)
_CLOCK = _Lazy(r"(?:([0-9]+)-)?([0-9]+):([0-9]+):([0-9]+)", re.A)        # [D-]HH:MM:SS
_DAY_CLOCK = _Lazy(r"([0-9]+)-([0-9]+)(?::([0-9]+))?", re.A)             # D-HH[:MM]
_ONE_COLON = _Lazy(r"([0-9]+):([0-9]+)", re.A)                           # MM:SS (ambiguous)

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
    if _BARE_NUMBER.fullmatch(s):
        n, d = _decimal(s)
        if n == 0:
            return 0
        minutes_clock = format_clock((2 * n * _MINUTE + d) // (2 * d)) if n * _MINUTE >= d else None
        fix = f"Write {s}m, {s}s" + (f" or {minutes_clock}." if minutes_clock else ".")
        raise ValidationError(field, raw, "a bare number is minutes to Slurm but seconds to PBS.", fix)

    m = _CLOCK.fullmatch(s)
    if m:
        days, hours, minutes, secs = (int(g) if g is not None else None for g in m.groups())
        _check_clock(raw, field, days, hours, minutes, secs)
        return (days or 0) * _DAY + hours * _HOUR + minutes * _MINUTE + secs

    m = _DAY_CLOCK.fullmatch(s)
    if m:
        days, hours, minutes = (int(g) if g is not None else None for g in m.groups())
        _check_clock(raw, field, days, hours, minutes or 0, 0)
        return days * _DAY + hours * _HOUR + (minutes or 0) * _MINUTE

    m = _ONE_COLON.fullmatch(s)
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
_MEMORY = _Lazy(rf"\s*(-?)\s*({_NUMBER})\s*([a-z]*)\s*", re.I | re.A)


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


# --------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------

_NAME_CHARS = _Lazy(r"[A-Za-z0-9_.@+\-]", re.A)
_NAME_RUNS = _Lazy(r"[^A-Za-z0-9_.@+\-]+", re.A)
_NAME_MAX = 64


def check_name(value: str, field: str) -> str:
    """A queue/partition, account or QOS name: 1..64 characters from
    ``[A-Za-z0-9_.@+-]``, not starting with ``-`` (it would read as an option)."""
    value = require_str(value, field)
    if not value:
        raise ValidationError(field, value, "is empty.", f"Give a name, or leave {field} out.")
    cleaned = _NAME_RUNS.sub("_", value).lstrip("-")[:_NAME_MAX]
    fix = f"Try {cleaned}." if cleaned.strip("_") and cleaned != value else ""
    bad = _first_bad(value, _NAME_CHARS)
    if bad:
        raise ValidationError(field, value, bad_char_rule(bad, "names", "letters, digits and _ . @ + -"), fix)
    if value.startswith("-"):
        raise ValidationError(field, value, "must not start with '-': the scheduler would read it as an option.", fix)
    if len(value) > _NAME_MAX:
        raise ValidationError(field, value, f"is {len(value)} characters; names may have at most {_NAME_MAX}.", fix)
    return value


# --------------------------------------------------------------------------
# numbers, environment, text
# --------------------------------------------------------------------------

def check_positive(value: object, field: str, *, allow_zero: bool = False) -> int:
    """A whole number >= 1 (>= 0 with ``allow_zero``): an ``int`` (not a
    ``bool``) or a string of ASCII digits (surrounding spaces allowed)."""
    low = 0 if allow_zero else 1
    rule = f"must be a whole number of at least {low}."
    if isinstance(value, bool):
        raise ValidationError(field, value, rule)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        s = value.strip()
        if not (s and s.isascii() and s.isdigit()):
            raise ValidationError(field, value, rule)
        if len(s) > 18:
            raise ValidationError(field, value, "is too large.")
        number = int(s)
    else:
        raise ValidationError(field, value, rule)
    if number < low:
        raise ValidationError(field, value, rule)
    return number


_ENV_NAME = _Lazy(r"[A-Za-z_][A-Za-z0-9_]*", re.A)


def check_env_name(name: str, field: str = "--env") -> str:
    """An environment variable name: ``[A-Za-z_][A-Za-z0-9_]*``."""
    name = require_str(name, field)
    if _ENV_NAME.fullmatch(name):
        return name
    raise ValidationError(field, name, *_env_name_problem(name))


def _env_name_problem(name: str) -> tuple[str, str]:
    what = "a variable name must start with a letter or _ and contain only letters, digits and _"
    if not name:
        return f"is empty; {what}.", "Write NAME=value, e.g. OMP_NUM_THREADS=8."
    cleaned = re.sub(r"[^A-Za-z0-9_]+", "_", name, flags=re.A)
    if cleaned[0].isdigit():
        cleaned = "_" + cleaned
    fix = f"Try {cleaned}." if cleaned.strip("_") else ""
    bad = _first_bad(name, _Lazy(r"[A-Za-z0-9_]"))
    if bad:
        i, ch = bad
        return f"character {ch!r} at position {i + 1} is not allowed; {what}.", fix
    return f"it starts with a digit; {what}.", fix


def parse_env_assignment(text: str, field: str = "--env") -> tuple[str, str]:
    """``NAME=value`` -> ``(NAME, value)``, split on the first ``=``.

    The value may be empty or hold anything except NUL (it is quoted when the
    script is rendered); the name must pass :func:`check_env_name`.
    """
    text = require_str(text, field)
    if "=" not in text:
        stem = text.strip() if _ENV_NAME.fullmatch(text.strip()) else "NAME"
        raise ValidationError(field, text, "has no '='; an assignment is NAME=value.",
                              f"Write {field} {stem}=value ({stem}= sets it to empty).")
    name, _, value = text.partition("=")
    if not _ENV_NAME.fullmatch(name):
        rule, fix = _env_name_problem(name)
        if not name:
            rule, fix = "has no variable name before '='.", "Write NAME=value, e.g. OMP_NUM_THREADS=8."
        else:
            rule = f"the name {name!r} is invalid: " + rule
        raise ValidationError(field, text, rule, fix)
    if "\0" in value:
        raise ValidationError(field, text, "contains a NUL character, which no environment variable can hold.",
                              "Remove it.")
    check_utf8(value, field, text)
    return name, value


def check_utf8(value: str, field: str, shown: object = None) -> None:
    """Job scripts are UTF-8 text: a byte that is not UTF-8 (a lone surrogate,
    as Python decodes such bytes from argv) cannot be written into one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # only lone surrogates fail
        i, ch = e.start, value[e.start]
        byte = f"\\x{ord(ch) - 0xDC00:02x}" if ord(ch) >= 0xDC80 else repr(ch)[1:-1]
        raise ValidationError(field, value if shown is None else shown,
                              f"has the byte {byte} at position {i + 1}, which is not UTF-8 text; "
                              "a job script cannot carry it.",
                              "Use UTF-8 (or plain ASCII) names and values.") from None


def check_text(value: str, field: str, *, allow_newline: bool = False) -> str:
    """A value that is shell-quoted at render time (module name, path, conda
    env, script argument): only NUL, bytes that are not UTF-8, and line breaks
    unless ``allow_newline``, are rejected."""
    value = require_str(value, field)
    if "\0" in value:
        raise ValidationError(field, value, "contains a NUL character, which cannot be passed to a program.",
                              "Remove it.")
    check_utf8(value, field)
    if not allow_newline and ("\n" in value or "\r" in value):
        raise ValidationError(field, value, "contains a line break, which would split a line of the job script.",
                              "Put the value on one line.")
    return value


def check_word(value: str, field: str) -> str:
    """A value that becomes one word of a command in the job script (a path,
    a module or conda environment, a program): :func:`check_text`, and not
    empty, and not starting with ``-``, which the command would read as one of
    its options (``torchrun --help``, ``module load -f``)."""
    value = check_text(value, field)
    if not value:
        raise ValidationError(field, value, "is empty.", f"Give a value, or leave {field} out.")
    if value.startswith("-"):
        raise ValidationError(field, value, "starts with '-': the command it is given to would read it as "
                              "one of its options.", f"If it is a path, write ./{value}.")
    return value


#: Words bash reads as its own syntax when they start a command, quoted or not.
BASH_KEYWORDS = ("!", "[[", "]]", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
                 "function", "if", "in", "select", "then", "time", "until", "while", "{", "}")
_ASSIGNMENT = _Lazy(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", re.A)


def check_program(value: str, field: str) -> str:
    """A program the job script runs by name or path (``--mpiexec``, ``--python``):
    :func:`check_word`, and not a word bash would not run as a program where
    it starts a command: ``NAME=...`` (an assignment), ``%...`` (a job, as
    ``fg``) or a reserved word (``time``, ``if``)."""
    value = check_word(value, field)
    if _ASSIGNMENT.match(value):
        raise ValidationError(field, value, "starts like a variable assignment (NAME=...): bash would assign it "
                              "instead of running a program.", f"If it is a path, write ./{value}.")
    if value.startswith("%"):
        raise ValidationError(field, value, "starts with '%', which bash reads as a job to resume (fg), "
                              "not a program.", f"If it is a path, write ./{value}.")
    if value in BASH_KEYWORDS:
        raise ValidationError(field, value, f"{value!r} is a bash reserved word, not a program.",
                              f"Give the program's path, e.g. /usr/bin/{value}.")
    return value


#: Variables bash refuses to assign: ``export UID=1`` stops the job script.
BASH_READONLY = ("BASHOPTS", "BASH_VERSINFO", "EUID", "PPID", "SHELLOPTS", "UID")


def check_env_settable(name: str, field: str = "--env") -> str:
    """A variable name the job script can ``export``: :func:`check_env_name`,
    and not one that bash keeps read-only (:data:`BASH_READONLY`)."""
    name = check_env_name(name, field)
    if name in BASH_READONLY:
        raise ValidationError(field, name, f"bash keeps {name} read-only: the job script would stop at "
                              f"`export {name}=...`.", "Use another variable name.")
    return name


_ARRAY_CHARS = _Lazy(r"[0-9,:%\-]", re.A)
_DEPENDENCY_CHARS = _Lazy(r"[A-Za-z0-9_.,:?+@\[\]\-]", re.A)
_MAIL_CHARS = _Lazy(r"[A-Za-z0-9_.,%+@\-]", re.A)


def _check_charset(value: object, field: str, allowed: _Lazy, what: str, words: str, example: str) -> str:
    value = require_str(value, field)
    if not value:
        raise ValidationError(field, value, "is empty.", f"Write for example {example}, or leave {field} out.")
    bad = _first_bad(value, allowed)
    if bad:
        raise ValidationError(field, value, bad_char_rule(bad, what, words), f"Write for example {example}.")
    if value.startswith("-"):
        raise ValidationError(field, value, "must not start with '-': the scheduler would read it as an option.",
                              f"Write for example {example}.")
    return value


def check_array(value: str, field: str = "--array") -> str:
    """A job array's indices, as Slurm (``--array``), PBS Pro (``-J``) and
    Torque (``-t``) read them: digits and ``, - : %`` (``0-15``, ``1,3,5``,
    ``0-15:2%4``)."""
    return _check_charset(value, field, _ARRAY_CHARS, "array indices", "digits and , - : %", "0-15, 1,3,5 or 0-15%4")


def check_dependency(value: str, field: str = "--dependency") -> str:
    """A job dependency (``afterok:123:456``, ``afterany:1234.server``,
    ``singleton``): letters, digits and ``_ . , : ? + @ [ ] -``, no spaces."""
    return _check_charset(value, field, _DEPENDENCY_CHARS, "dependencies",
                          "letters, digits and _ . , : ? + @ [ ] -", "afterok:1234 or afterok:1234.server")


def check_mail(value: str, field: str = "--mail") -> str:
    """Mail addresses (or user names), comma-separated: letters, digits and
    ``_ . , % + @ -``."""
    return _check_charset(value, field, _MAIL_CHARS, "mail addresses", "letters, digits and _ . , % + @ -",
                          "alice@example.org")


# --------------------------------------------------------------------------
# choices
# --------------------------------------------------------------------------

def check_choice(value: str, field: str, choices) -> str:
    """``value`` if it is one of ``choices`` (case and surrounding spaces are
    forgiven; the choice is returned as spelled in ``choices``), else a
    ValidationError listing them, with "Did you mean X?" when one is close."""
    choices = tuple(choices)
    listed = ", ".join(choices)
    if not isinstance(value, str):
        raise ValidationError(field, value, f"must be one of {listed}.")
    if value in choices:
        return value
    folded = value.strip().lower()
    matches = [c for c in choices if c.lower() == folded]
    if len(matches) == 1:
        return matches[0]
    import difflib

    close = difflib.get_close_matches(folded, [c.lower() for c in choices], n=1)
    fix = ""
    if close:
        fix = f"Did you mean {next(c for c in choices if c.lower() == close[0])}?"
    raise ValidationError(field, value, f"must be one of {listed}.", fix)
