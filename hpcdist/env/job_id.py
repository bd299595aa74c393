"""The job id a port is derived from (:func:`job_id_from`, :func:`hpcdist.ports.port_for_job`):
each scheduler's job id variables (its in-job module's), read only when a port must be derived.

Where it runs: in a rank, when no ``MASTER_PORT`` is set inside a job; and ``hpcdist doctor``.
"""

from hpcdist.env.model import DistEnvError, in_a_job, is_text, shown


def _job_id_variables(name: str) -> tuple:
    from hpcdist.schedulers import job_side

    return job_side(name).JOB_ID_VARIABLES


def job_id_variables() -> tuple:
    """Where the job id is read from, first set wins: each scheduler's own (its in-job module's), in
    the order their allocations are read, then Flux's (hpcdist reads Flux's launches, and submits to
    none), then the local backend's."""
    return tuple(_each_job_id_variable())


def _each_job_id_variable():
    """:func:`job_id_variables` one at a time, each scheduler's in-job side loaded when its turn
    comes: a rank under Slurm finds SLURM_JOB_ID and loads no other scheduler's folder."""
    from hpcdist.allocation import ORDER

    for name in ORDER:
        yield from _job_id_variables(name)
    yield "FLUX_JOB_ID"
    yield from _job_id_variables("local")


def job_id_from(environ: "Mapping[str, str]") -> "tuple[str, str] | None":
    """``(variable, value)`` of the first job id set, or None outside a job.

    ``environ`` needs only ``.get(name)`` (an :class:`~hpcdist.env.model.EnvReader` will do).
    """
    if not in_a_job(environ):
        return None
    for name in _each_job_id_variable():
        value = environ.get(name)
        if value is not None and value.strip():
            if not is_text(value):
                raise DistEnvError(
                    f"{name}={shown(value)} is not a job id (bytes that are not UTF-8). It is normally "
                    f"set by the scheduler: unset it or fix the job script that sets it, or set MASTER_PORT."
                )
            return name, value.strip()
    return None
