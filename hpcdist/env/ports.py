"""The master port when nobody chose one, for a process the job's set-up did not start (a job
script of the user's own): derived from the job id (:func:`hpcdist.injob.job_setup.port_for_job`), so
that two jobs sharing a node do not both listen on torch's default 29500. An explicit
``MASTER_PORT`` always wins over this; hpcdist's own scripts set one (a free port drawn at random
by the job's set-up: :func:`hpcdist.injob.job_setup.choose_port`).
"""

from hpcdist.env.model import DistEnvError, is_text, shown
from hpcdist.injob.job_setup import PORT_BASE, PORT_SPAN, port_for_job  # noqa: F401 - the rule, and its range
from hpcdist.allocation import ORDER

DEFAULT_PORT = 29500  # torch's own default, used outside any job


def _job_id_variables(name: str) -> tuple:
    return __import__(f"hpcdist.schedulers.{name}_job", fromlist=["JOB_ID_VARIABLES"]).JOB_ID_VARIABLES


#: Where the job id is read from, first set wins: each scheduler's own (its in-job module's), in the
#: order their allocations are read, then Flux's (hpcdist reads Flux's launches, and submits to
#: none), then the local backend's.
JOB_ID_VARIABLES = (*(v for name in ORDER for v in _job_id_variables(name)), "FLUX_JOB_ID",
                    *_job_id_variables("local"))


def job_id_from(environ: "Mapping[str, str]") -> "tuple[str, str] | None":
    """``(variable, value)`` of the first job id set, or None outside a job.

    ``environ`` needs only ``.get(name)`` (an :class:`~hpcdist.env.model.EnvReader` will do).
    """
    for name in JOB_ID_VARIABLES:
        value = environ.get(name)
        if value is not None and value.strip():
            if not is_text(value):
                raise DistEnvError(
                    f"{name}={shown(value)} is not a job id (bytes that are not UTF-8). It is normally "
                    f"set by the scheduler: unset it or fix the job script that sets it, or set MASTER_PORT."
                )
            return name, value.strip()
    return None
