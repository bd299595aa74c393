"""Files appear whole or not at all: write to a temporary file beside, then rename.

The temporary file has an unpredictable name (``mkstemp``: created with
O_EXCL, never through a link someone planted), and the file is private to
the user unless ``mode`` says otherwise. :func:`write_output`, for a file the
user names (``-o FILE``), renames only onto a regular file.
"""

from __future__ import annotations

import os
import tempfile


def write_text_atomic(path: str, text: str, mode: int = 0o600) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_output(path: str, text: str) -> None:
    """``text`` into the file a user named: a regular file (or a new one) whole, by rename, onto
    what a link names (the link stays a link); anything else (``/dev/stdout``, ``/dev/null``, a
    FIFO, a terminal) written in place, as a shell's ``>`` would: a rename would replace the
    device with a regular file (as root), or fail in /dev (as a user)."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    write_text_atomic(os.path.realpath(path), text)  # private, whatever the file was (a hostfile names the job's hosts)
