"""From a :class:`~hpcdist.submission.spec.JobSpec` to a job script, through Jinja templates.

Every value reaches the script shell-quoted (``finalize``), unless it is a
:class:`~hpcdist.shell.Shell` word or passes the ``raw`` filter
(user directives, which the user owns, and the lines a launcher builds:
:mod:`hpcdist.launchers`). Templates are looked up first in the
user's template folder, then in hpcdist's own (``templates/`` in the
repository, ``hpcdist/templates`` in the wheel). Undefined names are errors.

Templates run in Jinja's sandbox (:class:`_Sandbox`): a template found in a folder a profile
names (``./hpcdist.toml`` is picked up by itself) may read values and call filters and
macros, but not reach Python (``lipsum.__globals__``) nor call hpcdist's own methods (the
scheduler it gets could otherwise submit or cancel).
"""

from __future__ import annotations

import functools
import os
import textwrap

from hpcdist import __version__, containers, jobs, launchers, validate
from hpcdist.schedulers import registry as schedulers
from hpcdist.launchers.mpi import FLAVOURS, MPI_ENV
from hpcdist.submission.options import BY_NAME, SETUP_END, module_words
from hpcdist.shell import Shell, command_lines, quote, var
from hpcdist.submission.spec import JobSpec

# jinja2 is imported where a template is rendered, not here: `hpcdist status`, `logs` and
# `cancel` import this module (through hpcdist.submission.submit) and render nothing.


def launch(spec: JobSpec, scheduler, launcher, hpcdist: list, wrapper: str | None = None) -> tuple:
    """``(lines, comment)``: the shell lines that start the training on every node, and what they
    do, for the comment above them. The launcher's setup, then its command, spread one agent per
    node by the scheduler where the launcher runs per node. With a container the launcher runs in
    it, unless it starts the ranks itself (srun, mpirun: then each rank's program is in it,
    :func:`hpcdist.launchers.rank_program`). ``wrapper`` (--stage-env): each node's agent, or each
    rank's program, runs through it (:mod:`hpcdist.submission.stage`)."""
    # The launcher's own python (its setup lines; the rank's, under srun and mpirun): the node's own copy.
    staged = spec
    if wrapper:
        import dataclasses  # --stage-env only: its import is ~3% of a render

        staged = dataclasses.replace(spec, python=Shell(f"{quote(wrapper)} {quote(spec.python)}"))
    if launcher.starts_ranks:
        spec = staged
        words = launcher.words(spec)
    else:
        words = launcher.words(spec)
        if wrapper:
            from hpcdist.submission import stage  # --stage-env only: `status`, `logs`, `cancel` load none of it

            words = stage.wrapped(words, wrapper)
        words = containers.wrap(spec, words)
    if launcher.per_node(spec):
        mpi = FLAVOURS[spec.mpi]
        return (launcher.setup(staged) + scheduler.spread(spec, words, hpcdist, mpi),
                launcher.describe(spec, " " + scheduler.spreader(spec, mpi)))
    return launcher.setup(staged) + [command_lines(words)], launcher.describe(spec)


def launch_lines(spec: JobSpec) -> list[str]:
    """The launch's lines alone (the tests read them)."""
    launcher = launchers.get(spec.launcher)
    return launch(spec, schedulers.get(spec.scheduler, spec.dialect), launcher,
                  launchers.hpcdist_command(spec))[0]


#: job-setup's flags that pass variables to the other nodes (``--pass`` names more of them).
PASSING = {"--deepspeed-env", "--mpi-env"}


