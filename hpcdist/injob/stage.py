"""``--stage-env`` in the job: the packed environment copied to every node's local storage and unpacked.

Where it runs: the job script, on every node (``unpack``, once per node: srun, the MPI's one-per-node
launch or pbsdsh start it) and on the first node (``broadcast``: Slurm's ``sbcast``; ``clean``).

    python -m hpcdist.injob.stage broadcast --archive A [--image I] --to /tmp/hpcdist-stage-JOB
    python -m hpcdist.injob.stage unpack --archive A [--image I] [--copied /tmp/hpcdist-stage-JOB] --root '$TMPDIR'
        --origin /path/of/the/env --decompress zstd
    python -m hpcdist.injob.stage clean --root '$TMPDIR' [--archive /tmp/hpcdist-stage-JOB]

Two ways, chosen on each node. Where the submit made a squashfs image (a venv, ``mksquashfs`` on
the login node) and the node can mount one (``squashfuse``, ``/dev/fuse``): the image is the
node's copy (broadcast, or copied once from the shared file), nothing is unpacked, and
``ROOT/hpcdist-env-JOBID-HOST`` is a folder of links into the image's mount point plus a real
``bin/`` (copied from the image, its ``#!`` lines pointed at the folder); the image is mounted by
the wrapper, in the launcher's own step (a daemon started by this step would end with it where
Slurm tracks steps by cgroup), once per node (``.hpcdist-mount``, under flock). Otherwise the tar:
read once (the node's own copy after a broadcast, else the shared file), unpacked there, the
scripts of its ``bin/`` pointed at their new place (conda's ``conda-unpack`` where it ships one).
Either way the time goes to the job's progress folder (``stage-HOST.json``:
:mod:`hpcdist.progress.startup` reads it). A node that cannot stage says so in one line naming
itself, and exits 1: the launch that started it ends the others and the job. ``clean`` unmounts
and removes the node's copy (the job script's exit trap runs it on every node, also when the job
is killed). Cheap to import: os, sys, time, subprocess (shutil's which for the image).
"""

import os
import sys
import time

#: What a staged environment is called on a node: ROOT/hpcdist-env-JOBID-HOST (HOST: two "nodes"
#: that share one /tmp, as the test clusters' do, never unpack into one folder).
NODE_DIR = "hpcdist-env"

