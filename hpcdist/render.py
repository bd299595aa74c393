"""From a :class:`~hpcdist.spec.JobSpec` to a job script, through Jinja templates.

Every value reaches the script shell-quoted (``finalize``), unless it is a
:class:`~hpcdist.launch_commands.Shell` word or passes the ``raw`` filter
(user directives, which the user owns, and lines built by
:mod:`hpcdist.launch_commands`). Templates are looked up first in the
user's template folder, then in hpcdist's own (``templates/`` in the
repository, ``hpcdist/templates`` in the wheel). Undefined names are errors.
"""

from __future__ import annotations

import os
import shlex

from hpcdist import __version__, validate
from hpcdist.launch_commands import Shell, hostfile_format, launch_lines, propagated
from hpcdist.spec import JobSpec

#: How each scheduler takes a script.
SUBMIT_ARGV = {"slurm": ("sbatch", "--parsable"), "pbs": ("qsub",), "local": ("bash",)}


def submit_argv(scheduler: str, script: str, log: str) -> list[str]:
    """The exact submit command (the backends run it; --dry-run shows it).

    PBS gets the log path on the command line too: some qsub front ends (Slurm's
    Torque wrapper) ignore ``#PBS -o``, and the command line wins anyway.
    """
    extra = ["-o", log, "-j", "oe"] if scheduler == "pbs" else []
    return [*SUBMIT_ARGV[scheduler], *extra, script]


def templates_dir() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "templates")
    return installed if os.path.isdir(installed) else os.path.join(os.path.dirname(here), "templates")


def _quote(value) -> str:
    if isinstance(value, Shell):
        return str(value)
    if value is None:
        raise ValueError("a template printed None: a value it uses is unset (check the template's `if`s)")
    if isinstance(value, bool):
        raise ValueError("a template printed a bool: test it with `if` instead")
    return shlex.quote(str(value))


def environment(user_template: str | None = None, user_dir: str | None = None):
    """Templates from the user's file's folder, then ``user_dir``, then ours.

    Ours are also reachable as ``hpcdist/<name>``, so that a user's
    ``slurm/job.sh.j2`` can ``{% extends "hpcdist/slurm/job.sh.j2" %}``.
    """
    import jinja2

    search = [os.path.dirname(os.path.abspath(p)) for p in (user_template,) if p]
    search += [user_dir] if user_dir else []
    ours = jinja2.FileSystemLoader(templates_dir())
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([
            jinja2.PrefixLoader({"hpcdist": ours}), jinja2.FileSystemLoader(search), ours]),
        # Compiled templates are cached (in a private temporary folder): a
        # dry run should cost little more than importing jinja2.
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
        undefined=jinja2.StrictUndefined,
        finalize=_quote,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(
        raw=Shell,
        slurm_time=validate.format_slurm_time,
        pbs_walltime=validate.format_pbs_walltime,
        slurm_mem=validate.format_slurm_mem,
        pbs_mem=validate.format_pbs_mem,
    )
    return env


def render(spec: JobSpec, *, command_line: str | None = None, workdir: str | None = None,
           job_dir: str | None = None) -> str:
    """The job script. ``job_dir`` (set by ``hpcdist submit``) is where it records its exit code."""
    env = environment(spec.template, spec.template_dir)
    name = os.path.basename(spec.template) if spec.template else f"{spec.scheduler}/job.sh.j2"
    template = env.get_template(name)
    return template.render(
        spec=spec,
        version=__version__,
        command_line=command_line,
        submit_command=SUBMIT_ARGV[spec.scheduler][0],
        workdir=workdir or os.getcwd(),
        job_dir=job_dir,
        hostfile_format=hostfile_format(spec),
        propagated=propagated(spec),
        launch_lines=[Shell(line) for line in launch_lines(spec)],
    )
