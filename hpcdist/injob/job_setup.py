"""``hpcdist job-setup``: the job's set-up before the launcher, in one interpreter.

The job script runs it once, after the environment block (modules, conda, your setup lines)::

    python -m hpcdist job-setup --scheduler pbs --nodes 2 --dir "$run_dir" --hostfile deepspeed:4
    source "$run_dir/job.env"

It reads the allocation of the script's scheduler (:func:`hpcdist.allocation.read`), checks that
it holds the nodes the job asked for (a launcher told of 2 nodes and given 1 waits for the other
until the walltime), writes the node list (``$HPCDIST_NODEFILE``, one host per line) and the
launcher's hostfile (``$HPCDIST_HOSTFILE``, when the launcher reads one) into the run folder, and
the lines the script sources (``job.env`` there), each value quoted:

- ``HPCDIST_JOB_ID`` (torchrun's rendezvous id), the two files, ``MASTER_ADDR`` (the first node;
  127.0.0.1 for the local backend) and ``MASTER_PORT`` (drawn at random and checked free here:
  :func:`hpcdist.ports.choose_port`), unless ``--master-addr``/``--master-port`` give the user's own
  (``--env MASTER_PORT=...``: checked free here too, unless ``--port-unchecked``: under
  ``--launcher none`` the script is the user's own);
- ``HPCDIST_PASS``: the variables the other nodes need from this shell (``PASSED``, hpcdist's own,
  and ``--pass`` names), those that are set: pbsdsh's agents take them along;
- ``mpi_env``, with ``--mpi-env``: ``-x NAME`` for each of them (Open MPI passes only what
  ``-x`` names, and warns about a name that is not set);
- ``DS_ENV_FILE``, with ``--deepspeed-env``: the file DeepSpeed's pdsh runner exports on the other
  nodes, with those variables and ``NCCL_*``/``UCX_*`` (values holding ``$ ` "`` or a backslash
  are left out: DeepSpeed writes them inside double quotes).

With ``--hold-store`` (torchrun on several nodes: :func:`hpcdist.launchers.torchrun.holds_store`)
the set-up also takes the port and leaves a child that holds the agents' rendezvous store on it
(:mod:`hpcdist.injob.store`): the master is then this node (the first node, but for one that
``--exclude`` left out), and a port that cannot be listened on here ends the job (exit 1, said).

The log gets one line, ``hpcdist: nodes: node1 node2; master: node1:20123`` (``hpcdist logs``
names a failed node by its index in it).

With a job folder (``hpcdist submit``), ``--job-dir "$job_dir" --run-id ID`` (the scheduler's id
of this run, a subjob's array id) checks that this run is the job recorded there: the record's id
or a resubmission's (``runs``), by number (``PBS_JOBID`` may carry an ``N:`` prefix, another server
name, a subjob's index), or a record still being written. A run of the script by hand (``sbatch
job.sh`` again) is another job: ``job.env`` then empties ``exit_file``, so that it records no end
there, and the log says so. ``--record-start`` (a job that may be requeued) appends this run's
``start <time> <id> <host>`` line to ``runs`` (:attr:`hpcdist.jobs.Job.history` counts them).

A job that restarts its launch (``--max-restarts``: :mod:`hpcdist.injob.restart`) runs the set-up
again between two launches, with the same arguments (kept in ``setup.argv`` in the run folder):
the nodes listed in ``bad_nodes`` there are left out (a spare of the allocation takes their
place), the port is drawn again (the last launch's store ended, the next one's held), and
``--restart N`` exports ``HPCDIST_RESTART``.

Its arguments are read by hand, not by argparse: this
runs in every job, where its cost is felt.
"""

import os
import sys
import time

from hpcdist.ports import PortError, choose_port, is_this_host

#: What every node needs from the batch shell, where set: the environment the job activated, the
#: container's image (a node's agent starts it: hpcdist.containers).
PASSED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "HPCDIST_IMAGE")
#: What the set-up (and the stop block) export: the other nodes need them too.
OWN = ("MASTER_ADDR", "MASTER_PORT", "HPCDIST_JOB_ID", "HPCDIST_NODEFILE", "HPCDIST_HOSTFILE", "HPCDIST_STOP_FILE",
       "HPCDIST_PROGRESS_DIR", "HPCDIST_PYTHON", "HPCDIST_RESTART", "HPCDIST_NNODES")
