"""What every scheduler shares: job states and ids, the error for output that cannot be read,
and the :class:`Scheduler` interface each scheduler module implements.

Nothing here knows one scheduler from another: a scheduler's own grammar (its job names, its
directives) is data or a method of its class in its own module, its job ids' grammar is in
its folder (``<name>/ids.py``, an :class:`~hpcdist.schedulers.job_ids.IdGrammar`), and what a
message says of the others is in the package's names (:mod:`hpcdist.schedulers`). This module
loads no scheduler: they import it (:mod:`hpcdist.schedulers.registry` finds one by name).
Running the commands is :mod:`~hpcdist.schedulers.batch`'s.

States
------
Each status parser maps the scheduler's word onto one of :data:`STATES` and
keeps the word itself in :attr:`JobStatus.raw`.  A state word it does not
know but that has the scheduler's shape (say a state added by a newer Slurm)
becomes :data:`UNKNOWN`; text without that shape is an error.

Every parser either returns a value or raises :class:`SchedulerOutputError`,
whose message quotes the scheduler's own stdout and stderr, so that a user
whose site wraps ``qsub`` in a script sees what that script said.
"""

from __future__ import annotations

from hpcdist.frozen import Frozen
from hpcdist.schedulers import DIALECTS, ELASTIC, NAMES, QUEUED, TITLES
from hpcdist.shell import BREAK, Shell, command_lines, single_quoted

# validate and rules (which imports validate) are imported by the checks that use them, not here:
# `hpcdist status` imports this module and checks no job spec (validate would cost it 3%).


# --------------------------------------------------------------------------
# States
# --------------------------------------------------------------------------

PENDING = "PENDING"  # queued, held, waiting, suspended: not (or no longer) running
RUNNING = "RUNNING"  # running, or still exiting/cleaning up
COMPLETED = "COMPLETED"  # finished with exit status 0
FAILED = "FAILED"  # finished with a non-zero exit status
CANCELLED = "CANCELLED"  # deleted by a user or an admin (scancel, qdel)
TIMEOUT = "TIMEOUT"  # killed at its time limit
PREEMPTED = "PREEMPTED"  # preempted and not requeued
NODE_FAIL = "NODE_FAIL"  # a node failed (or failed to boot)
OUT_OF_MEMORY = "OUT_OF_MEMORY"  # killed for exceeding its memory
REQUEUED = "REQUEUED"  # requeued: it will be pending again
UNKNOWN = "UNKNOWN"  # a state this module does not know (or PBS "moved")

STATES = frozenset(
    {PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY, REQUEUED, UNKNOWN}
)

#: The terminal states: a job in one of these will not run again by itself.
FINISHED_STATES = frozenset({COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY})
#: The ends a record may keep for good: nothing runs the job again after them. A job preempted,
#: or on a node that failed, may be requeued by Slurm itself (PreemptMode=REQUEUE, JobRequeue),
#: so its recorded end is asked about again.
FINAL_STATES = FINISHED_STATES - {PREEMPTED, NODE_FAIL}


