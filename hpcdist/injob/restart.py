"""``hpcdist restart``: after a failed launch, whether to start it again, and on which nodes.

Where it runs: in the job script, on the first node, between two launches (``--max-restarts N``;
job.sh.j2's launch block runs the launch in a loop and asks this command after each failure)::

    hpcdist restart --dir "$run_dir" --status "$status" --max 2 [--job-dir "$job_dir"]

Exit 0: the set-up has been run again (``job.env`` in the run folder, to source: the nodes left,
a new port, ``HPCDIST_RESTART``; torchrun's store of the last launch ended and the next one's
held: :mod:`hpcdist.injob.store`) and the launch is to start again. Exit 1: the job ends with the
launch's status; the log says why. In order:

1. a rank that ended with :data:`hpcdist.env.NO_RESTART` (``sys.exit(hpcdist.env.NO_RESTART)``):
   the training asked for no restart;
2. every node of the launch is asked to describe itself (``hpcdist doctor --probe``, by srun in a
   Slurm job, else by ssh) within :data:`ANSWER_S` seconds; one that does not answer, or runs
   another Python, hpcdist or torch than the first node, or (``--stage-dir``, with
   ``--stage-env``) cannot write the stage folder, is a bad node: left out (``bad_nodes``
   in the run folder), a spare of the allocation (``--spare-nodes``) takes its place; with no spare
   left the launch goes on with the nodes left where ``--min-nodes`` allows (the set-up's
   ``--min-nodes``: the launch reads their count, ``$HPCDIST_NNODES``), else the job ends naming it;
3. with every node well, a rank that raised an exception that is not a lost peer's (a connection
   closed, reset or timed out: what the others see when one dies) is a fault in the training's
   code: not restarted;
4. after two restarts in a row whose launches made no step, none more (the fault is not a node's);
5. the restarts are counted against ``--max``.

Each restart is one line in the log and, with a job folder, one JSON line in its ``restarts``
file (:mod:`hpcdist.jobs.launch_restarts`, which ``hpcdist status`` reads).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading
import time
from typing import NamedTuple

from hpcdist.env import NO_RESTART
from hpcdist.injob.job_setup import (ARGV_FILE, BAD_NODES_FILE, HoldError, SetupError, parse,
                                     read_lines, setup)
from hpcdist.injob.store import release
from hpcdist.jobs.atomic import write_text_atomic

#: Seconds a node has to answer the health check.
ANSWER_S = 20
#: Restarts in a row whose launches made no step, after which there is none more.
STALLED_LIMIT = 2
#: In the run folder: what the restarts know so far.
STATE_FILE = "restarts.json"
#: What a rank sees when a peer dies (torch's, gloo's, NCCL's, MPI's words): no fault of its code.
PEER_LOST = (
    "Connection closed",
    "Connection reset",
    "Connection refused",
    "Broken pipe",
    "timed out",
    "Timeout",
    "DistNetworkError",
    "DistBackendError",
    "NCCL",
    "Gloo",
    "gloo",
    "MPI_ERR",
    "SignalException",
    "KeyboardInterrupt",
    "peer",
)
#: The versions a node must share with the first one (``hpcdist doctor``'s).
SAME = ("python", "hpcdist", "torch")
#: Nodes asked at once: each ask is an ssh or srun process on this node (at 1,000 nodes, 1,000 at
#: once would be 7.6 GB here and 1,000 job steps at once for slurmctld; bench/bench_health.py).
ASKS_AT_ONCE = 128

USAGE = (
    "usage: hpcdist restart --dir RUN_DIR --status N --max N [--job-dir DIR] [--stage-dir DIR]\n"
    "       hpcdist restart --preflight --dir RUN_DIR [--stage-dir DIR]\n"
    "Inside a job script, after a failed launch: end the job (exit 1), or run the set-up again\n"
    "without the nodes that failed and let the launch start again (exit 0). --preflight: before\n"
    "the first launch, the same check of every node (--preflight of hpcdist submit)."
)


def parse_args(argv: list) -> dict:
    options: dict = {}
    args = list(argv)
    while args:
        word = args.pop(0)
        if word == "--preflight":
            options["preflight"] = True
            continue
        name = {
            "--dir": "dir",
            "--status": "status",
            "--max": "max",
            "--job-dir": "job_dir",
            "--stage-dir": "stage_dir",
        }.get(word)
        if name is None or not args:
            raise SetupError(
                f"unknown argument {word!r}" if name is None else f"{word} needs a value"
            )
        options[name] = args.pop(0)
    for name in ("dir",) if options.get("preflight") else ("dir", "status", "max"):
        if name not in options:
            raise SetupError(f"--{name} is required")
    for name in ("status", "max"):
        if name in options and not options[name].isdigit():
            raise SetupError(f"--{name} {options[name]!r}: expected a whole number")
    return options


def _state(run_dir: str) -> dict:
    try:
        with open(os.path.join(run_dir, STATE_FILE), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"count": 0, "stalled": 0, "launched": 0.0}


def _ranks(launched: float) -> list:
    """This launch's ranks' records (:mod:`hpcdist.progress`), in a job with a progress folder."""
    folder = os.environ.get("HPCDIST_PROGRESS_DIR")
    found = []
    for path in glob.glob(os.path.join(folder, "rank-*.json")) if folder else ():
        try:
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if (record.get("started") or 0) >= launched:
            found.append(record)
    return sorted(found, key=lambda r: r.get("rank", 0))


def _probe_command(host: str, stage_dir: str | None = None) -> list:
    from hpcdist.injob.doctor import _probe_argv, node_command

    stage = ["--stage-env", "--stage-dir", stage_dir] if stage_dir else []
    return node_command(host, _probe_argv() + stage, ANSWER_S // 2)


def health(hosts: list, timeout: float = ANSWER_S, stage_dir: str | None = None) -> dict:
    """host -> why it is not well (it did not answer, another version than this node's, GPUs
    missing, ``stage_dir`` it cannot write), for each host that is not; this node answers by
    being here."""
    from hpcdist.injob.doctor import _match, probe

    here = probe(stage_dir)
    answers: dict = {host: here for host in hosts if _match(here["host"], [host]) == host}

    def ask(host: str) -> None:
        try:
            proc = subprocess.run(
                _probe_command(host, stage_dir),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                errors="replace",
            )
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            answers[host] = (
                json.loads(lines[-1])
                if proc.returncode == 0 and lines
                else ((proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
            )
        except subprocess.TimeoutExpired:
            answers[host] = f"no answer within {timeout:g} s"
        except (OSError, ValueError) as e:
            answers[host] = str(e)

    waiting = [host for host in hosts if host not in answers]
    lock = threading.Lock()

    def asker() -> None:
        while True:
            with lock:
                if not waiting:
                    return
                host = waiting.pop(0)
            ask(host)

    threads = [
        threading.Thread(target=asker, daemon=True)
        for _ in range(min(ASKS_AT_ONCE, len(waiting)))
    ]
    for thread in threads:
        thread.start()
    rounds = -(-len(hosts) // ASKS_AT_ONCE)  # each ask ends within its timeout
    deadline = time.monotonic() + rounds * (timeout + 5)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    problems = {}
    for host in hosts:
        answer = answers.get(host, f"no answer within {timeout:g} s")
        if isinstance(answer, str):
            problems[host] = f"did not answer ({answer})"
            continue
        other = [
            f"{name} {answer['versions'].get(name)} (this node's: {here['versions'].get(name)})"
            for name in SAME
            if answer["versions"].get(name) != here["versions"].get(name)
        ]
        if other:
            problems[host] = "runs " + ", ".join(other)
            continue
        gpus = gpu_problem(answer.get("gpus"), here.get("gpus"))
        if gpus:
            problems[host] = gpus
        elif answer.get("stage"):
            problems[host] = (
                f"cannot write its stage folder ({answer['stage']}): give --stage-dir local "
                "storage the job may write on every node (/tmp, $TMPDIR), or free this one's"
            )
    return problems


def gpu_problem(there, here) -> str | None:
    """Why a node's GPUs are not this node's (a GPU fallen off the bus, a driver that fails), as
    ``nvidia-smi`` lists them; None where they agree or neither node has nvidia-smi."""
    if there == here or here is None:
        return None
    if isinstance(there, str):
        return f"has GPUs nvidia-smi cannot list ({there})"
    if there is None:
        return "has no nvidia-smi (this node's lists its GPUs)"
    if isinstance(here, list) and len(there) != len(here):
        return f"has {len(there)} GPU(s) (this node's: {len(here)})"
    return None


class Verdict(NamedTuple):
    """:func:`judge`'s word on a failed launch: whether to start it again, why, and whether the
    restarts are used up (``--max-restarts``) for a cause that would otherwise be restarted."""

    again: bool
    why: str
    spent: bool = False


def judge(status: int, ranks: list, problems: dict, state: dict, most: int) -> Verdict:
    """The :class:`Verdict` on a launch that ended with ``status``."""
    spent = state["count"] >= most
    asked = [r for r in ranks if r.get("exit") == NO_RESTART]
    if asked:
        rank = asked[0].get("rank")
        return Verdict(False, f"rank {rank} asked for no restart (exit {NO_RESTART})")
    if problems:
        why = "; ".join(f"{host} {said}" for host, said in problems.items())
        return Verdict(not spent, why, spent)
    raised = [
        r
        for r in ranks
        if r.get("phase") == "failed"
        and r.get("error")
        and not any(word in r["error"] for word in PEER_LOST)
    ]
    if raised:
        r = raised[0]
        return Verdict(False, (
            f"rank {r.get('rank')} on {r.get('node')} ended with {r['error']}: a fault in the "
            "training's code, which a restart would meet again (every node answered)"
        ))
    gone = [r for r in ranks if r.get("phase") not in ("finished", "failed")]
    why = (
        f"rank {gone[0].get('rank')} on {gone[0].get('node')} ended without a word (killed?)"
        if gone
        else f"the launch ended with exit {status}"
    )
    if state["stalled"] >= STALLED_LIMIT:
        why += f"; no step since the last {STALLED_LIMIT} restarts: not a lost node's fault"
        return Verdict(False, why, spent)
    return Verdict(not spent, why, spent)


def _monitor_said(environ) -> str | None:
    """Why the job's monitor ended the launch, if it did (its note, taken); and the mark that a
    restart is under way, by which the monitor leaves the last launch's ranks alone."""
    from hpcdist.progress.monitor import LAUNCH_ENDED, RESTARTING

    folder = environ.get("HPCDIST_PROGRESS_DIR")
    if not folder:
        return None
    try:
        with open(os.path.join(folder, RESTARTING), "w", encoding="utf-8") as f:
            f.write(f"{time.time()}\n")
        with open(os.path.join(folder, LAUNCH_ENDED), encoding="utf-8") as f:
            said = f.read().strip()
        os.unlink(os.path.join(folder, LAUNCH_ENDED))
        return said or None
    except OSError:
        return None


