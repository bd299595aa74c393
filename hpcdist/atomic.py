"""Files appear whole or not at all: write to a temporary file beside, then rename.

The temporary file has an unpredictable name (``mkstemp``: created with
O_EXCL, never through a link someone planted), and the file is private to
the user unless ``mode`` says otherwise.
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
