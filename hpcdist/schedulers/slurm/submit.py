"""Slurm: sbatch, squeue, sacct, scancel, scontrol requeue and srun, and Slurm's own rules.

Job ids (see the reference notes, section 6): ``sbatch --parsable`` prints
``123`` or, with several clusters, ``123;foo``.  Without ``--parsable`` (or
through a site wrapper) it prints ``Submitted batch job 123`` or ``Submitted
batch job 123 on cluster foo``, and some wrappers print only ``15786755``.
The id is never ``foo``.  Array tasks are ``123_4``; ids compare exactly.

The parsers are pure functions on text (the caller runs the command); their
regular expressions are compiled on first use.
"""

from __future__ import annotations

import re

from hpcdist import containers
from hpcdist.schedulers import retry
from hpcdist import validate as v
from hpcdist.patterns import Pattern
from hpcdist.schedulers.base import JobId, JobStatus, SchedulerOutputError, on_each_node, output_lines, output_text
from hpcdist.schedulers.batch import BatchScheduler, query, recorded_exit, run_or_fail
from hpcdist.schedulers.slurm.ids import GRAMMAR, SLURM_ID, SlurmIds
from hpcdist.schedulers.slurm.queue import (
    parse_sacct, parse_sacct_disabled, parse_sacct_jobs, parse_squeue, parse_squeue_jobs, parse_squeue_unknown)
from hpcdist.schedulers.rules import JobNameRules, directive_tokens, option_values
from hpcdist.schedulers.slurm.job import JOB_ID_VARIABLES
from hpcdist.shell import BREAK, Shell, command_lines

__all__ = ["Slurm", "SlurmIds", "parse_sbatch", "parse_squeue", "parse_sacct", "parse_squeue_unknown",
           "parse_sacct_disabled", "parse_squeue_jobs", "parse_sacct_jobs",
           "format_slurm_time", "format_slurm_mem", "sbatch_value", "JOB_NAMES"]

# --------------------------------------------------------------------------
# Job ids
# --------------------------------------------------------------------------

# Their grammar (SlurmIds) is in hpcdist.schedulers.slurm.ids, which base's JobId reads.

_SUBMITTED = Pattern(r"Submitted batch job ([0-9]+)(?: on cluster (\S+))?")
_CLUSTER_NAME = Pattern(r"[^\s;]+")


def parse_sbatch(stdout, stderr="", returncode: int | None = 0) -> JobId:
    """The job id from ``sbatch --parsable`` (or from a site wrapper).

    A non-zero ``returncode`` is an error even when an id was printed (the
    submission may have failed after a wrapper printed something).  The id is
    the last non-empty stdout line that is not one of sbatch's own
    ``sbatch: ...`` messages, in the ``--parsable`` form ``123`` or
    ``123;cluster``; failing that, the last ``Submitted batch job 123[ on
    cluster foo]`` anywhere in stdout.
    """
    stdout, stderr = output_text(stdout), output_text(stderr)
    if returncode not in (0, None):
        raise SchedulerOutputError(
            f"sbatch failed (exit status {returncode}); no job was submitted, "
            "or its id cannot be trusted",
            stdout,
            stderr,
            returncode,
            "sbatch",
        )
    lines = [line for line in output_lines(stdout) if not line.startswith("sbatch:")]
    if lines:
        parts = lines[-1].split(";")
        if len(parts) <= 2 and SLURM_ID.fullmatch(parts[0]):
            cluster = parts[1].strip() if len(parts) == 2 else ""
            if not cluster or _CLUSTER_NAME.fullmatch(cluster):
                return JobId(parts[0], cluster or None, scheduler="slurm")
    found = list(_SUBMITTED.finditer(stdout))
    if found:
        m = found[-1]
        return JobId(m.group(1), m.group(2), scheduler="slurm")
    raise SchedulerOutputError(
        "could not find a job id in sbatch's output: expected a last line "
        "'123' or '123;cluster' (sbatch --parsable), or "
        "'Submitted batch job 123'",
        stdout,
        stderr,
        returncode,
        "sbatch",
    )


# --------------------------------------------------------------------------
# Values in #SBATCH lines
# --------------------------------------------------------------------------


def format_slurm_time(seconds: int) -> str:
    """Slurm ``--time``: ``HH:MM:SS`` under a day, ``D-HH:MM:SS`` from a day on."""
    return v.format_clock(seconds, days=True)


