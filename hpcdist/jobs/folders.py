"""Whether the folders hpcdist keeps jobs in can be used and trusted, and why not, in one line.

:mod:`hpcdist.jobs` reads and writes the job folders; this module holds its checks:

- the jobs folder (``.hpcdist/jobs``): a folder, reachable (not a dangling link, ``.hpcdist``
  not a file), creatable when a job is submitted, and ours alone (:func:`usable_root`);
- a job folder and its record: ours alone (:func:`check_ours`), and a record of the shape
  hpcdist writes (:func:`record_problem`, :func:`unreadable`).

Ours alone means owned by this user and writable by nobody else. A record names the pid that
``hpcdist cancel`` signals and the ids handed to the scheduler's commands: one that another
user could write or plant (a ``jobs`` link into a world-writable folder, even a sticky one
like /tmp, where others cannot remove our entries but can add their own) is never followed.

Every failure is a :class:`JobFolderError` whose message names the path, what is wrong and
the fix.
"""

from __future__ import annotations

import os
import pwd
import stat

# Imported here, not in each call: `hpcdist status` reads thousands of records.
from hpcdist.schedulers import DIALECTS, NAMES
# A job id or a cluster's name: a word that no scheduler command reads as an option.
from hpcdist.patterns import is_id_word as looks_like_id


class JobFolderError(LookupError):
    """A job folder, or the folder of job folders, that cannot be used (the message says why)."""


def shown(path: str) -> str:
    """``path`` relative to the current folder when it lies below it (shorter in one line)."""
    relative = os.path.relpath(path)
    return os.path.abspath(path) if relative.startswith("..") or relative == "." else relative


def word(path: str) -> str:
    """``path`` as :func:`shown` gives it, quoted for a command the user may paste."""
    import shlex  # not at the top: only for a message, and it would cost `hpcdist status` 1.4%

    return shlex.quote(shown(path))


def usable_root(root: str, create: bool = False) -> str | None:
    """The jobs folder's absolute path once checked; None when there is none yet and ``create``
    is false. Created (private, with its missing parents) when ``create`` is true."""
    path = os.path.abspath(root)
    if not os.path.exists(path):
        _check_reachable(path)
        if not create:
            return None
        _make_private_dirs(path)
    if not os.path.isdir(path):
        raise JobFolderError(f"{shown(path)} is a file, not a folder: hpcdist keeps its job folders there; "
                             f"move the file away (mv {word(path)} {word(path + '.old')})")
    check_ours(path, "the jobs folder")
    return path


def _check_reachable(path: str) -> None:
    """Why ``path``, which does not exist, cannot be created: a dangling link on the way, or a
    file where a folder should be. Nothing when its missing parts can simply be made."""
    here = path
    while not os.path.exists(here):
        if os.path.islink(here):
            raise JobFolderError(f"{shown(here)} is a link to {os.readlink(here)}, which does not exist: create "
                                 f"that folder (mkdir -m 700 -p {word(os.path.realpath(here))}), or remove the link "
                                 f"(rm {word(here)}) and hpcdist makes a folder of its own there")
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        raise JobFolderError(f"{shown(here)} is a file, not a folder: hpcdist keeps its jobs in {shown(path)}; "
                             f"move the file away (mv {word(here)} {word(here + '.old')})")


def _make_private_dirs(path: str) -> None:
    """Create ``path`` and its missing parents 0700 (``os.makedirs`` gives the parents the
    umask's mode: with umask 0, a world-writable ``.hpcdist`` where anyone could swap ``jobs``)."""
    missing, here = [], path
    while not os.path.isdir(here):
        missing.append(here)
        here = os.path.dirname(here)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:  # another submit made it meanwhile
            pass
        except OSError as e:
            raise JobFolderError(cannot_create(folder, e)) from None


def cannot_create(path: str, error: OSError) -> str:
    """The line for a folder ``hpcdist submit`` could not make: in a shared project folder, the
    ``.hpcdist`` another user made first (private to them) is named with its owner."""
    parent = os.path.dirname(path)
    try:
        owner = os.stat(parent).st_uid
    except OSError:
        owner = os.geteuid()
    if owner != os.geteuid() and os.path.basename(parent) == ".hpcdist":
        return (f"cannot create {shown(path)}: {shown(parent)} belongs to {_user(owner)} and is private to them "
                f"({error.strerror or error}): hpcdist keeps each user's jobs where only they can write. Submit from "
                f"a folder of your own (the script may stay here: hpcdist submit {word(os.path.abspath('.'))}/SCRIPT), "
                f"or ask them to remove {shown(parent)} if they no longer need it")
    return (f"cannot create {shown(path)}: {error.strerror or error}; submit from a folder you can write to, "
            f"or make {shown(parent)} writable for you")


