"""The health check's all-reduce (``--preflight``): one process on every node of the launch, one
small all-reduce among them within a time limit. A node whose process never joins, or whose
all-reduce fails, is named; the nodes that answered ``hpcdist doctor --probe`` may still not reach
each other (a network card, a firewall, a route), which only a collective shows.

Where it runs: in the job script, on the first node (:func:`check`, called by ``hpcdist restart
--preflight``), which starts on every node, through one ``srun`` step in a Slurm job and by ssh
elsewhere::

    python -m hpcdist.injob.allreduce MASTER:PORT RANK WORLD SECONDS

Rank 0 (this node) holds the store. gloo on CPUs; nccl where torch sees a GPU. Each process
prints one JSON line: ``{"rank", "host", "ok", "seconds"}``, or ``"error"`` and, on rank 0,
``"missing"`` (the ranks that never joined).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time


def main(argv: list) -> int:
    import datetime
    import socket

    import torch
    import torch.distributed as dist

    master, rank, world, seconds = argv[0], int(argv[1]), int(argv[2]), float(argv[3])
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
    return 0 if said["ok"] else 1


def check(hosts: list, master: str, port: int, here: str, seconds: float = 30) -> dict:
    """host -> why it failed the all-reduce, for each host that did (none: every node took part
    and the sum was right). ``here``: this node's name among ``hosts`` (it runs rank 0)."""
    from hpcdist.injob.doctor import node_command

    order = [here] + [h for h in hosts if h != here]
    argv = [sys.executable, "-m", "hpcdist.injob.allreduce", f"{master}:{port}"]
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
    # A node that never joined fails everyone's all-reduce: it alone is named.
    missing = [order[r] for r in answers.get(here, {}).get("missing", []) if r < len(order)]
    if missing:
        return {host: "never joined the all-reduce" for host in missing}
    return {host: f"failed the all-reduce ({answers.get(host, {}).get('error', 'a wrong sum')})"
            for host in order if not answers.get(host, {}).get("ok")}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
