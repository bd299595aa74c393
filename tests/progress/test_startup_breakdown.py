"""Where the start-up went: the breakdown's arithmetic and its lines, pinned; and a real local job
whose log ends with it, whose `status --json` and `watch` give it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hpcdist.progress import startup
from launch import clean_env

START = 1_000.0


def rank(n, node, proc, begun, rdzv, rdzv_end, first):
    return {"rank": n, "node": node, "proc_started": START + proc, "started": START + begun,
            "rdzv_started": START + rdzv, "rdzv_ended": START + rdzv_end, "first_step": START + first}


RECORDS = {"setup": {"job_started": START, "setup_ended": START + 1.0},
           "stage": {"node1": {"node": "node1", "started": START + 1.5, "ended": START + 9.0, "bytes": 4e8},
                     "node2": {"node": "node2", "started": START + 1.5, "ended": START + 12.0, "bytes": 4e8}},
           "broadcast": {"started": START + 1.0, "ended": START + 4.0}}
RANKS = [rank(0, "node1", 13.0, 13.5, 20.0, 22.0, 23.0), rank(1, "node1", 13.1, 13.6, 20.5, 22.0, 23.5),
         rank(2, "node2", 12.5, 13.0, 21.0, 22.0, 25.0), rank(3, "node2", 12.6, 13.2, 21.5, 22.0, 24.0)]


def test_each_nodes_segments_add_up_to_its_total_and_the_slowest_is_named():
    result = startup.breakdown(RANKS, RECORDS)
    assert result["slowest_node"] == "node2" and result["total_s"] == 25.0 and result["complete"]
    node2 = result["nodes"]["node2"]  # its rank that stepped last: rank 2
    assert (node2["setup"], node2["staging"], node2["launcher"], node2["rank_start"], node2["imports"],
            node2["rendezvous"], node2["first_step"]) == (1.0, 11.0, 0.5, 0.5, 8.0, 1.0, 3.0)
    for row in result["nodes"].values():
        assert round(sum(row[k] for k, _ in startup.SEGMENTS), 2) == row["total"]
    assert result["broadcast_s"] == 3.0


def test_the_log_lines_are_pinned():
    assert startup.lines(startup.breakdown(RANKS, RECORDS)) == [
        "start-up: 25.0 s from the job's start to the first step; slowest node: node2; "
        "the broadcast (sbcast) took 3.0 s",
        "  node         set-up    staging   launcher rank start    imports rendezvous first step    total",
        "  node1           1.0        8.0        4.1        0.5        6.9        1.5        1.5     23.5",
        "  node2           1.0       11.0        0.5        0.5        8.0        1.0        3.0     25.0",
    ]


def test_no_node_is_named_the_slowest_between_equal_totals():
    """Two nodes at 25.0 s as shown: naming one (by a millisecond) once told a user to look at it."""
    even = RANKS[:2] + [dict(r, first_step=START + 24.98) for r in RANKS[2:]]
    even[1] = dict(even[1], first_step=START + 25.0)
    assert startup.lines(startup.breakdown(even, RECORDS))[0] == (
        "start-up: 25.0 s from the job's start to the first step; 2 nodes alike, none the slowest; "
        "the broadcast (sbcast) took 3.0 s")


def test_a_script_that_inits_torch_distributed_itself_has_its_rendezvous_told_apart(tmp_path):
    """A script that calls torch.distributed.init_process_group itself (Fabric, DeepSpeed), not
    init_distributed: its imports and rendezvous were once folded into "first step"."""
    from test_watch import rank_env, rank_state

    (tmp_path / "own.py").write_text(
        "import time, torch, torch.distributed as dist\ntime.sleep(0.5)\n"
        "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29519', rank=0, world_size=1)\n"
        "time.sleep(1)\nm = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    m(torch.ones(1, 2)).sum().backward(); o.step()\n")
    proc = subprocess.run([sys.executable, "-m", "hpcdist.rank", str(tmp_path / "own.py")],
                          env=rank_env(tmp_path / "p"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    state = rank_state(tmp_path / "p")
    assert state["rdzv_started"] is not None and state["rdzv_ended"] >= state["rdzv_started"], state
    assert state["first_step"] - state["rdzv_ended"] >= 1.0, state  # the sleep after it: the first step's


def test_while_it_starts_and_at_ten_thousand_nodes():
    starting = [dict(r, first_step=None) for r in RANKS]
    lines = startup.lines(startup.breakdown(starting, RECORDS))
    assert lines[0] == "start-up so far (no node has made its first step yet); the broadcast (sbcast) took 3.0 s"
    assert lines[2].split()[-2:] == ["-", "-"] and lines[2].split()[2] == "8.0"  # staged, not stepped yet
    many = [rank(n, f"n{n:05d}", 2.0, 2.5, 3.0, 4.0, 5.0 + n / 1000) for n in range(10_000)]
    lines = startup.lines(startup.breakdown(many, {"setup": RECORDS["setup"]}))
    assert "45 nodes alike, none the slowest" in lines[0] and len(lines) == 2 + startup.LISTED + 1
    assert lines[-1] == "  (the 8 slowest of 10000 nodes; the median node's total: 10.0 s)"


def test_a_local_job_shows_it_while_it_starts_and_ends_its_log_with_it(tmp_path):
    (tmp_path / "probe.py").write_text(
        "import time, torch, hpcdist.env\n"
        "hpcdist.env.init_distributed(timeout=60)\n"
        "time.sleep(6)  # a slow first step: watch sees the start-up so far\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    o.zero_grad(); m(torch.ones(1, 2)).sum().backward(); o.step()\n"
        "time.sleep(3)\n")
    env = clean_env()

    def hpcdist(*args):
        return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=tmp_path, capture_output=True, text=True,
                              env=env, timeout=300)

    proc = hpcdist("submit", "--scheduler", "local", "--nodes", "1", "--procs-per-node", "2", "--json", "probe.py")
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout.splitlines()[0])["job_id"]
    watched = hpcdist("watch", job_id, "--interval", "1").stdout  # until the job ends
    node = os.uname().nodename
    assert "start-up so far (no node has made its first step yet)" in watched, watched
    assert f"\n  {node} " in watched.split("start-up so far", 1)[1]
    logs = hpcdist("logs", job_id)
    log = logs.stdout + logs.stderr  # the log, then (where it ended before the monitor's next look) logs' own lines
    ours = [line for line in log.splitlines() if line.startswith("hpcdist: ")]
    at = max(i for i, line in enumerate(ours) if line.startswith("hpcdist: start-up: "))
    head, table, row = ours[at:at + 3]
    assert ours[at + 3:] == [], ours  # the last of hpcdist's lines
    assert head.startswith("hpcdist: start-up: ") and head.endswith(f"s from the job's start to the first step; "
                                                                    f"slowest node: {node}")
    assert table.split()[1:] == ["node", "set-up", "staging", "launcher", "rank", "start", "imports", "rendezvous",
                                 "first", "step", "total"]
    cells = row.split()[2:]
    assert row.split()[1] == node and cells[1] == "-" and all(float(c) >= 0 for i, c in enumerate(cells) if i != 1)
    assert float(cells[-2]) >= 6  # the first step's sleep
    (status,) = json.loads(hpcdist("status", "--json", job_id).stdout)
    assert status["startup"]["slowest_node"] == node and status["startup"]["complete"]