def format_slurm_mem(mb: int) -> str:
    """Slurm ``--mem``: ``16G`` for a whole number of gigabytes, else ``500M``."""
    if type(mb) is int and mb == 0:  # all of each node's memory (sbatch --mem=0)
        return "0"
    mb = v.positive_int(mb, "mb")
    return f"{mb // 1024}G" if mb % 1024 == 0 else f"{mb}M"


def sbatch_value(value, fix: str = "Submit from (or write the log to) a folder whose path has no '\"'."):
    """A value in an ``#SBATCH`` line: sbatch reads "double quotes" there, not the
    shell's 'single quotes' (it would split ``'a b'`` at the space). ``fix``: what the
    error about a double quote, which nothing can carry there, advises."""
    text = str(value)
    if text and not any(c.isspace() or c in "'\"\\" for c in text):
        return Shell(text)
    if '"' in text:
        raise v.ValidationError("--output", text, "sbatch cannot read a double quote in an #SBATCH value.", fix)
    return Shell(f'"{text}"')


def sbatch_line(name: str, value) -> str:
    """The one rule of every ``#SBATCH`` line: ``--name=value``, or ``--name`` for a switch (True)."""
    return f"#SBATCH --{name}" if value is True else f"#SBATCH --{name}={sbatch_value(value)}"


#: Slurm's job names: 1..200 characters from [A-Za-z0-9+_.,:@=-] (no %, which Slurm expands
#: in output file names, and no spaces).
JOB_NAMES = JobNameRules(title="Slurm", chars=r"A-Za-z0-9+_.,:@=\-", words="letters, digits and + _ . , : @ = -",
                         longest=200)
_GRES_GPU = Pattern(r"gpu(?:[:/]|$)", re.I | re.A)


