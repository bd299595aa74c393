"""The master port's rule, in one place: its range, the port a job's set-up draws
(:func:`choose_port`, used by ``hpcdist job-setup`` and a restart's) and the one a process that
the set-up did not start derives from the job id (:func:`port_for_job`: a job script of the user's
own, and doctor), so that two jobs sharing a node do not both listen on torch's default 29500. An
explicit ``MASTER_PORT`` always wins over both.

Where it runs: inside jobs: in the job's set-up, and in a rank that must derive its port
(:mod:`hpcdist.env` reads the job id, :mod:`hpcdist.env.job_id`). It imports nothing of either:
the set-up does not load the rank's lookup, nor a rank the set-up.
"""

import os


class PortError(ValueError):
    """No master port can be had: the message says why and what to do."""


#: The master port's range. It lies below Linux's ephemeral ports (32768-60999 by default), so an
#: outgoing connection never holds it. hpcdist's own scripts draw the port at random in it
#: (:func:`choose_port`); a script of the user's own reads it from the job id (:func:`port_for_job`).
PORT_BASE = 20000
PORT_SPAN = 10000
#: Ports drawn before job-setup gives up on finding a free one.
PORT_TRIES = 100


def port_for_job(job_id: str) -> int:
    """The port every rank of a job can derive alone, for scripts hpcdist did not write (and
    doctor): ``PORT_BASE + n % PORT_SPAN`` with ``n`` the numeric job id (``1234`` for
    ``1234.pbs-server``), or a CRC-32 of the id when it is not a plain number (PBS array subjobs
    ``1234[5].server``, Flux ids). Predictable: job ids are public."""
    head = job_id.strip().split(".", 1)[0]
    if head.isascii() and head.isdigit():
        # The last 18 digits give the same remainder (10**18 is a multiple of PORT_SPAN),
        # and int() refuses over 4300 digits.
        number = int(head[-18:])
    else:
        import zlib

        number = zlib.crc32(job_id.strip().encode())
    return PORT_BASE + number % PORT_SPAN


def choose_port(master: str, given: "int | None" = None) -> int:
    """The job's master port, decided once, here, on the first node (every node reads job.env).

    Not derived from the job id: ids are public (a local job's is a pid), so another user could
    listen first on the port a job will use, and torchrun's agents would join that user's store;
    and two jobs whose ids differ by ``PORT_SPAN`` would share one. Drawn at random instead, and
    taken only when it can be listened on here. ``given`` (the user's ``--env MASTER_PORT``) is
    checked the same way and refused when it is taken. Where the master is another host, the
    port is drawn unchecked: it can only be checked there."""
    here = is_this_host(master)
    if given is not None:
        problem = bind_problem(given) if here else None
        if problem:
            raise PortError(f"MASTER_PORT {given} (the job's --env) cannot be listened on at {master} ({problem}): "
                             f"another process holds it (another job, or another user's program that the "
                             f"launcher would connect to). Leave MASTER_PORT out (hpcdist picks a free port) "
                             f"or give another")
        return given
    for _ in range(PORT_TRIES if here else 1):
        port = PORT_BASE + int.from_bytes(os.urandom(4), "big") % PORT_SPAN
        if not here or bind_problem(port) is None:
            return port
    raise PortError(f"no free master port here: {PORT_TRIES} ports drawn in {PORT_BASE}-{PORT_BASE + PORT_SPAN - 1} "
                     f"were all in use at {master}. Free some, or give one with --env MASTER_PORT=<free port>")


def bind_problem(port: int) -> "str | None":
    """Why ``port`` cannot be listened on at every address of this host, as torch's store
    listens (IPv6 and IPv4), or None when it can."""
    import _socket  # socket.py's own imports (enum, selectors) would double job-setup's cost

    for family, address in ((_socket.AF_INET6, "::"), (_socket.AF_INET, "0.0.0.0")):
        try:
            sock = _socket.socket(family, _socket.SOCK_STREAM)
        except OSError:  # no IPv6 on this host
            continue
        try:
            # As torch's store: a closed connection's TIME_WAIT on the port is no listener.
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
            sock.listen(1)
        except OSError as e:
            return e.strerror or str(e)
        finally:
            sock.close()
    return None


def is_this_host(master: str) -> bool:
    """Whether ``master`` names this host: a loopback address, or this host's name (short or
    full, as node lists write either)."""
    if master in ("localhost", "::1") or master.startswith("127."):
        return True
    name = os.uname().nodename  # gethostname(), without importing socket
    return master == name or master.split(".", 1)[0] == name.split(".", 1)[0]
