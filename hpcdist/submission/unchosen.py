"""The scheduler nobody chose: when the local default stands for a job meant for a cluster.

``local`` is hpcdist's default scheduler, a first try on this machine. A job of several nodes typed
on a login node (where sbatch or qsub is) with no ``--scheduler`` was meant for the cluster: run as
typed, all its ranks started on the login node without a word (issue 50). The rule is here alone;
:func:`hpcdist.cli.common.job_spec` refuses such a submit, and warns for render and a dry run,
which run nothing.
"""

from __future__ import annotations


def unchosen_local(profile: dict, flags: dict, spec) -> str | None:
    """Why ``spec`` should not run on the local scheduler, or None: it asks for more than one node,
    its scheduler is local only because none was chosen (no ``--scheduler`` among ``flags``, no
    ``scheduler`` in the ``profile``), and a cluster's submit command is on PATH."""
    chosen = flags.get("scheduler") is not None or "scheduler" in profile
    if chosen or spec.nodes < 2:
        return None
    import shutil  # not at the top: only a job of several nodes with no scheduler gets here

    from hpcdist.schedulers import QUEUED
    from hpcdist.schedulers import registry as schedulers

    if schedulers.get(spec.scheduler).queued:  # a default with a queue submits to the cluster
        return None
    # Each scheduler's own command (sbatch, qsub), named where it is defined.
    found = [(name, schedulers.get(name).submit_program) for name in QUEUED]
    found = [(name, program) for name, program in found if shutil.which(program)]
    if not found:
        return None
    here = " and ".join(program for _, program in found) + (" is" if len(found) == 1 else " are")
    give = " or ".join(f"--scheduler {name}" for name, _ in found)
    ranks, nodes = spec.nodes * spec.procs_per_node, spec.nodes
    return (f"--scheduler not given, so {spec.scheduler}: all {ranks} ranks of --nodes {nodes} "
            f"would start on this machine, though {here} here; give {give} to submit to the "
            f"cluster, or --scheduler {spec.scheduler} to run them here on purpose")
