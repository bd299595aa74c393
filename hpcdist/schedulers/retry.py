"""A scheduler in trouble: which errors are worth another try, the bounded retry loop, and hints.

Slurm's and PBS's client commands fail in two different ways when the
controller (slurmctld, the PBS server) is down, restarting or overloaded:

* the connection itself fails ("Unable to contact slurm controller (connect
  failure)", PBS "cannot connect to server", "Connection refused"): the
  request never reached the controller, so nothing happened there;
* the connection worked but the answer did not come ("Socket timed out on
  send/recv operation", "(receive failure)", "Zero Bytes were transmitted or
  received"): the controller may well have acted on the request.

A query (squeue, sacct, qstat) changes nothing, so both kinds are retried.
A submission (sbatch, qsub) is not idempotent: after the second kind the job
may be queued already (the classic "sbatch timed out but my job is there"),
and submitting again would run it twice.  So a submission is retried only
after the first kind, which proves the job was not accepted; after the
second kind, and after a submit command that did not answer in time, the
user is told to look at the queue before submitting again.

Pure functions on text plus :func:`with_retries`; the texts are each scheduler's (its in-job
module). Its patterns are compiled on first use (:class:`~hpcdist.patterns.Pattern`): the modules
that run the commands import it at the top, and `hpcdist render` imports those.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Callable, TypeVar

from hpcdist.patterns import Pattern
from hpcdist.schedulers import QUEUED, job_side

T = TypeVar("T")

#: The longest wait between two tries, however many retries are allowed.
MAX_DELAY_S = 30.0

# The texts are each scheduler's (Slurm's slurm_errno.c and sbatch.c, PBS Pro's and Torque's
# qsub, qstat and pbs_iff), in its in-job side (hpcdist.schedulers.<name>.job, JOB_SIDE_QUEUED: a
# job's own requeue reads them too); the patterns here join every scheduler's.

def _in_job_modules() -> list:
    """The in-job side of each scheduler with a queue (its commands' texts are there)."""
    return [job_side(name) for name in QUEUED]


def _joined(kind: str) -> Pattern:
    return Pattern("|".join(text for module in _in_job_modules() for text in getattr(module, kind)), re.I)


# The request never reached the controller (or the controller refused it before taking it):
# safe to repeat, even a submission.
_NOT_SENT = _joined("NOT_SENT")
# The request may have reached the controller: a query can be repeated, a submission cannot.
_MAYBE_SENT = _joined("MAYBE_SENT")
# The client found no scheduler to talk to at all: no configuration, or a server name that does
# not resolve. Not transient: no retry, and the user is told what it means (on a login node, a
# site problem; elsewhere, no cluster is set up here).
_NOT_CONFIGURED = _joined("NOT_CONFIGURED")


def _matching_line(pattern: Pattern, text: str) -> str | None:
    """The last line of ``text`` where ``pattern`` matches, stripped: the most specific one
    (PBS says "Connection refused", then "qsub: cannot connect to server pbs01")."""
    found = [line for line in text.splitlines() if pattern.search(line)]
    return found[-1].strip().strip("'\"") if found else None


def not_configured(text: str) -> str | None:
    """The line saying the client has no scheduler to talk to (no configuration, no server name
    it can resolve), or None: Slurm's ``fatal:`` line (the lines before it are its causes), else
    the first that matches (PBS names the cause first, then "cannot connect to server")."""
    lines = [line.strip() for line in (text or "").splitlines() if _NOT_CONFIGURED.search(line)]
    if not lines:
        return None
    fatal = [line for line in (text or "").splitlines() if " fatal: " in line]
    return fatal[-1].strip() if fatal else lines[0]


def not_sent(text: str) -> str | None:
    """The line saying the request never reached the controller, or None (also when no
    scheduler is configured at all: another try cannot help)."""
    return None if not_configured(text) else _matching_line(_NOT_SENT, text or "")


def maybe_sent(text: str) -> str | None:
    """The line saying the controller did not answer after the request went out, or None."""
    return None if not_configured(text) else _matching_line(_MAYBE_SENT, text or "")


def unreachable(text: str) -> str | None:
    """The line saying the controller cannot be reached (either kind), or None: for queries."""
    return not_sent(text) or maybe_sent(text)


def with_retries(attempt: Callable[[], T], transient: Callable[[T], str | None], *, command: str,
                 retries: int, delay: float, sleep: Callable[[float], None] = time.sleep, err=None) -> T:
    """Run ``attempt`` up to ``retries + 1`` times while ``transient(result)`` names a transient error.

    Each retry says so on stderr, with the scheduler's own words and the wait:
    ``hpcdist: sbatch: <message>; retrying in 2 s (attempt 1 of 3)``.  The
    wait doubles each time (capped at :data:`MAX_DELAY_S`).  The last result
    is returned whatever it is: the caller turns it into an error.
    """
    total = retries + 1
    for k in range(1, total + 1):
        result = attempt()
        message = transient(result)
        if message is None or k == total:
            return result
        wait = min(delay * 2 ** (k - 1), MAX_DELAY_S)
        print(f"hpcdist: {command}: {message}; retrying in {wait:g} s (attempt {k} of {total})",
              file=err or sys.stderr, flush=True)
        sleep(wait)
    raise AssertionError("unreachable")  # the loop always returns


# Each scheduler's advice for the submission errors users meet most: (pattern, advice).
_HINTS = [(Pattern(pattern, re.I), advice) for module in _in_job_modules() for pattern, advice in module.HINTS]


def hint(text: str) -> str | None:
    """Advice for a submission error the scheduler explained, or None."""
    for pattern, advice in _HINTS:
        if pattern.search(text or ""):
            return advice
    return None
