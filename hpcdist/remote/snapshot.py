"""The code a job sent from a laptop runs: a snapshot of the git working tree.

What git tracks, as it is on disk now (uncommitted changes included, and named), plus the files
and folders the user names (``--include``). Its name is a hash of its content (paths, the
executable bit, the bytes), so an unchanged tree has the same name and is not sent again; the
cluster unpacks it into a folder of that name, which the job runs from: a queued job does not see
later edits. Untracked files are left out, and counted. The archive carries no owner, group or
laptop path (``tarfile`` with names relative to the tree, uid 0 and no user names).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile


class SnapshotError(Exception):
    """The working tree cannot be sent as it is (the message says why and what to do)."""


class Snapshot:
    """``root``: the working tree; ``subdir``: the current folder below it ("" at the top);
    ``files``: paths relative to ``root``, sorted; ``changed``: those with uncommitted changes;
    ``untracked``: files git does not track, left out; ``digest``: the content's name."""

    def __init__(self, root: str, subdir: str, files: list[str], changed: list[str], untracked: list[str]):
        self.root, self.subdir, self.files, self.changed, self.untracked = root, subdir, files, changed, untracked
        self.digest = _digest(root, files)

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
    tracked = [p for p in _git(root, "ls-files", "-z", "--cached").decode().split("\0") if p]
    files = {p for p in tracked if os.path.islink(os.path.join(root, p)) or os.path.isfile(os.path.join(root, p))}
    changed, untracked = [], []
    for entry in _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all").decode().split("\0"):
        if len(entry) > 3 and entry[:2] == "??":
            if not entry[3:].startswith(".hpcdist/") and "/.hpcdist/" not in entry[3:]:  # hpcdist's own records
                untracked.append(entry[3:])
        elif len(entry) > 3 and entry[3:] in files:
            changed.append(entry[3:])
    for path in include:
        files.update(_included(root, cwd, path))
    untracked = [p for p in untracked if p not in files]
    return Snapshot(root, subdir, sorted(files), sorted(changed), sorted(untracked))


def _included(root: str, cwd: str, path: str) -> list[str]:
    full = os.path.realpath(os.path.join(cwd, path))
    relative = os.path.relpath(full, os.path.realpath(root))
    if relative.startswith(".."):
        raise SnapshotError(f"--include {path!r} is outside the git working tree {root}: the snapshot holds files "
                            f"below it; copy it to the cluster yourself and point at it there "
                            f"(--env DATA=/scratch/...)")
    if os.path.isfile(full):
        return [relative]
    if not os.path.isdir(full):
        raise SnapshotError(f"--include {path!r}: no such file or folder here ({full})")
    found = []
    for folder, dirs, names in os.walk(full):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        found += [os.path.relpath(os.path.join(folder, n), os.path.realpath(root)) for n in names]
    return found


def _digest(root: str, files: list[str]) -> str:
    """The content's name: every path, its kind (file, executable, link) and its bytes."""
    whole = hashlib.sha256()
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path):
            kind, content = b"l", os.readlink(path).encode()
        else:
            with open(path, "rb") as f:
                content = f.read()
            kind = b"x" if os.stat(path).st_mode & 0o100 else b"f"
        whole.update(name.encode() + b"\0" + kind + hashlib.sha256(content).digest())
    return whole.hexdigest()[:20]