class Slurm(BatchScheduler):
    name = "slurm"
    title = "Slurm"
    submit_program = "sbatch"
    queue_command = "squeue --me"
    cancel_command = "scancel"
    says_gone = staticmethod(parse_squeue_unknown)  # "Invalid job id specified"
    status_commands = "squeue/sacct"
    config_fix = "set SLURM_CONF to the cluster's slurm.conf"
    job_id_variable = JOB_ID_VARIABLES[0]
    recorded_id_shell = "${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-}}"  # an array task has an id of its own
    # An array task writes its own exit code and log (hpcdist.jobs.subjobs), as a PBS subjob does.
    array_index_variable = "SLURM_ARRAY_TASK_ID"
    # Slurm counts the restarts of a requeued job itself.
    restart_variable = "SLURM_RESTART_COUNT"
    excludes_nodes = True
    requeues_by_itself = True
    job_names = JOB_NAMES
    ids = GRAMMAR
    elastic_agents = True
    runs_srun = True
    directive_prefix = "#SBATCH"
    directive_example = "--constraint=a100"
    filters = {"sbatch_value": sbatch_value, "slurm_time": format_slurm_time, "slurm_mem": format_slurm_mem}

    # --- the job spec ----------------------------------------------------------

    def check_values(self, values, given):
        if "output" in values:
            sbatch_value(values["output"], "Choose a log path without '\"'.")
        self.check_gpu_directives(values.get("gpus_per_node", 0), list(values.get("directives", ())))

    def guess_option(self, text):
        return "--" + text

    def check_gpu_directives(self, gpus_per_node, directives):
        """hpcdist writes ``--gpus-per-node`` when ``gpus_per_node > 0``; Slurm rejects it
        together with ``--gres=gpu``, and a raw ``--gpus-per-node`` beside the flag is two
        sources for one number."""
        field = "--directive"
        gpus = v.check_positive(gpus_per_node, "--gpus-per-node", allow_zero=True)
        parsed = [(d, directive_tokens(v.require_str(d, field))) for d in directives]
        raw_gpn = [d for d, toks in parsed if option_values(toks, "--gpus-per-node")]
        gres_gpu = [d for d, toks in parsed
                    if any(value and any(_GRES_GPU.match(item.strip()) for item in value.split(","))
                           for value in option_values(toks, "--gres"))]
        if gpus and raw_gpn:
            raise v.ValidationError(field, raw_gpn[0],
                                    f"sets --gpus-per-node, which hpcdist already writes from --gpus-per-node {gpus}.",
                                    "Drop the directive; the flag asks for the GPUs and sets one process per GPU.")
        if gres_gpu and (gpus or raw_gpn):
            source = (f"hpcdist writes --gpus-per-node for --gpus-per-node {gpus}" if gpus
                      else f"the directive {raw_gpn[0]!r} sets --gpus-per-node")
            raise v.ValidationError(field, gres_gpu[0],
                                    f"asks for GPUs with --gres=gpu, but {source}, and Slurm refuses "
                                    "--gpus-per-node together with --gres=gpu.",
                                    "Drop one: keep --gpus-per-node and remove the --gres directive, or leave "
                                    "--gpus-per-node out and set --procs-per-node.")
        return None

    # --- the script --------------------------------------------------------------

    def submit_argv(self, script, log):
        # --parsable: the id alone (and the cluster), not a sentence to pick it from.
        return [self.submit_program, "--parsable", script]

    def array_log(self, log):
        """Each array task's output where ``%a`` (its index) stands in --output (``job.%a.log``,
        unless the path has one already)."""
        import os

        if "%a" not in log:
            stem, ext = os.path.splitext(log)
            log = f"{stem}.%a{ext}"
        before, _, after = log.partition("%a")
        return log, before, after

    def directives(self, spec):
        """Every ``#SBATCH`` line, by one rule (:func:`sbatch_line`), after the user's own."""
        gpus = f"{spec.gpu_type}:{spec.gpus_per_node}" if spec.gpu_type else spec.gpus_per_node
        options = [
            ("job-name", spec.job_name),
            # Shifter's image and modules are the job's (hpcdist.containers).
            *(option[2:].split("=", 1) for option in containers.directives(spec)),
            ("nodes", spec.allocated_nodes),  # the spares too (--spare-nodes)
            ("ntasks-per-node", spec.procs_per_node),
            ("gpus-per-node", gpus if spec.gpus_per_node else None),
            ("cpus-per-task", spec.cpus_per_proc),
            ("mem", None if spec.mem_mb is None else format_slurm_mem(spec.mem_mb)),
            ("mem-per-gpu", spec.mem_per_gpu_mb and format_slurm_mem(spec.mem_per_gpu_mb)),
            ("time", spec.walltime_s and format_slurm_time(spec.walltime_s)),
            ("partition", spec.queue),
            ("account", spec.account),
            ("qos", spec.qos),
            ("constraint", spec.constraint),
            ("exclude", ",".join(spec.excluded_nodes)),
            ("hint", spec.hint),
            ("output", spec.output or "%x-%j.out"),
            ("array", spec.array),
            ("dependency", spec.dependency),
            ("mail-user", spec.mail_user),
            ("mail-type", spec.mail_user and "END,FAIL"),
            ("exclusive", spec.exclusive),
            # A failed node leaves the job running on the others: hpcdist restarts the launch
            # without it (--max-restarts, with at least --min-nodes), or torchrun goes on (elastic).
            ("no-kill", spec.elastic or spec.restarts_launch),
            # B: the batch shell only. Signalled too, a torchrun agent would die of USR2 (it passes
            # on only INT, TERM, HUP, QUIT).
            ("signal", spec.stops_on_warning and f"B:USR2@{spec.signal_margin}"),
            ("requeue", bool(spec.requeue)),
            # Slurm requeues a job on its own too (a node failure, an admin's requeue): the next
            # run's lines go after this one's instead of over them.
            ("open-mode", "append"),
        ]
        return super().directives(spec) + [sbatch_line(name, value) for name, value in options
                                           if value not in (None, False, 0, "")]

    def spread(self, spec, words, hpcdist, mpi):
        """srun, one task per node; --kill-on-bad-exit ends the job when one agent fails. An elastic
        job's agents are started by ``hpcdist agents --elastic``
        (:func:`~hpcdist.schedulers.slurm.job.start_elastic`)."""
        # The agent's one task gets every CPU the node's processes were given;
        # by default a step's task has one CPU, and all workers would share it.
        # pyxis: srun's flags put each agent in the image (the agent's words are then not wrapped).
        each = ["--ntasks-per-node=1", f"--cpus-per-task={spec.cpus_per_node}", *containers.srun_flags(spec)]
        if spec.elastic:
            start = [*hpcdist, "agents", "--elastic", "--", BREAK, "srun", *each]
        else:
            start = ["srun", spec.count("--nodes="), spec.count("--ntasks="), *spec.srun_restart_words, *each,
                     "--kill-on-bad-exit=1"]
        return [command_lines(on_each_node(start, words, "SLURM_NODEID"))]

    def spreader(self, spec, mpi):
        return "with srun" if not spec.elastic else "with srun (elastic: nodes may be lost)"

    # --- the job -------------------------------------------------------------------

    def parse_submission(self, proc):
        return parse_sbatch(proc.stdout, proc.stderr, proc.returncode)

    def place(self, job):
        return job.record.get("cluster")

    def query_statuses(self, jobs, job_ids):
        """One squeue for all the jobs (of one cluster), one sacct for those it did not list, then
        each job's own evidence. The options, as squeue(1) and sacct(1) give them
        (slurm.schedmd.com/squeue.html, /sacct.html): ``-j, --jobs=<job_id_list>`` "a comma
        separated list of job IDs" (both), ``-h``/``-n`` no header, squeue ``-o %i`` the job id
        (``<id>_<index>`` for an array's task), sacct ``-o JobID`` and ``-X`` (the job, not its
        steps), ``-P`` "|"-separated, ``-M, --clusters``. Given several ids, squeue lists those it
        knows and leaves the rest out (src/squeue/opts.c asks slurmctld for one job only when one
        id is given: then an unknown id is the error "Invalid job id specified")."""
        cluster = [f"--clusters={jobs[0].record['cluster']}"] if jobs[0].record.get("cluster") else []
        ids = list(dict.fromkeys(job_ids))
        queued = self._in_queue(ids, cluster)  # id -> its line's state, or the squeue run that did not list it
        # Not in the queue (or squeue refused): accounting knows how they ended, when it is on.
        # (sacct asks slurmdbd, not slurmctld: it may answer while the controller is down.) Not
        # asked where squeue found no Slurm at all: sacct cannot tell either.
        asked = [job_id for job_id in ids if not isinstance(queued[job_id], JobStatus)
                 and not (queued[job_id].returncode and retry.not_configured(queued[job_id].stdout + "\n"
                                                                             + queued[job_id].stderr))]
        done = query(["sacct", "-X", "-n", "-P", "-j", ",".join(asked), "-o", "JobID,State,ExitCode",
                      *cluster]) if asked else None
        ended = parse_sacct_jobs(done.stdout, asked) if done is not None and done.returncode == 0 else {}
        return [self._judged(job, queued[job_id], done, ended.get(job_id)) for job, job_id in zip(jobs, job_ids)]

    def _in_queue(self, ids: list, cluster: list) -> dict:
        """``{id: JobStatus}`` for the ids squeue lists, ``{id: the squeue run}`` for the others."""
        proc = query(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r", *cluster])
        if proc.returncode != 0 and len(ids) > 1 and parse_squeue_unknown(proc.stderr):
            # Some versions refuse a whole list for one id they no longer know: halve it until
            # each refused id stands alone (and has left the queue, as when asked alone).
            half = len(ids) // 2
            return {**self._in_queue(ids[:half], cluster), **self._in_queue(ids[half:], cluster)}
        found = parse_squeue_jobs(proc.stdout, ids) if proc.returncode == 0 else {}
        return {job_id: found.get(job_id, proc) for job_id in ids}

    def _judged(self, job, queued, done, ended):
        """One job's state from squeue's answer (its state, or the run that did not list it) and sacct's."""
        if isinstance(queued, JobStatus):
            return queued
        missing = self.not_configured(job, "squeue", queued)  # no Slurm here at all
        if missing is not None:
            return missing
        if ended is not None:
            return ended
        left_queue = queued.returncode == 0 or parse_squeue_unknown(queued.stderr)
        if left_queue:  # squeue answered, without the job
            found = recorded_exit(job)
            if found is not None:
                return found
            # sacct says so when accounting is off (the test cluster's case): say it as a fact.
            off = "accounting is off" if done and parse_sacct_disabled(done.stderr) else "is accounting off?"
            return JobStatus(state="UNKNOWN", exit_code=None, raw="",
                             reason=f"not in squeue, and sacct has no record ({off})")
        down = retry.unreachable(queued.stdout + "\n" + queued.stderr)
        if down:
            return self.controller_down(job, f"squeue: {down}")
        first = (queued.stderr.strip().splitlines() or [""])[0]
        return JobStatus(state="UNKNOWN", exit_code=None, raw="",
                         reason=f"squeue failed: {first}" if first else "squeue failed without a word")

    def requeue(self, script, restart, log, environ):
        """``scontrol requeue``: the same job id starts the script again (``SLURM_RESTART_COUNT``
        counts the restarts, ``--open-mode=append`` keeps the log)."""
        run_or_fail(["scontrol", "requeue", self.job_id_for_requeue(environ)])
        return None


def scheduler(dialect: str | None = None) -> Slurm:
    return Slurm()