#: In the run folder: the set-up's arguments (NUL-separated), for a restart's set-up; the nodes a
#: restart left out, one a line.
ARGV_FILE, BAD_NODES_FILE = "setup.argv", "bad_nodes"
#: Prefixes DeepSpeed's environment file takes whole (its own docs: NCCL_*, and UCX's).
DEEPSPEED_PREFIXES = ("NCCL_", "UCX_")

#: The job folder's names this reads and writes (:mod:`hpcdist.jobs` owns them; a test holds them
#: equal): importing that package would cost every job's set-up a fifth more.
RECORD, RUNS, SUBMITTING, RESUBMITTED, START = "record.json", "runs", "submitting", "resubmitted", "start"

USAGE = ("usage: hpcdist job-setup --scheduler NAME --dir RUN_DIR [--nodes N] [--hostfile FORMAT:SLOTS]\n"
         "                          [--master-addr HOST] [--master-port PORT] [--pass NAME]... [--mpi-env]\n"
         "                          [--deepspeed-env] [--port-unchecked] [--restart N] [--exclude N1,N2]\n"
         "                          [--min-nodes N] [--hold-store]\n"
         "                          [--job-dir DIR --run-id ID [--record-start]]\n"
         "Inside a job script: write the node list, the launcher's hostfile and job.env, the lines to\n"
         "source (the master, its port, the variables to pass), into RUN_DIR. --hold-store: hold\n"
         "torchrun's rendezvous store on the port, on this node, until the job or a restart ends it.")


class SetupError(Exception):
    """What is wrong, for the job's log: one line, naming what was read and the fix."""


class HoldError(SetupError):
    """The port cannot be listened on for torchrun's store (``--hold-store``): another process
    took it since it was drawn. The job ends (exit 1): its agents must not meet whatever is there."""


def parse(argv: list) -> dict:
    """The options, as a dict; SetupError for a mistake (the template writes them, so a mistake
    here is an edited script's)."""
    flags = {"--scheduler": "scheduler", "--dir": "dir", "--nodes": "nodes", "--hostfile": "hostfile",
             "--master-addr": "master_addr", "--master-port": "master_port", "--pass": "pass",
             "--restart": "restart", "--exclude": "exclude", "--job-dir": "job_dir", "--run-id": "run_id",
             "--min-nodes": "min_nodes"}
    switches = {"--mpi-env": "mpi_env", "--deepspeed-env": "deepspeed_env", "--port-unchecked": "port_unchecked",
                "--record-start": "record_start", "--hold-store": "hold_store"}
    options: dict = {"pass": [], "mpi_env": False, "deepspeed_env": False, "port_unchecked": False,
                     "record_start": False, "hold_store": False}
    args = list(argv)
    while args:
        word = args.pop(0)
        name, eq, value = word.partition("=")
        if name in switches and not eq:
            options[switches[name]] = True
        elif name in flags:
            if not eq:
                if not args:
                    raise SetupError(f"{name} needs a value")
                value = args.pop(0)
            if name == "--pass":
                options["pass"].append(value)
            else:
                options[flags[name]] = value
        else:
            raise SetupError(f"unknown argument {word!r}")
    for required in ("scheduler", "dir"):
        if required not in options:
            raise SetupError(f"--{required} is required")
    for name in ("nodes", "master_port", "restart", "min_nodes"):
        if name in options and not (options[name].isascii() and options[name].isdigit()):
            raise SetupError(f"--{name.replace('_', '-')} {options[name]!r}: expected a whole number")
    if "master_port" in options and not (len(options["master_port"]) < 6 and 0 < int(options["master_port"]) < 65536):
        raise SetupError(f"--master-port {options['master_port']!r}: a port is a number from 1 to 65535")
    return options


