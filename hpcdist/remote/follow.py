"""``logs -f`` and ``watch`` from the laptop: the login node's output streamed here as it comes.

Where it runs: on the laptop.

A dropped connection (the network, a laptop lid, keepalives unanswered) is said, and ``logs -f``
goes on once one is open again, from the byte it had reached, so that nothing is lost or shown twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from hpcdist import remote
from hpcdist.remote.script import script

#: How long ``logs -f`` waits for a dropped connection to be opened again before it stops.
RESUME_PATIENCE_S = 600.0


def follow(target, job: str, offset: int) -> int:
    """``logs -f`` from the laptop: the output streamed as it comes; a dropped connection resumed,
    once one is open again, from the byte it had reached (``logs --from``), so that none is lost or
    shown twice."""
    remote.require_open(target)
    while True:
        argv = remote.command_argv(target, script(target, ["logs", "-f", "--from", str(offset), job]))
        returncode, offset, stderr = stream(target, argv, offset, job)
        if returncode != remote.SSH_FAILED or remote.is_open(target):
            problem = remote.explain(target, returncode, stderr) if returncode == 3 else None
            if problem is not None:
                raise problem
            return returncode  # the job's own end (a 255 of its own, when the connection is still there)
        print(f"hpcdist logs: ssh to {target.host}: the connection dropped after byte {offset} of the output; "
              f"following again from there once one is open (`{remote.connect_command(target)}`)", file=sys.stderr,
              flush=True)
        deadline = time.monotonic() + RESUME_PATIENCE_S
        while not remote.is_open(target):
            if time.monotonic() > deadline:
                raise remote.RemoteError(f"ssh to {target.host}", f"no connection for {RESUME_PATIENCE_S:g} s; the "
                                         f"job goes on. Once connected, go on with: hpcdist logs -f {job} "
                                         f"--from {offset}")
            time.sleep(1)


def stream(target, argv: list[str], offset: int, job: str, redraw: bool = False) -> tuple[int, int, str]:
    """Run ``argv``: its stdout to ours as it comes (counted from ``offset``), its stderr shown line
    by line, said where from. Returns the exit status, the offset reached and the stderr.
    ``redraw``: the screen is cleared before each of `watch`'s screens (a line "job ...")."""
    process = remote.ssh_popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said: list[str] = []

    def relay() -> None:
        for raw in process.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            said.append(line)
            if not line.startswith(remote.MARK):
                print(f"{target.host}: {line}", file=sys.stderr, flush=True)

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    begin, before = remote.BEGIN.encode(), b""  # what a login shell printed first (a banner) is not shown
    try:
        while True:
            chunk = process.stdout.readline() if redraw else os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            if before is not None:
                before, found, chunk = (before + chunk).partition(begin)
                if not found:
                    continue
                before = None
                if not chunk:
                    continue
            if redraw and chunk.startswith(b"job "):
                sys.stdout.buffer.write(b"\033[H\033[J")
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
            offset += len(chunk)
        returncode = process.wait()
    except KeyboardInterrupt:
        process.terminate()
        print(f"\nhpcdist: stopped following job {job}; it goes on. Follow it again with `hpcdist logs -f {job} "
              f"--from {offset}`, or stop it with `hpcdist cancel {job}`", file=sys.stderr)
        raise
    thread.join(5)
    return returncode, offset, "\n".join(said)