def job_setup(spec: JobSpec, scheduler, launcher, launch: list, job_dir: str | None = None) -> tuple:
    """``(line, comment)``: the one call of ``hpcdist job-setup`` (:mod:`hpcdist.injob.job_setup`) that
    prepares what this launch reads, and what it prepares, for the comment above it. With a job
    folder, it also checks that this run is the job recorded there (and records its start where
    the job may be requeued)."""
    words = [*launchers.hpcdist_command(spec, in_image=True), "job-setup", "--scheduler", spec.scheduler]
    if not scheduler.one_host:
        words += ["--nodes", str(spec.nodes)]
    if spec.shrinks:  # a restart may go on with fewer nodes: the launch reads $HPCDIST_NNODES
        words += ["--min-nodes", str(spec.min_nodes)]
    words += ["--dir", var("run_dir")]
    if spec.excluded_nodes and not scheduler.excludes_nodes:
        words += ["--exclude", ",".join(spec.excluded_nodes)]
    what = "The nodes"
    fmt = launcher.hostfile_format(spec)
    if fmt:
        # Every "node" of a local job is this host: one line with all their slots.
        words += ["--hostfile", f"{fmt}:{spec.total_procs if scheduler.one_host else spec.procs_per_node}"]
        what += f" and a hostfile for {launcher.name}"
    flags = launcher.job_setup(spec) + (["--mpi-env"] if any(MPI_ENV in line for line in launch) else [])
    if set(flags) & PASSING or spec.pbs_spread == "pbsdsh":  # the other nodes get the variables named here
        names = [k for k, _ in spec.env + spec.env_expand] + list(spec.propagate)
        flags += [w for name in dict.fromkeys(names) for w in ("--pass", name)]
    for name, value in spec.env:  # a master the user set (--env) stays the job's
        if name in ("MASTER_ADDR", "MASTER_PORT"):
            flags += [f"--{name.lower().replace('_', '-')}", value]
        if name == "MASTER_PORT" and launcher.name == "none":
            # Nothing hpcdist starts listens on it: the script does what it likes with it (doctor's
            # job reports a port taken itself).
            flags.append("--port-unchecked")
    if job_dir:
        flags += ["--job-dir", var("job_dir"), "--run-id", Shell(f'"{scheduler.recorded_id_shell}"')]
        # Each run's start, where the scheduler may run the script again by itself (an array's
        # subjobs are runs of their own: each would read as a restart).
        again = scheduler.requeues_by_itself and not spec.array
        flags += ["--record-start"] if spec.stops_on_warning or again else []
    if "--hold-store" in flags:
        here = "this host" if scheduler.one_host else "this node"
        said = f"{here} is the master and holds torchrun's store on a free port drawn at random"
    else:
        master = "this host" if scheduler.one_host else "the first node"
        said = f"the master is {master}, its port a free one drawn at random"
    return command_lines(words + flags + [Shell("|| {")]) + "\n" + hpcdist_check(spec), f"{what}; {said}."


#: The exit status of a job whose python cannot import hpcdist: a shell's for a command not found.
NO_HPCDIST_STATUS = 127


def hpcdist_check(spec) -> str:
    """The lines that end the brace group ``hpcdist job-setup``'s line opens where it fails (it is the
    script's first call of hpcdist; ``$status`` keeps its status): only then a probe of whether
    the job's python can import hpcdist at all, and where it cannot, one line that names it and
    the fix (:func:`hpcdist.failures.first_failure` quotes it), and the job ends with
    :data:`NO_HPCDIST_STATUS`. Any other failure of the set-up ends it with its own status."""
    words = launchers.hpcdist_command(spec, in_image=True)
    if words[-2:] == ["-m", "hpcdist"]:
        probe = words[:-2] + ["-c", "import hpcdist", Shell("2>/dev/null")]
        python = quote(str(words[-3]))
        if containers.get(spec) is not None:
            said = [f"hpcdist: {python} in the image on $HOSTNAME cannot import hpcdist;",
                    "install hpcdist in the image, or give --python the image's python that has it"]
        else:
            said = [f"hpcdist: $(command -v {python} || echo {python}) on $HOSTNAME cannot import hpcdist;",
                    "give the job a python that has it: --venv PATH, --conda ENV, --module NAME or --python PATH"]
    else:  # the hpcdist command (pyxis, the doctor's job)
        probe = [Shell("command -v hpcdist >/dev/null")]
        said = ["hpcdist: the job on $HOSTNAME cannot find the hpcdist command;",
                "give it an environment that has it: --venv PATH, --conda ENV or --module NAME"]
    return (command_lines(probe + [Shell('&& exit "$status"')], first="  status=$?; ", indent="    ") + "\n"
            f'  echo >&2 "{said[0]}" \\\n    "{said[1]}"\n  exit {NO_HPCDIST_STATUS}; }}')


