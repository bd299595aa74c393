"""The schedulers hpcdist submits to, one module each: everything that differs between them.

Where it runs: on the login node (``<name>.py``: rules, submit, status, cancel) and inside the job
(``<name>_job.py``: the job's id and allocation, light enough for every rank).

Each module (``local``, ``slurm``, ``pbs``; ``pbs_qstat`` reads qstat) holds one
:class:`~hpcdist.schedulers.base.Scheduler`: its rules for the job spec (directives, job
names, value formats, dialects), its template, its submit command and job ids, status
queries, cancel, requeue, how it starts one agent per node, and the variables it gives a
job. What they share: ``base`` (ids, states, errors, the interface), ``job_ids`` (each
scheduler's id grammar, which ``base.JobId`` reads), ``batch`` (running the commands of a
scheduler with a queue, submitting) and ``rules`` (job names, directive lines, read from each
scheduler's data). Adding a scheduler is one module here, its name in :data:`NAMES` (and the
rows below), and its template ``<name>.sh.j2`` beside it.

This package holds only names: what the shared modules and the CLI need to know of every
scheduler without loading one. Finding a scheduler by name is :mod:`hpcdist.schedulers.registry`'s
(``get``, ``all_schedulers``, the checks by scheduler name): it sits above the scheduler modules,
which import this package and never the registry, so that no import goes round in a circle.
"""


#: The schedulers hpcdist renders for, in --scheduler's order ("local" runs the job script here).
NAMES = ("local", "slurm", "pbs")
#: Those with a queue: they read directives, a job may go back to them, their ids have a grammar.
QUEUED = ("slurm", "pbs")
#: The dialects of a scheduler whose kinds read different directives (what each means is its
#: module's): named here so that --dialect's choices need not import the module.
DIALECTS = {"pbs": ("pro", "torque")}
PBS_DIALECTS = DIALECTS["pbs"]

# What a shared check says of another scheduler than the one in use ("only PBS has dialects",
# "is a PBS directive, but --scheduler is slurm"): named here, as each module has it (its class's
# title, directive_prefix and elastic_agents; tests/test_layout.py holds them equal), so that
# base and rules need not load every scheduler to word a message.
#: Each scheduler as people write it.
TITLES = {"local": "local", "slurm": "Slurm", "pbs": "PBS"}
#: Each directive prefix, by the scheduler that reads it (in :data:`NAMES` order).
DIRECTIVE_PREFIXES = {"slurm": "#SBATCH", "pbs": "#PBS"}
#: Those whose job's agents may lose a node and go on (--min-nodes).
ELASTIC = ("slurm",)

__all__ = ["NAMES", "QUEUED", "DIALECTS", "PBS_DIALECTS", "TITLES", "DIRECTIVE_PREFIXES", "ELASTIC",
           "template_folders"]


def template_folders() -> list:
    """Where hpcdist's own templates lie: the shared ones (``job.sh.j2``) in this package's folder,
    then each scheduler's (``<name>.sh.j2``) in its own folder; for each folder the package is
    found in."""
    import os

    return [os.path.join(base, *where) for base in __path__ for where in ((), *((name,) for name in NAMES))]
