"""A real OpenPBS for the tests: a server and two pbs_mom hosts, each its own network and name.

OpenPBS 23.06 built for this machine's image ships in ``../shared/openpbs/`` (its README); the
``openpbs`` fixture (tests/conftest.py) installs it (the tarball at /, the three Debian packages it
needs, each recorded as the Slurm cluster's packages are), starts ``tests/cluster/openpbs.sh`` once
per session and stops it at the end. Jobs are submitted as root from the head (``pbshead``), where
the server's ``acl_roots`` lets root run jobs, as the Slurm test cluster does; the compute hosts are
``pbsn1`` and ``pbsn2``. Where it cannot run (not root, no namespaces, no tarball) the tests that
need it are skipped, saying why.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from launch import clean_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
OPENPBS_SH = ROOT / "tests" / "cluster" / "openpbs.sh"
SHIPPED = ROOT.parent / "shared" / "openpbs"
TARBALL = "openpbs-23.06.06-cd7ab5e-slim.tar.xz"
PBS_EXEC = "/opt/pbs"
#: What the build needs at run time that the image lacks (../shared/openpbs/README.md), the
#: compute hosts' sshd and the clients the launchers run over it (mpirun, pdsh): one list with the
#: Slurm cluster's, which scripts/bootstrap.sh installs before the run (this is for a bare pytest).
PACKAGES = tuple(line.split("#")[0].strip() for line in (ROOT / "tests" / "cluster" / "packages.txt")
                 .read_text().splitlines() if line.split("#")[0].strip())
#: The cluster's state (PBS_HOME of each host, the datastore): PBS refuses a home under /tmp.
STATE = pathlib.Path(os.environ.get("HPCDIST_OPENPBS_DIR", "/var/spool/hpcdist-openpbs"))
HEAD = "pbshead"
NODES = ("pbsn1", "pbsn2")
#: A third mom, up but offline (`pbsnodes -o`): the spare that tests/injob/test_restarts_cluster.py
#: brings in with `pbsnodes -r` and sends back, no restart of the cluster (a restart to change
#: the node count, as it did, failed under CI's load and left the cluster down for every row
#: after it).
SPARE = "pbsn3"


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "the OpenPBS test cluster needs root (network namespaces, pbs_server, pbs_mom)"
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        return "the OpenPBS test cluster needs iproute2 and util-linux (ip, nsenter)"
    if not (SHIPPED / TARBALL).is_file() and not os.path.exists(f"{PBS_EXEC}/sbin/pbs_server"):
        return f"no OpenPBS build: {SHIPPED / TARBALL} is missing (../shared beside the clone)"
    return None


def _record(line: str) -> None:
    record = os.environ.get("HPCDIST_INSTALL_RECORD")
    if record:
        with open(record, "a") as f:
            f.write(line + "\n")


def install() -> None:
    """The three run-time packages and the build at /opt/pbs, where they are missing."""
    missing = [p for p in PACKAGES if subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout != "install ok installed"]
    if missing:
        # flock: the Slurm test cluster may be installing its own from the other test process.
        for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "--no-install-recommends",
                                                       *missing]):
            proc = subprocess.run(["flock", "/tmp/hpcdist-apt.lock", *command], capture_output=True, text=True,
                                  timeout=600, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            if proc.returncode != 0:
                pytest.fail(f"{' '.join(command)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        _record(f"tests/openpbs.py (the OpenPBS test cluster): apt-get install {' '.join(missing)} (system-wide)")
    if os.path.exists(f"{PBS_EXEC}/sbin/pbs_server"):
        return
    tarball = SHIPPED / TARBALL
    expected = dict(reversed(line.split()) for line in (SHIPPED / "SHA256SUMS").read_text().splitlines() if line)
    got = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if expected.get(TARBALL) != got:
        pytest.fail(f"{tarball}: sha256 {got}, SHA256SUMS says {expected.get(TARBALL)}: not unpacking it")
    proc = subprocess.run(["tar", "-xJf", str(tarball), "-C", "/"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"unpacking {tarball} failed:\n{proc.stderr}")
    _record(f"tests/openpbs.py (the OpenPBS test cluster): {TARBALL} unpacked at / ({PBS_EXEC}, /opt/pbs-cluster)")


def _script(*args: str, timeout: float = 180, check: bool = True, **settings: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PBSX_ROOT": str(STATE), "PBS_EXEC": PBS_EXEC, "PBSX_NODES": "3",
           "PBSX_OFFLINE": SPARE, **settings}
    proc = subprocess.run(["bash", str(OPENPBS_SH), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"openpbs.sh {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def start() -> None:
    # History off, the server's own default: the tests that need it on set it (history).
    _script("start", PBSX_HISTORY="False", timeout=300)
    # A killed session's jobs are deleted by the start itself (tests/cluster/openpbs.sh).
    _stale_pyenv_lock()


def _stale_pyenv_lock() -> None:
    """PBS starts root's jobs in a login shell, which on this machine's image runs root's
    ~/.bashrc and its `pyenv rehash`. A job killed in the middle of it (a session stopped while a
    job started) leaves pyenv's lock behind, and every later job waits 60 s for it: a lock older
    than a minute is no one's."""
    lock = pathlib.Path(os.path.expanduser("~/.pyenv/shims/.pyenv-shim"))
    try:
        if time.time() - lock.stat().st_mtime > 60:
            lock.unlink()
    except OSError:
        pass


def stop() -> None:
    _script("stop", check=False, timeout=120)


def qmgr(directive: str) -> str:
    return _script("qmgr", directive).stdout


def on(host: str, line: str, cwd: str | os.PathLike | None = None, timeout: float = 300,
       **env: str) -> subprocess.CompletedProcess:
    """A shell line run as root on HOST, in CWD, with a user's environment there: PBS's commands and
    this venv's first on PATH (as a user who activated it), and ENV."""
    user_env = clean_env(**env)
    user_env["PATH"] = os.pathsep.join([f"{PBS_EXEC}/bin", os.path.dirname(sys.executable), user_env["PATH"]])
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(user_env.items()))
    where = f"cd {shlex.quote(str(cwd))} && " if cwd else ""
    return _script("exec", host, "bash", "-c", f"export {exports}; {where}{line}", timeout=timeout, check=False)


def as_user(host: str, line: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """A shell line run on HOST as the cluster's user (pbsuser), from their home, with PBS's
    commands first on PATH (openpbs.sh user)."""
    return _script("user", host, line, timeout=timeout, check=False)


def hpcdist(*args: str, cwd, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """``python -m hpcdist ARGS`` as a user on the head would type it."""
    words = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "hpcdist", *args))
    return on(HEAD, words, cwd=cwd, timeout=timeout, **env)


def qstat(*args: str) -> str:
    return on(HEAD, "qstat " + " ".join(shlex.quote(a) for a in args)).stdout


def history(enabled: bool) -> None:
    qmgr(f"set server job_history_enable = {enabled}")