class Record(Frozen):
    """A small frozen value (its fields are its ``__slots__``): equality, hash, repr and pickling
    by value, as a frozen dataclass has them (:mod:`hpcdist.frozen`)."""

    __slots__ = ()

    def _key(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"

    def __reduce__(self):
        return (type(self), self._key())


#: How JobStatus.raw ends for a queued job that the scheduler says can never start as asked
#: (PBS's "Can Never Run" comment): `--wait` stops there instead of waiting for ever.
NEVER_RUNS = "can never run"


class JobStatus(Record):
    """A job's state, as one of :data:`STATES`.

    ``exit_code`` is set for finished jobs only: the job's exit status, or
    128 + N when a signal N ended it; it may be negative for PBS's own
    codes (e.g. ``-29``, walltime).  ``raw`` is the scheduler's own state
    word (``CANCELLED by 0``, ``F``), and ``reason`` its explanation where it
    gives one (Slurm's pending reason, the PBS comment), else ``None``.
    """

    __slots__ = ("state", "exit_code", "raw", "reason")

    def __init__(self, state: str, exit_code: int | None = None, raw: str = "", reason: str | None = None):
        # Field by field, not in a loop: `hpcdist status` makes one or two per job.
        setter = object.__setattr__
        setter(self, "state", state)
        setter(self, "exit_code", exit_code)
        setter(self, "raw", raw)
        setter(self, "reason", reason)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


# --------------------------------------------------------------------------
# Errors, and the text a command printed
# --------------------------------------------------------------------------

#: How much of stdout and of stderr an error message quotes (head and tail).
MAX_QUOTED = 2000


def _trim(text: str, limit: int = MAX_QUOTED) -> str:
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


class SchedulerOutputError(ValueError):
    """A scheduler command's output could not be understood, or it failed.

    The message says what was expected and quotes the command's stdout and
    stderr (each trimmed to about :data:`MAX_QUOTED` characters).  The full
    texts are kept in :attr:`stdout` and :attr:`stderr`, the exit status in
    :attr:`returncode` (``None`` when not known), and the bare explanation in
    :attr:`problem`.
    """

    def __init__(
        self,
        problem: str,
        stdout: str = "",
        stderr: str = "",
        returncode: int | None = None,
        command: str = "the command",
    ) -> None:
        self.problem = problem
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.command = command
        parts = [problem]
        if returncode is not None:
            parts.append(f"{command} exit status: {returncode}")
        parts.append(f"--- {command} stdout ---")
        parts.append(_trim(stdout) if stdout.strip() else "(empty)")
        parts.append(f"--- {command} stderr ---")
        parts.append(_trim(stderr) if stderr.strip() else "(empty)")
        super().__init__("\n".join(parts))

    def __reduce__(self):
        return (
            type(self),
            (self.problem, self.stdout, self.stderr, self.returncode, self.command),
        )


def output_text(value) -> str:
    """A command's output as text: str, bytes (decoded as UTF-8, errors replaced) or None."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        raise TypeError(f"expected the command's output as str, got {type(value).__name__}")
    return value


def output_lines(text: str) -> list[str]:
    """Non-empty lines, stripped (``\\r\\n`` tolerated)."""
    return [line.strip() for line in text.split("\n") if line.strip()]


# --------------------------------------------------------------------------
# Job ids
# --------------------------------------------------------------------------


_GRAMMARS: dict = {}


def _grammars() -> dict:
    """The id grammars, by scheduler name, in the order an id without a scheduler is tried
    (:data:`hpcdist.schedulers.QUEUED`'s: ``123`` reads as Slurm's), each its folder's
    ``ids.GRAMMAR``; loaded with the first id: `hpcdist status` with no job makes none)."""
    if not _GRAMMARS:
        from hpcdist.schedulers import part

        _GRAMMARS.update((name, part(name, "ids").GRAMMAR) for name in QUEUED)
    return _GRAMMARS


class JobId(Record):
    """A submitted job's id.

    ``id`` is what to pass to ``squeue``/``sacct``/``scancel`` (Slurm: ``123``
    or ``123_4``) or to ``qstat``/``qdel`` (PBS: the full ``123.server`` or
    ``123[].server``).  ``cluster`` is the Slurm cluster from ``123;foo`` or
    ``on cluster foo`` (pass it as ``--clusters=``), ``number`` the numeric
    sequence part, ``is_array`` whether the id names an array job (or an
    array task), and ``scheduler`` ``"slurm"`` or ``"pbs"``.

    Only ``id`` is required: ``number`` and ``is_array`` are always derived
    from it (values passed for them are replaced), and ``scheduler``, when
    not given, is the first scheduler whose grammar reads the id (``"slurm"``
    for ``123`` and ``123_4``), else the last one's (``"pbs"``); pass
    ``scheduler="pbs"`` for a server-less PBS id such as ``123``.
    """

    __slots__ = ("id", "cluster", "number", "is_array", "scheduler")

    def __init__(self, id: str, cluster: str | None = None, number: str = "", is_array: bool = False,
                 scheduler: str = "") -> None:
        for name, value in zip(self.__slots__, (id, cluster, number, is_array, scheduler)):
            object.__setattr__(self, name, value)
        if not isinstance(self.id, str) or not self.id or self.id != self.id.strip():
            raise ValueError(f"a job id must be a non-empty string without spaces: {self.id!r}")
        grammars = _grammars()
        scheduler = self.scheduler or next(
            (name for name, grammar in grammars.items() if grammar.split(self.id) is not None), list(grammars)[-1])
        if scheduler not in grammars:
            raise ValueError(f"scheduler must be {' or '.join(repr(n) for n in grammars)}, not {scheduler!r}")
        object.__setattr__(self, "scheduler", scheduler)
        grammar = grammars[scheduler]
        parts = grammar.split(self.id)
        if parts is None:
            raise ValueError(f"not a {grammar.title} job id: {self.id!r} (expected {grammar.expected})")
        # number and is_array always follow id (a caller rebuilding a JobId
        # from a record may pass the whole id as number).
        object.__setattr__(self, "number", parts[0])
        object.__setattr__(self, "is_array", parts[1] is not None)

    def __str__(self) -> str:
        return self.id

    @property
    def array_index(self) -> str | None:
        """PBS: the text in brackets (``""`` for ``123[]``); Slurm: the task
        of ``123_4``; ``None`` when the id has none."""
        parts = _grammars()[self.scheduler].split(self.id)
        return parts[1] if parts else None

    def matches(self, other_text) -> bool:
        """Whether ``other_text`` (a string or a JobId) names this job.

        Slurm ids compare exactly.  PBS ids compare by sequence number and
        array index (``123[]`` matches ``123[].x`` but not ``123`` nor
        ``123[4]``), ignoring the server part, because ``qstat`` may truncate
        it (``123.polaris.al*``) or show a shorter name (``38438.master``),
        and ``PBS_JOBID`` may differ in domain suffix or carry an ``N:``
        prefix.
        """
        if isinstance(other_text, JobId):
            other_text = other_text.id
        if not isinstance(other_text, str):
            return False
        return _grammars()[self.scheduler].matches(self, other_text.strip())


# --------------------------------------------------------------------------
# The interface
# --------------------------------------------------------------------------


def _those(names) -> tuple[str, str]:
    """The names and the titles of the schedulers ``names`` (for messages), in :data:`NAMES` order."""
    having = [name for name in NAMES if name in names]
    return " or ".join(having), " or ".join(TITLES[name] for name in having)


def uses_node_rank(words: list) -> bool:
    """Whether a launcher's words refer to ``$NODE_RANK``, which each node's agent must be given."""
    return any(isinstance(w, Shell) and "$NODE_RANK" in w for w in words)


def on_each_node(prefix: list, words: list, rank_variable: str) -> list:
    """The words of ``prefix`` (a command that starts one task per node) running ``words``.

    Where the words refer to ``$NODE_RANK``, each node's agent runs them in ``bash -c`` after
    setting it from ``rank_variable``, the starter's per-task variable (``NODE_RANK`` itself where
    the starter sets it: :mod:`hpcdist.injob.agents`), so that it is expanded on that node, not once in
    the batch shell. The ``bash -c`` script is written in lines of its own, indented.
    """
    if not uses_node_rank(words):
        return list(prefix) + list(words)
    export = "" if rank_variable == "NODE_RANK" else f'\n    export NODE_RANK="${rank_variable}"'
    inner = words[1:] if words[:1] == [BREAK] and words[0] is BREAK else words  # "exec torchrun ..." on one line
    script = command_lines(["exec", *inner], indent="      ", first="    ")
    return list(prefix) + [BREAK, "bash", "-c", Shell(single_quoted(f"{export}\n{script}"))]


class Scheduler:
    """One scheduler as hpcdist uses it: the job spec's rules, the script, the job.

    One subclass per scheduler module; :func:`hpcdist.schedulers.registry.get` gives one instance per
    scheduler (and dialect). Errors in the spec are :class:`~hpcdist.validate.ValidationError`.
    """

    name: str = ""  # as --scheduler takes it
    title: str = ""  # as people write it
    submit_program: str = ""  # the command that takes a script (the script's header names it)
    queue_command: str = ""  # what a user runs to see their queued jobs
    controller: str = "controller"  # what its central daemon is called in messages
    job_id_variable: str = ""  # the variable that holds the job's id inside the job
    #: Shell for the id this run has as the submission recorded it (an array's, not its subjob's):
    #: a run of the script by hand is another id, and records nothing in the job folder.
    recorded_id_shell: str = ""
    restart_variable: str = "HPCDIST_RESTART_COUNT"  # counts a job's restarts inside it
    job_names: "JobNameRules"  # see hpcdist.schedulers.rules
    ids = None  # its job ids' grammar (a job_ids.IdGrammar), when it has ids of its own
    dialects: tuple[str, ...] = ()  # kinds of this scheduler that read different directives
    dialect = None  # the kind this instance is for (PBS: a Dialect)
    #: An elastic job's agents may lose a node and go on (--min-nodes).
    elastic_agents = False
    #: Its directives' prefix (#SBATCH), with an example option; "" when it reads none.
    directive_prefix: str = ""
    directive_example: str = ""
    #: Jinja filters its template uses (its value formats), by name.
    filters: dict = {}
    #: After the walltime warning a new job goes on (PBS), not this one (Slurm).
    resubmits = False
    #: Its jobs start tasks with srun (the srun launcher, DeepSpeed's slurm runner).
    runs_srun = False
    #: Every "node" of a job is this one host (the local backend).
    one_host = False
    #: It may run a job's script again by itself (Slurm: a node failure, an admin's requeue; PBS:
    #: qrerun): each run's start is recorded, for `status` to count the runs, and the exit code a
    #: killed run left is removed as the next run starts.
    requeues_by_itself = False
    #: It can be told which nodes not to give a job (Slurm's --exclude); else the job's set-up
    #: leaves them out of what it was given (--exclude-nodes).
    excludes_nodes = False
    #: The variables that name the allocation's files, which the job's set-up reads: copied where a
    #: container's image sees them (:func:`hpcdist.containers.script_lines`).
    allocation_files: tuple[str, ...] = ()
    #: The variable that holds an array subjob's index inside it, when each subjob writes an
    #: exit_code file of its own (:func:`hpcdist.jobs.job_files.script_context`); None: one file for all.
    array_index_variable: str | None = None

    @property
    def template(self) -> str:
        """Its job script template, in its folder (``hpcdist/schedulers/<name>/<name>.sh.j2``,
        named ``<name>.sh.j2``), which extends ``job.sh.j2``."""
        return f"{self.name}.sh.j2"

    @property
    def queued(self) -> bool:
        """It has a queue (a job may go back to it) and reads directives."""
        return self.name in QUEUED

    def __repr__(self) -> str:
        return f"<{self.title} scheduler{f' ({self.dialect.name})' if self.dialect else ''}>"

    # --- the job spec --------------------------------------------------------

    def check(self, values: dict, given: dict, launcher) -> None:
        """The job spec's rules for this scheduler, on the checked ``values`` (``given``: as
        given); sets ``values["dialect"]``. :func:`hpcdist.submission.spec.build_spec` runs it,
        handing in the job's ``launcher`` (schedulers import none)."""
        values["dialect"] = self.check_dialect(given.get("dialect"))
        self.check_values(values, given)
        self.check_launcher(values, launcher)
        self.check_elastic(values)

    def check_launcher(self, values: dict, launcher) -> None:
        """What this scheduler asks of the job's launcher (PBS: one agent per node for pbsdsh)."""

    def check_values(self, values: dict, given: dict) -> None:
        """This scheduler's own rules (QOS, directives, the log path ...), once the dialect is known."""

    def check_dialect(self, dialect) -> str | None:
        """The dialect as the spec holds it; a scheduler without dialects takes none."""
        from hpcdist import validate as v  # see the note at the top

        if dialect is not None and dialect != "":
            names, titles = _those(DIALECTS)
            raise v.NotHere("--dialect", dialect,
                            f"only {titles} has dialects, and --scheduler is {self.name}.",
                            f"Drop --dialect, or use --scheduler {names}.")
        return None

    def check_elastic(self, values: dict) -> None:
        from hpcdist import validate as v  # see the note at the top

        # With --max-restarts, --min-nodes is the job script's restarts' (every scheduler's).
        if values.get("min_nodes") and not values.get("max_restarts") and not self.elastic_agents:
            names, titles = _those(ELASTIC)
            raise v.ValidationError("--min-nodes", str(values["min_nodes"]),
                                    f"without --max-restarts is torchrun's elastic size, which needs --scheduler "
                                    f"{names}: under {self.name} the node agents are started so that one agent's "
                                    "end ends them all.",
                                    f"Give --max-restarts N too (hpcdist's restarts go on with at least --min-nodes "
                                    f"nodes when no --spare-nodes one is left), or use {titles}.")

    def check_job_name(self, name) -> str:
        return self.job_names.check(name)

    def suggest_job_name(self, text) -> str:
        return self.job_names.suggest(text)

    def check_directive(self, line) -> str:
        """A raw directive as the full line to put at the top of the script: see
        :func:`hpcdist.schedulers.registry.check_directive`."""
        from hpcdist import validate as v  # see the note at the top

        field = "--directive"
        line = v.require_str(line, field)
        if "\0" in line:
            raise v.ValidationError(field, line, "contains a NUL character.", "Remove it.")
        v.check_utf8(line, field)
        if "\n" in line or "\r" in line:
            raise v.ValidationError(field, line, "contains a line break; each directive is one line.",
                                    f"Give one {field} per line.")
        return self.directive(line)

    def directive(self, line: str) -> str:
        """One line of text as this scheduler's directive: the right prefix (a lower-case one
        is corrected), a non-empty option that starts with ``-``."""
        from hpcdist.schedulers.rules import directive_line  # see the note at the top

        return directive_line(self, line)

    def guess_option(self, text: str) -> str:
        """What a directive without its leading '-' probably meant."""
        return "-" + text

    def check_gpu_directives(self, gpus_per_node: int, directives: list[str]) -> None:
        """Raw directives that clash with what hpcdist writes itself: see
        :func:`hpcdist.schedulers.registry.check_gpu_directives`."""
        return None

    # --- the script ------------------------------------------------------------

    def directives(self, spec) -> list[str]:
        """The script's directive lines: the user's own (``--directive``) first, then this
        scheduler's, each written by one rule (:meth:`directive_line`)."""
        return list(spec.directives)

    def spread(self, spec, words: list, hpcdist: list, mpi) -> list[str]:
        """Lines that start ``words`` (a launcher's agent) once on every node of the job, and end
        the whole job when one agent fails (an elastic job excepted); ``hpcdist``: how the job
        script runs hpcdist (:func:`hpcdist.launchers.hpcdist_command`); ``mpi``: the job's MPI
        flavour (:data:`hpcdist.launchers.mpi.FLAVOURS`), handed in: a scheduler without srun
        spreads by its launcher."""
        raise NotImplementedError

    def spreader(self, spec, mpi) -> str:
        """How :meth:`spread` starts the agents, for the launch's comment ("with srun")."""
        return ""

    def submit_argv(self, script: str, log: str) -> list[str]:
        """The exact submit command (submit runs it; --dry-run shows it)."""
        return [self.submit_program, script]

    def array_log(self, log: str) -> tuple[str, str, str] | None:
        """An array job's log: ``(the path the submit command gets, the text before and after the
        index in each subjob's own log)``; None when the scheduler writes one log for all."""
        return None

    # --- the job ---------------------------------------------------------------

    def submit(self, script: str, workdir: str, log: str) -> JobId:
        raise NotImplementedError

    def status(self, job) -> JobStatus:
        raise NotImplementedError

    def statuses(self, jobs: list, job_ids: list[str], down: dict | None = None) -> list[JobStatus]:
        """Each job's state, in order (``job_ids``: the id each goes on under, read once). Here
        one :meth:`status` after another; a scheduler whose commands answer for many jobs at once
        asks for them together (``down``: see :meth:`hpcdist.schedulers.batch.BatchScheduler.statuses`)."""
        return [self.status(job) for job in jobs]

    def cancel(self, job) -> None:
        raise NotImplementedError

    def requeue(self, script: str, restart: int, log: str, environ) -> str | None:
        """Inside the job, after the walltime warning: put it back in the queue. The new job's id
        when a new job goes on (``log``: its log, "" when unknown), None when this one does.
        :class:`~hpcdist.schedulers.batch.SubmitError` when it cannot."""
        raise NotImplementedError(f"{self.title} jobs cannot go back to a queue")

    def job_id_from(self, environ) -> str:
        """This job's id, inside it."""
        return environ.get(self.job_id_variable, "")
