"""The health check's all-reduce (``--preflight``): one process on every node of the launch, one
small all-reduce among them within a time limit. A node whose process never joins, or whose
all-reduce fails, is named; the nodes that answered ``hpcdist doctor --probe`` may still not reach
each other (a network card, a firewall, a route), which only a collective shows.

Where it runs: in the job script, on the first node (:func:`check`, called by ``hpcdist restart
--preflight``), which starts it on every node at once through one launch that fans out, not a
client per node here: one ``srun`` step over the launch's nodes in a Slurm job, one ``pbsdsh``
(the moms spawn it on every node of the job) in a PBS job, and only elsewhere ssh to each::

    python -m hpcdist.injob.allreduce MASTER:PORT RANK|@ORDER WORLD SECONDS [ANSWERS]

``@ORDER``: a file of the launch's hosts, one a line; a process's rank is its host's line (a node
not in it, a spare, takes no part; a second process on one host, pbsdsh's one per slot, neither:
the first claims ``ANSWERS/RANK.json``). Rank 0 (the first host) holds the store. gloo on CPUs;
nccl where torch sees a GPU. Each process prints one JSON line, also into ``ANSWERS/RANK.json``
(pbsdsh's tasks' output goes to the job's log): ``{"rank", "host", "ok", "seconds"}``, or
``"error"`` and, on rank 0, ``"missing"`` (the ranks that never joined).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time


def _rank(said: str, host: str) -> int | None:
    """RANK, or ``@ORDER``'s line of ``host`` (None where it is not there)."""
    if not said.startswith("@"):
        return int(said)
    from hpcdist.injob.doctor import _match

    with open(said[1:], encoding="utf-8") as f:
        order = [line.strip() for line in f if line.strip()]
    mine = _match(host, order)
    return order.index(mine) if mine in order else None


