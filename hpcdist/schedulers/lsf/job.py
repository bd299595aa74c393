"""IBM LSF from inside a job: hpcdist does not submit to LSF, but ranks that ``jsrun`` starts
read their job's hosts (the rank resolver, :mod:`hpcdist.env`, through :mod:`hpcdist.allocation`)."""

JOB_ID_VARIABLES = ("LSB_JOBID",)
RANKFILE = "LSB_DJOB_RANKFILE"


def allocation(environ, step: bool = False, slots: bool = True):
    """The compute hosts of ``$LSB_DJOB_RANKFILE`` (one line per slot), or None outside an LSF
    job. Line 1 is the launch node, not a compute node (Lightning's LSFEnvironment skips it too)."""
    path = environ.get(RANKFILE)
    if path is None:
        return None
    from hpcdist.schedulers.job_hosts import Allocation, AllocationError, count_in_order, read_host_lines

    lines = read_host_lines(path, RANKFILE)[1:]
    if not lines:
        raise AllocationError(f"{RANKFILE}={path} lists no compute host (its first line is the launch node)")
    return Allocation(count_in_order(lines), f"{RANKFILE}={path}")