def setup(options: dict, environ) -> tuple:
    """``(the lines to source, the log line)``, the files written into the run folder."""
    from hpcdist.allocation import AllocationError, read
    from hpcdist.schedulers import job_side
    from hpcdist.shell import quote

    scheduler = options["scheduler"]
    try:
        alloc = read(environ, scheduler=scheduler)
    except (AllocationError, ValueError) as e:
        raise SetupError(str(e)) from None
    job_module = job_side(scheduler)
    if alloc is None:
        names = " or ".join(job_module.JOB_ID_VARIABLES)
        raise SetupError(f"this is a {scheduler} job script, but no {scheduler} allocation is set here ({names} "
                         f"and its node list are not): submit it to {scheduler} (the header names the command), "
                         f"or render it for the scheduler it runs under")
    local = getattr(job_module, "MASTER_ADDR", None)
    allocated = alloc
    alloc, hosts, unwanted = _launch_hosts(options, alloc, scheduler, local)
    job_id = next((environ.get(v) for v in job_module.JOB_ID_VARIABLES if environ.get(v)), None)
    if not job_id:
        raise SetupError(f"{' or '.join(job_module.JOB_ID_VARIABLES)} is not set: this script runs inside a "
                         f"{scheduler} job")
    folder = options["dir"]
    files = {"HPCDIST_NODEFILE": _write(folder, "nodes", "\n".join(hosts) + "\n")}
    if "hostfile" in options:
        fmt, _, slots = options["hostfile"].partition(":")
        try:
            kept = alloc if len(hosts) == len(alloc.hosts) else type(alloc)(alloc.hosts[:len(hosts)], alloc.source)
            text = (kept.with_slots(int(slots)) if slots.isdigit() else kept).to_hostfile(fmt)
        except AllocationError as e:
            raise SetupError(str(e)) from None
        files["HPCDIST_HOSTFILE"] = _write(folder, "hostfile", text)
    master = options.get("master_addr") or local or _first(options, allocated, hosts[0])
    port = _port(options, master)
    values = {"HPCDIST_JOB_ID": job_id, **files, "MASTER_ADDR": master, "MASTER_PORT": port,
              # This interpreter, by its path: `python` on another node may be another one (a login
              # shell's conda or pyenv put before the job's PATH, as Open MPI's remote shells do).
              "HPCDIST_PYTHON": sys.executable}
    if options.get("restart"):
        values["HPCDIST_RESTART"] = str(int(options["restart"]))
    if options.get("min_nodes"):  # the launch's count, which a restart may lower
        values["HPCDIST_NNODES"] = str(len(hosts))
    lines = [f"# Written by `hpcdist job-setup` in job {job_id}, from {alloc.source}."]
    lines += [f"export {name}={quote(value)}" for name, value in values.items()]
    exported = {**environ, **values}
    passed = [n for n in dict.fromkeys(PASSED + OWN + tuple(options["pass"])) if n in exported]
    lines.append(f"export HPCDIST_PASS={quote(' '.join(passed))}")
    if options["mpi_env"]:
        lines.append(f"mpi_env=({' '.join('-x ' + name for name in passed)})")
    if options["deepspeed_env"]:
        lines.append(f"export DS_ENV_FILE={quote(_deepspeed_env(folder, exported, passed))}")
    fewer = f" ({len(hosts)} of --nodes {options['nodes']}: no spare left)" if (
        options.get("nodes") and not local and len(hosts) < int(options["nodes"])) else ""
    log = f"hpcdist: nodes: {' '.join(hosts)}{fewer}; master: {master}:{port}" + (
        f"; left out (--exclude-nodes): {' '.join(unwanted)}" if unwanted else "")
    return "\n".join(lines) + "\n", log


def _first(options: dict, allocated, first: str) -> str:
    """The master: the first node; where this node holds torchrun's store, this node by the
    allocation's name (the script's node, first but for one --exclude left out)."""
    if options["hold_store"] and not is_this_host(first):
        return next((name for name in allocated.host_names if is_this_host(name)), first)
    return first


def _port(options: dict, master: str) -> str:
    """The launch's port, drawn (or the user's, checked); with ``--hold-store``, held here for
    torchrun's store once the last launch's holder has ended (a restart's: its port may be this)."""
    given = int(options["master_port"]) if "master_port" in options else None
    if options["hold_store"]:
        from hpcdist.injob.store import cannot_listen, hold, release

        release(options["dir"])
    try:
        port = str(given if options["port_unchecked"] and given else choose_port(master, given))
    except PortError as e:
        raise SetupError(str(e)) from None
    if options["hold_store"]:
        try:
            hold(int(port), options["dir"])
        except OSError as e:
            raise HoldError(cannot_listen(port, e)) from None
    return port


