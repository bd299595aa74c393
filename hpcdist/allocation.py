"""The hosts of a job and their slots: the one reader of an allocation, and the hostfiles made from it.

Every part of hpcdist that asks "which hosts does this job have?" asks :func:`read`: the job's
set-up (``hpcdist job-setup``), ``hpcdist hostfile``, ``hpcdist supervise`` and the rank
resolver (:mod:`hpcdist.env`). The precedence, first set wins (:data:`ORDER`):

1. Slurm (:mod:`hpcdist.schedulers.slurm.job`): ``SLURM_JOB_NODELIST`` with
   ``SLURM_TASKS_PER_NODE``; an srun task of the run reads its step's pair instead (``step=True``).
2. PBS (:mod:`hpcdist.schedulers.pbs.job`): ``$PBS_NODEFILE``, one line per slot.
3. LSF (:mod:`hpcdist.schedulers.lsf.job`): ``$LSB_DJOB_RANKFILE``, one line per slot.
4. hpcdist's own node list, ``$HPCDIST_NODEFILE``: the job's set-up writes it (one host per
   line) and passes it to processes that see no scheduler's variables (ranks that Open MPI
   started over ssh: PBS's node file lies on the first node only).

Slurm comes first because its variables describe the step a process runs in; a site (or our
test cluster) that gives Slurm jobs a ``$PBS_NODEFILE`` too describes the same hosts with it.
A job script knows its scheduler and asks for that one alone (``scheduler=``): a PBS script
run by hand under Slurm then says so instead of reading another allocation, and a local job
(``scheduler="local"``) is this host whatever allocation its shell sits in.

An :class:`Allocation` is an ordered tuple of ``(host, slots)``. A plain class, not a dataclass:
the job's set-up and the rank lookup import this module, where ``dataclasses`` alone would
cost more than all the rest.
"""

# The shape and the node file reader, shared with each scheduler's reader (which cannot import this
# module: it loads them by name); here as the public names they always had.
from hpcdist.schedulers.job_hosts import (  # noqa: F401
    HOSTFILE_FORMATS, MAX_HOSTFILE_LINES, MAX_NODEFILE_BYTES, MAX_SLOTS_PER_HOST, Allocation, AllocationError,
    check_host, count_in_order, host_lines, read_host_lines, this_host)
from hpcdist.schedulers import IN_JOB_ONLY, QUEUED, job_side

#: The readers, in the order their variables are looked for: each is the ``allocation(environ,
#: step, slots)`` of ``hpcdist.schedulers.<name>.job``, the schedulers with a queue first (in
#: their registration's order), then those whose jobs hpcdist only reads (LSF); then hpcdist's own
#: node list.
ORDER = (*QUEUED, *IN_JOB_ONLY)
#: hpcdist's own node list (one host per line), written by the job's set-up.
OWN_NODEFILE = "HPCDIST_NODEFILE"


def read(environ=None, *, scheduler: "str | None" = None, step: "bool | None" = False,
         slots: bool = True) -> "Allocation | None":
    """The job's allocation: from ``scheduler``'s variables alone when given (its name as
    ``--scheduler`` takes it; ``"local"``: this host), else from the first in :data:`ORDER` whose
    variables are set, then ``$HPCDIST_NODEFILE``; None when there is none. ``step``: an srun
    task of the run reads its step's node list (None: whenever this process is an srun task).
    ``slots=False``: the hosts alone are wanted (the rank resolver), one slot each where a count
    would have to be read from another variable.
    AllocationError when it cannot be read. ``environ`` needs only ``.get(name)``."""
    import os

    environ = os.environ if environ is None else environ
    for name in (scheduler,) if scheduler else ORDER:
        found = _reader(name)(environ, step, slots)
        if found is not None or scheduler:
            return found
    return own_nodes(environ)


def _reader(name: str):
    try:
        return job_side(name).allocation
    except ModuleNotFoundError:
        raise ValueError(f"no allocation reader for {name!r}: expected one of {', '.join(ORDER)}, or local") from None


def own_nodes(environ) -> "Allocation | None":
    """``$HPCDIST_NODEFILE``: one host per line, one slot each (the job's set-up knows the slots)."""
    path = environ.get(OWN_NODEFILE)
    if not path:
        return None
    hosts = read_host_lines(path, OWN_NODEFILE)
    return Allocation(count_in_order(hosts), f"{OWN_NODEFILE}={path}")


# The readers' old names, kept for callers of the library: constructors of the public class that
# read through :func:`read`, attached here (the class's module is below the readers).
def _from_env(cls, environ=None, slots_per_node: "int | None" = None) -> "Allocation":
    """:func:`read` (an srun task reading its step's pair), or this host alone outside any
    allocation; ``slots_per_node`` for every host, which then need not be read."""
    alloc = read(environ, step=None, slots=not slots_per_node) or this_host(slots_per_node or 1)
    return alloc.with_slots(slots_per_node) if slots_per_node else alloc


def _from_slurm(cls, nodelist: str, tasks_per_node: str) -> "Allocation":
    from hpcdist.schedulers.slurm.job import NODELISTS

    found = read(dict(zip(NODELISTS[0], (nodelist, tasks_per_node))), scheduler="slurm")
    if found is None:
        raise AllocationError(f"{NODELISTS[0][0]}={nodelist!r} is empty: no hosts were allocated")
    return found


Allocation.from_env = classmethod(_from_env)
Allocation.from_slurm = classmethod(_from_slurm)
