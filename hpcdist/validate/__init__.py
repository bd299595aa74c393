"""Checks and normalisers for job-spec values, run before anything is queued.

Where it runs: on the login node (or a laptop), while a job spec is built.

A typo in a walltime or a job name costs a PhD student hours in a queue, so
every value that a scheduler would reject (or, worse, silently misread) is
checked here, when the job spec is built (the rules of one scheduler, such as its job
names and directives, are its module's: :mod:`hpcdist.schedulers`).  Every failure is a
:class:`ValidationError` that names the flag, the value as given, the rule
and the fix::

    --walltime '90': a bare number is minutes to Slurm but seconds to PBS. Write 90m, 90s or 01:30:00.

The functions are pure (no I/O, no environment) and use the standard library
only; importing this package costs ``re`` and nothing else (``difflib`` is
imported only when a choice is wrong). Its modules: :mod:`~hpcdist.validate.base`
(the error and shared helpers), :mod:`~hpcdist.validate.quantities` (walltimes and
memory) and :mod:`~hpcdist.validate.words` (names, numbers, words, text, choices).
"""

from __future__ import annotations

from hpcdist.validate.base import (  # noqa: F401
    NotHere, ValidationError, bad_char_rule, require_str
)
from hpcdist.validate.quantities import (  # noqa: F401
    MAX_MEMORY_MB, MAX_WALLTIME, describe_walltime, format_clock, parse_memory, parse_walltime,
    positive_int
)
from hpcdist.validate.words import (  # noqa: F401
    BASH_KEYWORDS, BASH_READONLY, MAX_COUNT, check_array, check_binding, check_choice,
    check_constraint, check_dependency, check_env_name, check_env_settable, check_mail, check_name,
    check_positive, check_program,
    check_remote_folder, check_ssh_destination, check_text, check_utf8, check_word,
    parse_env_assignment
)

__all__ = [
    "MAX_COUNT",
    "MAX_WALLTIME",
    "ValidationError",
    "bad_char_rule",
    "check_array",
    "check_binding",
    "check_choice",
    "check_constraint",
    "check_dependency",
    "check_env_name",
    "check_env_settable",
    "check_mail",
    "check_name",
    "check_positive",
    "check_program",
    "check_remote_folder",
    "check_ssh_destination",
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
