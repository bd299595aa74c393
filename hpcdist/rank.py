"""``python -m hpcdist.rank SCRIPT ARGS...``: start one rank of the training so every framework sees hpcdist's answer.

The srun, mpirun and DeepSpeed launchers start each rank through this module
(the job script shows it). Before the script runs, in the same process:

1. The rank's place is resolved (:mod:`hpcdist.env`) and exported as the
   variables torchrun gives its workers: ``RANK``, ``WORLD_SIZE``,
   ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``NODE_RANK``, ``GROUP_RANK``,
   ``MASTER_ADDR``, ``MASTER_PORT``. accelerate and the Hugging Face Trainer
   read no Slurm variable and would otherwise train each rank alone under
   srun; DeepSpeed's ``init_distributed`` would otherwise start MPI through
   mpi4py to find them; Lightning reads ``NODE_RANK`` where no cluster
   environment of its own applies.
2. Under a launcher other than srun, the Slurm *step* variables this process
   inherited (the batch step's on the first node, the step that started
   Open MPI's daemons on the others: ``SLURM_PROCID=0``, ``SLURM_NTASKS=1``)
   are removed: Lightning takes ``SLURM_NTASKS`` as the sign of an srun task
   and would read its ranks from them. The job's variables (node list, job
   id) stay.
3. The script runs as ``python SCRIPT`` would run it, in this process and
   as its ``__main__`` module. If it ends with an exception or a
   non-zero exit while MPI is running in this process (mpi4py imported by
   Lightning's MPI environment, DeepSpeed or the script), MPI is aborted:
   mpi4py would otherwise finalize MPI at exit, which waits for ranks that
   are themselves waiting for this one, and the job would hang.

Nothing is exported when a field is unknown (the frameworks then look for
themselves); each rank prints why.

4. In a submitted job (``$HPCDIST_PROGRESS_DIR`` set), the rank's progress is
   recorded for ``hpcdist watch`` (:mod:`hpcdist.progress`: an optimizer step
   hook and a thread that writes it; no change to the script).

A rank that starts and ends well imports only :mod:`hpcdist.env` (and what
its lookup needs; :mod:`hpcdist.progress` in a submitted job): MPI's abort (:mod:`hpcdist.env.mpi_discovery`) is
imported when the script ends badly, and ``__future__`` never (it costs each
rank about 2% of Python's start).
"""

import os
import sys

#: The variables of one Slurm step, wrong for a process that another launcher started
#: inside it (``SLURM_STEP_*`` go by their prefix).
SLURM_STEP_VARIABLES = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS",
                        "SLURM_NTASKS_PER_NODE", "SLURM_GTIDS", "SLURM_TASK_PID", "SLURM_STEPID",
                        "SLURM_LAUNCH_NODE_IPADDR", "SLURM_SRUN_COMM_HOST", "SLURM_SRUN_COMM_PORT")


def prepare(environ=None) -> "list[str]":
    """Steps 1 and 2 on ``environ`` (``os.environ``); the lines to print about them."""
    from hpcdist import env as hpcdist_env
    from hpcdist.env.detectors import SRUN_TASKS
    from hpcdist.env.model import DistEnvError

    environ = os.environ if environ is None else environ
    try:
        dist = hpcdist_env.resolve(environ)
        torch_vars = dist.torch_env()
    except DistEnvError as e:
        return [f"hpcdist.rank: exporting no rank variables: {e}"]
    if dist.launcher not in SRUN_TASKS:
        stale = [k for k in environ if k in SLURM_STEP_VARIABLES or k.startswith("SLURM_STEP_")]
        for k in stale:
            del environ[k]
    environ.update(torch_vars, GROUP_RANK=torch_vars["NODE_RANK"])
    return []


def own_gpu(environ) -> "list[str]":
    """``--own-gpu`` (``--gpu-map visible-devices``): let this rank see only its own GPU, the one
    of its local rank, as LUMI's ``select_gpu`` wrapper does; the lines to print about it.

    AMD GPUs (``/dev/kfd``) by ``ROCR_VISIBLE_DEVICES``, others by ``CUDA_VISIBLE_DEVICES``.
    Where the variable already lists the node's GPUs (set by the scheduler), the rank gets the
    one at its local rank's place in that list; where it lists one, it is left as it is.
    """
    name = "ROCR_VISIBLE_DEVICES" if os.path.exists("/dev/kfd") else "CUDA_VISIBLE_DEVICES"
    local = environ.get("LOCAL_RANK")
    if local is None:
        return [f"hpcdist.rank: --own-gpu: the local rank is unknown; {name} is left as it is."]
    visible = [d.strip() for d in environ.get(name, "").split(",") if d.strip()]
    if len(visible) == 1:
        return []
    if visible and int(local) >= len(visible):
        return [f"hpcdist.rank: --own-gpu: local rank {local}, but {name}={environ[name]} lists "
                f"{len(visible)} GPUs; it is left as it is."]
    environ[name] = visible[int(local)] if visible else local
    return []


