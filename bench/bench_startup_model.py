"""A model of a job's start-up at 100, 1,000 and 10,000 nodes, with the environment on a shared
parallel file system and with ``--stage-env``: stated as a model, from per-node costs measured here.

Measured on this machine (each can be given instead):

- metadata operations per interpreter that imports torch (``--ops``): stat, open and readlink
  calls of ``python -c "import torch"``, counted with strace where it is installed (19,300 here:
  17,900 stats, 1,400 opens);
- the local import time (``--local-import``): that import from the local disk;
- the packed environment's bytes (``--bytes``) and one node's unpack time (``--unpack``; with the
  squashfs image, its copy and checking mount: nothing is unpacked): from
  ``.hpcdist/stage/*.sqfs`` or ``*.tar.*`` under /tmp/hpcdist-stage-tests (tests/submission/test_stage_env*.py) and
  the records of its last run, else the figures of docs/guide/staging.md.

Assumed (the model's, each a flag; typical published figures, not measured here):

- the file system's metadata service answers ``--mds-ops`` operations a second in all (Lustre:
  one MDS, tens of thousands to about 100,000 a second), each costing a client ``--rtt`` seconds at
  least (0.2 ms); a node's ranks share its client cache, so a node asks for the ``ops`` once;
- unstaged, every node imports at once: the start-up's imports take the longer of one node's own
  (``ops x rtt + local import``) and the service's queue (``nodes x ops / mds_ops``);
- staged with a broadcast (Slurm's sbcast): a tree of fan-out ``--fanout`` (slurm.conf's
  TreeWidth; 16 assumed), pipelined: ``bytes / link + depth x block / link`` (link ``--link``
  bytes a second, 1 GB/s per stream assumed; block 1 MiB); then each node unpacks on its own
  (``unpack``) and imports locally (``local import``);
- staged without a broadcast (PBS: each node reads the file once): ``max(bytes / link,
  nodes x bytes / fs_bandwidth)`` (``--fs-bandwidth`` 100 GB/s assumed) plus one open per node
  at the metadata service, then as above.

Not modelled: the launcher's own fan-out (srun, mpirun, pbsdsh), the rendezvous (O(nodes) at one
store), node-to-node variance, the shared file system's other users.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = (100, 1_000, 10_000)
#: What docs/guide/staging.md gives, where nothing was measured on this machine yet.
DOCUMENTED = {"bytes": 403e6, "unpack": 7.5}


def count_ops(python: str) -> int | None:
    """stat/open/readlink calls of an interpreter that imports torch (strace -c), or None."""
    if not shutil.which("strace"):
        return None
    out = "/tmp/hpcdist-bench-strace.txt"
    proc = subprocess.run(["strace", "-f", "-c", "-e", "trace=%file", "-o", out, python, "-c", "import torch"],
                          capture_output=True, text=True)
    if proc.returncode:
        return None
    with open(out) as f:
        lines = [line.split() for line in f if line.strip() and line.split()[-1] in (
            "newfstatat", "stat", "lstat", "openat", "open", "readlink", "statx", "access")]
    os.unlink(out)
    return sum(int(parts[3]) for parts in lines if len(parts) >= 5)


def local_import(python: str, reps: int = 3) -> float:
    best = math.inf
    for _ in range(reps):
        started = time.perf_counter()
        subprocess.run([python, "-c", "import torch"], check=True)
        best = min(best, time.perf_counter() - started)
    return best


def measured_stage() -> dict:
    """The packed file's bytes and the slowest node's staging from the last staged cluster runs
    here: the squashfs image's (copy and checking mount; nothing unpacked) where the runs used it,
    else the tar's unpack."""
    found = {}
    records = sorted(glob.glob("/tmp/hpcdist-stage-tests/*/.hpcdist/jobs/*/progress/stage-*.json"),
                     key=os.path.getmtime)
    stages = {"image": [], "tar": []}
    for path in records[-20:]:
        try:
            with open(path) as f:
                r = json.load(f)
            if r.get("what") == "unpack":
                stages["image" if r.get("how") == "image" else "tar"].append(r["ended"] - r["started"])
        except (OSError, ValueError, KeyError):
            pass
    how = "image" if stages["image"] else "tar"
    if stages[how]:
        found["unpack"] = max(stages[how][-4:])
    pattern = "*.sqfs" if how == "image" else "*.tar.*"
    archives = sorted(glob.glob(f"/tmp/hpcdist-stage-tests/*/.hpcdist/stage/{pattern}"), key=os.path.getmtime)
    if archives:
        found["bytes"] = float(os.path.getsize(archives[-1]))
    return found


