"""A model of the restart's health check (``hpcdist restart``, ``--preflight``) at 10, 100,
1,000 and 10,000 nodes: stated as a model, from what one ask costs, measured here.

Measured on this machine:

- one node's answer (``--probe``): ``python -m hpcdist doctor --probe``, the command each node
  runs, its wall time (median of ``--reps``);
- this node's cost per ask (``--client-rss``): the resident memory of one ``ssh`` client
  process, the ask's process here (read from /proc while it runs against a host that never
  answers; 8 MB assumed where ssh is missing).

Assumed (each a flag): an ssh connection's set-up (``--connect``, 0.3 s: key exchange on a
cluster's network) or an ``srun --overlap`` step's (the same order).

The check asks :data:`hpcdist.injob.restart.ASKS_AT_ONCE` nodes at once, each ask ending within
its timeout: ``rounds = ceil(nodes / at_once)``, the check's time ``rounds x (connect + probe)``
and its peak cost here ``at_once x client_rss``. Asked all at once, as it was, the time is one
ask's, but the batch node runs ``nodes`` ssh clients at once and slurmctld gets ``nodes`` job
steps at once. Not modelled: a node that does not answer costs its timeout (20 s) in its round.

Beside it, a tree of asks (a model only; hpcdist does not ask so): this node asks ``k =
ceil(sqrt(nodes))`` first-level nodes, each of which asks its subtree of at most ``k`` nodes and
hands back their answers, every level in rounds of ``ASKS_AT_ONCE``: ``(ceil(k / at_once) x 2) x
ask``, each node at most ``min(k, at_once)`` clients at once. Its price, not in the figures: a
first-level node that does not answer hides its subtree, asked again from here after its timeout.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hpcdist.injob.restart import ASKS_AT_ONCE  # noqa: E402


def probe_seconds(reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hpcdist", "doctor", "--probe"], check=True,
                       capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ssh_client_rss_mb() -> float | None:
    """One ssh client's resident memory, to a host that never answers (10.255.255.1: dropped)."""
    try:
        proc = subprocess.Popen(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                                 "10.255.255.1", "true"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return None
    try:
        time.sleep(1)
        with open(f"/proc/{proc.pid}/status", encoding="utf-8") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return rss / 1024
    except (OSError, StopIteration):
        return None
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--connect", type=float, default=0.3, help="seconds (assumed)")
    parser.add_argument("--probe", type=float, help="seconds (default: measured)")
    parser.add_argument("--client-rss", type=float, help="MB (default: measured)")
    args = parser.parse_args()
    probe = args.probe if args.probe is not None else probe_seconds(args.reps)
    rss = args.client_rss or ssh_client_rss_mb() or 8.0
    ask = args.connect + probe
    print(f"one ask: {args.connect:.2f} s connect (assumed) + {probe:.2f} s probe (measured) "
          f"= {ask:.2f} s; one ssh client here: {rss:.1f} MB; {ASKS_AT_ONCE} asked at once")
    print()
    print("| nodes | rounds | check (s) | peak here (MB) | all at once: check (s) | "
          "all at once: peak here (MB) | tree: check (s) | tree: peak a node (MB) | flat / tree |")
    print("|---|---|---|---|---|---|---|---|---|")
    for nodes in (10, 100, 1000, 10000):
        rounds = math.ceil(nodes / ASKS_AT_ONCE)
        flat = rounds * ask
        branch = math.ceil(math.sqrt(nodes))
        tree = 2 * math.ceil(branch / ASKS_AT_ONCE) * ask
        print(f"| {nodes:,} | {rounds} | {flat:.1f} | {min(nodes, ASKS_AT_ONCE) * rss:,.0f} "
              f"| {ask:.1f} | {nodes * rss:,.0f} | {tree:.1f} "
              f"| {min(branch, ASKS_AT_ONCE) * rss:,.0f} | {flat / tree:.1f} |")


if __name__ == "__main__":
    main()