def _launch_hosts(options: dict, alloc, scheduler: str, local) -> tuple:
    """``(the allocation less the nodes left out, the launch's hosts, those --exclude-nodes left
    out)``: a restart's bad nodes and the excluded ones left out, spares in their places, and
    fewer nodes down to --min-nodes where no spare is left; SetupError where too few are left."""
    # A restart's bad nodes, and those --exclude-nodes named where the scheduler cannot be told:
    # left out, the spares take their places.
    excluded = [n for n in options.get("exclude", "").split(",") if n]
    bad = set(read_lines(os.path.join(options["dir"], BAD_NODES_FILE))) | set(excluded)
    unwanted = [host for host, _ in alloc.hosts if host in excluded]
    left_out = [host for host, _ in alloc.hosts if host in bad]
    if bad:
        left = [pair for pair in alloc.hosts if pair[0] not in bad]
        if not left:  # every node judged bad: the job's end, said by its caller
            raise SetupError(f"every node of {alloc.source} is left out ({' '.join(sorted(bad))})")
        alloc = type(alloc)(left, alloc.source)
    hosts = alloc.host_names
    wanted = int(options.get("nodes", 0))
    # Nodes left out and no spare in their place: the launch goes on with fewer, down to
    # --min-nodes (its count is then $HPCDIST_NNODES, not --nodes).
    least = int(options["min_nodes"]) if left_out and options.get("min_nodes") else wanted
    if wanted and not local and least <= len(hosts) < wanted:
        wanted = len(hosts)
    if wanted and not local and len(hosts) < wanted and least < int(options["nodes"]):
        raise SetupError(
            f"{len(hosts)} node(s) left once {' '.join(left_out)} are left out, fewer than --min-nodes "
            f"{least}, and no spare is left to take their place")
    if wanted and unwanted and len(hosts) < wanted:
        raise SetupError(
            f"{scheduler} gave the job {' '.join(unwanted)}, which --exclude-nodes leaves out, and "
            f"{len(hosts)} node(s) are left of the {wanted} it needs: {scheduler} cannot be told "
            f"which nodes not to give; submit with --spare-nodes {len(excluded)} to have nodes in "
            f"their place")
    if wanted and not local and len(hosts) < wanted:
        raise SetupError(
            f"the job asked for {wanted} nodes but {alloc.source} lists {len(hosts)} ({' '.join(hosts[:8])}"
            f"{' ...' if len(hosts) > 8 else ''}): a launcher told of {wanted} nodes would wait for the others "
            f"until the walltime. The scheduler put the request on fewer hosts: ask for whole nodes (PBS: "
            f"--place scatter, the default, or --exclusive; a job-wide request, -l ncpus=, is spread only by "
            f"servers whose hooks do it, as Gadi's), or submit with --nodes {len(hosts)}")
    if wanted and not local and len(hosts) > wanted:
        hosts = hosts[:wanted]
    return alloc, hosts, unwanted


def _deepspeed_env(folder: str, exported: dict, passed: list) -> str:
    """DeepSpeed's environment file in ``folder`` (its path): the passed variables and those it
    takes whole, but for values DeepSpeed would break (it writes them inside double quotes)."""
    keep = [(n, v) for n, v in exported.items() if n in passed or n.startswith(DEEPSPEED_PREFIXES)]
    text = "".join(f"{n}={v}\n" for n, v in keep if not any(c in v for c in '$`"\\\n'))
    return _write(folder, "deepspeed_env", text)


def id_number(job_id: str) -> str:
    """The number a job id starts with, after a ``N:`` prefix: ``123[4].server`` and ``2:123.pbs``
    are 123's ("" for none)."""
    job_id = job_id.partition(":")[2] if ":" in job_id else job_id
    digits = len(job_id) - len(job_id.lstrip("0123456789"))
    return job_id[:digits]


def recorded_ids(job_dir: str) -> list | None:
    """The ids of the job recorded in ``job_dir``: its record's, then those it resubmitted itself
    (``runs``); None while the record is still being written (the id not known yet)."""
    record = _load_json(os.path.join(job_dir, RECORD))
    if not isinstance(record, dict):
        return []
    if SUBMITTING in record:
        return None
    ids = [record.get("job_id")]
    for line in read_lines(os.path.join(job_dir, RUNS)):
        words = line.split(" ")
        if words[0] == RESUBMITTED and len(words) > 2:
            ids.append(words[2])
    return [i for i in ids if isinstance(i, str)]


