"""Reading a job's logs (:mod:`hpcdist.jobs` says where they are): whole, or what they gained
past an offset, to follow them as they grow."""

from __future__ import annotations


def read_log(path: str) -> str:
    """A log's text; bytes that are not UTF-8 are replaced (a log holds whatever the job
    printed). OSError when it cannot be read (FileNotFoundError before the job wrote it)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def read_log_from(path: str, offset: int) -> bytes:
    """What a log gained past ``offset`` bytes (b"" when nothing), to follow it as it grows:
    bytes, as a character may be cut at the end. FileNotFoundError before the job wrote it."""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read()