def model(n: int, a) -> dict:
    unstaged = max(a.ops * a.rtt + a.local_import, n * a.ops / a.mds_ops)
    depth = max(1, math.ceil(math.log(n, a.fanout)))
    broadcast = a.bytes / a.link + depth * (1 << 20) / a.link
    read_once = max(a.bytes / a.link, n * a.bytes / a.fs_bandwidth) + n / a.mds_ops
    return {"nodes": n, "unstaged": unstaged, "sbcast": broadcast + a.unpack + a.local_import,
            "read_once": read_once + a.unpack + a.local_import, "depth": depth}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--ops", type=int, help="metadata operations per import of torch (default: measured)")
    p.add_argument("--local-import", type=float, help="seconds to import torch from local disk (default: measured)")
    p.add_argument("--bytes", type=float, help="the packed environment's bytes (default: measured)")
    p.add_argument("--unpack", type=float, help="seconds for one node to unpack it (default: measured)")
    p.add_argument("--mds-ops", type=float, default=100_000.0, help="metadata operations a second, all clients")
    p.add_argument("--rtt", type=float, default=0.0002, help="seconds per metadata operation for one client")
    p.add_argument("--fanout", type=int, default=16, help="the broadcast tree's fan-out (Slurm TreeWidth)")
    p.add_argument("--link", type=float, default=1e9, help="bytes a second of one broadcast or read stream")
    p.add_argument("--fs-bandwidth", type=float, default=100e9, help="the shared file system's bytes a second in all")
    a = p.parse_args(argv)
    sources = {}
    if a.ops is None:
        a.ops = count_ops(a.python)
        sources["ops"] = "strace here" if a.ops else "assumed"
        a.ops = a.ops or 19_300
    if a.local_import is None:
        a.local_import, sources["local_import"] = local_import(a.python), "measured here"
    stage = measured_stage()
    for key in ("bytes", "unpack"):
        if getattr(a, key) is None:
            setattr(a, key, stage.get(key, DOCUMENTED[key]))
            sources[key] = "the last staged cluster run here" if key in stage else "docs/guide/staging.md"
    print("## Start-up at scale: a model (bench/bench_startup_model.py)\n")
    print(f"Per node: {a.ops:,} metadata operations to import torch ({sources.get('ops', 'given')}), "
          f"{a.local_import:.1f} s to import it from local disk ({sources.get('local_import', 'given')}), "
          f"{a.bytes / 1e6:.0f} MB packed and {a.unpack:.1f} s to unpack ({sources.get('bytes', 'given')}). "
          f"Assumed: {a.mds_ops:,.0f} metadata operations/s at the file system, {a.rtt * 1e3:.1f} ms each for one "
          f"client, broadcast fan-out {a.fanout}, {a.link / 1e9:.1f} GB/s per stream, "
          f"{a.fs_bandwidth / 1e9:.0f} GB/s from the shared file system in all. A model, not a measurement: "
          f"the module docstring says what it leaves out.\n")
    print("| nodes | imports from the shared FS | --stage-env, sbcast (Slurm) "
          "| --stage-env, each node reads once (PBS) |")
    print("|---:|---:|---:|---:|")
    for n in NODES:
        m = model(n, a)
        print(f"| {n:,} | {m['unstaged']:.0f} s | {m['sbcast']:.0f} s (tree depth {m['depth']}) "
              f"| {m['read_once']:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
