"""Reading a job's logs (:mod:`hpcdist.jobs` says where they are), in constant memory: a long
training's log holds gigabytes, and the login node is shared. Written out a chunk at a time,
followed as they grow (and when they start again), and their end read for the first failure."""

from __future__ import annotations

import codecs
import os
import sys

#: How much is read at a time.
CHUNK = 1 << 20
#: How much of a log's end the search for the first failure reads: the ranks' reports and the
#: launcher's lines sit at the end of a failed job's log.
FAILURE_TAIL = 16 << 20


def read_tail(path: str, limit: int = FAILURE_TAIL) -> str:
    """The last ``limit`` bytes of a log, from a whole line, as text (bytes that are not UTF-8
    replaced). OSError when it cannot be read (FileNotFoundError before the job wrote it)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
            f.readline()  # the rest of a line cut in two
        return f.read(limit).decode("utf-8", errors="replace")


class UnreadableLog(Exception):
    """A log that exists and cannot be read (a folder, a file this user may not read): its
    ``error``, the OSError. Not one that ``out`` could not take (a reader that went away)."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))
        self.error = error


class LogCopy:
    """One log, written out as it grows: how much was shown, and a decoder that keeps a
    character cut between two reads for the next."""

    def __init__(self, path: str):
        self.path, self.offset = path, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        #: Whether what was written so far ends a line (or nothing was written).
        self.at_line_start = True

    def copy(self, out, notes=None) -> bool:
        """Write to ``out`` what the log gained since the last call, :data:`CHUNK` at a time.
        A log now shorter than what was shown has started again (Slurm truncates it when it
        requeues a job without ``--open-mode=append``; logrotate's copytruncate): shown from its
        start, as ``tail -f`` does, with a line on ``notes`` (stderr) saying so. False while
        there is no log; :class:`UnreadableLog` when it cannot be read."""
        try:
            f = open(self.path, "rb")
            size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            return False
        except OSError as e:
            raise UnreadableLog(e) from None
        with f:
            if size < self.offset:
                print(f"hpcdist: the log {self.path} started again (cut short: a requeue, or logrotate); "
                      f"showing it from its start", file=notes or sys.stderr, flush=True)
                self.offset = 0
                self.decoder.reset()
            f.seek(self.offset)
            while True:
                try:
                    chunk = f.read(CHUNK)
                except OSError as e:  # a folder opens, and fails here
                    raise UnreadableLog(e) from None
                if not chunk:
                    break
                self.offset += len(chunk)
                text = self.decoder.decode(chunk)
                if text:
                    out.write(text)
                    self.at_line_start = text.endswith("\n")
        out.flush()
        return True
