"""PBS's own way to start one agent per node, for a site without an MPI launcher: ``pbsdsh``.

``--pbs-spread pbsdsh``: the job script runs ``python -m hpcdist agents --pbsdsh --dir "$run_dir"
-- COMMAND`` (:mod:`hpcdist.injob.agents`), which calls :func:`start`. What pbsdsh does, as its man pages
and source say, and what :func:`start` does about it:

- ``pbsdsh -n INDEX -- PROGRAM ARGS`` spawns PROGRAM through PBS's task manager (tm_spawn) on the
  INDEX-th node of the job, counted as ``$PBS_NODEFILE``'s lines (one per slot). Both PBS Pro /
  OpenPBS (src/cmds/pbsdsh.c: ``pbsdsh [-c copies][-s][-v][-o] -- program``, ``[-n node_index]``;
  no ``-u``) and Torque (pbsdsh(1B): ``-n node``, and ``-u`` for once per host) take ``-n``: one
  pbsdsh per host, at the index of the host's first line, is the same command under both.
- The task gets the job's environment from the MOM, not the variables the script set (an
  activated environment's PATH, MASTER_ADDR, ``--env``), and starts in $HOME: each agent is
  started through ``env NAME=VALUE...`` with the variables the job's set-up named
  (``$HPCDIST_PASS``: argv words, no quoting lost) and its node's ``NODE_RANK``, and the node
  agent (``hpcdist agents --node``) changes to the submit folder itself.
- PBS Pro's pbsdsh exits 0 whatever its task did (it prints ``pbsdsh: task 0x... exit status N``):
  each node agent leaves its command's status in the run folder (in the submit folder, which
  every node sees), and :func:`hpcdist.injob.agents.watch` reads it. On SIGTERM pbsdsh kills its task
  (tm_kill).
"""

import os
import sys


def start(command: list, options: dict) -> int:
    """One pbsdsh per host of ``$PBS_NODEFILE``, each running ``command`` through a node agent;
    the job's status (:func:`hpcdist.injob.agents.watch`)."""
    import subprocess

    from hpcdist.injob.agents import Agent, watch
    from hpcdist.injob.job_setup import read_lines
    from hpcdist.schedulers.pbs.job import nodefile_lines

    lines = nodefile_lines(os.environ.get("PBS_NODEFILE") or _no("PBS_NODEFILE"))
    first = {}
    for index, host in enumerate(lines):
        first.setdefault(host, index)
    # The launch's nodes, in the set-up's order (a spare not yet used, a node a restart left out,
    # get no agent): its node list, where it wrote one.
    launch = [host for host in read_lines(os.environ.get("HPCDIST_NODEFILE") or "") if host in first]
    if launch:
        first = {host: first[host] for host in launch}
    folder = os.path.join(options.get("dir") or _no("--dir"), "agents")
    os.makedirs(folder, exist_ok=True)
    passed = passed_variables(os.environ)
    agents = []
    for node, (host, index) in enumerate(first.items()):
        status = os.path.join(folder, str(node))
        argv = ["pbsdsh", "-n", str(index), "--", "env", *passed, f"NODE_RANK={node}", sys.executable, "-m",
                "hpcdist", "agents", "--node", "--status", status, "--cd", os.getcwd(), "--", *command]
        agents.append(Agent(subprocess.Popen(argv), node, host, status))
    return watch(agents)


def passed_variables(environ) -> list:
    """``NAME=VALUE`` for each variable the job's set-up named (``$HPCDIST_PASS``) and is set:
    what a pbsdsh task, started with the MOM's environment, is given through ``env``."""
    names = environ.get("HPCDIST_PASS", "PATH").split()
    return [f"{name}={environ[name]}" for name in names if name in environ]


def _no(what: str):
    raise SystemExit(f"hpcdist agents --pbsdsh: {what} is not set: this runs inside a PBS job script")