def _claim(answers: str | None, rank: int) -> bool:
    """This process is ``rank``'s (its answer file made here first), or another on this host is."""
    if not answers:
        return True
    try:
        made = os.open(os.path.join(answers, f"{rank}.json"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(made)
        return True
    except FileExistsError:
        return False


def main(argv: list) -> int:
    import datetime
    import socket

    master, world, seconds = argv[0], int(argv[2]), float(argv[3])
    answers = argv[4] if len(argv) > 4 else None
    rank = _rank(argv[1], socket.gethostname())
    if rank is None or not _claim(answers, rank):
        return 0

    import torch
    import torch.distributed as dist

    host, _, port = master.rpartition(":")
    limit, started = datetime.timedelta(seconds=seconds), time.monotonic()
    said: dict = {"rank": rank, "host": socket.gethostname()}
    store = None
    try:
        store = dist.TCPStore(host, int(port), world, is_master=rank == 0, timeout=limit,
                              wait_for_workers=False)
        store.set(f"joined/{rank}", said["host"])
        gpu = torch.cuda.is_available()
        dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=rank,
                                world_size=world, timeout=limit)
        ones = torch.ones(1, device="cuda" if gpu else "cpu")
        dist.all_reduce(ones)
        said.update(ok=int(ones.item()) == world, seconds=round(time.monotonic() - started, 2))
        dist.destroy_process_group()
    except Exception as e:  # what the check names; the job goes on without this node
        said.update(ok=False, error=(str(e).strip().splitlines() or [type(e).__name__])[0][:200])
        if rank == 0 and store is not None:
            said["missing"] = [r for r in range(world) if not store.check([f"joined/{r}"])]
    print(json.dumps(said), flush=True)
    if answers:
        from hpcdist.jobs.atomic import write_text_atomic

        write_text_atomic(os.path.join(answers, f"{rank}.json"), json.dumps(said) + "\n")
    return 0 if said["ok"] else 1


def fan_out(order_file: str, world: int, environ) -> list | None:
    """The one command that starts this module on every node at once (its arguments follow), or
    None where there is none (neither a Slurm job with srun nor a PBS job with pbsdsh)."""
    if environ.get("SLURM_JOB_ID") and shutil.which("srun"):
        return ["srun", "--overlap", f"--nodes={world}", f"--ntasks={world}",
                "--ntasks-per-node=1", f"--nodelist={order_file}"]
    if environ.get("PBS_JOBID") and shutil.which("pbsdsh"):
        from hpcdist.schedulers.pbs.pbsdsh import passed_variables

        return ["pbsdsh", "--", "env", *passed_variables(environ)]
    return None


def check(hosts: list, master: str, port: int, here: str, seconds: float = 30,
          folder: str | None = None) -> dict:
    """host -> why it failed the all-reduce, for each host that did (none: every node took part
    and the sum was right). ``here``: this node's name among ``hosts`` (it runs rank 0);
    ``folder``: one every node sees (the run folder), for the order and the answers."""
    order = [here] + [h for h in hosts if h != here]
    argv = [sys.executable, "-m", "hpcdist.injob.allreduce", f"{master}:{port}"]
    folder = os.path.join(folder, f"allreduce-{port}") if folder else None
    launch = None
    if folder:
        os.makedirs(folder, exist_ok=True)
        order_file = os.path.join(folder, "order")
        with open(order_file, "w", encoding="utf-8") as f:
            f.write("".join(f"{host}\n" for host in order))
        launch = fan_out(order_file, len(order), os.environ)
    if launch is None:
        answers = _each_by_ssh(order, argv, here, seconds)
    else:
        answers = _all_at_once(launch + argv + [f"@{order_file}", str(len(order)), str(seconds),
                                                folder], order, folder, seconds)
        shutil.rmtree(folder, ignore_errors=True)
    # A node that never joined fails everyone's all-reduce: it alone is named (one that left no
    # answer at all never ran).
    missing = [order[r] for r in answers.get(here, {}).get("missing", []) if r < len(order)]
    missing += [host for host in order if host not in answers and host not in missing]
    if missing and answers.get(here, {}).get("ok") is not True:
        return {host: "never joined the all-reduce" for host in missing}
    return {host: f"failed the all-reduce ({answers.get(host, {}).get('error', 'a wrong sum')})"
            for host in order if not answers.get(host, {}).get("ok")}


def _all_at_once(command: list, order: list, folder: str, seconds: float) -> dict:
    """host -> its answer, from the answer files of one launch on every node."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30,
                              stdin=subprocess.DEVNULL, errors="replace")
        said = proc.stderr.strip().splitlines()
    except subprocess.TimeoutExpired:
        said = [f"no answer within {seconds + 30:g} s"]
    except OSError as e:
        said = [str(e)]
    answers = {}
    for rank, host in enumerate(order):
        try:
            with open(os.path.join(folder, f"{rank}.json"), encoding="utf-8") as f:
                answers[host] = json.loads(f.read())
        except (OSError, ValueError):  # claimed but not written: it ran, and was cut short
            if os.path.exists(os.path.join(folder, f"{rank}.json")):
                answers[host] = {"ok": False, "error": said[-1] if said else "no answer"}
    return answers


def _each_by_ssh(order: list, argv: list, here: str, seconds: float) -> dict:
    """host -> its answer, each node started by a command of its own (ssh), all at once: where
    the job has no launch that reaches every node."""
    from hpcdist.injob.doctor import node_command

    answers: dict = {}

    def run(rank: int, host: str) -> None:
        words = [*argv, str(rank), str(len(order)), str(seconds)]
        command = words if host == here else node_command(host, words, int(seconds) // 2)
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30,
                                  stdin=subprocess.DEVNULL, errors="replace")
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            answers[host] = json.loads(lines[-1]) if lines else {
                "ok": False, "error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
        except subprocess.TimeoutExpired:
            answers[host] = {"ok": False, "error": f"no answer within {seconds + 30:g} s"}
        except (OSError, ValueError) as e:
            answers[host] = {"ok": False, "error": str(e)}

    # Every process at once: a collective needs them all.
    threads = [threading.Thread(target=run, args=(k, h), daemon=True) for k, h in enumerate(order)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 40)
    return answers


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
