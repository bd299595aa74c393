"""The master port when nobody chose one: derived from the job id.

Two jobs that share a node must not both listen on torch's default 29500.
The port is ``PORT_BASE + n % PORT_SPAN`` with ``n`` the numeric job id
(``1234`` for ``1234.pbs-server``), or a CRC-32 of the id when it is not a
plain number (PBS array sub-jobs ``1234[5].server``, Flux ids). The range
20000-29999 lies below Linux's ephemeral ports (32768-60999 by default), so
an outgoing connection never holds it; consecutive job ids get consecutive
ports, so jobs submitted one after another never collide.

An explicit ``MASTER_PORT`` always wins over this.
"""

from hpcdist.env.model import DistEnvError, is_text, shown

PORT_BASE = 20000
PORT_SPAN = 10000
DEFAULT_PORT = 29500  # torch's own default, used outside any job

#: Where the job id is read from, first set wins.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOBID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
                    # jobs of hpcdist's local backend, and of submitit's LocalExecutor
                    "HPCDIST_JOB_ID", "SUBMITIT_LOCAL_JOB_ID")


def port_for_job(job_id: str) -> int:
    head = job_id.strip().split(".", 1)[0]
    if head.isascii() and head.isdigit():
        # The last 18 digits give the same remainder (10**18 is a multiple of PORT_SPAN),
        # and int() refuses over 4300 digits.
        number = int(head[-18:])
    else:
        import zlib

        number = zlib.crc32(job_id.strip().encode())
    return PORT_BASE + number % PORT_SPAN


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
