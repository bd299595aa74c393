"""PBS, in its two dialects (PBS Pro/OpenPBS and Torque): qsub, qstat, qdel, and PBS's rules.

The dialects differ in data only (:class:`Dialect`): how a job asks for its nodes
(``-l select=`` or ``-l nodes=``), the array flag (``-J`` or ``-t``), whether ``qstat``
answers in JSON, and which raw ``-l`` resources clash with hpcdist's own request.

Job ids (see the reference notes, section 6): ``qsub`` prints ``<seq>.<server>``, arrays
``<seq>[].<server>``.  Site wrappers may print banners (with numbers) first, so the id is
the *last* line that is wholly an id.  ``qstat`` may show the id truncated
(``123.polaris.al*``) or with a shorter server name (``38438.master`` for
``38438.master.gw4.metoffice.gov.uk``), and ``PBS_JOBID`` may carry an ``N:`` prefix on
exotic servers, so PBS ids are compared by :meth:`~hpcdist.schedulers.base.JobId.matches`
(sequence number and array index), never as strings.  What ``qstat`` prints is read by
:mod:`hpcdist.schedulers.pbs.qstat`.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

from hpcdist.schedulers import retry
from hpcdist import validate as v
from hpcdist.patterns import Pattern
from hpcdist.schedulers.pbs import request as pbs_request
from hpcdist.schedulers.base import JobId, JobStatus, SchedulerOutputError, on_each_node, output_lines, output_text
from hpcdist.schedulers.batch import BatchScheduler, SubmitError, below, query, recorded_exit, run_or_fail
from hpcdist.schedulers.pbs.ids import GRAMMAR, PbsIds
from hpcdist.schedulers.pbs.job import JOB_ID_VARIABLES, NODEFILE, next_job_environment, own_command
from hpcdist.schedulers.pbs.qstat import (
    parse_qstat_jobs_json, parse_qstat_jobs_text, parse_qstat_no_history, parse_qstat_unknown, parse_qstat_unknown_ids)
from hpcdist.schedulers.rules import JobNameRules, directive_tokens, option_values
from hpcdist.shell import BREAK, Shell, command_lines, quote, var

__all__ = ["Pbs", "Dialect", "DIALECTS", "PBS_DIALECTS", "PbsIds", "parse_qsub", "format_pbs_walltime",
           "format_pbs_mem", "JOB_NAMES"]


class Dialect:
    """What one kind of PBS server reads differently. (A plain class: it is built when a
    script is rendered, where a dataclass costs time.)"""

    __slots__ = ("name", "request", "array_flag", "array_index", "array_output", "json_status", "keep", "clashes")

    def __init__(self, name: str, request: str, array_flag: str, array_index: str, array_output: str | None,
                 json_status: bool, keep: str | None, clashes: dict) -> None:
        self.name = name  # as --dialect takes it
        #: The resource a job asks for its nodes with (the template writes its line).
        self.request = request
        self.array_flag = array_flag  # the flag of a job array
        self.array_index = array_index  # the variable that holds a subjob's index
        #: What the server replaces by the index in an array's -o path; None: it appends
        #: "-<index>" to the path itself (Torque: job_clone in src/server/job_func.c).
        self.array_output = array_output
        #: ``qstat -f -F json -x`` is asked first (it also lists finished jobs).
        self.json_status = json_status
        #: ``-k``: where the log is written while the job runs; None: the server spools it on the
        #: first node and copies it to -o when the job ends (then `hpcdist logs -f` shows nothing).
        self.keep = keep
        #: A resource in a raw ``-l`` directive that clashes with the request: (rule, fix).
        self.clashes = clashes


DIALECTS = {
    "pro": Dialect(
        name="pro", request="select", array_flag="-J", array_index="PBS_ARRAY_INDEX", array_output="^array_index^",
        # -k oed: the log written in place as the job runs ("d", direct: OpenPBS 19.1+, qsub(1B)).
        json_status=True, keep="oed", clashes={
            "nodes": ("uses the old -l nodes= syntax; hpcdist writes -l select=, and PBS Pro refuses jobs that mix "
                      "new and old syntax.",
                      "Use --nodes and --procs-per-node, or --dialect torque if the server is Torque."),
        }),
    "torque": Dialect(
        name="torque", request="nodes", array_flag="-t", array_index="PBS_ARRAYID", array_output=None,
        json_status=False, keep=None, clashes={
            "nodes": ("sets -l nodes, but hpcdist already writes the nodes line from --nodes, --procs-per-node and "
                      "--gpus-per-node; two node requests clash.",
                      "Use those flags, or --template for a nodes spec hpcdist cannot express."),
            "select": ("uses -l select, which is PBS Pro syntax; Torque does not understand it.",
                       "Use --nodes and --procs-per-node, or --dialect pro if the server is PBS Pro/OpenPBS."),
        }),
}
#: The PBS dialects: PBS Pro / OpenPBS (``select=``) and Torque (``nodes=``), as the package's
#: names (hpcdist.schedulers.DIALECTS) give them to --dialect.
PBS_DIALECTS = tuple(DIALECTS)
_DIALECT_ALIASES = {"openpbs": "pro", "pbspro": "pro", "pbs-pro": "pro", "pbs_pro": "pro", "altair": "pro"}

# --------------------------------------------------------------------------
# Job ids
# --------------------------------------------------------------------------

# Their grammar (PbsIds) is in hpcdist.schedulers.pbs.ids, which base's JobId reads.

# What qsub may print: a PBS id (ASCII digits only), with an optional "N:" prefix.
_QSUB_LINE = Pattern(r"(?:[0-9]+:)?([0-9]+)(\[[0-9]*\])?(\.[A-Za-z0-9_.-]+)?")


_NQS_REQUEST = Pattern(r"^[ \t]*Request ([0-9]+(?:\[[0-9]*\])?\.[A-Za-z0-9_.-]+) submitted to queue", re.M)


def parse_qsub(stdout, stderr="", returncode: int | None = 0) -> JobId:
    """The job id printed by PBS Pro/OpenPBS or Torque ``qsub``.

    The id is the last non-empty stdout line that is wholly a job id:
    ``123.server`` or ``123[].server`` (arrays); a bare ``123`` only when it
    is the very last line.  Banner lines before it are ignored, even when
    they contain numbers (dask-jobqueue#699).  An ``N:`` prefix (``0:123.server``, seen in
    ``PBS_JOBID`` on an exotic PBS, dask-jobqueue#134) is accepted and
    dropped when a server part follows.  NQSII's ``Request 123.host
    submitted to queue: q.`` is accepted too.  A non-zero ``returncode`` is
    an error even when an id was printed.
    """
    stdout, stderr = output_text(stdout), output_text(stderr)
    if returncode not in (0, None):
        raise SchedulerOutputError(
            f"qsub failed (exit status {returncode}); no job was submitted, "
            "or its id cannot be trusted",
            stdout,
            stderr,
            returncode,
            "qsub",
        )
    lines = output_lines(stdout)
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        m = _QSUB_LINE.fullmatch(line)
        if m is None:
            continue
        if m.group(3) is None:
            # No server part: "12:30" is a time of day, not "N:" + an id,
            # and a bare number counts only as the very last line (a banner
            # may hold a line that is just a number).
            if ":" in line or i != len(lines) - 1:
                continue
        return JobId(line[line.index(":") + 1 :] if ":" in line else line, scheduler="pbs")
    found = _NQS_REQUEST.findall(stdout)
    if found:
        return JobId(found[-1], scheduler="pbs")
    raise SchedulerOutputError(
        "could not find a job id in qsub's output: expected a last line "
        "like '123.server' or '123[].server' (was qsub run with -z, or does "
        "a site wrapper print the id differently?)",
        stdout,
        stderr,
        returncode,
        "qsub",
    )


# --------------------------------------------------------------------------
# Values in #PBS lines
# --------------------------------------------------------------------------


def format_pbs_walltime(seconds: int) -> str:
    """PBS ``-l walltime=``: ``HH:MM:SS`` with hours unbounded (``49:00:00``)."""
    return v.format_clock(seconds)


def format_pbs_mem(mb: int) -> str:
    """PBS ``mem=``: ``16gb`` for a whole number of gigabytes, else ``500mb``."""
    mb = v.positive_int(mb, "mb")
    return f"{mb // 1024}gb" if mb % 1024 == 0 else f"{mb}mb"


def pbs_line(flag: str, value) -> str:
    """The one rule of every ``#PBS`` line: the flag, then its value as one shell word."""
    return f"#PBS {flag} {quote(str(value))}"


#: PBS job names (Pro and Torque): 1..230 characters from [A-Za-z0-9+_.-], not starting with a
#: dot (PBS Pro 19.2.1+ rejects others, "=" gives "illegal -N value", and a leading dot failed
#: on older PBS Pro).
JOB_NAMES = JobNameRules(title="PBS", chars=r"A-Za-z0-9+_.\-", words="letters, digits and + _ . -", longest=230,
                         leading_dot="a PBS job name must not start with a dot (older PBS Pro rejects it).")


class Pbs(BatchScheduler):
    name = "pbs"
    title = "PBS"
    submit_program = "qsub"
    queue_command = "qstat -u $USER"
    cancel_command = "qdel"
    status_commands = "qstat"
    config_fix = "set PBS_SERVER (PBS Pro, OpenPBS) or PBS_DEFAULT (Torque) to the server's host name"
    controller = "server"
    job_id_variable = JOB_ID_VARIABLES[0]
    recorded_id_shell = "${PBS_JOBID:-}"  # a subjob's 123[4].server is the array's 123[].server by its number
    job_names = JOB_NAMES
    ids = GRAMMAR
    dialects = PBS_DIALECTS
    # The node file lies in the MOM's aux folder, where no image sees it.
    allocation_files = (NODEFILE,)
    directive_prefix = "#PBS"
    directive_example = "-l place=scatter"
    filters = {"pbs_walltime": format_pbs_walltime, "pbs_mem": format_pbs_mem}

    def request(self, spec):
        """The ``-l`` resources that ask for the nodes (:mod:`hpcdist.schedulers.pbs.request`)."""
        return pbs_request.request(spec, self.dialect.request == "nodes", format_pbs_mem)

    def configure(self, line):
        # Slurm's Torque wrapper (slurm-wlm-torque) is a Perl qsub/qstat: Slurm's words, as "perl: ...".
        if line.startswith("perl:"):
            return "set SLURM_CONF to the cluster's slurm.conf (this qsub is Slurm's Torque wrapper)"
        return self.config_fix

    def __init__(self, dialect: Dialect):
        self.dialect = dialect

    @property
    def array_index_variable(self):
        return self.dialect.array_index

    # --- the job spec ----------------------------------------------------------

    def check_values(self, values, given):
        if "qos" in values:
            raise v.ValidationError("--qos", values["qos"], "PBS has no QOS; it uses queues.", "Use --queue instead.")
        if values.get("mem_mb") == 0:
            raise v.ValidationError("--mem", "0", "is all of a node's memory to Slurm; PBS gives a "
                                    "job the memory it asks for, or the site's default.",
                                    "Give an amount (e.g. 380G), or leave --mem out.")
        output = values.get("output") or ""
        if "%j" in output or "%x" in output:
            raise v.ValidationError("--output", output, "PBS writes the log where the path says, as written: "
                                    "%j and %x (Slurm's job id and name) would stay in the file's name.",
                                    "Give a name without them, or leave --output out: each job's log is then "
                                    "job.log in its own folder.")
        # The spec's dialect, which need not be this instance's.
        pbs = scheduler(values["dialect"])
        pbs_request.check_request(values, given, torque=pbs.dialect.request == "nodes")
        pbs.check_gpu_directives(values.get("gpus_per_node", 0), list(values.get("directives", ())))

    def check_launcher(self, values, launcher):
        """pbsdsh starts one agent per node: a launcher started once, from the first node, has none."""
        if values.get("pbs_spread") != "pbsdsh":
            return
        seen = SimpleNamespace(no_ssh=values.get("no_ssh", False), nodes=values.get("nodes", 1), one_host=self.one_host)
        if not launcher.per_node(seen):
            raise v.ValidationError("--pbs-spread", "pbsdsh", f"starts one agent per node, but --launcher "
                                    f"{values['launcher']} runs once, from the first node"
                                    f"{'' if seen.nodes > 1 else ' (one node)'}.",
                                    "Leave --pbs-spread out, or use a launcher with an agent per node (torchrun, "
                                    "accelerate, deepspeed --no-ssh).")

    def check_dialect(self, dialect):
        """``"pro"`` (the default; also for ``openpbs``/``pbspro``) or ``"torque"``."""
        if dialect is None or dialect == "":
            return "pro"
        if isinstance(dialect, str) and dialect.strip().lower() in _DIALECT_ALIASES:
            return _DIALECT_ALIASES[dialect.strip().lower()]
        return v.check_choice(dialect, "--dialect", PBS_DIALECTS)

    def guess_option(self, text):
        return ("-l " + text) if re.match(r"[A-Za-z_]+=", text) else "-" + text

    def check_gpu_directives(self, gpus_per_node, directives):
        """hpcdist always writes the dialect's node request (``-l select=`` or ``-l nodes=``): a
        raw ``-l`` with the same resource, or with the other dialect's, clashes with it."""
        field = "--directive"
        v.check_positive(gpus_per_node, "--gpus-per-node", allow_zero=True)
        parsed = [(d, directive_tokens(v.require_str(d, field))) for d in directives]
        for d, toks in parsed:
            for value in option_values(toks, short="-l"):
                for item in (value or "").split(","):
                    clash = self.dialect.clashes.get(item.split("=", 1)[0].strip().lower())
                    if clash:
                        raise v.ValidationError(field, d, *clash)
        return None

    # --- the script --------------------------------------------------------------

    def submit_argv(self, script, log):
        # The log on the command line too: some qsub front ends (Slurm's Torque wrapper)
        # ignore #PBS -o, and the command line wins anyway.
        return [self.submit_program, "-o", log, "-j", "oe", script]

    def array_log(self, log):
        """PBS Pro writes each subjob's output where ``^array_index^`` stands in the -o path
        (``job.^array_index^.log``, unless the path has one already); Torque appends ``-<index>``."""
        mark = self.dialect.array_output
        if mark is None:
            return log, log + "-", ""
        if mark not in log:
            stem, ext = os.path.splitext(log)
            log = f"{stem}.{mark}{ext}"
        before, _, after = log.partition(mark)
        return log, before, after

    def directives(self, spec):
        """Every ``#PBS`` line, by one rule (:func:`pbs_line`), after the user's own (PBS Pro reads
        the first of two conflicting ones, Parsl#2220)."""
        options = [
            ("-N", spec.job_name),
            # How the job asks for its nodes (hpcdist.schedulers.pbs.request): Torque's nodes=, PBS
            # Pro's select= and place=, or PBS Pro's job-wide ncpus=, ngpus=, mem=; then the site's.
            *(("-l", resource) for resource in self.request(spec)),
            ("-l", spec.walltime_s and f"walltime={format_pbs_walltime(spec.walltime_s)}"),
            ("-q", spec.queue),
            ("-A", spec.account),
            ("-P", spec.project),
            ("-j", "oe"),
            ("-k", self.dialect.keep),
            ("-o", spec.output),
            (self.dialect.array_flag, spec.array),
            ("-W", spec.dependency and f"depend={spec.dependency}"),
            # A lost node must not end the job: its restart goes on without it (PBS Pro's own
            # attribute; Torque has none).
            ("-W", spec.restarts_launch and self.dialect.name == "pro" and "tolerate_node_failures=all"),
            ("-M", spec.mail_user),
            ("-m", spec.mail_user and "ae"),
        ]
        return super().directives(spec) + [pbs_line(flag, value) for flag, value in options if value]

    def spread(self, spec, words, hpcdist, mpi):
        """One agent per node (PBS has no srun): by the ``--mpi`` flavour's launcher, one process per
        host of the node file, which ends every agent when one fails and hands each its node's
        index (:meth:`hpcdist.launchers.mpi.Flavour.agents`); or, with ``--pbs-spread pbsdsh``, by
        ``hpcdist agents --pbsdsh`` (:mod:`hpcdist.schedulers.pbs.pbsdsh`)."""
        # PBS tracks nothing a job starts on its other nodes (their moms see no pbsdsh task's own
        # sessions, nor an MPI's remote tasks): each node's launcher leaves nothing behind there.
        words = reaped(words, hpcdist)
        if spec.pbs_spread == "pbsdsh":
            start = [*hpcdist, "agents", "--pbsdsh", "--dir", var("run_dir"), "--"]
            return [command_lines(on_each_node(start, words, "NODE_RANK"))]
        return mpi.setup(spec) + [command_lines(on_each_node(mpi.agents(spec), words, mpi.rank_variable))]

    def spreader(self, spec, mpi):
        if spec.pbs_spread == "pbsdsh":
            return "with pbsdsh"
        return f"with {mpi.title}'s launcher"

    # --- the job -------------------------------------------------------------------

    def parse_submission(self, proc):
        return parse_qsub(proc.stdout, proc.stderr, proc.returncode)

    def query_statuses(self, jobs, job_ids):
        """One ``qstat -f -F json -x ID...`` for all the jobs (PBS Pro), or ``qstat -f ID...``
        (Torque, and front ends without -F json or -x) for those it could not answer. Asked about
        several jobs, qstat lists those it knows and writes "Unknown Job Id ID" (or "ID Job has
        finished") on stderr for each of the others, exiting non-zero; a job it neither lists nor
        names there is asked about alone."""
        ids = [JobId(id=job_id, scheduler="pbs") for job_id in dict.fromkeys(job_ids)]
        found, proc, history = {}, None, True
        if self.dialect.json_status:
            proc = query(["qstat", "-f", "-F", "json", "-x", *(job_id.id for job_id in ids)])
            if proc.returncode == 0 or parse_qstat_unknown(proc.stderr):
                found = parse_qstat_jobs_json(proc.stdout, ids)
            if proc.returncode == 0 and parse_qstat_no_history(proc.stderr) and len(found) < len(ids):
                # Job history off (OpenPBS's default): -x lists nothing, not even a running job, and
                # exits 0. Without -x qstat lists the jobs still there; the others have ended.
                history = False
                proc = query(["qstat", "-f", "-F", "json", *(job_id.id for job_id in ids if job_id.id not in found)])
                if proc.returncode == 0 or parse_qstat_unknown(proc.stderr):
                    found.update(parse_qstat_jobs_json(proc.stdout, ids))
        text = "" if proc is None else proc.stdout + "\n" + proc.stderr
        if proc is None or (proc.returncode != 0 and not parse_qstat_unknown(proc.stderr)
                            and not retry.unreachable(text) and not retry.not_configured(text)):
            # Torque, and qstat front ends without -F json or -x: the text form.
            proc = query(["qstat", "-f", *(job_id.id for job_id in ids if job_id.id not in found)])
            if proc.returncode == 0 or parse_qstat_unknown(proc.stderr):
                found.update(parse_qstat_jobs_text(proc.stdout, ids))
        unknown = parse_qstat_unknown_ids(proc.stderr, ids) if len(ids) > 1 else None
        # An answer about some of the jobs: one it left out for no reason it gave is asked alone.
        partial = unknown is not None and bool(proc.returncode == 0 or found or unknown)
        return [self._judged(job, job_id, found.get(job_id), proc, unknown, partial, history)
                for job, job_id in zip(jobs, job_ids)]

    def _judged(self, job, job_id, found, proc, unknown, partial, history=True):
        """One job's state from what qstat listed for it (or None) and the run that did not list
        it; ``unknown``: the ids its stderr says it does not know, when several were asked about;
        ``history``: False when the server keeps no finished jobs."""
        if found is not None:
            is_array = JobId(job_id, scheduler="pbs").is_array
            if found.finished and (found.exit_code is None or is_array):
                return self._with_recorded_exit(job, is_array, found)
            return found
        missing = self.not_configured(job, "qstat", proc)
        if missing is not None:
            return missing
        if parse_qstat_unknown(proc.stderr) if unknown is None else job_id in unknown:
            why = "" if history else (
                " (this PBS server keeps no finished jobs: job_history_enable is off), and the job "
                "left no exit_code file in its folder: it never started (deleted while queued, "
                "e.g. by qdel) or was killed before its script could write one")
            return recorded_exit(job) or JobStatus(
                state="UNKNOWN", exit_code=None, raw="", reason=f"qstat no longer knows the job{why}")
        down = retry.unreachable(proc.stdout + "\n" + proc.stderr)
        if down:
            return self.controller_down(job, f"qstat: {down}")
        if partial:
            return self.status(job)
        first = (proc.stderr.strip().splitlines() or [""])[0]
        return JobStatus(state="UNKNOWN", exit_code=None, raw="", reason=f"qstat: {first}" if first else None)

    @staticmethod
    def _with_recorded_exit(job, is_array: bool, found):
        """A finished job qstat gives no exit status for: Torque's (and Slurm's wrapper's) "C",
        whose exit_code file says how it ended; an array's parent, whose Exit_status is 0 when a
        subjob failed (PBS marks it failed) or was deleted alone (PBS does not): its subjobs' files
        say which one failed, and how, and which wrote none."""
        recorded = recorded_exit(job)
        if recorded is None:
            return found
        if not is_array:
            return recorded
        if found.state == "COMPLETED" and recorded.state != "COMPLETED":  # never COMPLETED then
            return JobStatus(recorded.state, recorded.exit_code, recorded.raw,
                             f"{recorded.reason}; PBS: the array finished, Exit_status 0")
        if recorded.state != found.state:  # a subjob that wrote no file: PBS's word on the array wins
            return found
        return JobStatus(recorded.state, recorded.exit_code, recorded.raw, f"{recorded.reason}; {found.reason}")

    says_gone = staticmethod(parse_qstat_unknown)  # qdel: "Unknown Job Id", "Job has finished"

    #: PBS has no requeue a job may ask for itself: it goes on as a new job.
    resubmits = True
    #: But it runs a job's script again by itself (qrerun, a preemption by requeue, a node lost).
    requeues_by_itself = True
    #: The signal that asks for the warning's stop by hand (`qsig -s WINCH <job>`). qsig sends a
    #: signal to every process of the job's session, the user's login shell above the script too:
    #: USR2 kills that shell and PBS ends the job. WINCH is ignored by default by bash, python and
    #: every launcher (Open MPI's mpirun forwards USR1, USR2 and URG, not WINCH).
    stop_by_hand_signal = "WINCH"

    def requeue(self, script, restart, log, environ):
        """``qsub`` the same script as a new job that starts after this one ends (``-W
        depend=afterany:<job>``), with ``HPCDIST_RESTART_COUNT`` counting the restarts and
        ``log`` (``job.restart<n>.log``: PBS would replace the earlier log with it)."""
        job_id = self.job_id_for_requeue(environ)
        # qsub as `hpcdist submit` ran it, with a log of its own on the command line (which front
        # ends such as Slurm's qsub wrapper read instead of the script's #PBS -o), relative to the
        # submit folder, as hpcdist submit gives it: some front ends pass it through a shell.
        workdir = environ.get("PBS_O_WORKDIR", os.getcwd())
        argv = self.submit_argv(script, below(log, workdir)) if log else [self.submit_program, script]
        argv[0] = own_command(argv[0], environ)  # this PBS's qsub, not the first on PATH
        # -V: the new job gets this job's environment, as a job submitted from here would.
        argv[1:1] = ["-V", "-v", f"{self.restart_variable}={restart}", "-W", f"depend=afterany:{job_id}"]
        proc = run_or_fail(argv, cwd=environ.get("PBS_O_WORKDIR"), env=next_job_environment(environ))
        try:
            return parse_qsub(proc.stdout, proc.stderr, proc.returncode).id
        except SchedulerOutputError as e:
            raise SubmitError(f"qsub printed no job id for the resubmitted job: {e}") from None


def scheduler(dialect: str | None = None) -> Pbs:
    """PBS of ``dialect`` (default: PBS Pro)."""
    if (dialect or "pro") not in DIALECTS:
        raise ValueError(f"unknown PBS dialect {dialect!r}: expected one of {', '.join(PBS_DIALECTS)}")
    return Pbs(DIALECTS[dialect or "pro"])


def reaped(words: list, hpcdist: list) -> list:
    """``words`` (a node's launcher) run by ``hpcdist agents --reap``, which becomes it and ends what
    is left of it on its node when it has gone (:func:`hpcdist.injob.agents.reap`). Not in a container
    job: the host's hpcdist runs there only where the host has one."""
    if hpcdist == ["hpcdist"]:
        return words
    first = 1 if words[:1] == [BREAK] and words[0] is BREAK else 0
    # The job's set-up's interpreter, by its path (hpcdist.injob.job_setup): `python` on another node
    # can be another one.
    reaper = [Shell('"${HPCDIST_PYTHON:-python}"'), "-m", "hpcdist", "agents", "--reap", "--"]
    return [*words[:first], *reaper, *words[first:]]
