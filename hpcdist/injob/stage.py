"""``--stage-env`` in the job: the packed environment copied to every node's local storage and unpacked.

Where it runs: the job script, on every node (``unpack``, once per node: srun, the MPI's one-per-node
launch or pbsdsh start it) and on the first node (``broadcast``: Slurm's ``sbcast``; ``clean``).

    python -m hpcdist.injob.stage broadcast --archive A --to /tmp/hpcdist-stage-JOB.tar.zst
    python -m hpcdist.injob.stage unpack --archive A --root '$TMPDIR' --origin /path/of/the/env --decompress zstd
    python -m hpcdist.injob.stage clean --root '$TMPDIR' [--archive COPY]

``unpack`` reads the archive once (the node's own copy after a broadcast, else the shared file),
unpacks it into ``ROOT/hpcdist-env-JOBID-HOST`` (``ROOT`` expanded on that node), points the
scripts of its ``bin/`` at their new place (their ``#!`` lines name the packed environment's
python; conda's ``conda-unpack`` where it ships one) and records how long it took in the job's
progress folder (``stage-HOST.json``: :mod:`hpcdist.progress.startup` reads it). A node that
cannot stage says so in one line naming itself, and exits 1: the launch that started it ends the
others and the job. ``clean`` removes the node's copy (the job script's exit trap runs it on every
node, also when the job is killed). Light: os, sys, time, subprocess.
"""

import os
import sys
import time

#: What a staged environment is called on a node: ROOT/hpcdist-env-JOBID-HOST (HOST: two "nodes"
#: that share one /tmp, as the test clusters' do, never unpack into one folder).
NODE_DIR = "hpcdist-env"

USAGE = ("usage: python -m hpcdist.injob.stage broadcast --archive FILE --to FILE\n"
         "       python -m hpcdist.injob.stage unpack --archive FILE --root DIR --origin DIR [--decompress zstd|gzip]\n"
         "       python -m hpcdist.injob.stage clean --root DIR [--archive FILE]\n"
         "Inside a job script (--stage-env): copy the packed environment to this node and unpack it there.")


class StageError(Exception):
    """What failed on this node, in one line."""


def node_dir(root: str, environ=None) -> str:
    """This node's copy: ROOT (its variables expanded here) / hpcdist-env-JOBID-HOST."""
    environ = os.environ if environ is None else environ
    expanded = os.path.expandvars(root)
    if "$" in expanded:
        raise StageError(f"--stage-dir {root}: a variable in it is not set on this node")
    job = environ.get("HPCDIST_JOB_ID")
    if not job:
        raise StageError("HPCDIST_JOB_ID is not set: this runs inside a job script, after its set-up")
    return os.path.join(expanded, f"{NODE_DIR}-{job}-{os.uname().nodename}")


def _run(argv, **kwargs):
    import subprocess

    return subprocess.run(argv, **kwargs)


def broadcast(options: dict) -> dict:
    """sbcast: the archive to every node of the job at once (Slurm's tree of slurmds)."""
    started = time.time()
    proc = _run(["sbcast", "--force", options["archive"], options["to"]], capture_output=True, text=True)
    if proc.returncode:
        raise StageError(f"sbcast of {options['archive']} to {options['to']} failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return {"what": "broadcast", "started": started, "ended": time.time(),
            "bytes": os.path.getsize(options["archive"])}


