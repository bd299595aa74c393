"""``--stage-env`` on the login node: the job's Python environment packed once, cached by its content.

Where it runs: the login node, at ``hpcdist submit`` (and ``render``, which only names the files).

The environment is the one the job runs with: ``--venv``, ``--conda`` (a path, or a name under
``$CONDA_PREFIX``'s ``envs``), else the active one (``$VIRTUAL_ENV``, ``$CONDA_PREFIX``, or the
interpreter hpcdist runs in when it is a venv's). It is packed into one archive in the submit
folder's ``.hpcdist/stage/`` (which every node sees, as the job folders beside it), named by a
hash of its content as its package manager records it (:func:`content_key`): a second submit of
an unchanged environment packs nothing. Two files: a plain tar compressed with zstd (``zstd -T0
-1``: every core, the fastest level) where ``zstd`` is on PATH, else gzip (``pigz`` where found),
which every node can unpack; and, for a venv where ``mksquashfs`` is on the login node, a squashfs
image (zstd), which a node with ``squashfuse`` mounts instead: nothing unpacked, nothing to remove
but one file (``HPCDIST_STAGE_TAR=1`` at submit: the tar only). Measured here on a 1.4 GB,
51,000-file venv with torch: the tar 7.8 s to 403 MB, the image 3.9 s to 393 MB (zstd level 3:
mksquashfs's default, 15, took minutes under load for 341 MB); unpacking the tar
takes 3 to 34 s on this machine's disk, mounting the image 0.01 s. docs/guide/staging.md says why
not venv-pack or conda-pack.

Beside the archive, one small script per (archive, local storage) pair, the *wrapper*
(``KEY-ROOT.run``): every node's launcher and rank runs through it, and it points ``PATH``,
``VIRTUAL_ENV`` (or ``CONDA_PREFIX``) and ``HPCDIST_PYTHON`` at that node's own copy
(:mod:`hpcdist.injob.stage` unpacks it there at the job's start) before ``exec``.
"""

from __future__ import annotations

import os
import sys
import time

from hpcdist import STATE_DIR, validate
from hpcdist.shell import BREAK, Shell, command_lines, quote
from hpcdist.injob.stage import MOUNT_SCRIPT, NODE_DIR

#: The folder of the archives, in the submit folder's .hpcdist (beside the job folders).
CACHE = os.path.join(STATE_DIR, "stage")


def check_dir(x, o, _):
    """Node-local storage: an absolute path whose parts may be variables (``$TMPDIR``,
    ``$PBS_JOBFS/env``, ``/mnt/bb/$USER``), expanded on each node (:func:`shell_root`): the check of
    ``--stage-dir`` (:mod:`hpcdist.submission.options` names it)."""
    x = validate.check_word(str(x), o.flag)
    parts = x.split("/")
    plain = all(part[1:].strip("{}").isidentifier() and part[1:].isascii() if part.startswith("$")
                else all(c.isalnum() or c in "._-" for c in part) for part in parts)
    if not plain or not (x.startswith("/") or x.startswith("$")):
        raise validate.ValidationError(o.flag, x, "is not an absolute path (or $VARIABLE/path) of plain characters.",
                                       "Give the nodes' local storage as /tmp, /local/scratch or $TMPDIR.")
    return x


class Plan:
    """What a job stages: the environment (``origin``, ``kind`` venv or conda), its content key,
    the archive, the wrapper and the local storage (``root``, as the profile gives it)."""

    __slots__ = ("origin", "kind", "key", "archive", "wrapper", "root", "compressor", "image")

    def __init__(self, origin, kind, key, archive, wrapper, root, compressor, image=None):
        self.origin, self.kind, self.key, self.archive = origin, kind, key, archive
        self.wrapper, self.root, self.compressor, self.image = wrapper, root, compressor, image

    @property
    def packed(self) -> bool:
        return os.path.isfile(self.archive) and (self.image is None or os.path.isfile(self.image)
                                                  or os.path.exists(self.image + ".failed"))


