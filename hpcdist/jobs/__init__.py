"""The job folder, ``.hpcdist/jobs/<name>-<time>/``: this module is the only code that reads or
writes one (the job script writes two of its files: its lines are ``hpcdist/schedulers/job_folder.sh.j2``'s,
from the names :mod:`hpcdist.jobs.job_files` gives it).

Where it runs: on the login node (submit, status, logs, cancel).

Its files:

- ``job.sh`` (:data:`SCRIPT`): the rendered script, as submitted.
- ``spec.json`` (:data:`SPEC`): the job spec it was rendered from.
- ``record.json`` (:data:`RECORD`): the scheduler's job id and what ``hpcdist`` needs to follow
  the job. Written before the submit command runs, marked :data:`SUBMITTING` (the job may exist
  from then on), and again with the id once the scheduler gave it; a record still marked is a
  submission that never finished. A submission the scheduler refused leaves no folder.
- ``job.log`` (:data:`LOG`): the job's output, unless ``--output`` put it elsewhere; a job that
  resubmitted itself (PBS) writes one log per run (:func:`restart_log`); :mod:`hpcdist.jobs.logfiles` reads them.
- ``runs`` (:data:`RUNS`): one line per event, appended: ``start <time> <id> <host>`` by each
  start of the script, ``resubmitted <time> <id> <log>`` by ``hpcdist requeue`` (PBS).
- ``exit_code`` (:data:`EXIT_CODE`): how the script ended, written whole by the script's EXIT
  trap and by the local runner; ``hpcdist status`` reads it when the scheduler keeps no record.
  An array's subjobs each write ``exit_code.<index>``, and a log of their own (:mod:`hpcdist.jobs.subjobs`).
- ``sweep.json``: a sweep's array only, which parameter set each subjob runs (:mod:`hpcdist.jobs.params`).
- ``ended.json``: why hpcdist ended the job (its monitor, at --hang-timeout): :mod:`hpcdist.jobs.ending`.
- ``restarts``: the launch's restarts inside the job (``--max-restarts``): :mod:`hpcdist.jobs.launch_restarts`.
- ``runner`` (:data:`RUNNER`): local jobs only, ``<pid> <start time> <host> <boot id>`` of the
  runner process (the last two: where it runs; older folders have the first two alone).

A folder whose record cannot be read, is not of the shape hpcdist writes, or that another user
could have written (:mod:`hpcdist.jobs.folders`) is no job: :func:`scan` gives it as a
:class:`Broken` folder, one row of ``hpcdist status`` saying what is wrong.
"""

from __future__ import annotations

import os
import time
from collections import namedtuple
from stat import S_ISREG

from hpcdist import STATE_DIR
from hpcdist.jobs.folders import (JobFolderError, cannot_create, check_ours, looks_like_id,
                                  read_bytes, record_problem, shown, unreadable, usable_root, word)
from hpcdist.schedulers import QUEUED
from hpcdist.jobs.subjobs import indexed, logs_of

#: Where the job folders are: ``.hpcdist/jobs`` of the current folder, or $HPCDIST_JOBS_DIR (set by a
#: laptop's hpcdist on the login node, whose job runs from its code snapshot: hpcdist.remote).
JOBS_DIR = os.environ.get("HPCDIST_JOBS_DIR") or os.path.join(STATE_DIR, "jobs")

SCRIPT = "job.sh"
SPEC = "spec.json"
RECORD = "record.json"
LOG = "job.log"
RUNS = "runs"
EXIT_CODE = "exit_code"
RUNNER = "runner"
#: The ranks' progress files and the stacks' control file (hpcdist.progress writes them).
PROGRESS = "progress"
#: In the progress folder: the lines the job's monitor leaves for the log's end when it ended the
#: job (hpcdist.progress.monitor), which the job script's exit trap copies there.
LAST_LINES = "last_lines"

#: ``record.json``'s key while the submit command runs: ``{"pid": ..., "started": ...}`` of the
#: ``hpcdist submit`` process. Its id is not known yet; the final record has no such key.
SUBMITTING = "submitting"
#: The marked record is padded with spaces (still JSON) to whole pages of this size, with this
#: much room at least, so that the final one fits in the blocks the file already has.
RECORD_PAGE, RECORD_ROOM = 4096, 2048