def run(argv: "list[str]") -> int:
    """Run ``argv`` (script and arguments) as ``python SCRIPT ARGS`` would; its exit status.

    The script's module becomes ``sys.modules["__main__"]`` (so that pickle and
    multiprocessing find its classes). What it holds is let go by the last
    ``atexit`` handler, while other threads can still run: python would let go
    of it later, during its finalization, where a gloo worker thread that still
    holds a tensor is stopped half-way and takes the process down ("terminate
    called without an active exception"), whether or not the script destroyed
    its process group.
    """
    import atexit
    import builtins
    import importlib.machinery
    import io
    import types

    script = argv[0]
    script_path = os.path.abspath(script)
    sys.argv = list(argv)
    # What python puts first on sys.path for a script: its folder.
    sys.path[0] = os.path.dirname(script_path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script_path, __builtins__=builtins, __spec__=None, __package__=None,
                         __cached__=None, __loader__=importlib.machinery.SourceFileLoader("__main__", script_path))
    try:
        with io.open_code(script_path) as f:
            source = f.read()
    except OSError as e:  # python's own words and status
        print(f"{sys.executable}: can't open file {script_path!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
        return 2
    try:
        compiled = compile_script(source, script_path)
        sys.modules["__main__"] = main
        atexit.register(_let_go, main)  # registered first: runs last
        exec(compiled, main.__dict__)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every way a script ends goes through here
        # Here, not at the top: a script that ends without an exception needs neither.
        from hpcdist.env.mpi_discovery import abort_if_running, exit_status

        code = exit_status(exc)
        global ERROR
        ERROR = f"{type(exc).__name__}: {exc}".splitlines()[0][:300] if code else None
        if not isinstance(exc, SystemExit):
            # As python would: through sys.excepthook (init_distributed's failure report hooks
            # in there), showing the script's frames, not this module's.
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != script_path:
                tb = tb.tb_next
            exc = exc.with_traceback(tb or exc.__traceback__)
            sys.excepthook(type(exc), exc, exc.__traceback__)
        elif code and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
        if code:
            sys.stderr.flush()
            abort_if_running(code)
        return code


#: How the script ended, where it raised: the exception's type and first line (for the rank's record).
ERROR = None


class _Compiled(BaseException):
    """Raised by :func:`compile_script`'s hook as the compiled script is about to start: it never runs."""


def compile_script(source: bytes, path: str):
    """``compile(source, path, "exec", dont_inherit=True)``, without compile()'s cost to a rank.

    compile()'s first call makes Python's ~120 AST classes (it asks whether ``source`` is an AST):
    ~12M instructions, a third of ``python SCRIPT``'s whole start, which never makes them. exec()
    compiles the same source the same way, named "<string>", without them: a profile hook takes the
    code object as it is about to start (and stops it there, before its first instruction), and
    ``_imp._fix_co_filename`` (importlib's, for a moved .pyc) names it and the code in it by the
    script's path. compile() itself does what this cannot do as it would: a compiler's warning or
    error (it would name "<string>"), a tracer or profiler already set (it would see the capture),
    a hook that does not fire. No flag is inherited (``dont_inherit``): this module imports nothing
    from ``__future__`` (tests/test_rank_compile.py holds the code equal to compile()'s).
    """
    if sys.gettrace() is None and sys.getprofile() is None:
        import _imp
        import warnings  # loaded already: importlib, which runs this module, imports it

        scratch = {"__builtins__": {}}  # should the hook not fire: no import, no builtin, nothing done
        found = []

        def hook(frame, event, arg):
            if event == "call" and frame.f_globals is scratch:
                found.append(frame.f_code)
                raise _Compiled

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sys.setprofile(hook)
                try:
                    exec(source, scratch)
                finally:
                    sys.setprofile(None)  # as it was: none was set
        except _Compiled:
            _imp._fix_co_filename(found[0], path)
            return found[0]
        except Exception:  # noqa: BLE001 - compile() says it, as python would
            pass
    return compile(source, path, "exec", dont_inherit=True)


def _let_go(module) -> None:
    import gc

    module.__dict__.clear()
    gc.collect()


def whole_lines() -> None:
    """Each line the rank writes goes out in one piece, as soon as it ends. The ranks of a node
    share one log: under ``python -u`` (PYTHONUNBUFFERED) print writes a line's text and its
    newline apart, and a block buffer cuts a line where it fills, so two ranks' lines ran into one
    (issue 50). Line buffering writes each line whole (a line longer than the text layer's 8 kB
    chunk may still be cut)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True, write_through=False)
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (replaced), or closed
            pass


def main(argv: "list[str] | None" = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    whole_lines()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m hpcdist.rank [--own-gpu] SCRIPT [ARGS...]\n"
              + __doc__.split("\n\n")[0].split(": ", 1)[1],
              file=sys.stderr if not argv else sys.stdout)
        sys.exit(2 if not argv else 0)
    own = argv[:1] == ["--own-gpu"] or argv[0].startswith("--local_rank=") and argv[1:2] == ["--own-gpu"]
    if own:
        argv = [a for i, a in enumerate(argv) if not (i < 2 and a == "--own-gpu")]
    if len(argv) > 1 and argv[0].startswith("--local_rank="):
        # DeepSpeed's launcher puts it right after the module it starts (-m hpcdist.rank):
        # the script gets it first, as it would without hpcdist.
        argv = [argv[1], argv[0], *argv[2:]]
    lines = prepare()
    if own:
        lines += own_gpu(os.environ)
    for line in lines:
        print(line, file=sys.stderr)
    recorder = None
    if os.environ.get("HPCDIST_PROGRESS_DIR"):  # a submitted job's: its progress for `hpcdist watch`
        from hpcdist import progress

        recorder = progress.start()
    status = run(argv)
    if recorder is not None:
        recorder.finish(status, ERROR)
    sys.exit(status)


if __name__ == "__main__":
    main()