def set_up_without(run_dir: str, bad: list, environ, restart: int | None = None) -> str:
    """The job's set-up run again with its first arguments, ``bad`` left out (the run folder's
    ``bad_nodes``; a spare of the allocation takes each one's place) and, for a restart, its
    number; its ``job.env`` written. Its log line; SetupError when too few nodes are left."""
    write_text_atomic(os.path.join(run_dir, BAD_NODES_FILE), "".join(f"{host}\n" for host in bad))
    with open(os.path.join(run_dir, ARGV_FILE), encoding="utf-8") as f:
        options = parse(f.read().split("\0"))
    if restart is not None:
        options["restart"] = str(restart)
    text, log = setup(options, environ)
    write_text_atomic(os.path.join(run_dir, "job.env"), text)
    return log


def preflight(options: dict, environ) -> int:
    """Before the first launch: every node asked to answer; one that does not is left out and the
    set-up run again (a spare in its place). Exit 1, said, when too few nodes are left."""
    run_dir, started = options["dir"], time.monotonic()
    hosts = read_lines(environ.get("HPCDIST_NODEFILE", ""))
    problems = health(hosts, stage_dir=options.get("stage_dir"))
    problems = problems or _all_reduce(hosts, run_dir, environ)
    took = time.monotonic() - started
    if not problems:
        print(
            f"hpcdist: preflight: every node answered and took part in an all-reduce "
            f"({len(hosts)}, in {took:.1f} s)",
            file=sys.stderr,
        )
        return 0
    why = "; ".join(f"{host} {said}" for host, said in problems.items())
    try:
        log = set_up_without(run_dir, sorted(problems), environ)
    except HoldError as e:
        print(f"hpcdist: preflight: {why}; {e}: the job ends.", file=sys.stderr)
        return 1
    except SetupError:
        print(
            f"hpcdist: preflight: {why}; no node left to take the place of "
            f"{', '.join(sorted(problems))} "
            f"(give --spare-nodes): the job ends.",
            file=sys.stderr,
        )
        return 1
    print(
        f"hpcdist: preflight: {why}; left out: {' '.join(sorted(problems))}; "
        f"{log.removeprefix('hpcdist: ')}",
        file=sys.stderr,
    )
    return 0


