"""A cluster from a laptop: commands sent to its login node over the system's OpenSSH.

Where it runs: on the laptop; the one script each command sends runs on the login node.

One master connection per cluster (``ControlMaster``/``ControlPersist``, its socket in a folder
only this user can enter), opened by ``hpcdist connect``: the only command that may prompt (a
password, a second factor). Every other command goes over it with ``ControlMaster=no`` and
``BatchMode=yes`` (never a prompt) after a local ``ssh -O check`` (no network); with none open it
says so and prints the command that opens one. The user's ``~/.ssh/config`` (jump hosts, keys,
ports, user names) applies: hpcdist passes the host as typed and only the options above.

Each command is one ssh session running one POSIX ``sh -c`` script on the login node
(:mod:`hpcdist.remote.script`): go to the remote folder, check that it is the user's own, that the
hpcdist there answers with this version, unpack the code snapshot when it comes along, run
``hpcdist COMMAND`` there. Every word of it is quoted with :func:`shlex.quote`; nothing of the
laptop's environment goes with it. What went wrong is said with where it happened
(:class:`RemoteError`). The laptop's records of its jobs and of the
snapshots it sent (``.hpcdist/remote/``) are :mod:`hpcdist.remote.records`'. A master connection
that stops answering is closed by ssh's keepalives (``ServerAliveInterval`` x ``ServerAliveCountMax``
of the user's config, else :data:`ALIVE`), so that no command waits on it for ever.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from hpcdist import STATE_DIR, __version__

#: How long a master connection stays open with no command over it.
PERSIST = "12h"
#: The first word of the lines the remote script writes for the laptop (on stderr).
MARK = "hpcdist-remote:"
#: The version the laptop expects, set for the login node's hpcdist: it checks it before anything
#: else, in its own process (an older one, which does not, is caught by `hpcdist connect`'s
#: `hpcdist --version`).
EXPECT = "HPCDIST_EXPECT_VERSION"
#: ssh's own exit status for its failures (the connection, the authentication).
SSH_FAILED = 255
#: The laptop's records of its remote jobs and of the snapshots it sent.
RECORDS = os.path.join(STATE_DIR, "remote")


class RemoteError(Exception):
    """A failure on the way to a cluster: ``where`` it happened (the laptop, ssh to HOST, the
    login node HOST) and what to do, in the message."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where


class Target:
    """A cluster as the laptop reaches it: ``host`` for ssh, ``folder`` there, the ``hpcdist``
    command there (words), and ``name``: what the user calls it (a profile, or the host)."""

    def __init__(self, host: str, folder: str = "hpcdist", hpcdist: str = "hpcdist", name: str | None = None):
        self.host, self.folder, self.name = host, folder, name or host
        self.hpcdist = shlex.split(hpcdist) or ["hpcdist"]

    @property
    def command(self) -> str:
        """The hpcdist command there, as the user wrote it."""
        return shlex.join(self.hpcdist)

    def as_record(self) -> dict:
        return {"remote": self.host, "remote_folder": self.folder, "remote_hpcdist": self.command,
                "cluster": self.name}

    @classmethod
    def from_record(cls, record: dict) -> "Target":
        return cls(record["remote"], record["remote_folder"], record["remote_hpcdist"], record.get("cluster"))


# -- ssh ----------------------------------------------------------------------------------------

