"""Reading a job's logs (:mod:`hpcdist.jobs` says where they are), in constant memory: a long
training's log holds gigabytes, and the login node is shared. Written out a chunk at a time,
followed as they grow (and when they start again), and their end read for the first failure.

What is written out folds torchrun's teardown after a signal (a cancel, the walltime, a
preemption: two to four nested ``SignalException`` tracebacks per agent, that read like a crash) into
one line that says what stopped it and where the whole log is (:class:`TeardownFold`). The file
itself stays as the job wrote it."""

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
    character cut between two reads for the next. ``fold``: torchrun's teardown folded
    (:class:`TeardownFold`); without, the log as it is."""

    def __init__(self, path: str, fold: bool = True):
        self.path, self.offset = path, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        #: Whether what was written so far ends a line (or nothing was written).
        self.at_line_start = True
        self.fold = TeardownFold(path) if fold else None

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
                self.fold = self.fold and TeardownFold(self.path)
            f.seek(self.offset)
            while True:
                try:
                    chunk = f.read(CHUNK)
                except OSError as e:  # a folder opens, and fails here
                    raise UnreadableLog(e) from None
                if not chunk:
                    break
                self.offset += len(chunk)
                self._write(out, self.decoder.decode(chunk))
            if self.fold:  # what is held is written out: a log may end there
                self._write(out, self.fold.end(), fed=True)
        out.flush()
        return True

    def _write(self, out, text: str, fed: bool = False) -> None:
        if self.fold and text and not fed:
            text = self.fold.feed(text)
        if text:
            out.write(text)
            self.at_line_start = text.endswith("\n")


#: Python's first line of a traceback, and the lines between the tracebacks of one chain.
TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("", "During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
#: Python's logging when the signal comes while torchrun logs its shutdown: its report of that
#: error, around the traceback (logging.Handler.handleError).
LOGGING_ERROR = "--- Logging error ---"
LOGGING_REPORT = (LOGGING_ERROR, "Call stack:", "Message: ", "Arguments: ")
#: What a teardown may begin with: text without any of these passes as it is, unread line by line.
MARKERS = (TRACEBACK, " death signal", " closing signal", LOGGING_ERROR)
#: The most lines held while a teardown may be under way; how many other lines end it.
HELD_MAX, QUIET = 2000, 20


class TeardownFold:
    """torchrun's teardown after a signal, out of the way: its shutdown lines and the chains of
    ``SignalException`` tracebacks its handlers raise (two to four per agent, some 60 lines), as
    one line, where the teardown begins, that says what stopped it, how many lines are folded,
    and the log file that has them whole.

    Fed the text as it is read. From a traceback or torchrun's shutdown lines on, lines are held
    until :data:`QUIET` lines in a row are no traceback's, or :meth:`end` (the text read so far
    ends there), or :data:`HELD_MAX`. Then, if a ``SignalException`` was among them and no other
    exception, the traceback lines are the one line, and every other held line (a rank's own
    output) follows in its order; else all are written as they are. Several agents on one host
    write their tracebacks into one log at once, cut into each other mid-line: a line of a
    traceback is told by its parts (a frame, carets, ``File "``), not by its place in one.
    A chunk with none of :data:`MARKERS` passes untouched."""

    def __init__(self, path: str):
        self.path = path
        #: The start of a line not whole yet; ``raw``: part of that line was written out already.
        self.partial, self.raw = "", False
        #: ``[line, folded]``: whether it is of the teardown.
        self.held: list[tuple[str, bool]] = []
        self.quiet = self.signals = 0
        #: Another exception than torchrun's in the held lines (then nothing is folded); where the
        #: last line of one is held, until the next line says whether another was raised in handling it.
        self.other_error, self.error_line = False, None
        self.signal = self.time = None

    def feed(self, text: str) -> str:
        if not self.held and not self.raw:  # the common case, with as few copies as may be
            last = text.rfind("\n") + 1
            if last:
                head = self.partial + text[:last] if self.partial else text[:last]
                if not any(marker in head for marker in MARKERS):
                    self.partial = text[last:]
                    return head
        out = ""
        if self.raw:  # the rest of a line written out in part: as it is
            head, nl, text = text.partition("\n")
            out = head + nl
            if not nl:
                return out
            self.raw = False
        whole, nl, self.partial = (self.partial + text).rpartition("\n")
        if not nl:  # no line ended yet
            if len(self.partial) > CHUNK:  # a line too long to hold (memory stays bounded): as it is
                out, self.partial, self.raw = out + self._close() + self.partial, "", True
            return out
        start = 0 if self.held else min((i for i in map(whole.find, MARKERS) if i >= 0), default=-1)
        if start < 0:
            return out + whole + "\n"
        start = whole.rfind("\n", 0, start) + 1  # from the start of its line; what is before, as it is
        return out + whole[:start] + "".join(self._line(line) for line in whole[start:].split("\n"))

    def end(self) -> str:
        """What is held, written out: the text read so far ends there."""
        out = self._close()
        if self.partial:
            out += self.partial
            self.partial, self.raw = "", True
        return out

    def _line(self, line: str) -> str:
        signal_exception, teardown_line, elastic_line, other_error = _patterns()
        shutdown = teardown_line.match(line)
        if not self.held and not (shutdown or TRACEBACK in line or line == LOGGING_ERROR):
            return line + "\n"
        if shutdown:
            self.time = self.time or shutdown["time"]
        caught = signal_exception.search(line)
        if self.error_line is not None and line:  # an exception the next one was raised in handling is no end
            if line in CHAINED:
                self.held[self.error_line] = (self.held[self.error_line][0], True)
            else:
                self.other_error = True
            self.error_line = None
        if caught:
            self.signals, self.signal = self.signals + 1, int(caught["signal"])
        elif other_error.match(line):
            self.error_line = len(self.held)  # where it is held
        folded = bool(caught or shutdown or line[:1].isspace() or line.lstrip().startswith("^") or line in CHAINED
                      or TRACEBACK in line or 'File "' in line or line.startswith(LOGGING_REPORT)
                      or elastic_line.match(line))
        self.held.append((line, folded))
        self.quiet = 0 if folded else self.quiet + 1
        return self._close() if self.quiet >= QUIET or len(self.held) >= HELD_MAX else ""

    def _close(self) -> str:
        """The held lines: the teardown as one line, then the others in their order."""
        other = self.other_error or self.error_line is not None
        held, signals = self.held, self.signals if not other else 0
        head = self._folded(signals, sum(folded for _, folded in held)) if signals else ""
        self.held, self.quiet, self.signals, self.other_error, self.error_line = [], 0, 0, False, None
        self.signal = self.time = None
        if not signals:
            return "".join(line + "\n" for line, _ in held)
        return head + "".join(line + "\n" for line, folded in held if not folded)

    def _folded(self, tracebacks: int, lines: int) -> str:
        import signal

        try:
            name = signal.Signals(self.signal).name
        except ValueError:
            name = f"signal {self.signal}"
        when = f" at {self.time}" if self.time else ""
        why = (f"the job was cancelled (hpcdist cancel); torchrun got {name}{when}" if _cancelled(self.path)
               else f"torchrun got {name}{when} (a cancel, the walltime or a preemption)")
        count = f"{tracebacks} traceback{'s' if tracebacks > 1 else ''} in {lines} lines"
        return f"hpcdist: {why} and stopped the ranks [its teardown, {count}, folded; whole in {self.path}]\n"


_COMPILED: list = []


def _patterns() -> list:
    """torchrun's lines (:mod:`hpcdist.launchers.torchrun`): its SignalException, its shutdown
    lines, any line of its agent's log; and any other exception's last line. Compiled once, when a
    log first has a marker."""
    if not _COMPILED:
        import re

        from hpcdist.launchers.torchrun import ELASTIC_LINE, SIGNAL_EXCEPTION, TEARDOWN_LINE

        _COMPILED.extend((re.compile(SIGNAL_EXCEPTION), re.compile(TEARDOWN_LINE), re.compile(ELASTIC_LINE),
                          re.compile(r"(?:\[\w+\]:\s*)?[\w.]*(?:Error|Exception|Interrupt)\b")))
    return _COMPILED


def _cancelled(log: str) -> bool:
    """Whether the job whose folder holds ``log`` was cancelled with ``hpcdist cancel`` (its record
    says so: :mod:`hpcdist.jobs`)."""
    import json

    try:
        with open(os.path.join(os.path.dirname(log), "record.json"), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("cancelled") is True