def environment(spec, environ=None) -> tuple[str, str]:
    """``(path, kind)`` of the environment the job runs with; ValidationError when there is none."""
    environ = os.environ if environ is None else environ
    if spec.venv:
        path, kind, flag = spec.venv, "venv", "--venv"
    elif spec.conda:
        path, kind, flag = spec.conda, "conda", "--conda"
        if "/" not in path and environ.get("CONDA_PREFIX"):
            base = environ.get("CONDA_ROOT") or environ["CONDA_PREFIX"].split(os.sep + "envs" + os.sep)[0]
            path = os.path.join(base, "envs", path) if path != "base" else base
    elif environ.get("VIRTUAL_ENV"):
        path, kind, flag = environ["VIRTUAL_ENV"], "venv", "$VIRTUAL_ENV"
    elif environ.get("CONDA_PREFIX"):
        path, kind, flag = environ["CONDA_PREFIX"], "conda", "$CONDA_PREFIX"
    elif sys.prefix != sys.base_prefix:
        path, kind, flag = sys.prefix, "venv", "the venv hpcdist runs in"
    else:
        raise validate.ValidationError(
            "--stage-env", "on", "needs a Python environment to stage, and none is given or "
            "active.",
            "Give --venv DIR or --conda ENV, or activate one before submitting.")
    path = os.path.abspath(os.path.expanduser(path))
    marker = "pyvenv.cfg" if kind == "venv" else "conda-meta"
    if not os.path.exists(os.path.join(path, marker)):
        raise validate.ValidationError(
            flag, path, f"is not a {kind} environment (no {marker} in it): --stage-env packs a "
            "whole environment.", f"Give the {kind}'s own folder, or leave --stage-env out.")
    return path, kind


def content_key(path: str) -> str:
    """A hash of the environment as its package manager records it, without reading its tens of
    thousands of files (a walk of them through a slow shared file system takes minutes): the
    entries of ``bin/``, of every ``site-packages`` and of ``conda-meta/`` (name, size, mtime: an
    install or removal changes them, and each distribution's ``*.dist-info`` or ``*.json``
    record), and ``pyvenv.cfg``. A file edited in place inside ``site-packages`` is not seen:
    ``hpcdist submit`` packs it again once the environment is touched (``touch ENV/pyvenv.cfg``)."""
    import glob
    import hashlib

    digest = hashlib.sha256()
    folders = [os.path.join(path, "bin"), os.path.join(path, "conda-meta"), path]
    folders += sorted(glob.glob(os.path.join(path, "lib", "python*", "site-packages")))
    folders += sorted(glob.glob(os.path.join(path, "lib", "python*", "site-packages", "*.dist-info")))
    for folder in folders:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        digest.update(f"D{os.path.relpath(folder, path)}\n".encode("utf-8", "surrogateescape"))
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            digest.update(f"{entry.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def compressor() -> tuple[str, list[str], str]:
    """``(suffix, the compress command, the decompress program)``: zstd, else pigz, else gzip."""
    import shutil

    if shutil.which("zstd"):
        return ".tar.zst", ["zstd", "-q", "-T0", "-1"], "zstd"
    gzip = "pigz" if shutil.which("pigz") else "gzip"
    return ".tar.gz", [gzip, "-1"], "gzip"


_PLANS: dict = {}
#: origin -> (its stamp once packed, the key it was packed under), for the render after the pack.
_PACKED: dict = {}


def _stamp(origin: str) -> tuple:
    import glob

    return tuple(os.stat(folder).st_mtime_ns for folder in [origin, os.path.join(origin, "bin")] +
                 sorted(glob.glob(os.path.join(origin, "lib", "python*", "site-packages"))) if os.path.isdir(folder))


def plan(spec, workdir: str, environ=None) -> Plan:
    """What the job stages (the key is computed once per process and environment)."""
    origin, kind = environment(spec, environ)
    if spec.container_image:
        raise validate.ValidationError("--stage-env", "on", "stages the host's Python environment, and a container "
                                       "job runs in its image's.", "Leave --stage-env out of container jobs.")
    cache = os.path.join(workdir, CACHE)
    # Once per submit (its render asks again): the folders an install changes, by their mtimes.
    stamp = _stamp(origin)
    found = _PLANS.get(origin)
    if _PACKED.get(origin, (None,))[0] == stamp:  # as packed: the script names what was packed, also
        found = _PACKED[origin]                    # where an install changed it during the pack
    elif found is None or found[0] != stamp:
        found = _PLANS[origin] = (stamp, content_key(origin))
    key = f"{os.path.basename(origin.rstrip(os.sep)).lstrip('.') or 'env'}-{found[1]}"
    suffix, _, decompress = compressor()
    root = spec.stage_dir
    import hashlib

    where = hashlib.sha256(root.encode()).hexdigest()[:8]
    image = os.path.join(cache, key + ".sqfs") if wants_image(kind) else None
    return Plan(origin, kind, key, os.path.join(cache, key + suffix), os.path.join(cache, f"{key}-{where}.run"),
                root, decompress, image)


def wants_image(kind: str, environ=None) -> bool:
    """A squashfs image beside the tar: a venv (a conda environment's prefix is written in its
    files: conda-unpack rewrites them, which a read-only image cannot take), ``mksquashfs`` here,
    and not ``HPCDIST_STAGE_TAR=1``."""
    import shutil

    environ = os.environ if environ is None else environ
    return kind == "venv" and environ.get("HPCDIST_STAGE_TAR") != "1" and bool(shutil.which("mksquashfs"))


def pack(p: Plan, say=None) -> float:
    """The archive, made when missing (once per content), and the wrapper; the seconds it took
    (0.0 when the archive was there)."""
    os.makedirs(os.path.dirname(p.archive), 0o700, exist_ok=True)
    _write_wrapper(p)
    started, took = time.monotonic(), 0.0
    if not p.packed:
        if say:
            say(f"packing {p.origin} for --stage-env into {p.archive}{' and an image' if p.image else ''} "
                "(once for this content)")
        if not os.path.isfile(p.archive):
            _pack_tar(p)
        if p.image and not (os.path.isfile(p.image) or os.path.exists(p.image + ".failed")):
            _pack_image(p, say)
        took = time.monotonic() - started
        if say:
            say(kept(p))
    _PACKED[p.origin] = (_stamp(p.origin), p.key.rsplit("-", 1)[-1])
    return took


def kept(p: Plan) -> str:
    """What packing left on the submit folder's disk, and how to free it: the archives of every
    content packed before stay too (a changed environment packs anew), unsaid they grew unseen."""
    folder = os.path.dirname(p.archive)
    mine = sum(os.path.getsize(f) for f in (p.archive, p.image) if f and os.path.isfile(f))
    files = [os.path.join(folder, name) for name in os.listdir(folder)]
    total = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    archives = sum(1 for f in files if ".tar." in os.path.basename(f) and not f.endswith(".tmp"))
    relative = os.path.relpath(folder)
    plural = "s" if archives != 1 else ""
    return (f"--stage-env: {_megabytes(mine)} packed; {relative} holds {_megabytes(total)} "
            f"({archives} environment{plural}, kept for the next submit). To free it "
            f"once no queued or running job uses it: rm -r {quote(relative)} (a later --stage-env "
            "submit packs again)")


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size / 1e3:,.0f} kB"


