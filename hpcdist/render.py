"""From a :class:`~hpcdist.spec.JobSpec` to a job script, through Jinja templates.

Every value reaches the script shell-quoted (``finalize``), unless it is a
:class:`~hpcdist.shell.Shell` word or passes the ``raw`` filter
(user directives, which the user owns, and lines built by
:mod:`hpcdist.launch_commands`). Templates are looked up first in the
user's template folder, then in hpcdist's own (``templates/`` in the
repository, ``hpcdist/templates`` in the wheel). Undefined names are errors.
"""

from __future__ import annotations

import functools
import os

from hpcdist import __version__, jobs, validate
from hpcdist.launch_commands import hostfile_format, launch_lines
from hpcdist.launchers.mpi import propagated
from hpcdist.shell import Shell, quote
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
    return quote(str(value))


def _cache_dir() -> str | None:
    """``$XDG_CACHE_HOME/hpcdist/jinja2`` (``~/.cache/...``), private; None when it cannot be had.

    Not jinja2's default, ``/tmp/_jinja2-cache-<uid>``: a predictable name in a
    shared folder, which anyone can take first (jinja2 then refuses to render).
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "hpcdist", "jinja2")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isabs(path) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return path


def environment(user_template: str | None = None, user_dir: str | None = None):
    """Templates from the user's file's folder, then ``user_dir``, then ours.

    Ours are also reachable as ``hpcdist/<name>``, so that a user's
    ``slurm/job.sh.j2`` can ``{% extends "hpcdist/slurm/job.sh.j2" %}``.
    One environment per folder pair and process: jinja2 keeps the compiled
    templates in it, and checks their files' times on each use (auto_reload).
    """
    folder = os.path.dirname(os.path.abspath(user_template)) if user_template else None
    return _environment(folder, user_dir)


@functools.lru_cache(maxsize=16)
def _environment(folder: str | None, user_dir: str | None):
    import jinja2

    search = [folder] if folder else []
    search += [user_dir] if user_dir else []
    ours = jinja2.FileSystemLoader(templates_dir())
    cache = _cache_dir()
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([
            jinja2.PrefixLoader({"hpcdist": ours}), jinja2.FileSystemLoader(search), ours]),
        # Compiled templates are cached (in the user's private cache folder): a
        # dry run should cost little more than importing jinja2.
        bytecode_cache=jinja2.FileSystemBytecodeCache(cache) if cache else None,
        undefined=jinja2.StrictUndefined,
        finalize=_quote,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(
        raw=Shell,
        sbatch_value=_sbatch_value,
        slurm_time=validate.format_slurm_time,
        pbs_walltime=validate.format_pbs_walltime,
        slurm_mem=validate.format_slurm_mem,
        pbs_mem=validate.format_pbs_mem,
    )
    return env


def _sbatch_value(value) -> Shell:
    """A value in an ``#SBATCH`` line: sbatch reads "double quotes" there, not the
    shell's 'single quotes' (it would split ``'a b'`` at the space)."""
    text = str(value)
    if text and not any(c.isspace() or c in "'\"\\" for c in text):
        return Shell(text)
    if '"' in text:
        raise validate.ValidationError(
            "--output", text, "sbatch cannot read a double quote in an #SBATCH value.",
            "Submit from (or write the log to) a folder whose path has no '\"'.")
    return Shell(f'"{text}"')


def _check_folder(path: str, what: str) -> str:
    try:
        return validate.check_text(path, what)
    except validate.ValidationError as e:
        raise validate.ValidationError(e.field, e.value, e.rule, "Rename the folder, or submit from another one.") from None


def render(spec: JobSpec, *, command_line: str | None = None, workdir: str | None = None,
           job_dir: str | None = None) -> str:
    """The job script. ``job_dir`` (set by ``hpcdist submit``) is where it records its exit code.

    ``workdir`` and ``job_dir`` come from the file system, not from a flag: a
    line break in them would split a directive line (``#SBATCH --output=``
    holds the job folder), so they are checked like the flags' values.
    """
    workdir = _check_folder(workdir or os.getcwd(), "the folder you submit from")
    for name, value in (("the job folder", job_dir), ("--output", spec.output)):
        if value is not None:
            _check_folder(value, name)
    env = environment(spec.template, spec.template_dir)
    name = os.path.basename(spec.template) if spec.template else f"{spec.scheduler}/job.sh.j2"
    template = env.get_template(name)
    return template.render(
        spec=spec,
        version=__version__,
        command_line=command_line,
        submit_command=SUBMIT_ARGV[spec.scheduler][0],
        workdir=workdir,
        job_dir=job_dir,
        job_files=jobs.script_context(job_dir),
        hostfile_format=hostfile_format(spec),
        propagated=propagated(spec),
        launch_lines=[Shell(line) for line in launch_lines(spec)],
    )
