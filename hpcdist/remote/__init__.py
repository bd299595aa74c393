"""A cluster from a laptop: commands sent to its login node over the system's OpenSSH.

Where it runs: on the laptop; the one script each command sends runs on the login node.

One master connection per cluster (``ControlMaster``/``ControlPersist``, its socket in a folder
only this user can enter), opened by ``hpcdist connect``: the only command that may prompt (a
password, a second factor). Every other command goes over it with ``ControlMaster=no`` and
``BatchMode=yes`` (never a prompt) after a local ``ssh -O check`` (no network); with none open it
says so and prints the command that opens one. The user's ``~/.ssh/config`` (jump hosts, keys,
ports, user names) applies: hpcdist passes the host as typed and only the options above.

Each command is one ssh session running one POSIX ``sh -c`` script on the login node (:func:`script`):
go to the remote folder, check that the hpcdist there answers with this version, unpack the code
snapshot when it comes along, run ``hpcdist COMMAND`` there. Every word of it is quoted here with
:func:`shlex.quote`; nothing of the laptop's environment goes with it. What went wrong is said with
where it happened (:class:`RemoteError`).

The laptop keeps only how to find its jobs (``.hpcdist/remote/jobs``: id, host, remote folder) and
which snapshots it sent where (``.hpcdist/remote/sent``); the job folders are on the cluster.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time

from hpcdist import __version__

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
RECORDS = os.path.join(".hpcdist", "remote")


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
    """The command that opens the master connection (it may prompt), then leaves it in the background."""
    return ["ssh", "-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST}", *_control(target.host), "-f", "-N",
            "--", target.host]


def is_open(target: Target) -> bool:
    """Whether a master connection to the host is open (asked of the local socket: no network)."""
    argv = ["ssh", "-O", "check", *_control(target.host), "--", target.host]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


def close(target: Target) -> bool:
    argv = ["ssh", "-O", "exit", *_control(target.host), "--", target.host]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


def connect_command(target: Target) -> str:
    return f"hpcdist connect {shlex.quote(target.name)}"


def require_open(target: Target) -> None:
    if not is_open(target):
        raise RemoteError(f"ssh to {target.host}", f"no connection to {target.host} is open (hpcdist prompts for a "
                          f"password or second factor only when you connect); open one with: "
                          f"{connect_command(target)}")


def command_argv(target: Target, remote_script: str) -> list[str]:
    """ssh over the master, never prompting, running ``remote_script`` with the login node's sh."""
    return ["ssh", "-o", "ControlMaster=no", "-o", "BatchMode=yes", *_control(target.host), "--", target.host,
            "sh -c " + shlex.quote(remote_script)]


# -- The script run on the login node -----------------------------------------------------------

def folder_word(folder: str) -> str:
    """``folder`` as one shell word: ``~/...`` and ``$VAR/...`` expand on the login node, nothing else."""
    if folder == "~" or folder.startswith("~/"):
        rest = folder[2:]
        return '"$HOME"' + (f"/{shlex.quote(rest)}" if rest else "")
    if folder.startswith("$"):
        name, _, rest = folder[1:].partition("/")
        return f'"${{{name.strip("{}")}}}"' + (f"/{shlex.quote(rest)}" if rest else "")
    return shlex.quote(folder)