def _pack_image(p: Plan, say) -> None:
    """The squashfs image; where mksquashfs fails, none (the nodes unpack the tar) and a warning.
    ``IMAGE.failed`` records a failed try, so that it is not tried again at every submit."""
    import subprocess

    temporary = f"{p.image}.{os.getpid()}.tmp"
    argv = ["mksquashfs", p.origin, temporary, "-noappend", "-comp", "zstd", "-Xcompression-level", "3", "-no-xattrs",
            "-quiet", "-no-progress"]
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        if os.path.exists(temporary):
            os.unlink(temporary)
        if say:
            why = proc.stderr.strip().splitlines()
            say(f"warning: mksquashfs could not make an image of {p.origin} ({why[-1] if why else proc.returncode}): "
                "the nodes unpack the tar")
        with open(p.image + ".failed", "w") as f:
            f.write(proc.stderr[-2000:])
        return
    os.replace(temporary, p.image)


def _pack_tar(p: Plan) -> None:
    temporary = f"{p.archive}.{os.getpid()}.tmp"
    _, command, _ = compressor()
    import subprocess

    with open(temporary, "wb") as out:
        tar = subprocess.Popen(["tar", "-C", p.origin, "-cf", "-", "."], stdout=subprocess.PIPE)
        squeeze = subprocess.run(command, stdin=tar.stdout, stdout=out)
        tar.stdout.close()
        tar_status = tar.wait()
    # tar 1: a file changed while it was read (a pip run beside it): the next submit packs it again.
    if squeeze.returncode or tar_status not in (0, 1):
        os.unlink(temporary)
        raise validate.ValidationError(
            "--stage-env", p.origin, f"could not be packed (tar {tar_status}, {command[0]} "
            f"{squeeze.returncode}).", "Check that every file of the environment is readable and "
            "the submit folder has room, or leave --stage-env out.")
    os.replace(temporary, p.archive)


def wrapper_text(p: Plan) -> str:
    """The wrapper every node runs its launcher and ranks through (a person may read it)."""
    prefix = "CONDA_PREFIX" if p.kind == "conda" else "VIRTUAL_ENV"
    root = shell_root(p.root)
    return (f"#!/bin/sh\n"
            f"# Written by hpcdist --stage-env: runs a command from this node's own copy of\n"
            f"# {p.origin}, unpacked into {p.root} at the job's start (hpcdist.injob.stage).\n"
            f'env_dir={root}/{NODE_DIR}-'
            f'"${{HPCDIST_JOB_ID:?hpcdist --stage-env: HPCDIST_JOB_ID is not set}}"-"$(uname -n)"\n'
            f'if [ ! -x "$env_dir/bin/python" ]; then\n'
            f'  echo "hpcdist: $(uname -n): no staged environment in $env_dir (--stage-env): its staging failed or '
            f'was removed" >&2\n'
            f"  exit 1\n"
            f"fi\n"
            f'if [ -f "$env_dir/{MOUNT_SCRIPT}" ] && ! sh "$env_dir/{MOUNT_SCRIPT}"; then\n'
            f'  echo "hpcdist: $(uname -n): cannot mount the staged environment\'s image in '
            f'$env_dir (--stage-env)" >&2\n'
            f"  exit 1\n"
            f"fi\n"
            f'{prefix}=$env_dir HPCDIST_PYTHON=$env_dir/bin/python PATH=$env_dir/bin:$PATH\n'
            f"export {prefix} HPCDIST_PYTHON PATH\n"
            f'exec "$@"\n')


