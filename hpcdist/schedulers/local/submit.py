"""The local backend: the job script runs on this machine, its "nodes" as background agents.

No queue and no directives: the job id is the runner's pid (numeric, so ports derive from
it as from a Slurm id), and the exit code lands in the job folder's ``exit_code`` file.
"""

from __future__ import annotations

import os
import sys

from hpcdist import jobs
from hpcdist import validate as v
from hpcdist.schedulers.base import JobId, JobStatus, Scheduler, on_each_node
from hpcdist.schedulers.batch import AlreadyEnded, SubmitError, signal_words
from hpcdist.schedulers.local.job import JOB_ID_VARIABLES, process_start
from hpcdist.schedulers.slurm.submit import JOB_NAMES as SLURM_JOB_NAMES
from hpcdist.shell import command_lines

#: What a shell inside another job holds (an salloc or ``qsub -I`` shell, an srun step, another
#: hpcdist job, or stale exports): left out of a local job's environment, which runs on this host
#: alone. Open MPI's mpirun would read Slurm's allocation and refuse the job's hostfile, or start
#: its daemons on the allocation's nodes; a rank would take Slurm's task variables for its own.
#: A trailing ``_`` is a prefix. Kept: how to reach a scheduler (``SLURM_CONF``, ``PBS_CONF_FILE``,
#: ``PBS_SERVER``), for a job that submits others.
OUTER_JOB = ("SLURM_", "PBS_", "LSB_", "PMI_", "PMIX_", "PALS_", "FLUX_JOB_ID", "HPCDIST_JOB_ID",
             "HPCDIST_NODEFILE", "HPCDIST_HOSTFILE", "HPCDIST_STOP_FILE", "HPCDIST_PASS", "HPCDIST_RESTART_COUNT",
             "MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
             "GROUP_RANK", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_")
KEPT = ("SLURM_CONF", "PBS_CONF_FILE", "PBS_SERVER")
#: What the local backend cannot do, refused by name rather than dropped: ``(option key, flag,
#: why)``. A chain run out of order (--dependency) could overwrite its own input; an array run
#: once is not what was asked.
UNSUPPORTED = (
    ("walltime", "--walltime", "runs the job until it ends: nothing enforces a walltime"),
    ("array", "--array", "runs one job: it has no array"),
    ("dependency", "--dependency", "starts the job at once: it waits for no other job"),
    ("queue", "--queue", "has no queue"),
    ("account", "--account", "charges no account"),
    ("qos", "--qos", "has no quality of service"),
    ("exclusive", "--exclusive", "shares this host with whatever runs on it"),
    ("mail_user", "--mail", "sends no mail"),
)
#: The variable every process of a local job inherits from its runner: the job folder (unique).
JOB_MARK = "HPCDIST_JOB_FOLDER"
#: Seconds a cancelled job's processes get after SIGTERM before SIGKILL (Slurm's KillWait is 30).
KILL_WAIT_S = 10.0
#: The most processes the local backend starts (--nodes x --procs-per-node): each "node" is a
#: background agent on this host, and more than this is a typo, not a workstation's load.
MAX_LOCAL_PROCESSES = 1024


class Local(Scheduler):
    """Runs the script on this machine in its own session; the exit code lands in a file."""

    name = "local"
    title = "local"
    submit_program = "bash"
    job_id_variable = JOB_ID_VARIABLES[0]
    recorded_id_shell = "${HPCDIST_JOB_ID:-}"
    # Slurm's rules: a name that runs here runs on a cluster too.
    job_names = SLURM_JOB_NAMES
    one_host = True

    # --- the job spec ----------------------------------------------------------

    def check_values(self, values, given):
        if given.get("directives"):
            self.directive(str(given["directives"][0]))
        nodes, procs = values.get("nodes", 1), values["procs_per_node"]
        if nodes * procs > MAX_LOCAL_PROCESSES:
            flag, value = ("--procs-per-node", procs) if procs > MAX_LOCAL_PROCESSES else ("--nodes", nodes)
            raise v.ValidationError(
                flag, str(value), f"the local backend would start {nodes * procs} processes on "
                f"this host ({nodes} node(s) x {procs}); it starts at most {MAX_LOCAL_PROCESSES}.",
                "Ask for fewer, or submit with --scheduler slurm or pbs.")
        for key, flag, why in UNSUPPORTED:
            if given.get(key) not in (None, False, "", [], ()):
                raise v.NotHere(flag, str(given[key]), f"the local backend {why}.",
                                        f"Leave {flag} out, or submit with --scheduler slurm or pbs.")
        output = values.get("output") or ""
        if "%" in output.replace("%j", "").replace("%x", ""):
            raise v.ValidationError("--output", output, "the local backend replaces only %j (the job id) and %x "
                                    "(the job name) in the log's name.", "Use those, or a name without %.")
        if values.get("requeue") or "signal_margin_s" in values:
            flag = "--requeue" if values.get("requeue") else "--signal-margin"
            raise v.ValidationError(flag, str(given.get("requeue") or given.get("signal_margin")),
                                    "the local backend has no walltime and no queue to go back to.",
                                    "Submit with --scheduler slurm or pbs, or leave it out.")

    def directive(self, line):
        raise v.NotHere("--directive", line, "the local backend has no scheduler to read it.",
                                "Drop it, or submit with --scheduler slurm or pbs.")

    # --- the script --------------------------------------------------------------

    def spread(self, spec, words, hpcdist, mpi):
        """Several "nodes" on this host, as agents of ``hpcdist agents --local``
        (:func:`hpcdist.schedulers.local.job.start`), which ends them all when one fails."""
        start = [*hpcdist, "agents", "--local", "--nodes", str(spec.nodes), "--"]
        return [command_lines(on_each_node(start, words, "NODE_RANK"))]

    def spreader(self, spec, mpi):
        return "as agents on this host"

    # --- the job -------------------------------------------------------------------

    def submit(self, script: str, workdir: str, log: str) -> JobId:
        # Not at the top: a render reads every scheduler's data (all_schedulers()) and runs nothing.
        import subprocess

        folder = os.path.dirname(script)
        exit_file = jobs.exit_code_file(folder)
        if "%x" in log:  # the job name, as the record names the log
            import json

            with open(os.path.join(folder, jobs.SPEC), encoding="utf-8") as f:
                log = log.replace("%x", json.load(f)["job_name"])
        # The job id is the runner's pid: numeric, so ports derive from it as from a Slurm id.
        # The log's %j is the runner's pid, as the record names it (check_values refused other patterns).
        runner = 'log=${2//"%j"/$$}; bash "$1" > "$log" 2>&1; status=$?; ' + jobs.write_exit_code_shell("$3")
        env = {name: value for name, value in os.environ.items() if name in KEPT or not (
            name.startswith(tuple(p for p in OUTER_JOB if p.endswith("_"))) or name in OUTER_JOB)}
        # The job uses the Python environment hpcdist runs from, activated or not.
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env[JOB_MARK] = os.path.realpath(folder)  # every process of the job inherits it: job_processes()
        proc = subprocess.Popen(
            ["bash", "-c", 'export HPCDIST_JOB_ID=$$; ' + runner, "hpcdist-local", script, log, exit_file],
            cwd=workdir, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        jobs.write_runner(folder, proc.pid, process_start(proc.pid), *this_host())
        return JobId(id=str(proc.pid), scheduler="slurm")  # a plain number, compared exactly

    def status(self, job) -> JobStatus:
        code = jobs.read_exit_code(job.path)
        if code is None and self._live_runner(job) is not None:
            return JobStatus(state="RUNNING", exit_code=None, raw="running", reason=None)
        if job.record.get("cancelled"):
            return JobStatus(state="CANCELLED", exit_code=code, raw="cancelled", reason="hpcdist cancel")
        elsewhere = elsewhere_words(job) if code is None else None
        if elsewhere and not elsewhere.startswith(RESTARTED):
            # Its pid means nothing here: not "failed" (--wait would record it so).
            return JobStatus(state="UNKNOWN", exit_code=None, raw="elsewhere", reason=elsewhere)
        if code is None:
            return JobStatus(state="FAILED", exit_code=None, raw="gone", reason="the runner ended without an exit "
                             "code" + (f" ({elsewhere})" if elsewhere else ""))
        return JobStatus(state="COMPLETED" if code == 0 else "FAILED", exit_code=code, raw=f"exit {code}",
                         reason=signal_words(code).removesuffix("; ") or None)

    @staticmethod
    def _live_runner(job) -> int | None:
        """The runner's pid while it is alive and is still the runner (pids are reused): its start
        time is the recorded one, and it still leads the process group it was started in."""
        pid, started = jobs.read_runner(job.path) or (job.job_id, "None")
        try:
            pid = int(pid)
            if pid <= 1 or os.getpgid(pid) != pid:
                return None
        except (ValueError, OverflowError, ProcessLookupError):
            return None
        now = process_start(pid)
        if now is None:  # no /proc (not Linux): the pid and its group are all there is to go by
            return pid if started == "None" and not os.path.exists("/proc/self/stat") else None
        return pid if started == now else None

    def cancel(self, job) -> None:
        elsewhere = elsewhere_words(job)
        if elsewhere and not elsewhere.startswith(RESTARTED) and jobs.read_exit_code(job.path) is None:
            host = jobs.runner_host(job.path)[0]
            raise SubmitError(f"job {job.job_id} is a local job of {host}: {elsewhere}. Cancel it there "
                              f"(ssh {host} hpcdist cancel {job.job_id})")
        state = self.status(job)
        pid = self._live_runner(job)
        if state.finished or pid is None:  # its pid may already be another process's: nothing is signalled
            code = "" if state.exit_code is None else f", exit {state.exit_code}"
            left = job_processes(job)
            if not left:
                raise AlreadyEnded.of(job.job_id, state)
            # Its runner ended (a killed torchrun agent's workers live on): its processes are ended.
            print(f"hpcdist cancel: job {job.job_id} has ended ({state.state.lower()}{code}), but {len(left)} of its "
                  f"processes still run: ending them", file=sys.stderr, flush=True)
            end_processes(job, None)
            return
        try:  # recorded before the signal, so that a follower never reads the end without it
            job.update(cancelled=True)
        except (OSError, jobs.JobFolderError) as e:  # a full disk must not stop the cancel
            print(f"hpcdist: job {job.job_id} is cancelled, but its record could not say so "
                  f"({getattr(e, 'strerror', None) or e})", file=sys.stderr, flush=True)
        end_processes(job, pid)


#: How elsewhere_words() begins for a job whose host has restarted since: its runner is gone.
RESTARTED = "this host restarted"


def this_host() -> tuple[str, str]:
    """``(host name, boot id)`` of this machine: a local job's pid means something only there,
    and only until it restarts. The boot id is Linux's; elsewhere "-"."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip() or "-"
    except OSError:
        boot = "-"
    return os.uname().nodename, boot


def elsewhere_words(job) -> "str | None":
    """Why the job's runner cannot be looked at from here, or None when it can (or the folder
    does not say where it runs): the home folder is shared by the login nodes of a cluster."""
    where = jobs.runner_host(job.path)
    if where is None:
        return None
    host, boot = this_host()
    if where[0] != host:
        return f"running on {where[0]}; cannot be checked from {host}"
    if where[1] != boot and "-" not in (where[1], boot):
        return f"{RESTARTED} since the job started"
    return None


def job_processes(job) -> list:
    """The pids of the job's processes still alive, found by the variable its runner gave them
    (:data:`JOB_MARK`), which they inherit whatever group or session they are in: a process that
    left the runner's group (setsid, a double fork), torchrun's workers (a session each). Only the
    job's owner's processes, and not this one."""
    mark = f"{JOB_MARK}={os.path.realpath(job.path)}".encode()
    owner = os.stat(job.path).st_uid
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != owner:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                marked = mark in f.read().split(b"\0")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if marked and process_start(int(name)) is not None:  # a zombie has ended
            found.append(int(name))
    return found


def end_processes(job, group: "int | None") -> None:
    """SIGTERM to the runner's group and every process of the job; SIGKILL to those left after
    :data:`KILL_WAIT_S` (as Slurm's KillWait); returns once none is left, saying so meanwhile."""
    import signal
    import time

    def alive() -> list:
        left = job_processes(job)
        try:
            if group is not None:
                os.killpg(group, 0)  # a job started before the mark: its group is all there is
                left = left or [group]
        except (ProcessLookupError, PermissionError):
            pass
        return left

    def send(signum) -> None:
        for pid in ([-group] if group is not None else []) + job_processes(job):
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    send(signal.SIGTERM)
    start = time.monotonic()
    said = False
    while alive() and time.monotonic() < start + KILL_WAIT_S:
        if not said and time.monotonic() > start + 1:
            said = True
            print(f"hpcdist cancel: cancelling job {job.job_id}: {len(alive())} process(es) still running; "
                  f"SIGKILL {KILL_WAIT_S:g} s after the SIGTERM", file=sys.stderr, flush=True)
        time.sleep(0.2)
    left = alive()
    if left:
        print(f"hpcdist cancel: job {job.job_id}: {len(left)} process(es) still running {KILL_WAIT_S:g} s after "
              f"SIGTERM: sending SIGKILL", file=sys.stderr, flush=True)
        send(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive() and time.monotonic() < deadline:
            time.sleep(0.2)
    killed, left = bool(left), alive()
    if killed and not left and group is not None:
        _killed_exit_code(job)
    if left:
        print(f"hpcdist cancel: job {job.job_id}: processes {' '.join(map(str, left))} outlived SIGKILL "
              f"(stuck in the kernel: uninterruptible I/O?)", file=sys.stderr, flush=True)


def _killed_exit_code(job) -> None:
    """137 (128 + SIGKILL) into the exit_code file of a job whose runner was killed before it
    could write one, as a shell would report it: `status` then shows how it ended, not a blank."""
    if jobs.read_exit_code(job.path) is not None:
        return
    from hpcdist.jobs.atomic import write_text_atomic

    try:
        write_text_atomic(jobs.exit_code_file(job.path), "137\n", mode=0o644)
    except OSError:  # a full disk: the record says cancelled all the same
        pass


def scheduler(dialect: str | None = None) -> Local:
    return Local()
