"""A laptop and a login node on this machine, for tests/remote/test_remote.py: two users of their own
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

import pytest

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
        _record(f"user {name} (useradd, for tests/remote/test_remote.py's laptop and login node)")
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


def closed_folder() -> str | None:
    """The first folder above this checkout that other users cannot enter (``mktemp -d`` makes
    one), or None."""
    path = ROOT
    while True:
        if not os.stat(path).st_mode & 0o001:
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


class LoginNode:
    """sshd on 127.0.0.1:``port``, letting ``laptop_user``'s key in as ``user`` (the login user,
    or root for the test clusters, which run root's jobs: its key is in a file of the test's own).
    Each test process's nodes have laptop users of their own: ssh reads the config of the user's
    home (not $HOME), and the laptop's connection sockets live there too.

    ``otp``: a second factor after the key, a time-based one-time password checked by PAM's
    pam_oath (Debian's libpam-oath, unpacked from its package into a folder: nothing installed),
    under a PAM service of this sshd's own name (sshd uses its program's name)."""

    def __init__(self, user: str = LOGIN_USER, laptop_user: str = LAPTOP_USER, otp: bool = False):
        closed = closed_folder()
        if closed:  # else every command of the two users fails with "No module named hpcdist"
            pytest.fail(f"{closed} is closed to other users (mode {os.stat(closed).st_mode & 0o777:o}): the "
                        f"laptop's and the login node's users run this checkout's hpcdist ({ROOT}). Clone it "
                        f"under folders every user can enter (chmod o+x {closed}).")
        self.user = user
        self.laptop, self.login = _user(laptop_user), _user(user)
        self.dir = tempfile.mkdtemp(prefix="hpcdist-sshd-")
        os.chmod(self.dir, 0o711)  # the laptop's user runs the askpass program here
        self.port = _free_port()
        self._keys()
        program, env, otp_lines = shutil.which("sshd") or "/usr/sbin/sshd", dict(os.environ), ""
        self.pam_service = None
        if otp:
            program, otp_lines = self._otp(program, env)
        self.config = os.path.join(self.dir, "sshd_config")
        with open(self.config, "w") as f:
            f.write(f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.dir}/host_key\n"
                    f"PidFile {self.dir}/sshd.pid\nAllowUsers {user}\nPubkeyAuthentication yes\n"
                    + (f"PermitRootLogin prohibit-password\nAuthorizedKeysFile {self.dir}/root_keys\nStrictModes no\n"
                       if user == "root" else "")
                    + "PasswordAuthentication no\nMaxSessions 50\nMaxStartups 50\n"
                    + (otp_lines or "KbdInteractiveAuthentication no\nUsePAM no\n"))
        os.makedirs("/run/sshd", exist_ok=True)
        self.log = open(os.path.join(self.dir, "sshd.log"), "w")
        self.process = subprocess.Popen([program, "-D", "-e", "-f", self.config], stdout=self.log,
                                        stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"sshd did not start: {open(self.log.name).read()}")
                time.sleep(0.1)

    def _otp(self, sshd: str, env: dict) -> tuple[str, str]:
        module, libs = pam_oath()
        self.pam_service = f"hpcdist-otp-{self.port}"
        program = os.path.join(self.dir, self.pam_service)
        os.symlink(sshd, program)
        secret = os.urandom(20).hex()
        with open(os.path.join(self.dir, "users.oath"), "w") as f:
            f.write(f"HOTP/T30 {self.user} - {secret}\n")
        os.chmod(os.path.join(self.dir, "users.oath"), 0o600)
        with open(f"/etc/pam.d/{self.pam_service}", "w") as f:
            f.write(f"auth required {module} usersfile={self.dir}/users.oath window=20 digits=6\n"
                    "account required pam_permit.so\nsession required pam_permit.so\n")
        env["LD_LIBRARY_PATH"] = libs
        # The laptop's terminal, as ssh asks it (SSH_ASKPASS_REQUIRE=force): the code of the moment,
        # a wrong one when HPCDIST_TEST_WRONG_OTP is set; each question written down.
        self.askpass, self.prompts = os.path.join(self.dir, "askpass"), os.path.join(self.dir, "prompts")
        with open(self.askpass, "w") as f:
            f.write(f"#!{PYTHON}\nimport hashlib, hmac, os, struct, sys, time\n"
                    f"open({self.prompts!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                    f"mac = hmac.new(bytes.fromhex({secret!r}), struct.pack('>Q', int(time.time()) // 30), "
                    "hashlib.sha1).digest()\n"
                    "code = (struct.unpack('>I', mac[mac[-1] & 15:][:4])[0] & 0x7fffffff) % 1000000\n"
                    "print('000000' if os.environ.get('HPCDIST_TEST_WRONG_OTP') else '%06d' % code)\n")
        os.chmod(self.askpass, 0o755)
        with open(self.prompts, "w"):
            pass
        os.chmod(self.prompts, 0o666)
        return program, ("KbdInteractiveAuthentication yes\nUsePAM yes\n"
                         "AuthenticationMethods publickey,keyboard-interactive\n")

    def askpass_env(self, wrong: bool = False) -> dict:
        """What the laptop's ssh needs to ask the askpass program instead of a terminal."""
        return {"SSH_ASKPASS": self.askpass, "SSH_ASKPASS_REQUIRE": "force",
                **({"HPCDIST_TEST_WRONG_OTP": "1"} if wrong else {})}

    def questions(self) -> list[str]:
        """The questions ssh asked the laptop's user so far."""
        with open(self.prompts) as f:
            return f.read().splitlines()

    def _keys(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{self.dir}/host_key"], check=True)
        laptop_ssh = os.path.join(self.laptop.pw_dir, ".ssh")
        login_ssh = os.path.join(self.login.pw_dir, ".ssh")
        shutil.rmtree(laptop_ssh, ignore_errors=True)
        as_user(self.laptop.pw_name, ["mkdir", "-m", "700", laptop_ssh]).check_returncode()
        if self.user != "root":  # root's own ~/.ssh is left alone
            shutil.rmtree(login_ssh, ignore_errors=True)
            as_user(self.user, ["mkdir", "-m", "700", login_ssh]).check_returncode()
        as_user(self.laptop.pw_name, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{laptop_ssh}/id_ed25519"]
                ).check_returncode()
        with open(f"{laptop_ssh}/id_ed25519.pub") as f:
            public = f.read()
        with open(f"{self.dir}/host_key.pub") as f:
            host_key = " ".join(f.read().split()[:2])
        keys = f"{self.dir}/root_keys" if self.user == "root" else f"{login_ssh}/authorized_keys"
        self.write(self.user, keys, public)
        # The laptop's own ssh config names the login node: hpcdist passes `login` and nothing else.
        self.write(self.laptop.pw_name, f"{laptop_ssh}/config",
                   f"Host login\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
                   f"  IdentityFile ~/.ssh/id_ed25519\n  StrictHostKeyChecking yes\n")
        self.write(self.laptop.pw_name, f"{laptop_ssh}/known_hosts", f"[127.0.0.1]:{self.port} {host_key}\n")

    @staticmethod
    def write(user: str, path: str, text: str) -> None:
        as_user(user, ["sh", "-c", 'umask 077 && cat > "$0"', path], input=text.encode()).check_returncode()

    def sessions(self) -> list[int]:
        """The pids of this sshd's per-connection processes for the login user (`sshd: hpcd-login
        ...`), and only this sshd's: the test clusters' own sshds serve root too (pdsh's ranks)."""
        parents, lines = {}, {}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/stat", "rb") as f:
                        parents[int(pid)] = int(f.read().rsplit(b")", 1)[1].split()[1])
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        lines[int(pid)] = f.read().replace(b"\0", b" ").decode(errors="replace").split()
                except (OSError, IndexError, ValueError):
                    continue

        def ours(pid: int) -> bool:
            while pid > 1:
                pid = parents.get(pid, 0)
                if pid == self.process.pid:
                    return True
            return False
        return [pid for pid, words in lines.items()
                if words[:1] == ["sshd:"] and len(words) > 1 and words[1].split("@")[0] == self.user and ours(pid)]

    def stop(self) -> None:
        as_user(self.laptop.pw_name, ["ssh", "-O", "exit", "-o", "ControlPath=~/.cache/hpcdist-ssh/%C", "login"])
        if self.pam_service:
            os.unlink(f"/etc/pam.d/{self.pam_service}")
        sessions = self.sessions()  # before the listener goes: then they are its children no more
        self.process.terminate()
        self.process.wait(10)
        for pid in sessions:
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


#: Where Debian's libpam-oath and liboath0 are unpacked (apt-get download, dpkg-deb -x).
PAM_OATH_DIR = os.path.join(tempfile.gettempdir(), "hpcdist-pam-oath")


def pam_oath() -> tuple[str, str]:
    """pam_oath.so and the folder of its library, unpacked from Debian's packages once (nothing is
    installed: dpkg's database is not touched). pytest.skip, saying why, where they cannot be had."""
    import pytest

    module = os.path.join(PAM_OATH_DIR, "root", "lib", "x86_64-linux-gnu", "security", "pam_oath.so")
    libs = os.path.join(PAM_OATH_DIR, "root", "usr", "lib", "x86_64-linux-gnu")
    if not os.path.exists(module):
        os.makedirs(PAM_OATH_DIR, exist_ok=True)
        got = subprocess.run(["apt-get", "download", "libpam-oath", "liboath0"], cwd=PAM_OATH_DIR,
                             capture_output=True, text=True, timeout=300)
        debs = [n for n in os.listdir(PAM_OATH_DIR) if n.endswith(".deb")]
        if got.returncode != 0 or len(debs) < 2:
            pytest.skip(f"libpam-oath could not be downloaded (apt-get download: {got.stderr.strip()[-200:]})")
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", deb, "root"], cwd=PAM_OATH_DIR, check=True)
        _record(f"libpam-oath and liboath0 unpacked (not installed) into {PAM_OATH_DIR}")
    return module, libs


def _record(line: str) -> None:
    """A line for the run's closing summary of what it installed (tests/conftest.py)."""
    record = os.environ.get("HPCDIST_INSTALL_RECORD")
    if record:
        with open(record, "a") as f:
            f.write(line + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