def script(target: Target, argv: list[str] | None, *, create: bool = False, code: str | None = None,
           send: bool = False, subdir: str = "") -> str:
    """The login node's side of one command: ``hpcdist ARGV`` in the remote folder (in the code
    snapshot ``code`` below it, unpacked from stdin when ``send``), after the version check."""
    folder, hpcdist = folder_word(target.folder), " ".join([folder_word(target.hpcdist[0]),
                                                            *map(shlex.quote, target.hpcdist[1:])])
    lines = []
    if create:
        lines.append(f"mkdir -p {folder} || exit 3")  # mkdir's own message names the folder
    lines += [f"cd {folder} 2>/dev/null || {{ echo '{MARK} no-folder' >&2; exit 3; }}", "base=$PWD"]
    if argv is None:  # connect: the version as the hpcdist there says it, whatever its age
        lines += [f"v=$({hpcdist} --version 2>&1) || {{ echo '{MARK} missing' >&2; printf '%s\\n' \"$v\" >&2; "
                  f"exit 3; }}", f"[ \"$v\" = {shlex.quote('hpcdist ' + __version__)} ] || "
                  f"{{ printf '{MARK} version %s\\n' \"$v\" >&2; exit 3; }}"]
    else:  # the command itself checks it (no second python), and a missing one is said as such
        lines += [f"command -v {folder_word(target.hpcdist[0])} >/dev/null || {{ echo '{MARK} missing' >&2; exit 3; }}",
                  f"{EXPECT}={shlex.quote(__version__)}", f"export {EXPECT}"]
    if argv is None:
        return "; ".join(lines + ["echo \"$v $base\""])
    if code is not None:
        here = f"code/{code}"
        if send:  # unpacked aside, then renamed: a snapshot folder is whole or absent
            lines.append(f"[ -d {here} ] || {{ mkdir -p code && t=$(mktemp -d code/.incoming.XXXXXX) && "
                         f"tar -xzf - -C \"$t\" && {{ mv -T \"$t\" {here} 2>/dev/null || rm -rf \"$t\"; }}; }} "
                         "|| exit 3")
        else:
            lines.append(f"[ -d {here} ] || {{ echo '{MARK} need-code' >&2; exit 3; }}")
        lines += [f"cd {here}" + (f"/{shlex.quote(subdir)}" if subdir else "") + " || exit 3",
                  # The job's folder with the others, not in the snapshot; the laptop's profile came as flags.
                  'HPCDIST_JOBS_DIR="$base/.hpcdist/jobs"', "HPCDIST_NO_DEFAULT_PROFILE=1",
                  "export HPCDIST_JOBS_DIR HPCDIST_NO_DEFAULT_PROFILE"]
    lines.append(f"exec {hpcdist} " + " ".join(map(shlex.quote, argv)))
    return "; ".join(lines)


def explain(target: Target, returncode: int, stderr: str) -> RemoteError | None:
    """The failure of a command whose ssh ended with ``returncode`` and ``stderr`` that is not the
    remote command's own (the remote hpcdist's messages are its own: shown as they are)."""
    marks = [line[len(MARK):].strip() for line in stderr.splitlines() if line.startswith(MARK)]
    where = f"the login node {target.host}"
    if returncode == SSH_FAILED and not marks:
        said = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        return RemoteError(f"ssh to {target.host}", f"{said}; check that `{connect_command(target)}` works "
                           f"(it opens the connection the other commands use)")
    if not marks:
        return None
    mark = marks[0]
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


def run(target: Target, remote_script: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    """One round trip: the script over the master, ``data`` on its stdin."""
    argv = command_argv(target, remote_script)
    return subprocess.run(argv, input=data, stdin=None if data is not None else subprocess.DEVNULL,
                          capture_output=True)


# -- The laptop's records -----------------------------------------------------------------------

def _records_path(name: str) -> str:
    os.makedirs(RECORDS, mode=0o700, exist_ok=True)
    return os.path.join(RECORDS, name)


def record_job(target: Target, job: dict, snapshot: str) -> None:
    """What the laptop keeps of a job sent to ``target``: how to find it there, nothing more."""
    entry = {"job_id": job["job_id"], "scheduler": job.get("scheduler"), "job_name": job.get("job_name"),
             **target.as_record(), "folder": job.get("folder"), "code": snapshot, "submitted_at": time.time()}
    with open(_records_path("jobs"), "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def recorded_jobs() -> list[dict]:
    try:
        with open(os.path.join(RECORDS, "jobs"), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def find_job(ref: str) -> dict | None:
    """The newest record of job ``ref`` (its id, or its folder's name there)."""
    for entry in reversed(recorded_jobs()):
        if ref in (entry["job_id"], os.path.basename(entry.get("folder") or "")):
            return entry
    return None


def sent_before(target: Target, digest: str) -> bool:
    try:
        with open(os.path.join(RECORDS, "sent"), encoding="utf-8") as f:
            return f"{target.host}\t{target.folder}\t{digest}\n" in f.readlines()
    except FileNotFoundError:
        return False


def record_sent(target: Target, digest: str) -> None:
    with open(_records_path("sent"), "a", encoding="utf-8") as f:
        f.write(f"{target.host}\t{target.folder}\t{digest}\n")