def unpack(options: dict) -> dict:
    """The archive unpacked into this node's folder; the record of it."""
    import subprocess

    started = time.time()
    archive, origin = options["archive"], options["origin"].rstrip("/")
    target = node_dir(options["root"])
    try:
        size = os.path.getsize(archive)
    except OSError as e:
        raise StageError(f"cannot read the packed environment {archive}: {e.strerror or e}") from None
    if os.path.exists(target):  # an earlier run of this job on this node (a requeue)
        _run(["rm", "-rf", target])
    try:
        os.makedirs(target, 0o700)
    except OSError as e:
        raise StageError(f"cannot make {target}: {e.strerror or e} (--stage-dir: local storage the job may "
                         f"write, with room for the environment)") from None
    decompress = [options.get("decompress") or "zstd", "-dc", archive]
    with subprocess.Popen(decompress, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as squeeze:
        tar = subprocess.run(["tar", "-x", "-C", target, "-f", "-"], stdin=squeeze.stdout, capture_output=True,
                             text=True)
        squeeze.stdout.close()
        said = squeeze.stderr.read().decode(errors="replace")
    if squeeze.returncode or tar.returncode:
        _run(["rm", "-rf", target])
        why = (tar.stderr or said).strip().splitlines()
        raise StageError(f"cannot unpack {archive} into {target}: {decompress[0]} {squeeze.returncode}, tar "
                         f"{tar.returncode}: {why[-1] if why else 'no message'} (room on {options['root']}? "
                         f"--stage-dir names another place)")
    unpacked = time.time()
    moved = relocate(target, origin)
    if os.path.exists(os.path.join(target, "bin", "conda-unpack")):
        proc = _run([os.path.join(target, "bin", "conda-unpack")], capture_output=True, text=True)
        if proc.returncode:
            raise StageError(f"conda-unpack in {target} failed: {proc.stderr.strip()[-300:]}")
    return {"what": "unpack", "started": started, "unpacked": unpacked, "ended": time.time(), "bytes": size,
            "dir": target, "scripts": moved, "copied": bool(options.get("copied"))}


def relocate(target: str, origin: str) -> int:
    """The ``#!`` lines of ``target/bin`` that name the packed environment, pointed at ``target``
    (what venv-pack does at its activation); how many were changed."""
    folder = os.path.join(target, "bin")
    old = [p.encode() + b"/bin/" for p in dict.fromkeys((origin, os.path.realpath(origin)))]
    new = target.encode() + b"/bin/"
    changed = 0
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        path = os.path.join(folder, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            head = f.read(2)
            if head != b"#!":
                continue
            text = head + f.read()
        line, _, rest = text.partition(b"\n")
        fixed = line
        for prefix in old:
            fixed = fixed.replace(b"#!" + prefix, b"#!" + new).replace(b"'" + prefix, b"'" + new)
        if fixed != line:
            with open(path, "wb") as f:
                f.write(fixed + b"\n" + rest)
            changed += 1
    return changed


def clean(options: dict) -> dict:
    target = node_dir(options["root"])
    _run(["rm", "-rf", target])
    if options.get("archive"):
        try:
            os.unlink(options["archive"])
        except OSError:
            pass
    return {}


def _record(record: dict) -> None:
    """Into the job's progress folder, for the start-up breakdown: ``stage-HOST.json`` (unpack) or
    ``stage-broadcast.json``."""
    folder = os.environ.get("HPCDIST_PROGRESS_DIR")
    if not folder or not record:
        return
    from hpcdist.progress import _json, _replace, run_id

    record = {**record, "node": os.uname().nodename, "run": run_id()}
    name = "stage-broadcast.json" if record["what"] == "broadcast" else f"stage-{record['node']}.json"
    os.makedirs(folder, 0o700, exist_ok=True)
    _replace(os.path.join(folder, name), _json(record))


def parse(argv: list) -> tuple:
    if not argv or argv[0] not in ("broadcast", "unpack", "clean"):
        raise StageError(f"expected broadcast, unpack or clean\n{USAGE}")
    options, args = {}, list(argv[1:])
    while args:
        word = args.pop(0)
        if word == "--copied":
            options["copied"] = True
        elif word in ("--archive", "--to", "--root", "--origin", "--decompress") and args:
            options[word[2:]] = args.pop(0)
        else:
            raise StageError(f"unknown or incomplete argument {word!r}\n{USAGE}")
    needed = {"broadcast": ("archive", "to"), "unpack": ("archive", "root", "origin"), "clean": ("root",)}[argv[0]]
    missing = [f"--{n}" for n in needed if n not in options]
    if missing:
        raise StageError(f"{' and '.join(missing)} needed\n{USAGE}")
    return argv[0], options


def main(argv: list) -> int:
    host = os.uname().nodename
    try:
        command, options = parse(argv)
        record = {"broadcast": broadcast, "unpack": unpack, "clean": clean}[command](options)
        _record(record)
    except (StageError, OSError) as e:
        print(f"hpcdist: {host}: staging the environment failed (--stage-env): {e}", file=sys.stderr, flush=True)
        return 1
    if command == "unpack":
        print(f"hpcdist: {host}: environment staged into {record['dir']} in {record['ended'] - record['started']:.1f} s "
              f"({record['bytes'] / 1e6:.0f} MB read once)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
