"""A laptop and a login node on this machine, for tests/test_remote.py: two users of their own
(``useradd``), a real OpenSSH server for the login node (``sshd`` on 127.0.0.1, its own config, host
key and port), and the laptop's ``~/.ssh/config`` naming it ``login`` with a key made for it.

Nothing is faked: the laptop's hpcdist runs as the laptop's user with an environment of its own
(HOME, PATH, no variable of this test process), and reaches the login node only through the
system's ``ssh``; the login node's hpcdist is this checkout's, run by the login user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAPTOP_USER, LOGIN_USER = "hpcd-laptop", "hpcd-login"
#: The python the two users run: the system's (the test's own may lie in root's private home),
#: with this checkout and the test python's packages (jinja2) on its path: same minor version.
PYTHON = "/usr/bin/python3"
PYTHONPATH = f"{ROOT}:{sysconfig.get_paths()['purelib']}"
#: The hpcdist command on the login node: this checkout's.
REMOTE_HPCDIST = f"env PYTHONPATH={PYTHONPATH} {PYTHON} -m hpcdist"


def missing() -> str | None:
    """Why this machine cannot run the two (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (useradd, sshd)"
    same = subprocess.run([PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if same.stdout.strip() != str(sys.version_info[:2]):
        return f"needs {PYTHON} of this python's version {sys.version_info[:2]} (it has the packages)"
    for program in ("sshd", "ssh", "ssh-keygen", "useradd", "runuser", "git"):
        if not shutil.which(program) and not os.path.exists(f"/usr/sbin/{program}"):
            return f"needs {program}"
    return None


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
        # No password, and not locked (useradd's "!" is a locked account, which sshd refuses).
        subprocess.run(["usermod", "-p", "*", name], check=True)
        return pwd.getpwnam(name)


def as_user(user: str, argv: list[str], *, cwd: str | None = None, env: dict | None = None,
            timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    home = pwd.getpwnam(user).pw_dir
    clean = {"HOME": home, "USER": user, "LOGNAME": user, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
             **(env or {})}
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in clean.items()), *argv],
                          cwd=cwd or home, timeout=timeout, capture_output=True, **kwargs)


class LoginNode:
    """sshd on 127.0.0.1:``port``, letting the laptop's key in as ``user`` (the login user, or
    root for the test clusters, which run root's jobs: its key is in a file of the test's own)."""

    def __init__(self, user: str = LOGIN_USER):
        self.user = user
        self.laptop, self.login = _user(LAPTOP_USER), _user(user)
        self.dir = tempfile.mkdtemp(prefix="hpcdist-sshd-")
        self.port = _free_port()
        self._keys()
        self.config = os.path.join(self.dir, "sshd_config")
        with open(self.config, "w") as f:
            f.write(f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.dir}/host_key\n"
                    f"PidFile {self.dir}/sshd.pid\nAllowUsers {user}\nPubkeyAuthentication yes\n"
                    + (f"PermitRootLogin prohibit-password\nAuthorizedKeysFile {self.dir}/root_keys\nStrictModes no\n"
                       if user == "root" else "")
                    + "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                    "MaxSessions 50\nMaxStartups 50\n")
        os.makedirs("/run/sshd", exist_ok=True)
        self.log = open(os.path.join(self.dir, "sshd.log"), "w")
        self.process = subprocess.Popen([shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", self.config],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"sshd did not start: {open(self.log.name).read()}")
                time.sleep(0.1)

    def _keys(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{self.dir}/host_key"], check=True)
        laptop_ssh = os.path.join(self.laptop.pw_dir, ".ssh")
        login_ssh = os.path.join(self.login.pw_dir, ".ssh")
        shutil.rmtree(laptop_ssh, ignore_errors=True)
        as_user(LAPTOP_USER, ["mkdir", "-m", "700", laptop_ssh]).check_returncode()
        if self.user != "root":  # root's own ~/.ssh is left alone
            shutil.rmtree(login_ssh, ignore_errors=True)
            as_user(self.user, ["mkdir", "-m", "700", login_ssh]).check_returncode()
        as_user(LAPTOP_USER, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{laptop_ssh}/id_ed25519"]
                ).check_returncode()
        with open(f"{laptop_ssh}/id_ed25519.pub") as f:
            public = f.read()
        with open(f"{self.dir}/host_key.pub") as f:
            host_key = " ".join(f.read().split()[:2])
        self.write(self.user, f"{self.dir}/root_keys" if self.user == "root" else f"{login_ssh}/authorized_keys", public)
        # The laptop's own ssh config names the login node: hpcdist passes `login` and nothing else.
        self.write(LAPTOP_USER, f"{laptop_ssh}/config",
                   f"Host login\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
                   f"  IdentityFile ~/.ssh/id_ed25519\n  StrictHostKeyChecking yes\n")
        self.write(LAPTOP_USER, f"{laptop_ssh}/known_hosts", f"[127.0.0.1]:{self.port} {host_key}\n")

    @staticmethod
    def write(user: str, path: str, text: str) -> None:
        as_user(user, ["sh", "-c", 'umask 077 && cat > "$0"', path], input=text.encode()).check_returncode()

    def sessions(self) -> list[int]:
        """The pids of sshd's per-connection processes for the login user (`sshd: hpcd-login ...`)."""
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        line = f.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if line.startswith(f"sshd: {self.user}"):
                    found.append(int(pid))
        return found

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        for pid in self.sessions():
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
