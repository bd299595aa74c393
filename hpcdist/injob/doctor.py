"""``hpcdist doctor``: is every node of this allocation ready for a distributed launch?

Run inside a job (or ``hpcdist doctor --scheduler slurm --nodes 2`` submits
one that runs it). From the first node, for every node of the allocation:
ssh reachable (DeepSpeed's pdsh runner and mpirun need it), the launchers
present (pdsh, mpirun/mpiexec, torchrun, deepspeed), Python, hpcdist, torch,
DeepSpeed and mpi4py at the same versions as on the first node, the GPUs
(count and model) when there are any, and the master port free on the
first node. One table, then what to fix.

Each node describes itself with ``hpcdist doctor --probe`` (JSON), started on
every node by srun inside a Slurm job, else over ssh.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib import metadata

PACKAGES = ("hpcdist", "torch", "deepspeed", "mpi4py")
TOOLS = ("pdsh", "mpirun", "mpiexec", "torchrun", "deepspeed", "srun")
#: Packages whose versions must match the first node's on every node.
MUST_MATCH = ("python", "hpcdist", "torch", "deepspeed", "mpi4py")


def probe(stage_dir: str | None = None) -> dict:
    """This node, as the checks need it. Imports nothing heavy (versions from package metadata).
    With ``stage_dir`` (``--stage-dir``), ``"stage"``: why this node cannot write it, or None."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    found = {"host": socket.gethostname(), "executable": sys.executable, "versions": versions,
             "tools": {t: shutil.which(t) for t in TOOLS}, "gpus": _gpus()}
    if stage_dir:
        found["stage"] = stage_problem(stage_dir)
    return found


def stage_problem(root: str) -> str | None:
    """Why this node cannot write ``root`` (``--stage-dir``, its variables expanded here), or None
    where it can. A file is made there and removed (the permission bits do not tell: root, ACLs, a
    read-only mount), or where ``root`` is not there yet, in the nearest folder above it, in which
    the stage makes it. A variable not set here is not judged: an ssh session lacks the job's."""
    import tempfile

    path = os.path.expandvars(root)
    if "$" in path:
        return None
    folder = path
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        return f"{path}: {folder} is not a folder"
    try:
        fd, made = tempfile.mkstemp(prefix=".hpcdist-probe-", dir=folder)
        os.close(fd)
        os.unlink(made)
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    return None


def _gpus() -> list[str] | str | None:
    """GPU models (one per GPU), None without nvidia-smi, or nvidia-smi's error."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "nvidia-smi did not answer within 30 s"
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        return said[-1] if said else f"nvidia-smi exited with {proc.returncode}"
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def port_problem(port: int) -> str | None:
    """Why the master port cannot be listened on here, or None when it is free (job-setup's check)."""
    from hpcdist.ports import bind_problem

    return bind_problem(port)


def _ssh(port: int | None, timeout: int = 10) -> list[str]:
    """ssh that never asks for a password and gives up on a silent host."""
    return ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}"] + (["-p", str(port)] if port else [])


def ssh_problem(host: str, port: int | None = None, timeout: int = 10) -> str | None:
    try:
        proc = subprocess.run(_ssh(port, timeout) + ["--", host, "true"], capture_output=True,
                              text=True, timeout=timeout + 5, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return "no ssh client here"
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout} s"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return lines[-1] if lines else f"ssh exited with {proc.returncode}"
    return None


def node_command(host: str, argv: list, connect_s: int = 10) -> list:
    """``argv`` run on ``host``: a step of this Slurm job there, else by ssh."""
    from hpcdist.shell import quote

    if os.environ.get("SLURM_JOB_ID"):
        return ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={host}", *argv]
    return _ssh(None, connect_s) + ["--", host, " ".join(quote(word) for word in argv)]


def _probe_argv() -> list[str]:
    return [sys.executable, "-m", "hpcdist", "doctor", "--probe"]