#: The events of the ``runs`` file (its lines' first words).
START, RESUBMITTED = "start", "resubmitted"


class JobNotFound(LookupError):
    pass


# json and typing are not imported at the top: `hpcdist status` with no job reads no record
# (json would cost it 7%), and typing alone costs as much as Python's start-up.

#: A job's runs so far (its folder's ``runs`` file): ``restarts``; ``current_id``, the newest
#: resubmission's id, else the submitted one; ``logs``, ``(job id, log)`` oldest first, the last
#: one being written.
History = namedtuple("History", ("restarts", "current_id", "logs"))


class Job:
    """A submitted job's folder and its record (``record.json``)."""

    def __init__(self, path: str):
        """JobFolderError, naming the file, what is wrong and the fix, for a folder that holds
        no record hpcdist can follow (FileNotFoundError when it has no record file)."""
        self.path = path
        self.record = _read_record(path)

    @property
    def job_id(self) -> str:
        return self.record["job_id"]

    def history(self) -> History:
        """What the ``runs`` file says, read once: ``start <time> <id> <host>`` for each run of
        the script, ``resubmitted <time> <id> <log>`` for each new PBS job it submitted
        (:func:`record_resubmission`; the log, a path, is the rest of the line)."""
        record = self.record
        try:  # the path joined by hand, here and in _read_record: os.path.join costs `status` 2%
            text = read_bytes(f"{self.path}/{RUNS}").decode("utf-8", errors="replace")
        except OSError:
            text = ""
        # A resubmitted PBS job writes its own log (it would replace the earlier one).
        starts, logs = 0, [(record["job_id"], record.get("log", ""))]
        # A line without its newline is still being written: not counted yet.
        for line in text.split("\n")[:-1]:
            words = line.split(" ", 3)
            if len(words) < 3 or not looks_like_id(words[2]):  # an id goes to the scheduler's commands
                continue
            if words[0] == START:
                starts += 1
            elif words[0] == RESUBMITTED:
                logs.append((words[2], words[3] if len(words) > 3 and words[3] else logs[-1][1]))
        current = logs[-1][0]
        subjobs = logs_of(record)  # an array's subjobs write a log each
        if subjobs:
            logs = [(f"{self.job_id} subjob {index}", path) for index, path in subjobs]
        return History(max(0, starts - 1), current, logs)

    @property
    def current_id(self) -> str:
        """The id that goes on: the newest resubmission's, else the submitted one."""
        return self.history().current_id

    @property
    def restarts(self) -> int:
        return self.history().restarts

    @property
    def logs(self) -> list[tuple[str, str]]:
        """``(job id, log)`` of the submitted job and of each job it resubmitted, oldest first."""
        return self.history().logs

    @property
    def scheduler(self) -> str:
        return self.record["scheduler"]

    @property
    def submitting(self) -> dict | None:
        """``{"pid", "started"}`` of the ``hpcdist submit`` that never recorded the id, else None."""
        marked = self.record.get(SUBMITTING)
        return marked if isinstance(marked, dict) else None

    @property
    def script(self) -> str:
        return os.path.join(self.path, SCRIPT)

    @property
    def log(self) -> str:
        """The log being written now (the newest run's)."""
        return self.logs[-1][1]

    def spec_values(self) -> dict:
        """The job spec's values the script was rendered from (``spec.json``), for
        ``JobSpec(**values)``. OSError or ValueError when the file is missing or not JSON."""
        import json  # not at the top: see above

        with open(os.path.join(self.path, SPEC), encoding="utf-8") as f:
            return json.load(f)

    def reload(self) -> None:
        """The record as on disk now (a cancel from another shell); the copy stays if unreadable."""
        try:
            self.record = _read_record(self.path)
        except (OSError, JobFolderError):
            pass

    def update(self, **changes) -> None:
        """Set ``changes`` in the record on disk, read again under the folder's lock: a follower's
        copy from before a cancel dropped its ``cancelled``. OSError or JobFolderError."""
        import fcntl  # not at the top: only a command that writes a record needs it

        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:  # another update waits; a file system without flock (some NFS) goes unlocked
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                pass
            self.record = {**_read_record(self.path), **changes}
            _write_record(self.path, _record_text(self.record))
        finally:
            os.close(fd)  # and the lock with it


