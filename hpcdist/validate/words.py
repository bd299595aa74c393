"""Names, numbers, words and text: the values that become a word of a command, a directive's
value or a variable, checked (the shell quoting itself is :mod:`hpcdist.shell`'s)."""

from __future__ import annotations

import re

from hpcdist.patterns import Pattern
from hpcdist.validate.base import ValidationError, bad_char_rule, first_bad, require_str


# --------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------

_NAME_CHARS = Pattern(r"[A-Za-z0-9_.@+\-]", re.A)
_NAME_RUNS = Pattern(r"[^A-Za-z0-9_.@+\-]+", re.A)
_NAME_MAX = 64


def check_name(value: str, field: str) -> str:
    """A queue/partition, account or QOS name: 1..64 characters from
    ``[A-Za-z0-9_.@+-]``, not starting with ``-`` (it would read as an option)."""
    value = require_str(value, field)
    if not value:
        raise ValidationError(field, value, "is empty.", f"Give a name, or leave {field} out.")
    cleaned = _NAME_RUNS.sub("_", value).lstrip("-")[:_NAME_MAX]
    fix = f"Try {cleaned}." if cleaned.strip("_") and cleaned != value else ""
    bad = first_bad(value, _NAME_CHARS)
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

#: The largest count a scheduler or launcher reads: a C int (Slurm's and PBS's node and task
#: counts, torchrun's); hpcdist refuses more rather than let it wrap or be refused at submission.
MAX_COUNT = 2**31 - 1


def check_positive(value: object, field: str, *, allow_zero: bool = False, most: int = MAX_COUNT,
                   limit: str = "the most a scheduler or launcher reads (a 32-bit count)",
                   fix: str = "Check it for extra digits.") -> int:
    """A whole number >= 1 (>= 0 with ``allow_zero``), at most ``most`` (``limit`` says why,
    ``fix`` what to give instead): an ``int`` (not a ``bool``) or a string of ASCII digits
    (surrounding spaces allowed)."""
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
        # Counted before int(), which refuses over 4300 digits.
        number = int(s) if len(s.lstrip("0")) <= len(str(most)) else most + 1
    else:
        raise ValidationError(field, value, rule)
    if number < low:
        raise ValidationError(field, value, rule)
    if number > most:
        raise ValidationError(field, value, f"is more than {most}, {limit}.", fix)
    return number


_ENV_NAME = Pattern(r"[A-Za-z_][A-Za-z0-9_]*", re.A)


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
    bad = first_bad(name, Pattern(r"[A-Za-z0-9_]", re.A))
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
_ASSIGNMENT = Pattern(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", re.A)


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


_ARRAY_CHARS = Pattern(r"[0-9,:%\-]", re.A)
_DEPENDENCY_CHARS = Pattern(r"[A-Za-z0-9_.,:?+@\[\]\-]", re.A)
_MAIL_CHARS = Pattern(r"[A-Za-z0-9_.,%+@\-]", re.A)


def _check_charset(value: object, field: str, allowed: Pattern, what: str, words: str, example: str) -> str:
    value = require_str(value, field)
    if not value:
        raise ValidationError(field, value, "is empty.", f"Write for example {example}, or leave {field} out.")
    bad = first_bad(value, allowed)
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


_CONSTRAINT_CHARS = Pattern(r"[A-Za-z0-9_.:&|\[\]*()\-]", re.A)


def check_constraint(value: str, field: str) -> str:
    """Slurm node features (``--constraint``): ``gpu``, ``gpu&hbm80g``, ``[a100|v100]``, ``gpu*2``."""
    return _check_charset(value, field, _CONSTRAINT_CHARS, "constraints", "letters, digits and _ . : & | [ ] * ( ) -",
                          "gpu or gpu&hbm80g")


_BINDING_CHARS = Pattern(r"[A-Za-z0-9_:,.=+\-]", re.A)


def check_binding(value: str, field: str) -> str:
    """A CPU or GPU binding in a launcher's own words (``cores``, ``list:0:16:32:48``,
    ``mask_cpu:0xfe,0xfe00``, ``closest``): letters, digits and ``_ : , . = + -``."""
    return _check_charset(value, field, _BINDING_CHARS, "bindings", "letters, digits and _ : , . = + -",
                          "cores, closest or list:0:16:32:48")


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
    import difflib  # only for a wrong choice: importing validate costs re alone (its docstring)

    close = difflib.get_close_matches(folded, [c.lower() for c in choices], n=1)
    fix = ""
    if close:
        fix = f"Did you mean {next(c for c in choices if c.lower() == close[0])}?"
    raise ValidationError(field, value, f"must be one of {listed}.", fix)


def check_ssh_destination(value: str, field: str) -> str:
    """An ssh destination, as ``ssh`` takes it: ``user@login.cluster``, or a ``Host`` of ~/.ssh/config."""
    value = check_word(value, field)
    if any(c.isspace() for c in value):
        raise ValidationError(field, value, "an ssh destination is one word.",
                              'Give user@host, or a Host name from your ~/.ssh/config: remote = "me@login.cluster".')
    return value


def check_remote_folder(value: str, field: str) -> str:
    """A folder on the cluster: relative to the home there, absolute, ``~/...`` or ``$VAR/...`` (expanded there)."""
    value = check_word(value, field)
    if value.startswith("$"):
        check_env_name(value[1:].split("/", 1)[0].strip("{}"), field)
    return value
