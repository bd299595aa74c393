"""Each rank's progress, recorded for ``hpcdist watch``: steps, the last step's time, the step rate, the phase.

Where it runs: the recorder in every rank; the monitor in the job script, on the first node; the
view (``hpcdist watch``) on the login node.

``python -m hpcdist.rank`` starts a :class:`Recorder` in every rank when the job script sets
``$HPCDIST_PROGRESS_DIR`` (a submitted job's ``progress/`` folder, :mod:`hpcdist.jobs`). A step is
counted by a global optimizer step hook (``torch.optim.Optimizer.register_optimizer_step_post_hook``,
installed once the script has imported torch: a plain training script needs no change), or by
:func:`step` (``hpcdist.env.step()``) for a loop without an optimizer; once :func:`step` is
called, the hook stops counting, so a script that does both counts each step once.
:func:`phase` (``hpcdist.env.phase("checkpointing")``, also a ``with`` block) says what the rank
is doing: a rank that checkpoints is never taken for a hung one.

Nothing here can block a rank: a step adds one to a counter and reads the clock. A daemon thread
writes the rank's state (``rank-N.json``, about 250 bytes, replaced whole) every
``$HPCDIST_PROGRESS_INTERVAL`` seconds (default 2), and once more as the script ends (from
``hpcdist.rank``, else at the interpreter's exit), so the file ends at its last step; a file
system that hangs holds that thread, never the training. The same thread answers a request for
stacks: when ``stacks.request`` (a number) changes, it writes the main thread's Python stack
into ``stacks-N.txt``. A thread can do so while the main thread waits in a collective (it waits
in C, without the GIL); a stopped rank (SIGSTOP) cannot, and ``watch`` says it did not answer.

Why the job folder and not a node-local folder gathered by an agent: it is on the file system that
the login node and every node of the job share already (the log and the exit code are there), so
``watch`` needs nothing running but the ranks, under every launcher and scheduler (torchrun,
mpirun and DeepSpeed start no agent of hpcdist's on the other nodes). The cost is one small file
per rank per interval on the shared file system; at thousands of ranks, raise the interval.

Cheap to import: only ``os``, ``sys`` and ``time`` at import (``hpcdist.env`` imports this
module). The writing thread is started with ``_thread``, not ``threading`` (whose import, with
``collections``, costs a rank a third of Python's start); ``json`` only for a string it must
escape.
"""

import os
import sys
import time

DIR_VARIABLE = "HPCDIST_PROGRESS_DIR"
INTERVAL_VARIABLE = "HPCDIST_PROGRESS_INTERVAL"
#: The control file ``hpcdist stacks`` (and the monitor) writes: a number, new for each request.
STACKS_REQUEST = "stacks.request"
PHASES = ("starting", "rendezvous", "training", "checkpointing", "finished", "failed")
#: The longest interval between writes (``$HPCDIST_PROGRESS_INTERVAL``) taken; inf and NaN give the default.
MAX_INTERVAL_S = 3600.0
#: (time, steps, waited) samples kept for the step rate: the last minute at the default interval.
SAMPLES = 30
#: ``0``: do not time torch.distributed's collectives (the straggler measure; the step hook stays).
COLLECTIVES_VARIABLE = "HPCDIST_PROGRESS_COLLECTIVES"
#: The collectives timed (blocking calls; an async_op call's wait is not seen).
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "barrier", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter")

#: The node file job-setup writes in the run's own folder (the job script's ``mktemp -d``), passed to
#: every node: its folder's name tells one run of the job script from another in the same job folder.
RUN_VARIABLE = "HPCDIST_NODEFILE"

#: This process's recorder, once started (one per rank).
RECORDER = None


def run_id(environ=None) -> str | None:
    """This run's id (a requeue, ``bash job.sh`` again: another), from :data:`RUN_VARIABLE`; None outside a job."""
    path = (os.environ if environ is None else environ).get(RUN_VARIABLE)
    return os.path.basename(os.path.dirname(path)) or None if path else None