USAGE = ("usage: python -m hpcdist.injob.stage broadcast --archive FILE [--image FILE] --to BASE\n"
         "       python -m hpcdist.injob.stage unpack --archive FILE [--image FILE] [--copied BASE] --root DIR "
         "--origin DIR [--decompress zstd|gzip]\n"
         "       python -m hpcdist.injob.stage clean --root DIR [--archive BASE]\n"
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


#: The suffixes a broadcast copy may have (BASE + one of them): the image, or the tar.
SUFFIXES = (".sqfs", ".tar.zst", ".tar.gz")
#: In a node's folder, when it stages the image: the mount point, the image (or a link to its
#: broadcast copy), and the script the wrapper runs to mount it.
MOUNT, IMAGE, MOUNT_SCRIPT = ".image", ".image.sqfs", ".hpcdist-mount"


def mounter():
    """``(squashfuse, unmount argv)`` where this node can mount a squashfs image without root's
    kernel mount (squashfuse_ll or squashfuse, /dev/fuse it may open, a way to unmount), else None."""
    from shutil import which

    fuse = which("squashfuse_ll") or which("squashfuse")
    if not fuse or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return None
    for name in ("fusermount3", "fusermount"):
        if which(name):
            return fuse, [which(name), "-u", "-z"]
    return (fuse, ["umount", "-l"]) if os.geteuid() == 0 else None


def broadcast(options: dict) -> dict:
    """sbcast: the image (where this node can mount it; the nodes of a job are alike) or the tar,
    to every node of the job at once (Slurm's tree of slurmds), as BASE.sqfs or BASE.tar.zst."""
    started = time.time()
    source = options.get("image") if options.get("image") and os.path.isfile(options["image"]) and mounter() else None
    source = source or options["archive"]
    to = options["to"] + next(x for x in SUFFIXES if source.endswith(x))
    proc = _run(["sbcast", "--force", source, to], capture_output=True, text=True)
    if proc.returncode:
        raise StageError(f"sbcast of {source} to {to} failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return {"what": "broadcast", "started": started, "ended": time.time(), "bytes": os.path.getsize(source),
            "how": "image" if source.endswith(".sqfs") else "tar"}


def unpack(options: dict) -> dict:
    """This node's copy of the environment (the image where it can mount one, else the tar
    unpacked); the record of it."""
    started = time.time()
    target = node_dir(options["root"])
    copied = options.get("copied")
    image = copied + ".sqfs" if copied and os.path.isfile(copied + ".sqfs") else None
    if not image and not copied and options.get("image") and os.path.isfile(options["image"]):
        image = options["image"]
    if os.path.exists(target) or os.path.islink(target):  # an earlier run of this job on this node (a requeue)
        _remove(target)
    try:
        os.makedirs(target, 0o700)
    except OSError as e:
        raise StageError(f"cannot make {target}: {e.strerror or e} (--stage-dir: local storage the job may "
                         f"write, with room for the environment)") from None
    how, failed = mounter() if image else None, None
    if how:
        try:
            record = _stage_image(image, bool(copied), target, options, how)
            return {**record, "started": started, "ended": time.time(), "copied": bool(copied)}
        except StageError as e:  # the image will not do here (FUSE refused?): the tar, as without squashfuse
            failed = str(e)
            _remove(target)
            os.makedirs(target, 0o700)
    archive = options["archive"]
    if copied:
        archive = next((copied + x for x in SUFFIXES[1:] if os.path.isfile(copied + x)), archive)
    record = _unpack_tar(archive, target, options)
    if failed:
        record["image_failed"] = failed
    return {**record, "started": started, "ended": time.time(), "copied": archive != options["archive"]}


def _unpack_tar(archive: str, target: str, options: dict) -> dict:
    import subprocess

    try:
        size = os.path.getsize(archive)
    except OSError as e:
        _remove(target)
        raise StageError(f"cannot read the packed environment {archive}: {e.strerror or e}") from None
    decompress = [options.get("decompress") or "zstd", "-dc", archive]
    with subprocess.Popen(decompress, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as squeeze:
        tar = subprocess.run(["tar", "-x", "-C", target, "-f", "-"], stdin=squeeze.stdout, capture_output=True,
                             text=True)
        squeeze.stdout.close()
        said = squeeze.stderr.read().decode(errors="replace")
    if squeeze.returncode or tar.returncode:
        _remove(target)
        why = (tar.stderr or said).strip().splitlines()
        raise StageError(f"cannot unpack {archive} into {target}: {decompress[0]} {squeeze.returncode}, tar "
                         f"{tar.returncode}: {why[-1] if why else 'no message'} (room on {options['root']}? "
                         f"--stage-dir names another place)")
    unpacked = time.time()
    moved = relocate(target, options["origin"].rstrip("/"))
    if os.path.exists(os.path.join(target, "bin", "conda-unpack")):
        proc = _run([os.path.join(target, "bin", "conda-unpack")], capture_output=True, text=True)
        if proc.returncode:
            raise StageError(f"conda-unpack in {target} failed: {proc.stderr.strip()[-300:]}")
    return {"what": "unpack", "how": "tar", "unpacked": unpacked, "bytes": size, "dir": target, "scripts": moved}


def _stage_image(image: str, copied: bool, target: str, options: dict, how) -> dict:
    """The image as this node's copy: the node's own file (the broadcast's, else one copy of the
    shared one), mounted once here to check it and to copy its ``bin/`` out, then unmounted (the
    wrapper mounts it for the launch, :func:`mount_script`); links to the rest."""
    import shutil

    fuse, unmount = how
    own = os.path.join(target, IMAGE)
    try:
        size = os.path.getsize(image)
        if copied:
            os.symlink(image, own)
        else:
            shutil.copyfile(image, own)
    except OSError as e:
        raise StageError(f"cannot copy the packed environment {image} into {target}: {e.strerror or e} "
                         f"(room on {options['root']}? --stage-dir names another place)") from None
    point = os.path.join(target, MOUNT)
    os.mkdir(point, 0o700)
    proc = _run([fuse, own, point], capture_output=True, text=True)
    if proc.returncode:
        raise StageError(f"cannot mount {image} on {point} with {fuse} ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-300:]}")
    try:
        names = sorted(os.listdir(point))
        if "bin" not in names:
            raise StageError(f"{image} has no bin/: not a packed environment")
        shutil.copytree(os.path.join(point, "bin"), os.path.join(target, "bin"), symlinks=True)
    except OSError as e:
        raise StageError(f"cannot read the mounted {image}: {e.strerror or e}") from None
    finally:
        _run([*unmount, point], capture_output=True)
    for name in names:
        if name != "bin":
            os.symlink(os.path.join(MOUNT, name), os.path.join(target, name))
    moved = relocate(target, options["origin"].rstrip("/"))
    _write(os.path.join(target, MOUNT_SCRIPT), mount_script(target, fuse), 0o500)
    return {"what": "unpack", "how": "image", "bytes": size, "dir": target, "scripts": moved}


def mount_script(target: str, fuse: str) -> str:
    """What the wrapper runs before its command: the image mounted once on this node (under flock:
    a node's launchers and ranks may start at once; held until squashfuse returns, mounted, and
    not handed to its daemon)."""
    from hpcdist.shell import quote

    point, lock = quote(os.path.join(target, MOUNT)), quote(os.path.join(target, MOUNT_SCRIPT + ".lock"))
    return (f"#!/bin/sh\n# hpcdist --stage-env: mounts this node's environment image once (hpcdist.injob.stage).\n"
            f"mountpoint -q {point} && exit 0\n"
            f"exec 9>{lock}\nflock 9\n"
            f"mountpoint -q {point} && exit 0\n"
            f"{quote(fuse)} {quote(os.path.join(target, IMAGE))} {point} 9>&-\n")


def _write(path: str, text: str, mode: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def _remove(target: str) -> None:
    """A node's copy: its image unmounted first (a lazy unmount: a rank may still hold it), then gone."""
    point = os.path.join(target, MOUNT)
    how = mounter()
    for _ in range(4):  # (a mount on a mount, should two have raced, goes too)
        if not (os.path.isdir(point) and _mounted(point)):
            break
        _run([*how[1], point] if how else ["umount", "-l", point], capture_output=True)
    _run(["rm", "-rf", "--one-file-system", target])


def _mounted(point: str) -> bool:
    point = os.path.realpath(point)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            return any(line.split()[4].replace("\\040", " ") == point for line in f if len(line.split()) > 4)
    except OSError:
        return os.path.ismount(point)


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
    _remove(node_dir(options["root"]))
    for suffix in SUFFIXES if options.get("archive") else ():
        try:
            os.unlink(options["archive"] + suffix)
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
        if word in ("--archive", "--image", "--copied", "--to", "--root", "--origin", "--decompress") and args:
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
        if record.get("image_failed"):
            print(f"hpcdist: {host}: the environment's image did not mount, unpacking instead: "
                  f"{record['image_failed']}", file=sys.stderr, flush=True)
        what = "an image, mounted by the launch" if record["how"] == "image" else "unpacked"
        print(f"hpcdist: {host}: environment staged into {record['dir']} in "
              f"{record['ended'] - record['started']:.1f} s "
              f"({record['bytes'] / 1e6:.0f} MB read once; {what})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
