"""The job spec's rules every scheduler applies with its own data: job names and directive lines.

A scheduler module gives the data (its job-name characters and limit, its directive prefix);
the checks here read it, so that each message has one wording for every scheduler. A line with
another scheduler's prefix is told apart by the package's names (:data:`hpcdist.schedulers.DIRECTIVE_PREFIXES`),
not by loading every scheduler: they import this module.
"""

from __future__ import annotations

import re

from hpcdist import validate as v
from hpcdist.schedulers import DIRECTIVE_PREFIXES, TITLES


class JobNameRules:
    """What a scheduler accepts as a job name (``--job-name``). (A plain class, not a
    dataclass: it is built when a script is rendered, where a dataclass costs time.)"""

    __slots__ = ("title", "chars", "words", "longest", "leading_dot")

    def __init__(self, title: str, chars: str, words: str, longest: int, leading_dot: str = "") -> None:
        self.title = title  # the scheduler, as the message names it
        self.chars = chars  # the allowed characters, as the inside of a regex class
        self.words = words  # the same, for people
        self.longest = longest
        #: The rule that refuses a name starting with a dot, where the scheduler has one.
        self.leading_dot = leading_dot

    def suggest(self, text) -> str:
        """A valid name made from ``text``: see :func:`hpcdist.schedulers.registry.suggest_job_name`."""
        s = str(text).strip() if text is not None else ""
        if s.lower().endswith(".py"):
            s = s[:-3]
        s = re.sub(f"[^{self.chars}]+", "_", s, flags=re.A)
        s = s.lstrip(".-")  # a name (and the job folder named after it) read as an option
        s = s[:self.longest]
        if not s.strip("_"):
            return "job"
        return s

    def check(self, name) -> str:
        """``name`` if the scheduler accepts it, else ValidationError: see
        :func:`hpcdist.schedulers.registry.check_job_name`."""
        field = "--job-name"
        name = v.require_str(name, field)
        if not name:
            raise v.ValidationError(field, name, "is empty.",
                                    "Give a name, or leave --job-name out to use the script's name.")
        fix = f"Try {self.suggest(name)}."
        # The pattern suggest() compiled (a run of bad characters): its first is the first bad one.
        bad = re.search(f"[^{self.chars}]+", name, re.A)
        if bad:
            raise v.ValidationError(field, name, v.bad_char_rule((bad.start(), bad.group()[0]),
                                                                 f"{self.title} job names", self.words), fix)
        if self.leading_dot and name.startswith("."):
            raise v.ValidationError(field, name, self.leading_dot, fix)
        if len(name) > self.longest:
            raise v.ValidationError(field, name, f"is {len(name)} characters; {self.title} job names may have at "
                                    f"most {self.longest}.", fix)
        return name



# --------------------------------------------------------------------------
# Directives
# --------------------------------------------------------------------------


def prefix_pattern():
    """``#SBATCH``, ``#PBS`` ...: every directive prefix, any case, as one pattern."""
    words = [prefix[1:] for prefix in DIRECTIVE_PREFIXES.values()]
    return re.compile("#(" + "|".join(re.escape(w) for w in words) + ")", re.I | re.A)


def directive_tokens(line: str) -> list[str]:
    """A directive's words, without its prefix (of any scheduler)."""
    s = line.strip()
    m = prefix_pattern().match(s)
    if m:
        s = s[m.end():]
    return s.split()


def option_values(tokens: list[str], long: str | None = None, short: str | None = None) -> list[str | None]:
    """Values of an option in a token list (``--opt=v``, ``--opt v``, ``-o v``, ``-ov``).

    A flag with no value gives ``None``.
    """
    out: list[str | None] = []
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if long and tok == long:
            out.append(nxt)
        elif long and tok.startswith(long + "="):
            out.append(tok[len(long) + 1:])
        elif short and tok == short:
            out.append(nxt)
        elif short and tok.startswith(short) and not tok.startswith("--"):
            out.append(tok[len(short):].lstrip("="))
    return out


def directive_line(scheduler, line: str) -> str:
    """``line`` (one line of text) as ``scheduler``'s directive: see
    :meth:`hpcdist.schedulers.base.Scheduler.directive`."""
    field, prefix, example = "--directive", scheduler.directive_prefix, scheduler.directive_example
    s = line.strip()
    if s.startswith("#"):
        m = prefix_pattern().match(s)
        if not m:
            raise v.ValidationError(field, line, f"starts with '#' but not with {prefix}.",
                                    f"Give the bare option ({example}) or a full line ({prefix} {example}).")
        found = next(name for name, its in DIRECTIVE_PREFIXES.items() if its[1:] == m.group(1).upper())
        if found != scheduler.name:
            raise v.ValidationError(field, line, f"is a {TITLES[found]} directive, but --scheduler "
                                    f"is {scheduler.name}.",
                                    f"Write the {scheduler.title} option instead (e.g. {example}), "
                                    f"or submit with --scheduler {found}.")
        s = s[m.end():].strip()
    if not s:
        raise v.ValidationError(field, line, "has no option.", f"Write for example {prefix} {example}.")
    if not s.startswith("-"):
        raise v.ValidationError(field, line, "the option must start with '-'; the scheduler ignores or rejects "
                                "it otherwise.", f"Did you mean {prefix} {scheduler.guess_option(s)}?")
    return f"{prefix} {s}"