def check_ours(path: str, what: str, st: os.stat_result | None = None) -> None:
    """``path`` (followed through links) is owned by this user and writable by no one else
    (``st``: its stat, when the caller has it from the file it opened)."""
    try:
        st = os.stat(path) if st is None else st
    except OSError as e:
        raise JobFolderError(f"{what} {shown(path)} cannot be read: {e.strerror or e}") from None
    problem = not_ours(st)
    if problem is None:
        return
    me = os.geteuid()
    where = shown(path)
    if os.path.islink(path):
        where += f" (a link to {os.path.realpath(path)})"
    owner, mode = problem
    if what != "the jobs folder":
        fix = (f"check that no one changed it, then chmod go-w {word(path)}" if st.st_uid == me
               else "remove the job folder if the job is not yours or not needed")
    elif os.path.islink(path):
        fix = (f"keep jobs in a folder only you can write to: remove the link (rm {word(path)}) "
               "and hpcdist makes its own")
    elif st.st_uid != me:  # another user's jobs, in a shared project folder (or a uid no one has now)
        fix = (f"submit from a folder of your own (the jobs there are that user's), or, once they no longer need "
               f"them, move it away (mv {word(path)} {word(path + '.old')}) and hpcdist makes its own")
    else:
        fix = f"chmod go-w {word(path)}"
    raise JobFolderError(f"{what} {where} is {owner}, {mode}; hpcdist follows no job another user could have "
                         f"{'planted there' if what == 'the jobs folder' else 'written'}: {fix}")


def not_ours(st: os.stat_result) -> tuple[str, str] | None:
    """None for a file (``st``: its stat) owned by this user and writable by no one else; else
    ``(owner, mode)`` as a message says them: "owned by bob (uid 1001), not by you", "mode 666
    (others can write it)"."""
    me = os.geteuid()
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if st.st_uid == me and not writable:
        return None
    owner = f"owned by {_user(st.st_uid)}" + (", not by you" if st.st_uid != me else "")
    mode = f"mode {stat.S_IMODE(st.st_mode):o}"
    if writable and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
        mode += " (sticky: others cannot remove what is yours, but can add their own)"
    elif writable:
        mode += " (others can write it)"
    return owner, mode


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:  # no such user (a uid from another system)
        return f"uid {uid}"


# -- Reading ---------------------------------------------------------------------------------

def read_bytes(path: str, opened=None) -> bytes:
    """The whole file ``path``; ``opened(fd, stat)`` is called with the open file first, to
    check the file actually read. Raw ``os`` calls: ``hpcdist status`` reads two files per job,
    and a text file object costs more than the reading. O_NONBLOCK: a FIFO planted in a job
    folder is opened without waiting for a writer (then refused as a record, empty as a runs file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        size = 1 << 16  # without a stat to check, none is made: a shorter read ends a regular file
        if opened is not None:
            st = os.fstat(fd)
            opened(fd, st)
            size = st.st_size + 1  # one read, unless the file grew meanwhile
        chunks = [os.read(fd, size)]
        while len(chunks[-1]) == size:
            chunks.append(os.read(fd, size))
        return b"".join(chunks)
    finally:
        os.close(fd)


# -- The record --------------------------------------------------------------------------------

def unreadable(error: Exception) -> str:
    """What is wrong with a record that could not be read as JSON: ``error`` from reading it."""
    if isinstance(error, UnicodeDecodeError):
        return f"is not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start})"
    if isinstance(error, OSError):
        return f"cannot be read: {error.strerror or error}"
    if getattr(error, "doc", None) is not None and not error.doc.strip():
        return "is empty"
    return f"is not JSON ({error})"  # JSONDecodeError: its message says where (cut short when truncated)


def record_problem(record) -> str | None:
    """What makes ``record`` (parsed JSON) not a record hpcdist wrote, or None."""
    if not isinstance(record, dict):
        return f"holds a JSON {type(record).__name__}, not the object hpcdist writes"
    for key in ("job_id", "scheduler"):
        if key not in record:
            return f"has no {key!r}"
    scheduler, job_id = record["scheduler"], record["job_id"]
    if scheduler not in NAMES:
        return f"names the scheduler {scheduler!r}, not one of {', '.join(NAMES)}"
    # A record written before the submit command ran has no id yet (jobs.SUBMITTING says so):
    # it is listed as submitting or interrupted, not as broken.
    awaiting_id = job_id == "" and isinstance(record.get("submitting"), dict)
    if not awaiting_id and not _is_job_id(scheduler, job_id):
        return f"holds the job id {job_id!r}, which is not a {scheduler} job id"
    if record.get("dialect") not in (None, *DIALECTS.get(scheduler, ())):
        return f"names the dialect {record['dialect']!r}, not one of {scheduler}'s"
    if record.get("cluster") is not None and not looks_like_id(record["cluster"]):
        return f"names the cluster {record['cluster']!r}, which is not a cluster name"
    for key in ("job_name", "log", "workdir"):
        if key in record and not isinstance(record[key], str):
            return f"holds {json_text(record[key])} as {key!r}, not a string"
    return None


_ID_CHECKS: dict = {}


def _is_job_id(scheduler: str, text) -> bool:
    """Whether ``text`` can be one of ``scheduler``'s ids: its in-job module's ``is_job_id`` where it
    has one (a local job's id is its runner's pid), else an id word. The in-job module, not the
    scheduler's: it is cheap to import, and the scheduler's own module writes job folders (an
    import circle)."""
    check = _ID_CHECKS.get(scheduler)
    if check is None:
        from hpcdist.schedulers import job_side

        check = _ID_CHECKS[scheduler] = getattr(job_side(scheduler), "is_job_id", looks_like_id)
    return check(text)


def json_text(value) -> str:
    import json  # not at the top: only for a message, and it would cost `hpcdist status` 7%

    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