def user_setup(spec: JobSpec) -> dict:
    """The user's setup lines (``--setup``, then ``--setup-file``'s), as written, for the batch
    shell or, written to a file, for every node (``--setup-on``), with the scheduler's line
    that runs that file once on each node."""
    lines = [line for item in spec.setup for line in item.splitlines()]
    if spec.setup_file:
        try:
            with open(spec.setup_file, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise validate.ValidationError("--setup-file", spec.setup_file, f"cannot be read ({e}).",
                                           "Give a readable UTF-8 text file.") from None
        lines += BY_NAME["setup"].check(text, BY_NAME["setup_file"], spec.scheduler).splitlines()
    source = " and ".join(flag for flag, given in (("--setup", spec.setup), (f"--setup-file {spec.setup_file}",
                                                                          spec.setup_file)) if given)
    lines = [Shell(line) for line in lines]
    every = bool(lines) and spec.setup_on == "every-node"
    spread = []
    if every:
        spread = schedulers.get(spec.scheduler, spec.dialect).spread(
            spec, ["bash", "-e", Shell('"$run_dir/setup.sh"')], launchers.hpcdist_command(spec),
            FLAVOURS[spec.mpi])
    return dict(source=source, end=SETUP_END, batch=[] if every else lines, every_node=lines if every else [],
                spread=[Shell(line) for line in spread])


def templates_dir() -> list:
    """hpcdist's own templates: the shared ones in ``hpcdist/schedulers``, each scheduler's in its
    folder (``hpcdist/schedulers/slurm/slurm.sh.j2``), all named as one flat set (``slurm.sh.j2``,
    ``hpcdist/slurm.sh.j2``) as before the folders."""
    from hpcdist.schedulers import template_folders

    return template_folders()


def _quote(value) -> str:
    if isinstance(value, Shell):
        return str(value)
    if value is None or isinstance(value, bool):
        from jinja2 import TemplateRuntimeError  # jinja2 is loaded: a template is rendering

        raise TemplateRuntimeError("it printed None: a value it uses is unset (check the template's `if`s)"
                                   if value is None else "it printed a bool: test it with `if` instead")
    return quote(str(value))


def _cache_dir() -> str | None:
    """``$XDG_CACHE_HOME/hpcdist/jinja2-sandboxed`` (``~/.cache/...``), private; None when it cannot be had.

    Not jinja2's default, ``/tmp/_jinja2-cache-<uid>``: a predictable name in a
    shared folder, which anyone can take first (jinja2 then refuses to render).
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # Not the unsandboxed templates' folder: compiled code records how calls are made
    # (sandboxed or not), and jinja2's cache keys hold only the template's name and source.
    path = os.path.join(base, "hpcdist", "jinja2-sandboxed")
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


#: The most characters (or items, or bits) one ``*`` or ``**`` of a template may make.
MAX_TEMPLATE_VALUE = 1_000_000

#: Python's own errors a template's expression can raise (``{{ 1/0 }}``, ``{{ 'a' + 1 }}``, a
#: macro that calls itself, a number of 5,000 digits): one line each, as Jinja's own.
TEMPLATE_RUNTIME_ERRORS = (ArithmeticError, TypeError, ValueError, LookupError, AttributeError, RecursionError,
                           MemoryError)


class TemplateTooBig(ArithmeticError):
    """A template's ``*`` or ``**`` past :data:`MAX_TEMPLATE_VALUE`."""


def _sandbox_class():
    from jinja2.sandbox import SandboxedEnvironment  # see the note at the top

    class _Sandbox(SandboxedEnvironment):
        """Jinja's sandbox (no ``_``-attributes, no function internals), and no call to a
        method of hpcdist's own objects: the values a template gets are to read. ``*`` and
        ``**`` are bounded (:data:`MAX_TEMPLATE_VALUE`): ``'x' * 10**9`` took 20 s and 1.7 GB."""

        intercepted_binops = frozenset(["*", "**"])

        def is_safe_callable(self, obj) -> bool:
            module = getattr(obj, "__module__", None) or ""
            return super().is_safe_callable(obj) and module.split(".")[0] != "hpcdist"

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, times in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and \
                            len(seq) * times > MAX_TEMPLATE_VALUE:
                        raise TemplateTooBig(f"{len(seq)} item(s) times {times} is more than a job script holds "
                                             f"({MAX_TEMPLATE_VALUE:,})")
            elif isinstance(left, int) and isinstance(right, int) and right > 0 and \
                    max(left.bit_length(), 1) * right > MAX_TEMPLATE_VALUE:
                raise TemplateTooBig(f"{left} ** {right} is a larger number than a job script holds")
            return super().call_binop(context, operator, left, right)

    return _Sandbox


@functools.lru_cache(maxsize=16)
def _environment(folder: str | None, user_dir: str | None):
    import jinja2  # see the note at the top

    search = [folder] if folder else []
    search += [user_dir] if user_dir else []
    ours = jinja2.FileSystemLoader(templates_dir())
    cache = _cache_dir()
    env = _sandbox_class()(
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
    env.filters = _Filters(env.filters, raw=Shell, module=_module_command, command=_command)
    return env


def _command(words) -> Shell:
    """The words as one command, each quoted unless raw, its long line broken with `` \\``
    continuations (:func:`hpcdist.shell.command_lines`)."""
    return Shell(command_lines([words] if isinstance(words, str) else list(words)))


def _module_command(value: str) -> Shell:
    """The words after ``module`` for a --module value, each quoted: ``load cuda/12.1``, ``use /soft/x``."""
    return Shell(" ".join(quote(w) for w in module_words(value)))


class _Filters(dict):
    """Jinja's filters, and each scheduler's value formats (slurm_time, pbs_mem ...): a user's
    template may use any scheduler's. The scheduler rendered for adds its own
    (:func:`render`); the others' are added the first time a template asks for a name that
    is missing, so that a render imports no other scheduler's module."""

    def _all(self) -> None:
        for scheduler in schedulers.all_schedulers():
            self.update(scheduler.filters)

    def __missing__(self, name):  # a compiled template's lookup
        self._all()
        return dict.__getitem__(self, name)

    def get(self, name, default=None):  # the compiler's
        if name not in self:
            self._all()
        return dict.get(self, name, default)


def _check_folder(path: str, what: str) -> str:
    try:
        return validate.check_text(path, what)
    except validate.ValidationError as e:
        raise validate.ValidationError(e.field, e.value, e.rule,
                                       "Rename the folder, or submit from another one.") from None


def _job_files(job_dir: str | None, spec, scheduler):
    """The job folder's values for the template (:mod:`hpcdist.jobs.job_files`; its lines are
    ``job_folder.sh.j2``'s), and the job's monitor's; None without a folder (`hpcdist render`)."""
    if not job_dir:
        return None
    from hpcdist.jobs import job_files  # `hpcdist render` writes no job folder: it loads none of this

    files = job_files.script_context(job_dir, scheduler.array_index_variable if spec.array else None,
                                     scheduler.job_id_variable, Shell(scheduler.recorded_id_shell))
    # The job's monitor (hpcdist.progress.monitor): the hpcdist it runs and, in a container job,
    # only where the host has one (the image's cannot see this shell).
    hpcdist = launchers.hpcdist_command(spec)
    monitor = [*hpcdist, "monitor", "--dir", files["progress_dir"], "--pid", Shell("$$")]
    if spec.hang_floor_s is not None:
        monitor += ["--hang-floor", str(spec.hang_floor_s)]
    if spec.hang_timeout_s is not None:
        monitor += ["--hang-timeout", str(spec.hang_timeout_s)]
    if spec.restarts_launch:
        monitor.append("--restarts")
    return {**files, "hpcdist": hpcdist, "monitor": _command(monitor),
            "monitor_if_found": containers.get(spec) is not None}


def render(spec: JobSpec, *, command_line: str | None = None, workdir: str | None = None,
           job_dir: str | None = None, sweep=None) -> str:
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
    scheduler = schedulers.get(spec.scheduler, spec.dialect)
    env.filters.update(scheduler.filters)
    name = os.path.basename(spec.template) if spec.template else scheduler.template
    launcher = launchers.get(spec.launcher)
    import jinja2  # imported by environment() already

    if sweep is not None:  # a sweep's array (sweeps.arrays.Part): subjob i's set after the args
        spec = sweep.apply(spec)
    context = _context(spec, scheduler, launcher, command_line, workdir, job_dir)
    context["sweep"] = sweep and sweep.context()
    try:
        return env.get_template(name).render(**context)
    except validate.ValidationError:  # a value a filter refused: its own message
        raise
    except (jinja2.TemplateError, *TEMPLATE_RUNTIME_ERRORS) as e:
        raise _template_error(e, env, name) from None


def _template_error(error, env, name: str) -> validate.ValidationError:
    """A template that cannot be rendered, as one line: the file, the line, what is wrong."""
    from jinja2.sandbox import SecurityError  # jinja2 is loaded: a template was rendering

    where, line = getattr(error, "filename", None), getattr(error, "lineno", None)
    if not where:  # a runtime error: jinja2 put the template's own line in the traceback
        import traceback  # only for a template that fails (it costs a render 1%)

        frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.endswith(".py")]
        where, line = (frames[-1].filename, frames[-1].lineno) if frames else (_template_file(env, name), None)
    if isinstance(error, SecurityError):
        rule = (f"{str(error).rstrip('.')}: a template may read the values it is given and use filters and macros, "
                "not reach Python or call hpcdist's methods.")
    elif isinstance(error, TemplateTooBig):
        rule = f"{error}."
    elif isinstance(error, RecursionError):
        rule = "RecursionError: a macro calls itself without end."
    else:
        rule = f"{type(error).__name__}: {getattr(error, 'message', None) or error}."
    return validate.ValidationError("template", f"{where}:{line}" if line else where, rule,
                                    "Fix the template (hpcdist/schedulers/TEMPLATES.md says what "
                                    "it gets), or use hpcdist's own.")


def _template_file(env, name: str) -> str:
    """The file ``name`` was loaded from, for messages (the name itself when not found)."""
    try:  # its source alone: a template that fails to compile (a number of 5,000 digits) is still named
        return env.loader.get_source(env, name)[1] or name
    except Exception:  # noqa: BLE001 - only for the message: the template may not even load
        return name


def submit_by_hand(scheduler, workdir: str, job_dir: str | None) -> str:
    """The header's command that submits this script again as hpcdist did: from the submit folder
    (the job starts there: PBS's $PBS_O_WORKDIR, Slurm's $SLURM_SUBMIT_DIR), naming the script by
    its path from there. Rendered alone, the script is wherever the user writes it."""
    if not job_dir:
        return f"{scheduler.submit_program} <this file>"
    script = os.path.relpath(os.path.join(job_dir, jobs.SCRIPT), workdir)
    return f"cd {quote(workdir)} && {scheduler.submit_program} {quote(script)}"


def _context(spec, scheduler, launcher, command_line, workdir, job_dir) -> dict:
    """What a template gets (hpcdist/schedulers/TEMPLATES.md lists it)."""
    hpcdist = launchers.hpcdist_command(spec)
    staged = _stage(spec, scheduler, launcher, workdir)
    lines, launch_comment = launch(spec, scheduler, launcher, hpcdist, staged and staged["wrapper"])
    setup_line, allocation_comment = job_setup(spec, scheduler, launcher, lines + (staged["lines"] if staged else []),
                                               job_dir)
    # The job folder's copy of the script where there is one: PBS's own copy ("$0", in the mom's
    # folder) of a job PBS ran again (preempted by requeue, qrerun) may be gone by then.
    script = os.path.join(job_dir, jobs.SCRIPT) if job_dir else Shell('"$0"')
    requeue = [*hpcdist, "requeue", "--scheduler", spec.scheduler, "--max", str(spec.requeue), "--script",
               script] + (["--job-dir", Shell('"$job_dir"')] if job_dir else [])
    return dict(
        spec=spec,
        version=__version__,
        # The command as typed, cut into lines for the header's comments.
        command_lines=textwrap.wrap(command_line, 96, break_long_words=False, break_on_hyphens=False)
        if command_line else [],
        scheduler=scheduler,
        submit_command=submit_by_hand(scheduler, workdir, job_dir),
        directives=scheduler.directives(spec),
        workdir=workdir,
        job_dir=job_dir,
        job_files=_job_files(job_dir, spec, scheduler),
        job_setup=Shell(setup_line),
        allocation_comment=allocation_comment,
        launch_lines=[Shell(line) for line in lines],
        launch_comment=launch_comment,
        # Requeued: this run's end is not the job's end (the next run records it).
        requeue=Shell(command_lines(requeue + [Shell('&& exit_file=""'), Shell("|| status=$?")], width=96)),
        # The user's own lines (--setup, --setup-file), where --setup-on puts them.
        setup=user_setup(spec),
        # --max-restarts: the command that judges a failed launch and prepares the next (hpcdist.injob.restart).
        restart=_restart(spec, hpcdist, job_dir),
        preflight=_preflight(spec, hpcdist),
        # The allocation's files where the image sees them (hpcdist.containers).
        container_lines=[Shell(line) for line in containers.script_lines(spec, scheduler.allocation_files)],
        # The image, exported once at the top: the lines below name it "$HPCDIST_IMAGE".
        image=containers.named_image(spec),
        # --stage-env: the environment copied to every node and unpacked there (hpcdist.submission.stage).
        stage=staged,
    )


def _restart(spec, hpcdist: list, job_dir: str | None) -> dict | None:
    """The restart loop's values (None without ``--max-restarts``, or when torchrun's elastic
    rounds restart the workers)."""
    if not spec.restarts_launch:
        return None
    words = [*hpcdist, "restart", "--dir", var("run_dir"), "--status", Shell('"$status"'), "--max",
             str(spec.max_restarts)] + (["--job-dir", Shell('"$job_dir"')] if job_dir else [])
    words += _stage_dir(spec)
    spares = " (one of the --spare-nodes in its place)" if spec.spare_nodes else ""
    if spec.shrinks:
        spares += (f"; with no spare left, the launch goes on with the nodes left, if at least "
                   f"{spec.min_nodes} (--min-nodes)")
    comment = (f"When the launch fails, hpcdist asks every node to answer and starts it again, at most "
               f"{spec.max_restarts} time{'s' if spec.max_restarts > 1 else ''} (--max-restarts): a node that "
               f"does not answer is left out{spares}; a fault in the training's own code ends the job.")
    return {"command": Shell(command_lines(words, width=94)), "comment": comment}


def _preflight(spec, hpcdist: list) -> dict | None:
    """The health check before the first launch (None without ``--preflight``)."""
    if not spec.preflight:
        return None
    spares = ", and one of the --spare-nodes takes its place" if spec.spare_nodes else ""
    comment = (f"Before the launch every node is asked to answer (--preflight): one that does not, or runs "
               f"another Python, hpcdist or torch, is left out{spares}; with none left, the job ends naming it.")
    words = [*hpcdist, "restart", "--preflight", "--dir", var("run_dir"), *_stage_dir(spec)]
    return {"command": Shell(command_lines(words, width=94)), "comment": comment}


def _stage_dir(spec) -> list:
    """The health check's words for the stage folder each node must be able to write (as
    written: its variables are each node's), with --stage-env."""
    return ["--stage-dir", spec.stage_dir] if spec.stage_env else []


def _stage(spec, scheduler, launcher, workdir) -> dict | None:
    """The staging block's values, with --stage-env (None without)."""
    if not spec.stage_env:
        return None
    from hpcdist.submission import stage

    stage.refuse(spec, launcher, scheduler)
    return stage.script(spec, scheduler, stage.plan(spec, workdir), FLAVOURS[spec.mpi])