def control_dir() -> str:
    """The folder of the master connections' sockets: private (0700), made when missing."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "hpcdist-ssh")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # anyone who can reach the socket runs commands as this user there
    except OSError as e:
        raise RemoteError("the laptop", f"cannot make the folder of ssh's connection sockets {path}: "
                          f"{e.strerror or e}; make {base} writable for you") from None
    return path


def _control(host: str) -> list[str]:
    # %C: a hash of this host, the host, port and user ssh resolves (its ~/.ssh/config's): short
    # enough for a socket's path, and one per cluster account.
    return ["-o", f"ControlPath={control_dir()}/%C"]


def master_argv(target: Target) -> list[str]:
    """The command that opens the master connection (it may prompt), then leaves it in the background.
    With keepalives (:func:`alive`): a connection that stops answering is closed, not waited on."""
    interval, count, theirs = alive(target)
    keep = [] if theirs else ["-o", f"ServerAliveInterval={interval}", "-o", f"ServerAliveCountMax={count}"]
    return ["ssh", "-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST}", *keep, *_control(target.host),
            "-f", "-N", "--", target.host]


#: ssh's keepalives when the user's config sets none: a master connection that has had no answer
#: for 10 s x 3 is closed (a Wi-Fi gap shorter than that is no harm).
ALIVE = (10, 3)
#: What the laptop says when it has no ssh.
NO_SSH = ("ssh (OpenSSH's client) is not on this laptop's PATH: install it (apt install openssh-client, or your "
          "system's package), or put it on the PATH")


def ssh(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(argv)`` of an ssh command; no ssh here is a :class:`RemoteError` saying so."""
    try:
        return subprocess.run(argv, **kwargs)
    except FileNotFoundError:
        raise RemoteError("the laptop", NO_SSH) from None


def ssh_popen(argv: list[str], **kwargs) -> subprocess.Popen:
    try:
        return subprocess.Popen(argv, **kwargs)
    except FileNotFoundError:
        raise RemoteError("the laptop", NO_SSH) from None


def alive(target: Target) -> tuple[int, int, bool]:
    """ssh's keepalive interval and count for the host, and whether they are the user's own (their
    ~/.ssh/config sets an interval: ``ssh -G`` says, with no network); else :data:`ALIVE`."""
    said = ssh(["ssh", "-G", "--", target.host], stdin=subprocess.DEVNULL, capture_output=True)
    values = dict(line.split(None, 1) for line in said.stdout.decode(errors="replace").splitlines()
                  if len(line.split(None, 1)) == 2)
    try:
        interval, count = int(values.get("serveraliveinterval", 0)), int(values.get("serveralivecountmax", 3))
    except ValueError:
        interval, count = 0, 3
    return (interval, count, True) if interval > 0 else (*ALIVE, False)