class Draft:
    """A job folder being assembled.

    The folder's name is reserved with one ``mkdir`` (atomic, so jobs
    submitted in the same second never share one); :meth:`write_pending`
    records the job before the scheduler is asked, :meth:`commit` records its id.
    :meth:`discard` removes every trace of a submission that failed.
    """

    def __init__(self, root: str, name: str):
        """JobFolderError when the jobs folder cannot be made or is not the user's alone."""
        root = usable_root(root, create=True)
        base = os.path.join(root, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.path, n = base, 1
        while True:
            try:
                os.mkdir(self.path, 0o700)
                break
            except FileExistsError:
                n += 1
                self.path = f"{base}-{n}"
            except OSError as e:
                raise JobFolderError(cannot_create(self.path, e)) from None

    @property
    def default_log(self) -> str:
        """Where the job's output goes unless ``--output`` says otherwise."""
        return os.path.join(self.path, LOG)

    def write(self, filename: str, text: str, mode: int = 0o600) -> str:
        # O_EXCL: the folder is new, so an existing file is someone else's doing; never write through it.
        path = os.path.join(self.path, filename)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def write_spec(self, values: dict) -> str:
        """``spec.json``: the spec's values (``JobSpec.as_dict()``), read back by :meth:`Job.spec_values`."""
        import json  # not at the top: see above

        return self.write(SPEC, json.dumps(values, indent=2) + "\n")

    def write_script(self, text: str) -> str:
        """``job.sh``, executable by its owner only; its path, to submit."""
        return self.write(SCRIPT, text, 0o700)

    def write_pending(self, record: dict, pid: int, started: str | None) -> None:
        """``record.json`` before the submit command runs, marked :data:`SUBMITTING` by the
        process ``pid`` (started at ``started``), and padded (:data:`RECORD_ROOM`)."""
        text = _record_text({**record, SUBMITTING: {"pid": pid, "started": started}})
        size = -(-(len(text.encode()) + RECORD_ROOM) // RECORD_PAGE) * RECORD_PAGE
        _write_record(self.path, text + " " * (size - len(text.encode())))

    def commit(self, record: dict) -> Job:
        """The final record. Once the scheduler has the job, the disk may be full: then the
        padded pending record is overwritten in place, in blocks it already has (not atomic,
        but a moment's odd read beats a job nobody knows of). OSError when neither works."""
        text = _record_text(record)
        path = os.path.join(self.path, RECORD)
        try:
            _write_record(self.path, text)
        except OSError as first:
            try:
                with open(path, "r+b") as f:
                    room = os.fstat(f.fileno()).st_size
                    data = text.encode()
                    if len(data) > room:  # would need new blocks: the first error says why not
                        raise first from None
                    f.write(data.ljust(room))
                    f.flush()
                    os.fsync(f.fileno())
            except OSError:
                raise first from None
        return Job(self.path)

    def discard(self) -> None:
        import shutil  # only here: every submission and `hpcdist status` import this module

        shutil.rmtree(self.path, ignore_errors=True)


def _record_text(record: dict) -> str:
    import json  # not at the top: see above

    return json.dumps(record, indent=2) + "\n"


def _read_record(path: str) -> dict:
    """The checked record of the job folder ``path``: the folder and the record ours alone (the
    record checked on the file opened: it cannot be swapped in between), of the shape hpcdist
    writes, and a local job's runner file ours too. FileNotFoundError (or NotADirectoryError,
    IsADirectoryError) when the folder holds no record file; JobFolderError otherwise."""
    import json  # not at the top: see above

    record = f"{path}/{RECORD}"

    def checked(fd: int, st: os.stat_result) -> None:
        if not S_ISREG(st.st_mode):
            raise IsADirectoryError(record)
        check_ours(path, "the job folder")
        check_ours(record, "the job record", st)

    try:
        parsed = json.loads(read_bytes(record, opened=checked).decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        problem = unreadable(e)
    else:
        problem = record_problem(parsed)
    if problem:
        raise JobFolderError(f"the job record {shown(record)} {problem}: hpcdist cannot follow this job; "
                             f"remove the folder (rm -r {word(path)}) if the job is not needed")
    # The runner file names the pid `hpcdist cancel` signals; only the local backend (no queue)
    # reads one, so only its jobs' folders are looked in (a stat per job costs `status` 5%).
    if parsed["scheduler"] not in QUEUED and os.path.exists(os.path.join(path, RUNNER)):
        check_ours(os.path.join(path, RUNNER), "the local job's runner file")
    return parsed


def _write_record(folder: str, text: str) -> None:
    # Whole or not at all: `hpcdist status` in another shell may read it at any moment.
    from hpcdist.jobs.atomic import write_text_atomic  # not at the top: tempfile would cost `status` 22%

    write_text_atomic(os.path.join(folder, RECORD), text, 0o600)


def recorded_log(folder: str) -> str | None:
    """The log ``record.json`` names (the submitted job's), or None when there is no readable record.

    For ``hpcdist requeue``, inside the job, which has the folder's path only.
    """
    import json  # not at the top: see above

    try:
        with open(os.path.join(folder, RECORD), encoding="utf-8") as f:
            log = json.load(f)["log"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return log if isinstance(log, str) else None


# -- The exit code ---------------------------------------------------------------------------

def exit_code_file(folder: str) -> str:
    return os.path.join(folder, EXIT_CODE)


def read_subjob_exit_codes(folder: str) -> dict[int, int]:
    """An array's subjobs' exit codes, by index, from their ``exit_code.<index>`` files."""
    codes = {index: _exit_code_in(path) for index, path in indexed(exit_code_file(folder) + ".")}
    return {index: code for index, code in codes.items() if code is not None}


def read_exit_code(folder: str) -> int | None:
    """The job's exit code from its ``exit_code`` file; None when there is none.

    The one rule for every reader: a file that cannot be read or holds no number is no
    record (never taken for a failure: an exit code is evidence, not a guess). Every writer
    writes the file whole (:func:`write_exit_code_shell`), so a reader never sees it half
    written; one that holds no number was not written by hpcdist, nor one past a shell's exit
    status (0-255: 256 would be a failure that --wait, exiting with it, turns into 0).
    """
    return _exit_code_in(exit_code_file(folder))


def _exit_code_in(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except (OSError, ValueError):
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 3 and int(text) <= 255):
        return None
    return int(text)


def write_exit_code_shell(target: str) -> str:
    """Shell that writes ``$status`` into the file ``target`` (a shell word) whole: to a
    temporary file beside, then renamed over it, so a reader sees no file or a whole number.
    The local runner's; the job script's is the same line (job_folder.sh.j2, ``write_exit_code``)."""
    return f'echo "$status" > "{target}.tmp" && mv -f "{target}.tmp" "{target}"'


# -- The runs file (each start of a job that may be requeued appends its line: hpcdist job-setup) -------

def record_resubmission(folder: str, job_id: str, log: str = "") -> None:
    """Append ``resubmitted <time> <id> <log>`` to the runs file: ``hpcdist status`` then
    follows the job to its new id, and ``hpcdist logs`` shows the new log after the others."""
    # One short line appended with O_APPEND: whole even if two runs write at once. The log, a
    # path that may hold spaces, is the rest of the line (a newline in it would end the line).
    log = log.replace("\n", "?")
    with open(os.path.join(folder, RUNS), "a", encoding="utf-8") as f:
        f.write(f"{RESUBMITTED} {int(time.time())} {job_id}{' ' + log if log else ''}\n")


def restart_log(log: str, restart: int) -> str:
    """``job.log`` -> ``job.restart2.log``: the log of a job's second resubmission."""
    stem, ext = os.path.splitext(log)
    return f"{stem}.restart{restart}{ext}"


# -- The local runner --------------------------------------------------------------------------

def write_runner(folder: str, pid: int, started: str | None, host: str = "", boot: str = "") -> None:
    """``<pid> <start time> <host> <boot id>`` of a local job's runner: its pid alone could name
    another process once the runner has ended (pids are reused), or one on another host."""
    # 0600 whatever the umask: a runner file others could write would name the pid cancel signals.
    with open(os.open(os.path.join(folder, RUNNER), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(" ".join([str(pid), str(started)] + ([host, boot] if host and boot else [])) + "\n")


def read_runner(folder: str) -> tuple[str, str] | None:
    """``(pid, start time)`` as :func:`write_runner` wrote them (the time "None" when it was not
    known); None when the file is missing or not two words."""
    words = _runner_words(folder)
    return (words[0], words[1]) if words else None


def runner_host(folder: str) -> tuple[str, str] | None:
    """``(host, boot id)`` where a local job's runner runs, as :func:`write_runner` wrote them;
    None when the file does not say (a folder of an older hpcdist)."""
    words = _runner_words(folder)
    return (words[2], words[3]) if words and len(words) == 4 else None


def _runner_words(folder: str) -> list | None:
    try:
        with open(os.path.join(folder, RUNNER), errors="replace") as f:  # a broken one: not two words
            words = f.read().split()
    except OSError:
        return None
    return words if len(words) in (2, 4) else None


class Broken:
    """A job folder that holds no job hpcdist can follow; ``problem`` says why, and the fix."""

    def __init__(self, path: str, problem: str):
        self.path, self.problem = path, problem

    def row(self) -> dict:
        """Its row of ``hpcdist status`` (the keys of a job's row)."""
        return {"job_id": "-", "name": os.path.basename(self.path), "scheduler": "-", "state": "BROKEN",
                "exit_code": None, "reason": self.problem, "restarts": 0, "current_job_id": None,
                "folder": self.path, "log": None}


def find(ref: str, root: str = JOBS_DIR) -> Job:
    """A job by its id, its folder name, or a folder path. JobNotFound when there is none, or
    when the id names several folders (the message names them); JobFolderError when its folder
    (or the jobs folder) cannot be used."""
    found = _lookup(ref, root)
    if len(found) > 1:
        # Ids come round again (a local job's pid; a scheduler whose state was wiped): the wrong
        # one would be cancelled, or said to have ended while the other runs.
        folders = ", ".join(shown(job.path) for job in found)
        raise JobNotFound(f"job id {ref} names {len(found)} job folders (an id used again): {folders}; "
                          f"give the folder instead of the id (e.g. {word(found[-1].path)})")
    if isinstance(found[0], Broken):
        raise JobFolderError(found[0].problem)
    return found[0]


def select(refs: list[str], root: str = JOBS_DIR) -> list:
    """The jobs ``refs`` name (all when none; every folder of an id used again), each a
    :class:`Job` or a :class:`Broken` folder. JobNotFound for a ref that names none;
    JobFolderError when the jobs folder cannot be used."""
    return [job for ref in refs for job in _lookup(ref, root)] if refs else scan(root)


def _lookup(ref: str, root: str) -> list:
    """The folders ``ref`` names, oldest first: one path or folder name, or every job of an id."""
    if os.path.isfile(os.path.join(ref, RECORD)):
        return [_open(os.path.abspath(ref))]
    found = scan(root)
    named = [job for job in found if ref == os.path.basename(job.path)]
    if not named:
        named = sorted((job for job in found if isinstance(job, Job) and ref == job.job_id),
                       key=lambda job: job.record.get("submitted_at") or 0)
    if named:
        return named
    broken = sum(isinstance(job, Broken) for job in found)
    unread = f" ({broken} job folder(s) there cannot be read: `hpcdist status` says why)" if broken else ""
    raise JobNotFound(f"no job {ref!r} in {root}{unread}: `hpcdist status` lists the jobs submitted from here")


def _open(path: str):
    try:
        return Job(path)
    except JobFolderError as e:
        return Broken(path, str(e))


def scan(root: str = JOBS_DIR) -> list:
    """Every job folder in ``root``, by name: a :class:`Job`, or a :class:`Broken` folder."""
    root = usable_root(root)
    if root is None:
        return []
    found = []
    for name in sorted(os.listdir(root)):
        if not name.startswith("."):
            try:
                found.append(_open(os.path.join(root, name)))
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                pass  # no record file: not a job folder (yet)
    return found


def all_jobs(root: str = JOBS_DIR) -> list[Job]:
    """The jobs in ``root`` that can be followed (:func:`scan` gives the broken folders too)."""
    return [job for job in scan(root) if isinstance(job, Job)]
