"""The schedulers by name: :func:`get` loads a scheduler's submit side (``<name>/submit.py``)
when it is first asked for, and the job spec's checks that take a scheduler's name
(``--scheduler``) ask it.

Where it runs: on the login node (render, submit, status) and in a job's requeue.

Above the scheduler modules: they import :mod:`hpcdist.schedulers` (the names) and never this
module, so loading one by name goes one way only. Code that has a scheduler's name and wants the
scheduler imports this (``from hpcdist.schedulers import registry as schedulers``).
"""

from hpcdist.schedulers import DIALECTS, NAMES, PBS_DIALECTS, QUEUED, part

__all__ = ["NAMES", "QUEUED", "DIALECTS", "PBS_DIALECTS", "get", "all_schedulers", "check_dialect",
           "check_directive", "check_gpu_directives", "check_job_name", "suggest_job_name"]


_LOADED: dict = {}


def get(name: str, dialect: str | None = None):
    """The scheduler called ``name`` (one of :data:`NAMES`); for PBS, of ``dialect`` (default:
    PBS Pro). One instance per name and dialect."""
    key = (name, dialect)
    if key not in _LOADED:
        if name not in NAMES:
            raise ValueError(f"unknown scheduler {name!r}: expected one of {', '.join(NAMES)}")
        # A dict, not functools.lru_cache: one more module for every command that asks for one.
        _LOADED[key] = part(name, "submit").scheduler(dialect)
    return _LOADED[key]


def all_schedulers() -> list:
    """Every scheduler, in :data:`NAMES` order."""
    return [get(name) for name in NAMES]


# The job spec's scheduler rules by scheduler name, the name checked first (as --scheduler).

def _named(scheduler):
    from hpcdist import validate as v

    return get(v.check_choice(scheduler, "--scheduler", NAMES))


def check_dialect(scheduler: str, dialect: str | None) -> str | None:
    """PBS: ``"pro"`` (the default; also for ``openpbs``/``pbspro``) or
    ``"torque"``.  Slurm and local: None; a dialect given for them is an error."""
    return _named(scheduler).check_dialect(dialect)


def check_directive(line: str, scheduler: str) -> str:
    """A raw scheduler directive as the full line to put at the top of the script.

    Takes the bare option (``--constraint=a100``, ``-l place=scatter``) or a
    full line (``#SBATCH --constraint=a100``, ``#PBS -l place=scatter``) and
    returns the full line with the right prefix (a lower-case prefix is
    corrected).  Raw directives are not quoted, so only structure is checked:
    one line, no NUL, the prefix of this scheduler, a non-empty option that
    starts with ``-``.  The local backend takes no directives.
    """
    return _named(scheduler).check_directive(line)


def check_gpu_directives(scheduler: str, dialect: str | None, gpus_per_node: int, directives: list[str]) -> None:
    """Raw directives that clash with what hpcdist writes itself.

    Slurm: hpcdist writes ``--gpus-per-node`` when ``gpus_per_node > 0``;
    Slurm rejects it together with ``--gres=gpu``, and a raw
    ``--gpus-per-node`` beside the flag is two sources for one number.
    PBS Pro: hpcdist always writes ``-l select=``; a second ``select`` is
    ignored (Parsl#2220), and old syntax (``-l nodes=``) cannot be mixed with
    it.  Torque: hpcdist always writes ``-l nodes=``; a second ``nodes`` is
    refused, and ``select`` is PBS Pro syntax Torque does not know.
    Directives may be bare options or full lines.  Returns None.
    """
    named = _named(scheduler)
    return get(named.name, named.check_dialect(dialect)).check_gpu_directives(gpus_per_node, directives)


def option_job_name(value, option, scheduler: str | None) -> str:
    """The job name check of the job options' table (:mod:`hpcdist.submission.options`): before the scheduler
    is known (a profile without one), Slurm's rules, the widest."""
    return get(scheduler or "slurm").check_job_name(str(value))


def option_directive(value, option, scheduler: str | None) -> str:
    """The directive check of the job options' table: under a scheduler with a queue, its own
    grammar; the local backend refuses directives (its own rule), and a profile read before the
    scheduler is known checks them as text."""
    if scheduler is not None and get(scheduler).queued:
        return get(scheduler).check_directive(str(value))
    from hpcdist import validate as v

    return v.check_text(str(value), option.flag)


def check_job_name(name: str, scheduler: str) -> str:
    """``name`` if the scheduler accepts it as a job name, else ValidationError.

    PBS (Pro and Torque): 1..230 characters from ``[A-Za-z0-9+_.-]``, not
    starting with a dot (PBS Pro 19.2.1+ rejects others, ``=`` gives "illegal
    -N value", and a leading dot failed on older PBS Pro).  Slurm and local:
    1..200 characters from ``[A-Za-z0-9+_.,:@=-]`` (no ``%``, which Slurm
    expands in output file names, and no spaces).
    """
    return _named(scheduler).check_job_name(name)


def suggest_job_name(text: str, scheduler: str) -> str:
    """A valid job name made from ``text`` (typically a script's file name).

    Drops a trailing ``.py``, replaces each run of disallowed characters with
    ``_``, strips leading dots and dashes, cuts to the scheduler's limit and falls back
    to ``"job"``: ``.train v2.py`` -> ``train_v2``.  The result always passes
    :func:`check_job_name` for ``scheduler``.  Directories are not removed
    (pass ``os.path.basename(path)``); a ``/`` becomes ``_``.
    """
    return _named(scheduler).suggest_job_name(text)