def rank_file(folder: str, rank) -> str:
    return os.path.join(folder, f"rank-{rank}.json")


def stacks_file(folder: str, rank) -> str:
    return os.path.join(folder, f"stacks-{rank}.txt")


class Recorder:
    """One rank's progress and the thread that writes it."""

    def __init__(self, folder: str, rank: int, local_rank, node: str, interval: float, world=None):
        self.folder, self.rank, self.local_rank, self.node, self.interval = folder, rank, local_rank, node, interval
        self.world = world  # the ranks in all: the monitor names those that never started
        self.run = run_id()
        self.steps = 0
        self.last_step = self.first_step = None  # time.time() of the last and first steps
        self.phase, self.phase_since = "starting", time.perf_counter()
        # The start-up's marks (hpcdist.progress.startup): the process's start, the rendezvous.
        self.proc_started = self.rdzv_started = self.rdzv_ended = None
        self.explicit = False  # step() was called: the optimizer hook no longer counts
        self.started = time.time()
        self.samples = []
        self.answered = None  # the stacks request last answered (its file's mtime and inode)
        self.exit = self.error = None  # how the script ended, once finish() says it
        self.pid = os.getpid()
        # Seconds waited in torch.distributed's collectives, in all and at the last step: in
        # synchronous training every rank steps at the slowest one's rate, and the straggler is
        # the one that waits least (its own work takes longest).
        self.waited = self.waited_at_step = 0.0
        import _thread

        # The thread whose stack `hpcdist stacks` asks for: the main one, which threading knows
        # where it is loaded; else this one, the one that starts the recorder (hpcdist.rank's).
        threading = sys.modules.get("threading")
        self.main_ident = threading.main_thread().ident if threading else _thread.get_ident()
        # Two locks, held while nothing happened: _wake is released to wake the thread (its
        # acquire is threading.Event's wait and clear in one), _ended by the thread as it ends.
        self._wake, self._ended = _thread.allocate_lock(), _thread.allocate_lock()
        self._wake.acquire()
        self._ended.acquire()
        self._done = False
        _thread.start_new_thread(self._run, ())  # a daemon thread, as threading's daemon=True

    # -- The training's side: no I/O, no lock ----------------------------------------------------

    def step(self, n: int = 1) -> None:
        if type(n) is not int:  # numpy's and torch's integers, Decimal: a plain int, or refused
            n = whole_steps(n)
        if not self.explicit and self.steps:
            # A loop that calls optimizer.step() and then step(): the hook has just counted this
            # very step (its first), and step() counts from here on (1500 iterations read 1501).
            self.steps -= 1
        self.explicit = True
        self.hook_step(n)

    def hook_step(self, n: int = 1) -> None:
        self.steps += n
        self.last_step = time.time()
        self.waited_at_step = self.waited
        if self.first_step is None:
            self.first_step = self.last_step
        if self.phase in ("starting", "rendezvous"):
            self.phase = "training"
            self._wake_up()  # written at once: a rank stopped soon after reads "training", not "starting"

    def _optimizer_stepped(self, optimizer, args, kwargs) -> None:
        if not self.explicit:
            self.hook_step()

    def set_phase(self, name: str) -> None:
        """A checkpoint's time is no work of a step: counted with the collectives' waits, so the
        rank that checkpoints is not named a straggler for it."""
        now = time.perf_counter()
        if self.phase == "checkpointing":
            self.waited += now - self.phase_since
        if name == "rendezvous" and self.rdzv_started is None:
            self.rdzv_started = time.time()
        elif self.phase == "rendezvous" and name != "rendezvous" and self.rdzv_ended is None:
            self.rdzv_ended = time.time()
        self.phase, self.phase_since = name, now

    def finish(self, status: int, error: str | None = None) -> None:
        """The script ended (``status``; ``error``: the exception it ended with, one line): one
        last write, waited for at most a second. A restart reads both (:mod:`hpcdist.injob.restart`)."""
        self.exit, self.error = status, error
        self.set_phase("finished" if status == 0 else "failed")
        self._done = True
        self._wake_up()
        self._ended.acquire(timeout=1.0)

    def flush_at_exit(self) -> None:
        """At the interpreter's exit (``atexit``), where nothing called :meth:`finish` (a script its
        launcher started directly, ``--launcher none``, that counts with ``hpcdist.env.step()``):
        the steps since the last write written, waited for at most a second. The phase stays:
        how the script ended is not known here."""
        if self._done or os.getpid() != self.pid:  # a forked child has no writing thread
            return
        self._done = True
        self._wake_up()
        self._ended.acquire(timeout=1.0)

    def _wake_up(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:  # released already: the thread has yet to see it
            pass

    # -- The thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._record()
        finally:
            self._ended.release()

    def _record(self) -> None:
        hooked, next_write = False, 0.0
        self.proc_started = process_start(os.getpid())
        try:
            os.makedirs(self.folder, 0o700, exist_ok=True)  # private, as the job folder
        except OSError:
            return  # no folder: nothing recorded, the training goes on
        while True:
            # Quick polls until torch is there to hook (a script builds its model after importing it).
            woken = self._wake.acquire(timeout=self.interval if hooked or time.time() - self.started > 60 else 0.1)
            done = self._done  # read after the wake is taken: a finish() from now on wakes the next wait
            if not hooked:
                hooked = self._hook()
            now = time.time()
            if now >= next_write or done or woken:
                self._sample(now)
                self._write(now)
                next_write = now + self.interval
                self._answer_stacks()
            if done:
                return

    def _hook(self) -> bool:
        """The global optimizer step hook, once torch has finished importing."""
        torch = sys.modules.get("torch")
        if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
            return False
        register = getattr(sys.modules.get("torch.optim.optimizer"), "register_optimizer_step_post_hook", None)
        if register is None:
            return False
        register(self._optimizer_stepped)
        self._mark_rendezvous()
        if os.environ.get(COLLECTIVES_VARIABLE) != "0":
            self._time_collectives()
        return True

    def _mark_rendezvous(self) -> None:
        """The rendezvous of a script that calls ``torch.distributed.init_process_group`` itself
        (Fabric, DeepSpeed, a plain script), not ``hpcdist.env.init_distributed``: marked as that
        does, so that its imports and rendezvous are not folded into its first step. A call made
        before torch had finished importing, or through a name taken before this, is not seen."""
        import functools

        modules = [sys.modules.get("torch.distributed"),
                   sys.modules.get("torch.distributed.distributed_c10d")]
        original = getattr(modules[1], "init_process_group", None)
        if original is None or getattr(original, "_hpcdist_marked", False):
            return

        @functools.wraps(original)
        def marked(*args, **kwargs):
            if self.rdzv_started is not None:  # init_distributed's phase, or a second group
                return original(*args, **kwargs)
            self.rdzv_started = time.time()
            try:
                return original(*args, **kwargs)
            finally:
                self.rdzv_ended = time.time()

        marked._hpcdist_marked = True
        for module in modules:
            if module is not None and getattr(module, "init_process_group", None) is original:
                setattr(module, "init_process_group", marked)

    def _time_collectives(self) -> None:
        """Count the time spent in torch.distributed's blocking collectives called from Python
        (DDP's own, in C++, are not seen: a DDP rank's wait stays in its step's work)."""
        import functools

        modules = [sys.modules.get("torch.distributed"), sys.modules.get("torch.distributed.distributed_c10d")]
        clock = time.perf_counter
        for name in COLLECTIVES:
            original = getattr(modules[1], name, None)
            if original is None or getattr(original, "_hpcdist_timed", False):
                continue

            @functools.wraps(original)
            def timed(*args, _original=original, **kwargs):
                start = clock()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.waited += clock() - start

            timed._hpcdist_timed = True
            for module in modules:
                if module is not None and getattr(module, name, None) is original:
                    setattr(module, name, timed)

    def _sample(self, now: float) -> None:
        # At the last step's time, not now: a stall does not lower the rate (it would raise the
        # hang threshold, a multiple of the step time, as the stall goes on).
        if self.last_step is not None and (not self.samples or self.samples[-1][1] != self.steps):
            self.samples.append((self.last_step, self.steps, self.waited_at_step))
            del self.samples[:-SAMPLES]

    def work_per_step(self) -> float:
        """Seconds per step outside the collectives, over the samples kept (None before two)."""
        if len(self.samples) < 2:
            return None
        (t0, s0, w0), (t1, s1, w1) = self.samples[0], self.samples[-1]
        return max(0.0, (t1 - t0) - (w1 - w0)) / (s1 - s0) if s1 > s0 else None

    def rate(self):
        """Steps per second while it stepped, over the samples kept (the last minute at the
        default interval); None before two samples."""
        if len(self.samples) < 2:
            return None
        (t0, s0, _), (t1, s1, _) = self.samples[0], self.samples[-1]
        return round((s1 - s0) / (t1 - t0), 4) if t1 > t0 else None

    def _write(self, now: float) -> None:
        state = {"rank": self.rank, "local_rank": self.local_rank, "node": self.node, "pid": os.getpid(),
                 "step": self.steps, "first_step": self.first_step, "last_step": self.last_step,
                 "phase": self.phase, "rate": self.rate(), "work": self.work_per_step(),
                 "started": self.started, "written": now, "interval": self.interval,
                 "world": self.world, "run": self.run, "proc_started": self.proc_started,
                 "rdzv_started": self.rdzv_started, "rdzv_ended": self.rdzv_ended}
        if self.exit is not None:  # how it ended: a restart tells a code fault from a lost peer
            state.update(exit=self.exit, error=self.error)
        _replace(rank_file(self.folder, self.rank), _json(state))

    def _answer_stacks(self) -> None:
        request = os.path.join(self.folder, STACKS_REQUEST)
        try:
            st = os.lstat(request)
            # Each request is a new file (replaced whole): its time and inode tell it from the last.
            if (st.st_mtime_ns, st.st_ino) == self.answered or st.st_mode & 0o170000 != 0o100000:
                return
            # Non-blocking, no link followed, a few bytes: a FIFO or a link put there holds nothing up.
            fd = os.open(request, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
            try:
                number = os.read(fd, 64).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
        except OSError:
            return
        self.answered = (st.st_mtime_ns, st.st_ino)
        if not number.isdigit():
            return
        _replace(stacks_file(self.folder, self.rank), f"request {number}\n" + main_stack(self.main_ident))


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds, from /proc, to the clock tick: its start since
    boot against /proc/uptime, not the whole second of /proc/stat's btime); None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])
        now = time.time()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return now - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def whole_steps(n) -> int:
    """``n`` steps as a plain int (``numpy.int64(3)``, ``Decimal(3)``, ``3.0``); ValueError for a
    count that is no whole number of steps, 0 or more."""
    try:
        count = int(n)
        whole = count == n and count >= 0
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole:
        raise ValueError(f"hpcdist.env.step({n!r}): expected a whole number of steps, 0 or more (as step(1))")
    return count


def _json(state: dict) -> str:
    """``state`` (numbers, None, plain strings) as JSON, without importing json on every rank
    (most of a short rank's cost of recording); json itself for a string it would escape. Always
    valid JSON: a number that is not a finite int or float (inf, NaN, another type) is null."""
    parts = []
    for key, value in state.items():
        kind = type(value)
        if kind is str:
            if not value.isprintable() or '"' in value or "\\" in value:
                import json

                text = json.dumps(value)
            else:
                text = f'"{value}"'
        elif kind is int or kind is float and value - value == 0:  # inf - inf and NaN - NaN are NaN
            text = repr(value)
        else:
            text = "null"
        parts.append(f'"{key}": {text}')
    return "{" + ", ".join(parts) + "}"


def main_stack(ident: int) -> str:
    """The Python stack of the thread ``ident`` (the main one), outermost first, one ``FILE:LINE
    FUNCTION`` line per frame; hpcdist.rank's own frames (which run the script) left out."""
    import traceback

    frame = sys._current_frames().get(ident)
    frames = traceback.extract_stack(frame) if frame is not None else []
    ours = [i for i, f in enumerate(frames) if f.filename.endswith(os.path.join("hpcdist", "rank.py"))]
    if ours:  # runpy's and hpcdist.rank's frames, which run the script
        del frames[:ours[-1] + 1]
    return "".join(f"{f.filename}:{f.lineno} {f.name}\n" for f in frames)


def _replace(path: str, text: str) -> None:
    """Write ``path`` whole (a reader sees the old file or the new one, never half of one)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w") as f:
            f.write(text)
        os.replace(temporary, path)
    except OSError:  # a full or gone file system: the next write tries again
        try:
            os.unlink(temporary)  # an empty file a full disk took, not left behind
        except OSError:
            pass


def start(environ=None):
    """Start this rank's recorder where the job asks for one (``$HPCDIST_PROGRESS_DIR`` set, the
    rank known from ``RANK``); the recorder, or None."""
    global RECORDER
    environ = os.environ if environ is None else environ
    folder, rank = environ.get(DIR_VARIABLE), environ.get("RANK")
    if RECORDER is not None or not folder or not (rank or "").isdigit():
        return RECORDER
    try:
        interval = float(environ.get(INTERVAL_VARIABLE) or 2)
    except ValueError:
        interval = 2.0
    # inf or NaN: the default; within 0.2 s and an hour (a thread cannot wait for ever).
    interval = min(MAX_INTERVAL_S, max(0.2, interval)) if interval - interval == 0 else 2.0
    local, world = environ.get("LOCAL_RANK"), environ.get("WORLD_SIZE")
    # os.uname(), not socket.gethostname(): the same name, without importing socket on every rank.
    RECORDER = Recorder(folder, int(rank), int(local) if (local or "").isdigit() else None,
                        os.uname().nodename, interval, int(world) if (world or "").isdigit() else None)
    import atexit  # built into the interpreter: nothing to load

    atexit.register(RECORDER.flush_at_exit)  # the last steps written (a no-op after finish())
    return RECORDER


_tried = False


def _recorder():
    """The recorder, started on first use for a script its launcher started directly (torchrun,
    accelerate) that calls :func:`step` or :func:`phase` itself."""
    global _tried
    if RECORDER is None and not _tried:
        _tried = True
        start()
    return RECORDER


def step(n: int = 1) -> None:
    """Count ``n`` steps of this rank (``hpcdist.env.step()``): for a loop without an optimizer.
    Nothing when the job records no progress."""
    recorder = RECORDER or _recorder()
    if recorder is not None:
        recorder.step(n)


class phase:
    """Say what this rank does now: ``phase("checkpointing")``, or as a ``with`` block, which puts
    the phase before it back at its end. A rank in the phase ``checkpointing`` is never taken for
    a hung one, however long it takes."""

    def __init__(self, name: str):
        if name not in PHASES:
            raise ValueError(f"hpcdist phase {name!r}: expected one of {', '.join(PHASES)}")
        recorder = _recorder()
        self.before = recorder.phase if recorder is not None else None
        if recorder is not None:
            recorder.set_phase(name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if RECORDER is not None and self.before is not None:
            RECORDER.set_phase(self.before)