def _all_reduce(hosts: list, run_dir: str, environ) -> dict:
    """The nodes that answered, in one small all-reduce (:mod:`hpcdist.injob.allreduce`, its
    order and answers in the run folder, which every node sees); a port of its own, drawn as the
    launch's is."""
    import socket

    from hpcdist.ports import PortError, choose_port
    from hpcdist.injob import allreduce
    from hpcdist.injob.doctor import _match

    here = _match(socket.gethostname(), hosts)
    if len(hosts) < 2 or here not in hosts:  # one node, or a script not on its first node
        return {}
    master = environ.get("MASTER_ADDR") or here
    try:
        port = choose_port(master)
    except PortError as e:
        return {here: f"has no free port for the all-reduce ({e})"}
    return allreduce.check(hosts, master, port, here, ANSWER_S, run_dir)


def restart(options: dict, environ) -> int:
    run_dir, status, most = options["dir"], int(options["status"]), int(options["max"])
    monitor = _monitor_said(environ)
    state = _state(run_dir)
    ranks = _ranks(state["launched"])
    steps = max((r.get("step") or 0 for r in ranks), default=0)
    # A restarted launch that made no step (the first launch's failure is not a restart's)
    state["stalled"] = 0 if steps or not state["count"] else state["stalled"] + 1
    hosts = read_lines(environ.get("HPCDIST_NODEFILE", ""))
    problems = health(hosts, stage_dir=options.get("stage_dir"))
    again, why, spent = judge(status, ranks, problems, state, most)
    if monitor and not problems and again:
        why = f"the job's monitor ended it: {monitor}"
    elif monitor and problems:
        why += f" (the job's monitor: {monitor})"
    now = time.strftime("%H:%M:%S")
    if not again:
        release(run_dir)  # the last launch's store (torchrun's), if the set-up held one
        left = f" (no restart left: --max-restarts {most})" if spent else ""
        print(
            f"hpcdist: the launch failed at {now} (exit {status}): {why}{left}; the job ends.",
            file=sys.stderr,
        )
        return 1
    bad = read_lines(os.path.join(run_dir, BAD_NODES_FILE)) + sorted(problems)
    try:
        log = set_up_without(run_dir, bad, environ, restart=state["count"] + 1)
    except HoldError as e:
        print(f"hpcdist: the launch failed at {now} (exit {status}): {why}; {e}: the job ends.",
              file=sys.stderr)
        return 1
    except SetupError as e:
        print(
            f"hpcdist: the launch failed at {now} (exit {status}): {why}; "
            f"no node left to take the place of "
            f"{', '.join(sorted(problems))} (give --spare-nodes): the job ends. ({e})",
            file=sys.stderr,
        )
        return 1
    nodes = read_lines(os.path.join(run_dir, "nodes"))  # the set-up's node list, just written
    state.update(count=state["count"] + 1, launched=time.time())
    write_text_atomic(os.path.join(run_dir, STATE_FILE), json.dumps(state))
    spares = [host for host in nodes if host not in hosts]
    fewer = len(nodes) < len(hosts)  # no spare left: on the nodes left (--min-nodes)
    record = {
        "restart": state["count"],
        "of": most,
        "time": time.time(),
        "status": status,
        "cause": why,
        "step": steps,
        "left_out": sorted(problems),
        "spares": spares,
        "nodes": nodes,
        **({"fewer": True} if fewer else {}),
    }
    left = (
        f"; left out: {' '.join(sorted(problems))}"
        + (f", in their place: {' '.join(spares)}" if spares else "")
        + (f", no spare left: going on with {len(nodes)} node{'s' * (len(nodes) > 1)}"
           if fewer else "")
        if problems
        else ""
    )
    print(
        f"hpcdist: restart {state['count']} of {most} at {now}: {why} "
        f"(exit {status}, at step {steps}){left}; "
        f"{log.removeprefix('hpcdist: ')}",
        file=sys.stderr,
    )
    if options.get("job_dir"):
        from hpcdist.jobs import launch_restarts

        try:
            launch_restarts.append(options["job_dir"], record)
        except OSError as e:  # the restart goes on: the log has its line
            print(
                f"hpcdist: cannot record the restart in {options['job_dir']}: {e}", file=sys.stderr
            )
    return 0


def main(argv: list) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    try:
        options = parse_args(argv)
        return (preflight if options.get("preflight") else restart)(options, os.environ)
    except SetupError as e:
        print(f"hpcdist restart: error: {e}", file=sys.stderr)
        return 2