def is_open(target: Target) -> bool:
    """Whether a master connection to the host is open (asked of the local socket: no network)."""
    argv = ["ssh", "-O", "check", *_control(target.host), "--", target.host]
    return ssh(argv, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


def close(target: Target) -> bool:
    argv = ["ssh", "-O", "exit", *_control(target.host), "--", target.host]
    return ssh(argv, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


def connect_command(target: Target) -> str:
    return f"hpcdist connect {shlex.quote(target.name)}"


def require_open(target: Target) -> None:
    if not is_open(target):
        raise RemoteError(f"ssh to {target.host}", f"no connection to {target.host} is open (hpcdist prompts for a "
                          f"password or second factor only when you connect); open one with: "
                          f"{connect_command(target)}")


def lost(target: Target) -> RemoteError:
    """The master connection is gone in the middle of a command: it stopped answering, or the network did."""
    interval, count, _ = alive(target)
    return RemoteError(f"ssh to {target.host}", f"the connection was lost (no answer for {interval * count} s, or "
                       f"the network went down); open it again with: {connect_command(target)}")


def command_argv(target: Target, remote_script: str) -> list[str]:
    """ssh over the master, never prompting, running ``remote_script`` with the login node's sh. Never
    a login of its own: where the master has gone meanwhile, ssh would connect by itself (and wait on
    a dead network); ``ProxyCommand=false`` makes that fail at once (the master does not use it)."""
    return ["ssh", "-o", "ControlMaster=no", "-o", "BatchMode=yes", "-o", "ProxyCommand=false",
            *_control(target.host), "--", target.host, "sh -c " + shlex.quote(remote_script)]


#: The marks the login node's script writes that say how it went, not what went wrong.
INFO = ("exit", "answer", "submitting")


def marks(stderr: str) -> list[str]:
    """The lines the remote script wrote for the laptop (:data:`MARK`), without it."""
    return [line[len(MARK):].strip() for line in stderr.splitlines() if line.startswith(MARK)]


def explain(target: Target, returncode: int, stderr: str) -> RemoteError | None:
    """The failure of a command whose ssh ended with ``returncode`` and ``stderr`` that is not the
    remote command's own (the remote hpcdist's messages are its own: shown as they are)."""
    said_marks = [m for m in marks(stderr) if m.split(" ", 1)[0] not in INFO]
    where = f"the login node {target.host}"
    if returncode == SSH_FAILED and not said_marks:
        if not is_open(target):
            return lost(target)
        said = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        return RemoteError(f"ssh to {target.host}", f"{said}; check that `{connect_command(target)}` works "
                           f"(it opens the connection the other commands use)")
    if not said_marks:
        return None
    mark = said_marks[0]
    if mark.startswith(("untrusted ", "replaceable ")):
        return RemoteError(where, untrusted(said_marks))
    if mark == "no-folder":
        return RemoteError(where, f"no folder {target.folder} there: nothing was submitted to it from here yet "
                           f"(or remote_folder names another folder)")
    if mark == "missing":
        said = " ".join(line for line in stderr.splitlines() if not line.startswith(MARK)).strip()
        return RemoteError(where, f"`{target.command}` failed there ({said or 'not found'}): "
                           f"install hpcdist {__version__} there (pip install hpcdist=={__version__}), or give its "
                           f"path: remote_hpcdist = \"~/venv/bin/hpcdist\" in the profile, or --remote-hpcdist")
    if mark.startswith("version"):
        theirs = mark[len("version"):].strip()
        return RemoteError(where, f"its hpcdist is {theirs!r}, this laptop's is hpcdist {__version__}: the two must "
                           f"be the same version; install hpcdist {__version__} there "
                           f"(pip install hpcdist=={__version__}) or that one here")
    return RemoteError(where, mark)


def untrusted(said: list[str]) -> str:
    """Why the remote folder, or the code in it, is refused: the marks of :mod:`hpcdist.remote.script`'s
    check (``untrusted PATH`` or ``replaceable PATH``, ``ls`` and that path's ``ls -ld`` line, ``folder``
    and the remote folder)."""
    what, _, path = said[0].partition(" ")
    info = dict(m.partition(" ")[::2] for m in said[1:])
    words = info.get("ls", "").split()
    mode, owner = (words[0], words[2]) if len(words) > 2 else ("?", "?")
    folder, quoted = info.get("folder", path), shlex.quote(path)
    if what == "replaceable":
        return (f"{path} (mode {mode}, owner {owner}) lets other users rename {folder} and put a folder of theirs in "
                f"its place, with code your jobs would run: choose a remote_folder below a folder only you (and "
                f"root) can write (remote_folder in the profile, or --remote-folder: $SCRATCH/hpcdist, ~/hpcdist), or "
                f"ask {path}'s owner to make it sticky (chmod +t {quoted}: then only you can rename what is yours)")
    if owner not in (info.get("me"), info.get("uid")):
        return (f"{path} is owned by {owner}, not by you: another user's folder, or one put in place of yours; "
                f"hpcdist sends code and runs jobs only in folders of your own: choose another remote_folder (in the "
                f"profile, or --remote-folder), or look at it and move it away (mv {quoted} {quoted}.old)")
    return (f"{path} is mode {mode}: other users can change the code your jobs run; chmod -R go-w {quoted} if no one "
            f"did, or remove it (hpcdist sends the code again)")


def run(target: Target, remote_script: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    """One round trip: the script over the master, ``data`` on its stdin; its ``stdout`` from the
    script's own first line on (:func:`answer`)."""
    argv = command_argv(target, remote_script)
    done = ssh(argv, input=data, stdin=None if data is not None else subprocess.DEVNULL, capture_output=True)
    done.stdout = answer(done.stdout)
    return done


#: The first line the login node's script writes on stdout: what a login shell printed before it
#: (a banner of a .bashrc) is not the command's.
BEGIN = MARK + " begin\n"


def answer(stdout: bytes) -> bytes:
    """What the script wrote on stdout, after :data:`BEGIN` (nothing when it never ran)."""
    before, found, after = stdout.partition(BEGIN.encode())
    return after if found else b""
