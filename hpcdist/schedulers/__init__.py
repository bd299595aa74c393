"""The schedulers hpcdist submits to, one folder each: everything that differs between them.

Where it runs: each scheduler's folder holds its login node side (``<name>/submit.py``: rules,
submit, status, cancel; the template ``<name>/<name>.sh.j2``; for a queued one, ``ids.py``, its
job ids' grammar) and its side inside the job (``<name>/job.py``: the job's id and allocation,
cheap enough to import in every rank). Some have more (``pbs/qstat.py`` reads qstat,
``slurm/queue.py`` squeue and sacct, ``<name>/limits.py`` a site's caps); LSF has its in-job side
alone.

What the schedulers share sits here: ``base`` (ids, states, errors, the :class:`Scheduler`
interface ``submit.py`` implements), ``job_ids`` (the id grammar's interface, which
``base.JobId`` reads), ``batch`` (running the commands of a scheduler with a queue,
submitting), ``rules`` (job names, directive lines), ``retry``, ``job_hosts`` (the
allocation's shape) and the shared templates (``job.sh.j2``, ``job_folder.sh.j2``).

Adding a scheduler is its folder and one :func:`register` line below (CONTRIBUTING.md, "A new
scheduler"; tests/schedulers/test_new_scheduler.py adds one at test time): a folder of 5 files for a
scheduler with a queue (``__init__.py``, ``submit.py``, ``job.py``, ``ids.py``,
``<name>.sh.j2``), 4 without one (no ``ids.py``). What ``job.py`` must define is
:data:`JOB_SIDE`, loaded through :func:`job_side` alone.

This package holds only names and the loader: what the shared modules and the CLI need to know
of every scheduler without loading one. Finding a scheduler by name is
:mod:`hpcdist.schedulers.registry`'s (``get``, ``all_schedulers``, the checks by scheduler
name): it sits above the scheduler folders, which import this package and never the registry,
so that no import goes round in a circle.
"""

#: The schedulers hpcdist renders for, in --scheduler's order ("local" runs the job script here).
NAMES: tuple = ()
#: Those with a queue: they read directives, a job may go back to them, their ids have a grammar.
QUEUED: tuple = ()
#: Those hpcdist does not submit to, whose allocation a job may still read (LSF's jsrun ranks).
IN_JOB_ONLY: tuple = ()
#: The dialects of a scheduler whose kinds read different directives (what each means is its
#: submit side's): named here so that --dialect's choices need not import it.
DIALECTS: dict = {}
# What a shared check says of another scheduler than the one in use ("only PBS has dialects",
# "is a PBS directive, but --scheduler is slurm"): named here, as each submit side has it (its
# class's title, directive_prefix and elastic_agents; tests/project/test_layout.py holds them equal), so
# that base and rules need not load every scheduler to word a message.
#: Each scheduler as people write it.
TITLES: dict = {}
#: Each directive prefix, by the scheduler that reads it (in :data:`NAMES` order).
DIRECTIVE_PREFIXES: dict = {}
#: Those whose job's agents may lose a node and go on (--min-nodes).
ELASTIC: tuple = ()


def register(name: str, title: str, *, directive_prefix: str = "", dialects: tuple = (),
             elastic: bool = False, submits: bool = True) -> None:
    """A scheduler whose folder is ``hpcdist/schedulers/<name>/``: ``title`` as people write it;
    ``directive_prefix`` (``#SBATCH``): it has a queue and reads directives; ``dialects``: its
    kinds that read different directives; ``elastic``: its job's agents may lose a node;
    ``submits=False``: hpcdist only reads its allocation inside a job (its folder: ``job.py``).
    Run before the rest of hpcdist reads the names (here, at import; a test's own: first)."""
    global NAMES, QUEUED, IN_JOB_ONLY, ELASTIC
    if not submits:
        IN_JOB_ONLY = (*IN_JOB_ONLY, name)
        return
    NAMES = (*NAMES, name)
    TITLES[name] = title
    if directive_prefix:
        QUEUED = (*QUEUED, name)
        DIRECTIVE_PREFIXES[name] = directive_prefix
    if dialects:
        DIALECTS[name] = tuple(dialects)
    if elastic:
        ELASTIC = (*ELASTIC, name)