def is_recorded_run(job_dir: str, run_id: str) -> bool:
    """Whether the run with the scheduler's id ``run_id`` is the job recorded in ``job_dir``."""
    number = id_number(run_id)
    if not number:
        return False
    ids = recorded_ids(job_dir)
    return ids is None or any(id_number(i) == number for i in ids)


def _load_json(path: str):
    """The JSON value in ``path`` (None where it cannot be read), by the json module's own C
    scanner: ``import json`` compiles json.decoder's regular expressions, a tenth of the set-up."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, ValueError):
        return None
    try:
        from _json import make_scanner
    except ImportError:  # an interpreter without the C accelerator
        from json.scanner import make_scanner

    class Rules:  # what json.JSONDecoder() gives its scanner
        strict, object_hook, object_pairs_hook, memo = True, None, None, {}
        parse_float, parse_int, parse_constant = float, int, float

    try:
        value, end = make_scanner(Rules)(text, len(text) - len(text.lstrip()))
    except (StopIteration, ValueError):
        return None
    return value if not text[end:].strip() else None


def check_run(options: dict, environ) -> str:
    """The lines ``job.env`` gets from the job folder's check (``--job-dir``): none for the job
    recorded there (its start appended to ``runs`` with ``--record-start``); for another run,
    ``exit_file=""``, and the log says why."""
    job_dir, run_id = options.get("job_dir"), options.get("run_id", "")
    if not job_dir or options.get("restart"):
        return ""
    if not is_recorded_run(job_dir, run_id):
        print(f"hpcdist: this run is not the job recorded in {job_dir} (its script run again by hand?): its end is "
              f"not recorded there", file=sys.stderr)
        return 'exit_file=""\n'
    if options["record_start"]:
        from hpcdist.schedulers import job_side

        job_id = next((environ.get(v) for v in job_side(options["scheduler"]).JOB_ID_VARIABLES
                       if environ.get(v)), "")
        try:  # one short append is whole even beside another run's
            with open(os.path.join(job_dir, RUNS), "a", encoding="utf-8") as f:
                f.write(f"{START} {int(time.time())} {job_id} {os.uname().nodename}\n")
        except OSError as e:
            print(f"hpcdist: cannot record this run's start in {job_dir}: {e.strerror or e}", file=sys.stderr)
        # A run the scheduler started again (a requeue, PBS's qrerun) has not ended: the exit code
        # its killed run left is not the job's.
        return '[ -z "$exit_file" ] || rm -f "$exit_file"\n'
    return ""


def read_lines(path: str) -> list:
    """The lines of ``path`` that hold something (none when there is no such file)."""
    try:
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _write(folder: str, name: str, text: str) -> str:
    """``folder/name`` holding ``text``, private (0600) whatever the job's umask: it names the job's
    hosts and, in DeepSpeed's file, its variables."""
    path = os.path.join(folder, name)
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise SetupError(f"cannot write {path}: {e.strerror or e} (the run folder is in the submit folder, "
                         f"which every node must see and the job must be able to write)") from None
    return path


def main(argv: list) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    try:
        options = parse(argv)
        recorded = check_run(options, os.environ)
        text, log = setup(options, os.environ)
        _write(options["dir"], "job.env", text + recorded)
        if "restart" not in options:  # the first set-up's, for a restart's (hpcdist.injob.restart)
            _write(options["dir"], ARGV_FILE, "\0".join(argv))
        # The job's start and the set-up's end, for the start-up's breakdown (hpcdist.progress.startup),
        # where the job has a progress folder: a script rendered alone has none, and loads none of it.
        if os.environ.get("HPCDIST_PROGRESS_DIR"):
            from hpcdist.progress.startup import record_setup

            record_setup(os.environ, time.time(), os.getppid(), os.path.basename(os.path.abspath(options["dir"])))
    except HoldError as e:
        print(f"hpcdist: {e}", file=sys.stderr)
        return 1
    except SetupError as e:
        print(f"hpcdist job-setup: error: {e}", file=sys.stderr)
        return 2
    print(log, file=sys.stderr)
    return 0
