"""PBS (PBS Pro, OpenPBS, Torque) from inside a job: its id, its node file, what a job that goes
on after it must not inherit, and the words of its commands' errors.

Cheap to import: the rank resolver (:mod:`hpcdist.env`), the job's set-up and
:mod:`hpcdist.allocation` import it. The login side (:mod:`hpcdist.schedulers.pbs.submit`: qsub,
qstat, qdel) builds on it.
"""

import os

#: Where a PBS job finds its id.
JOB_ID_VARIABLES = ("PBS_JOBID",)
NODEFILE = "PBS_NODEFILE"


def allocation(environ, step: bool = False, slots: bool = True):
    """The job's hosts from ``$PBS_NODEFILE`` (one line per slot, PBS's mpiprocs), or None
    outside a PBS job. A host's slots are its lines, in order of first appearance; names are kept
    as written (Torque may write FQDNs: ``n1`` and ``n1.domain`` stay two hosts). The file lies on
    the job's first node only (the MOM's aux folder)."""
    path = environ.get(NODEFILE)
    if path is None:
        return None
    from hpcdist.schedulers.job_hosts import Allocation, count_in_order

    return Allocation(count_in_order(nodefile_lines(path)), f"{NODEFILE}={path}")


def nodefile_lines(path: str) -> list:
    """The node file's lines (one per slot), checked (:func:`hpcdist.allocation.read_host_lines`)."""
    from hpcdist.schedulers.job_hosts import read_host_lines

    return read_host_lines(path, NODEFILE)


#: What PBS's mom and the job script set for one job alone. ``qsub -V`` must not hand them to the
#: job that goes on after this one (a resubmission): it would keep this job's MASTER_PORT and talk
#: to this job's master, or write into this job's TMPDIR. PBS and the script set them again; a
#: user's own value (--env) is exported by the script itself.
PER_JOB = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "TMPDIR", "ENVIRONMENT", "NCPUS", "OMP_NUM_THREADS",
    "HPCDIST_JOB_ID", "HPCDIST_HOSTFILE", "HPCDIST_NODEFILE", "HPCDIST_STOP_FILE", "HPCDIST_RESTART_COUNT",
    "DS_ENV_FILE",
    # PBS Pro / OpenPBS, and Torque
    *JOB_ID_VARIABLES, "PBS_JOBNAME", "PBS_JOBDIR", "PBS_JOBCOOKIE", NODEFILE, "PBS_GPUFILE", "PBS_MICFILE",
    "PBS_NODENUM", "PBS_VNODENUM", "PBS_TASKNUM", "PBS_MOMPORT", "PBS_ENVIRONMENT", "PBS_QUEUE", "PBS_ACCOUNT",
    "PBS_ARRAY_INDEX", "PBS_ARRAY_ID", "PBS_ARRAYID", "PBS_NP", "PBS_NUM_NODES", "PBS_NUM_PPN", "PBS_WALLTIME",
})


def next_job_environment(environ) -> dict:
    """The environment ``qsub -V`` gives the job that goes on: this job's, less what was this
    job's alone (:data:`PER_JOB`, and the ``PBS_O_*`` that qsub sets again)."""
    return {name: value for name, value in environ.items()
            if name not in PER_JOB and not name.startswith("PBS_O_")}


def own_command(name: str, environ) -> str:
    """A PBS command of this job's own PBS: ``$PBS_EXEC/bin/NAME``, PBS_EXEC read from the
    node's pbs.conf (``$PBS_CONF_FILE``, else /etc/pbs.conf: PBS Pro, OpenPBS), where that file
    exists; else NAME from PATH (Torque has no pbs.conf). On a machine with two schedulers' clients,
    the first ``qsub`` on PATH may be another's (Slurm's qsub wrapper)."""
    try:
        with open(environ.get("PBS_CONF_FILE") or "/etc/pbs.conf") as f:
            conf = dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))
    except OSError:
        return name
    path = os.path.join(conf.get("PBS_EXEC", ""), "bin", name)
    return path if conf.get("PBS_EXEC") and os.access(path, os.X_OK) else name


# What the PBS client commands (PBS Pro / OpenPBS and Torque: qsub, qstat, pbs_iff) print when the
# server is in trouble, read by hpcdist.schedulers.retry: the request never reached the server ...
NOT_SENT = (r"cannot connect to server", r"pbs_iff: cannot connect", r"Connection refused")
# ... it may have (PBS prints no such line of its own: the operating system's word) ...
MAYBE_SENT = (r"Resource temporarily unavailable",)
# ... or there is no server to talk to (no server name, no configuration).
NOT_CONFIGURED = (r"Cannot resolve (?:default|specified) server host", r"pbsconf error",
                  r"cannot connect to server (?:\(null\) )?\(errno=")
HINTS = ((r"Unknown queue", "check --queue: `qstat -Q` lists the queues"),
         # A job's own resubmission (--requeue) from a compute node, refused by a stock server.
         (r"Bad UID for job execution",
          "the PBS server takes jobs from this host only if its flatuid is True or the host is in its "
          "hosts.equiv (root's jobs: acl_roots); a compute node usually is not, so --requeue cannot go on as a "
          "new job from there until the admins allow it (qmgr -c 'set server flatuid = True', or the compute "
          "nodes in /etc/hosts.equiv). Until then submit the next run from a login node (`hpcdist submit` "
          "again, or `qsub` the job's script), and check with `hpcdist doctor` in a job before a long job "
          "relies on it"))
