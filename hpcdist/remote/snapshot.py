"""The code a job sent from a laptop runs: a snapshot of the git working tree.

What git tracks, as it is on disk now (uncommitted changes included, and named), plus the files
and folders the user names (``--include``). Its name is a hash of its content (paths, the
executable bit, the bytes), so an unchanged tree has the same name and is not sent again; the
cluster unpacks it into a folder of that name, which the job runs from: a queued job does not see
later edits. Untracked files are left out, and counted. The archive carries no owner, group or
laptop path (``tarfile`` with names relative to the tree, uid 0 and no user names). What cannot
be sent is said with its name, before anything is sent: a name that is not UTF-8, a file that
cannot be read, a FIFO, socket or device under ``--include`` (never opened: a FIFO would wait).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import tarfile


class SnapshotError(Exception):
    """The working tree cannot be sent as it is (the message says why and what to do)."""


class Snapshot:
    """``root``: the working tree; ``subdir``: the current folder below it ("" at the top);
    ``files``: paths relative to ``root``, sorted; ``changed``: those with uncommitted changes;
    ``untracked``: files git does not track, left out; ``digest``: the content's name."""

    def __init__(self, root: str, subdir: str, files: list[str], changed: list[str], untracked: list[str],
                 included: frozenset = frozenset()):
        self.root, self.subdir, self.files, self.changed, self.untracked = root, subdir, files, changed, untracked
        self.digest = _digest(root, files, included)

    def archive(self) -> bytes:
        """The files as a gzipped tar, names relative to the tree, no owner."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for name in self.files:
                info = tar.gettarinfo(os.path.join(self.root, name), arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isfile():
                    info.mode = 0o755 if info.mode & 0o100 else 0o644
                    with open(os.path.join(self.root, name), "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        return buffer.getvalue()

    def summary(self) -> str:
        """One line for the user: what goes, and what is left out."""
        parts = [f"code snapshot {self.digest} ({len(self.files)} files from {self.root})"]
        if self.changed:
            more = len(self.changed) - 5
            shown = ", ".join(self.changed[:5]) + (f" and {more} more" if more > 0 else "")
            parts.append(f"with uncommitted changes to {shown}")
        if self.untracked:
            parts.append(f"{len(self.untracked)} untracked file(s) left out ({self.untracked[0]}...): "
                         f"git add them, or name them with --include")
        return "; ".join(parts)


def _git(root: str, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True)
    except FileNotFoundError:
        raise SnapshotError("git is not installed on this laptop: the code snapshot is what git tracks; "
                            "install git") from None
    if done.returncode != 0:
        raise SnapshotError(f"{os.path.abspath(root)} is not in a git working tree "
                            f"({done.stderr.decode(errors='replace').strip()}): the code sent to the cluster is "
                            f"what git tracks; run `git init && git add .` there first") from None
    return done.stdout


def take(cwd: str, include: tuple[str, ...] = ()) -> Snapshot:
    """The snapshot of the working tree ``cwd`` is in, with ``include`` (paths as typed, from ``cwd``)."""
    root = _git(cwd, "rev-parse", "--show-toplevel").decode().strip()
    subdir = os.path.relpath(os.path.realpath(cwd), os.path.realpath(root))
    subdir = "" if subdir == "." else subdir
    tracked = [_utf8(p, "tracked by git") for p in _git(root, "ls-files", "-z", "--cached").split(b"\0") if p]
    files = {p for p in tracked if os.path.islink(os.path.join(root, p)) or os.path.isfile(os.path.join(root, p))}
    changed, untracked = [], []
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    for entry in status.decode("utf-8", errors="backslashreplace").split("\0"):  # names only shown
        if len(entry) > 3 and entry[:2] == "??":
            if not entry[3:].startswith(".hpcdist/") and "/.hpcdist/" not in entry[3:]:  # hpcdist's own records
                untracked.append(entry[3:])
        elif len(entry) > 3 and entry[3:] in files:
            changed.append(entry[3:])
    included = set()
    for path in include:
        included.update(p for p in _included(root, cwd, path) if p not in files)
    files |= included
    untracked = [p for p in untracked if p not in files]
    return Snapshot(root, subdir, sorted(files), sorted(changed), sorted(untracked), frozenset(included))


def _utf8(name: bytes, why: str) -> str:
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        shown = name.decode("utf-8", errors="backslashreplace")
        raise SnapshotError(f"'{shown}' ({why}) has a name that is not UTF-8: the cluster's file names are read as "
                            f"UTF-8; rename it (git mv), or leave it out of git (git rm --cached)") from None


#: What a file that is not one is called in a message.
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"))


def _not_a_file(path: str) -> str | None:
    """What ``path`` is when it is neither a file, a folder nor a link (checked without opening it)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return next((name for test, name in _KINDS if test(mode)), None)


def _included(root: str, cwd: str, path: str) -> list[str]:
    full = os.path.realpath(os.path.join(cwd, path))
    relative = os.path.relpath(full, os.path.realpath(root))
    if relative.startswith(".."):
        raise SnapshotError(f"--include {path!r} is outside the git working tree {root}: the snapshot holds files "
                            f"below it; copy it to the cluster yourself and point at it there "
                            f"(--env DATA=/scratch/...)")
    kind = _not_a_file(full)
    if kind:
        raise SnapshotError(f"--include {path!r} is {kind}, not a file: the snapshot holds files; name the files to "
                            f"send")
    if os.path.isfile(full):
        _utf8(os.fsencode(relative), f"named by --include {path!r}")
        return [relative]
    if not os.path.isdir(full):
        raise SnapshotError(f"--include {path!r}: no such file or folder here ({full})")
    found = []
    for folder, dirs, names in os.walk(full):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in names:
            inside = os.path.join(folder, name)
            shown = os.path.relpath(inside, os.path.realpath(cwd))
            kind = _not_a_file(inside)
            if kind:
                raise SnapshotError(f"--include {path!r}: {shown} is {kind}, not a file: the snapshot holds files; "
                                    f"move it out of {path}, or name the files to send with --include")
            _utf8(os.fsencode(shown), f"under --include {path!r}")
            found.append(os.path.relpath(inside, os.path.realpath(root)))
    return found


def _digest(root: str, files: list[str], included: frozenset = frozenset()) -> str:
    """The content's name: every path, its kind (file, executable, link) and its bytes."""
    whole = hashlib.sha256()
    for name in files:
        path = os.path.join(root, name)
        try:
            if os.path.islink(path):
                kind, content = b"l", os.fsencode(os.readlink(path))
            else:
                with open(path, "rb") as f:
                    content = f.read()
                kind = b"x" if os.stat(path).st_mode & 0o100 else b"f"
        except OSError as e:
            why = "named by --include" if name in included else "tracked by git"
            raise SnapshotError(f"cannot read {name} ({why}): {e.strerror or e}; make it readable (chmod u+r "
                                f"{name}), or leave it out of the snapshot (git rm --cached {name})") from None
        whole.update(name.encode() + b"\0" + kind + hashlib.sha256(content).digest())
    return whole.hexdigest()[:20]