def probe_nodes(hosts: list[str], ssh_port: int | None = None) -> dict[str, dict | str]:
    """host -> its probe, or why it could not be run there."""
    here = socket.gethostname()
    found: dict[str, dict | str] = {}
    if os.environ.get("SLURM_JOB_ID") and shutil.which("srun") and len(hosts) > 1:
        n = str(len(hosts))
        proc = subprocess.run(["srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", "--overlap",
                               *_probe_argv()], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, errors="replace")  # a site's banner may be Latin-1
        for line in proc.stdout.splitlines():
            try:
                p = json.loads(line)
            except ValueError:
                continue
            found[_match(p["host"], hosts)] = p
    for host in hosts:
        if host in found:
            continue
        if _match(here, [host]) == host:
            found[host] = probe()
            continue
        try:
            proc = subprocess.run(_ssh(ssh_port) + ["--", host, " ".join(_probe_argv())],
                                  capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
            found[host] = json.loads(proc.stdout) if proc.returncode == 0 else (
                proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        except (subprocess.TimeoutExpired, ValueError, FileNotFoundError) as e:
            found[host] = f"could not run hpcdist there: {e}"
    return found


def resubmit_problem(environ) -> str | None:
    """Inside a PBS job: whether the server takes a job submitted from this compute node, as
    ``--requeue`` does when it goes on as a new job. A held job is submitted and deleted at once
    (PBS's own answer; its flatuid and hosts.equiv are not readable from here). None when it is."""
    from hpcdist.schedulers import retry
    from hpcdist.schedulers.pbs.job import own_command

    try:
        proc = subprocess.run([own_command("qsub", environ), "-h", "-N", "hpcdist-doctor", "-j", "oe",
                               "-o", "/dev/null"], input="true\n", capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"qsub could not be run from this node ({e}): --requeue cannot go on as a new job"
    if proc.returncode == 0:
        job_id = proc.stdout.strip()
        subprocess.run([own_command("qdel", environ), job_id], capture_output=True, timeout=60)
        return None
    said = (proc.stderr.strip() or proc.stdout.strip())[:300]
    return f"qsub from this node fails ({said}): {retry.hint(said) or 'see its message'}"


def _match(name: str, hosts: list[str]) -> str:
    """The allocation's name for a host that calls itself ``name`` (short or fully qualified)."""
    short = name.split(".")[0]
    for h in hosts:
        if h == name or h.split(".")[0] == short:
            return h
    return name


class Report:
    def __init__(self):
        self.rows: list[dict[str, str]] = []
        self.fixes: list[str] = []
        self.notes: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.fixes


def check(hosts: list[str], master_port: int | None, ssh_port: int | None = None) -> Report:
    """Every node of ``hosts`` probed (ssh on ``ssh_port``, then hpcdist's probe there): whether it
    answers, runs the first node's Python, hpcdist, torch, DeepSpeed and mpi4py, its pdsh, MPI and
    GPUs, and whether the master (the first host) can listen on ``master_port``; the
    :class:`Report`, a row per node and a problem line for each thing that would stop a launch."""
    report = Report()
    head = hosts[0]
    probes = probe_nodes(hosts, ssh_port)
    first = probes.get(head) if isinstance(probes.get(head), dict) else probe()
    for host in hosts:
        p = probes.get(host)
        ssh = "-" if host == head and len(hosts) == 1 else ssh_problem(host, ssh_port)
        row = {"NODE": host, "SSH": "ok" if ssh is None else ("-" if ssh == "-" else "FAILS")}
        if ssh not in (None, "-"):
            report.fixes.append(f"{host}: ssh from {socket.gethostname()} fails ({ssh}). DeepSpeed's pdsh runner "
                                "and mpirun need key login: ssh-keygen, then ssh-copy-id to the nodes; or use "
                                "--launcher torchrun or srun, or DeepSpeed --no-ssh, which need no ssh.")
        if not isinstance(p, dict):
            row.update(PYTHON="?", HPCDIST="?", TORCH="?", PDSH="?", MPI="?", GPUS="?")
            report.fixes.append(f"{host}: could not run hpcdist there ({p}). Install it in the job's environment "
                                "on every node (a shared conda env or venv: --conda, --venv).")
            report.rows.append(row)
            continue
        v, tools, gpus = p["versions"], p["tools"], p["gpus"]
        row["PYTHON"] = v["python"]
        row["HPCDIST"] = v["hpcdist"] or "missing"
        row["TORCH"] = v["torch"] or "missing"
        row["PDSH"] = "yes" if tools.get("pdsh") else "no"
        row["MPI"] = "yes" if tools.get("mpirun") or tools.get("mpiexec") else "no"
        row["GPUS"] = ("0" if gpus is None else f"{len(gpus)} x {gpus[0]}" if isinstance(gpus, list) and gpus
                       else "0" if isinstance(gpus, list) else "ERROR")
        report.rows.append(row)
        for name in MUST_MATCH:
            if v.get(name) != first["versions"].get(name):
                report.fixes.append(
                    f"{host}: {name} {v.get(name) or 'missing'} differs from {head}'s "
                    f"{first['versions'].get(name) or 'missing'}. Activate the same environment on every node "
                    "(a shared conda env or venv: --conda, --venv, --module).")
        if not v["torch"]:
            report.fixes.append(f"{host}: torch is not importable there; install it in the job's environment.")
        if isinstance(gpus, str):
            report.fixes.append(f"{host}: nvidia-smi fails ({gpus}); check the driver or ask your admins.")
        if not tools.get("mpirun") and not tools.get("mpiexec"):
            report.notes.append(f"{host}: no mpirun or mpiexec; --launcher mpirun (and PBS jobs of torchrun, "
                                "accelerate, DeepSpeed --no-ssh) need one: --module openmpi, or apt install "
                                "openmpi-bin.")
    if isinstance(first, dict) and not first["tools"].get("pdsh"):
        report.notes.append(f"{head}: no pdsh; DeepSpeed's default multi-node runner needs it (apt install "
                            "pdsh), or use --no-ssh or --deepspeed-runner slurm/openmpi.")
    models = {r["GPUS"] for r in report.rows if r.get("GPUS") not in (None, "?")}
    if len(models) > 1:
        report.notes.append(f"the nodes have different GPUs ({', '.join(sorted(models))}): ranks will wait for "
                            "the slowest; hpcdist.data can give faster ranks bigger batches.")
    if os.environ.get("PBS_JOBID"):
        problem = resubmit_problem(os.environ)
        if problem:
            report.notes.append(f"{socket.gethostname()}: --requeue resubmits the job from here, and {problem}")
    if master_port is not None:
        problem = port_problem(master_port) if _match(socket.gethostname(), [head]) == head else None
        report.rows[0]["PORT"] = f"{master_port} " + ("free" if problem is None else "IN USE")
        if problem:
            report.fixes.append(f"{head}: master port {master_port} is taken ({problem}). Give another: "
                                "--env MASTER_PORT=<free port>.")
    return report


def report_text(report: Report) -> str:
    columns = ["NODE", "SSH", "PYTHON", "HPCDIST", "TORCH", "PDSH", "MPI", "GPUS", "PORT"]
    widths = {c: max(len(c), *(len(r.get(c, "")) for r in report.rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns).rstrip()]
    lines += ["  ".join(r.get(c, "").ljust(widths[c]) for c in columns).rstrip() for r in report.rows]
    if report.fixes:
        lines += ["", "To fix:"] + [f"- {f}" for f in report.fixes]
    if report.notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in report.notes]
    if report.ok:
        lines += ["", f"All {len(report.rows)} node(s) ready."]
    return "\n".join(lines) + "\n"