def shell_root(root: str) -> str:
    """The local storage as the shell expands it on each node, in double quotes: ``$TMPDIR/x`` ->
    ``"${TMPDIR:?...}/x"`` (checked: plain path characters and variables, each a part of its own)."""
    parts = []
    for part in root.split("/"):
        if part.startswith("$"):
            name = part[1:].strip("{}")
            part = f"${{{name}:?hpcdist --stage-dir: {name} is not set on $(uname -n)}}"
        parts.append(part)
    return '"' + "/".join(parts) + '"'


def _write_wrapper(p: Plan) -> None:
    text = wrapper_text(p)
    try:
        with open(p.wrapper, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    from hpcdist.jobs.atomic import write_text_atomic

    write_text_atomic(p.wrapper, text, 0o755)


#: How the job script runs the in-job side: the set-up's interpreter by its path (hpcdist.injob.job_setup).
IN_JOB = [Shell('"${HPCDIST_PYTHON:-python}"'), "-m", "hpcdist.injob.stage"]


def refuse(spec, launcher, scheduler) -> None:
    """The launches whose ranks a per-node wrapper cannot reach: DeepSpeed's runners start the other
    nodes' ranks themselves, by the first node's interpreter path."""
    if launcher.name == "deepspeed" and not launcher.per_node(spec) and spec.nodes > 1 and not scheduler.one_host:
        raise validate.ValidationError(
            "--stage-env", "on", f"cannot reach the ranks DeepSpeed's {spec.deepspeed_runner} "
            "runner starts on the other nodes (it names the first node's python).",
            "Add --no-ssh (one DeepSpeed launcher per node), or use --launcher torchrun.")


def script(spec, scheduler, p: Plan, mpi) -> dict:
    """What the job script's staging block gets: the lines that copy and unpack the environment on
    every node, the line that removes every node's copy, and the wrapper."""
    root = quote(p.root)
    clean = [*IN_JOB, "clean", "--root", Shell(root)]
    lines = []
    image = ["--image", p.image] if p.image else []

    def unpack(*extra):
        return [*IN_JOB, "unpack", "--archive", p.archive, *image, *extra, "--root", Shell(root), "--origin", p.origin,
                "--decompress", p.compressor]

    staged = "mounts the image or unpacks the tar" if p.image else "unpacks it"
    if scheduler.one_host:  # every "node" is this host: one copy
        lines.append(command_lines(unpack()))
        return dict(comment=_comment(p, f"staged once on this host ({staged})"), lines=[Shell(x) for x in lines],
                    wrapper=p.wrapper, clean=Shell(command_lines(clean)))
    hpcdist = [*IN_JOB[:1], "-m", "hpcdist"]
    if scheduler.runs_srun:
        # sbcast: the image or the tar to every node's local storage through slurmd's tree, as
        # BASE.sqfs or BASE.tar.zst; each node then reads its own copy.
        base = Shell(f'{shell_root(p.root)}/hpcdist-stage-"$SLURM_JOB_ID"')
        lines.append(command_lines([*IN_JOB, "broadcast", "--archive", p.archive, *image, "--to", base]))
        clean += ["--archive", base]
        how = f"sbcast copies the packed file to every node, each {staged}"
        lines += scheduler.spread(spec, unpack("--copied", base), hpcdist, mpi)
    else:
        how = f"every node reads the packed file once from the shared file system and {staged}"
        lines += scheduler.spread(spec, unpack(), hpcdist, mpi)
    return dict(comment=_comment(p, how), lines=[Shell(x) for x in lines], wrapper=p.wrapper,
                clean=Shell("\n  ".join(scheduler.spread(spec, clean, hpcdist, mpi))))


def _comment(p: Plan, how: str) -> str:
    return (f"Your Python environment, {p.origin}, on every node's local storage ({p.root}), --stage-env: {how}. "
            f"The ranks import from there, not from the shared file system; a node that cannot stage ends the job, "
            f"named.")


def wrapped(words: list, wrapper: str) -> list:
    """A launcher's words run through the wrapper (after a leading line break)."""
    first = 1 if words[:1] and words[0] is BREAK else 0
    return [*words[:first], Shell(quote(wrapper)), *words[first:]]