# One line per scheduler, in --scheduler's order (the queued ones' order is also the order an id
# without a scheduler is tried, and an allocation read: hpcdist.allocation.ORDER).
register("local", "local")
register("slurm", "Slurm", directive_prefix="#SBATCH", elastic=True)
register("pbs", "PBS", directive_prefix="#PBS", dialects=("pro", "torque"))
register("lsf", "LSF", submits=False)

PBS_DIALECTS = DIALECTS["pbs"]

#: What each scheduler's in-job side (``<name>/job.py``) defines; :func:`job_side` checks it.
#: Cheap to import: the rank resolver (:mod:`hpcdist.env`), the job's set-up and
#: :mod:`hpcdist.allocation` load it in every job, so it imports nothing at the top
#: (:mod:`hpcdist.schedulers.job_hosts` inside ``allocation``).
JOB_SIDE = {
    "JOB_ID_VARIABLES": "the variables that hold the job's id inside it, first set wins",
    "allocation": "allocation(environ, step=False, slots=True): the job's hosts and their slots "
                  "(a job_hosts.Allocation), or None outside such a job",
}
#: ... and, for a scheduler with a queue, the words of its commands' errors
#: (:mod:`hpcdist.schedulers.retry` joins every scheduler's; a job's own requeue reads them too):
#: regular expressions, as tuples.
JOB_SIDE_QUEUED = {
    "NOT_SENT": "the request never reached the controller: safe to repeat, even a submission",
    "MAYBE_SENT": "the request may have reached it: a query may be repeated, a submission not",
    "NOT_CONFIGURED": "there is no scheduler to talk to (no configuration, no server name)",
    "HINTS": "(pattern, advice) for the submission errors users meet most",
}
#: ... and what it may define: ``is_job_id(text)`` (what its ids look like in a job's record; else
#: any id word), ``MASTER_ADDR`` (every agent on one host: the local backend's 127.0.0.1).
JOB_SIDE_OPTIONAL = ("is_job_id", "MASTER_ADDR")

_JOB_SIDES: dict = {}


def part(name: str, which: str):
    """The module ``hpcdist.schedulers.<name>.<which>`` (``submit``, ``job``, ``ids``,
    ``limits``): the one place a scheduler's module is loaded by its name. ModuleNotFoundError
    when it has none."""
    # __import__, not importlib: importlib is one more module for every rank.
    return __import__(f"{__name__}.{name}.{which}", fromlist=["_"])


def job_side(name: str):
    """The in-job side of scheduler ``name`` (``<name>/job.py``), checked against :data:`JOB_SIDE`
    (and :data:`JOB_SIDE_QUEUED` for one with a queue) the first time. ModuleNotFoundError for a
    name without one; TypeError naming what a new scheduler's ``job.py`` lacks."""
    module = _JOB_SIDES.get(name)
    if module is None:
        module = part(name, "job")
        wanted = (*JOB_SIDE, *JOB_SIDE_QUEUED) if name in QUEUED else tuple(JOB_SIDE)
        missing = [what for what in wanted if not hasattr(module, what)]
        if missing:
            raise TypeError(f"{module.__file__} does not define {', '.join(missing)}: an in-job "
                            f"side defines what hpcdist.schedulers.JOB_SIDE names")
        _JOB_SIDES[name] = module
    return module


def template_folders() -> list:
    """Where hpcdist's own templates lie: the shared ones (``job.sh.j2``) in this package's folder,
    then each scheduler's (``<name>.sh.j2``) in its own folder; for each folder the package is
    found in."""
    import os

    return [os.path.join(base, *where) for base in __path__
            for where in ((), *((name,) for name in NAMES))]


__all__ = ["NAMES", "QUEUED", "IN_JOB_ONLY", "DIALECTS", "PBS_DIALECTS", "TITLES",
           "DIRECTIVE_PREFIXES", "ELASTIC", "register", "JOB_SIDE", "JOB_SIDE_QUEUED",
           "JOB_SIDE_OPTIONAL", "part", "job_side", "template_folders"]
