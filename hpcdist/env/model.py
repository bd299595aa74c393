"""What rank resolution reads and produces: :class:`EnvReader`, this host's name
(:func:`hostname`), :class:`DistEnv`, and its error and warning.

Every lookup of a launcher variable goes through :class:`EnvReader`, so
``hpcdist env --explain`` can list each variable that was consulted, set or
not. (The reader lives here, not in a module of its own: every rank lookup
needs both, and each module costs the lookup about 1% of Python's start-up.)
"""

import os

from hpcdist.frozen import DataclassFields, Frozen

#: The values of :attr:`DistEnv.launcher`: what started this process, as the detectors
#: (:mod:`hpcdist.env.detectors`) name it. Not the job launchers a script is written for
#: (:data:`hpcdist.launchers.NAMES`).
LAUNCHERS = (
    "torchrun",
    "deepspeed",
    "openmpi",
    "mpich",
    "mvapich",
    "slurm",
    "pbs",
    "lsf",
    "flux",
    "pals",
    "horovod",
    "submitit",
    "mpi4py",
    "single",
)

#: Variables that also claim a field's value. When present, they must agree; where the launcher
#: does not say a field, the first one set says it (:mod:`hpcdist.env.derive`).
ALIASES: "dict[str, tuple[str, ...]]" = {
    "rank": (
        "RANK", "PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK",
        "PALS_RANKID", "JSM_NAMESPACE_RANK", "FLUX_TASK_RANK", "HOROVOD_RANK",
    ),
    "world_size": (
        "WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE",
        "JSM_NAMESPACE_SIZE", "FLUX_JOB_SIZE", "HOROVOD_SIZE",
    ),
    "local_rank": (
        "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
        "PALS_LOCAL_RANKID", "PMI_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_RANK", "FLUX_TASK_LOCAL_ID",
        "HOROVOD_LOCAL_RANK",
    ),
    "local_world_size": (
        "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
        "MV2_COMM_WORLD_LOCAL_SIZE", "PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE",
        "JSM_NAMESPACE_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE",
    ),
}


#: How the source of a field the environment does not say begins (:attr:`DistEnv.unknown`).
UNKNOWN = "unknown: "

#: The resolved fields, in the order they are shown.
FIELDS = (
    "rank",
    "local_rank",
    "world_size",
    "local_world_size",
    "node_rank",
    "master_addr",
    "master_port",
)


class DistEnvError(ValueError):
    """The environment cannot be resolved without guessing.

    The message names the variables and their values and says what to do.
    """


class UndistributedWarning(UserWarning):
    """A job allocated several tasks but this process was started without a launcher."""


class _ReadOnlyDict(dict):
    """``DistEnv.sources``: a dict that refuses changes, and copies and pickles as itself."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("DistEnv.sources is read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return (_ReadOnlyDict, (dict(self),))


_INIT_FIELDS = FIELDS + ("launcher", "sources")
_COMPARED = FIELDS + ("launcher",)


class DistEnv(Frozen):
    """Where this process stands in a distributed run (a frozen dataclass in all but its
    making, :mod:`hpcdist.frozen`: ``import dataclasses`` alone would triple the cost of
    ``import hpcdist.env; get_rank()``).

    ``sources`` maps each field (and ``launcher``) to the variable or rule
    that gave its value, e.g. ``{"rank": "OMPI_COMM_WORLD_RANK=3"}``; it is
    read-only and not part of equality.

    A field the environment does not say is None, and its source starts with
    :data:`UNKNOWN` and says why and how to supply it: :meth:`value` (and the
    ``get_*`` getters) raise that as a :class:`DistEnvError`, and so does
    :meth:`torch_env`, which needs every field.
    """

    __slots__ = _INIT_FIELDS
    __match_args__ = _INIT_FIELDS
    __dataclass_fields__ = DataclassFields()
    __dataclass_params__ = DataclassFields()
    _compared = _COMPARED

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    launcher: str
    sources: "Mapping[str, str]"

    def __init__(self, rank, local_rank, world_size, local_world_size, node_rank,
                 master_addr, master_port, launcher, sources=None):
        values = (rank, local_rank, world_size, local_world_size, node_rank,
                  master_addr, master_port, launcher, _ReadOnlyDict(sources or {}))
        for name, value in zip(_INIT_FIELDS, values):
            object.__setattr__(self, name, value)

    @classmethod
    def _dataclass_twin(cls, dataclasses):
        return dataclasses.make_dataclass(
            cls.__name__,
            [(f, cls.__annotations__[f]) for f in _INIT_FIELDS[:-1]]
            + [("sources", cls.__annotations__["sources"],
                dataclasses.field(default_factory=dict, compare=False, hash=False))],
            frozen=True,
        )

    def __repr__(self):
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _COMPARED)
        return f"DistEnv({shown}, sources={dict(self.sources)!r})"

    def __reduce__(self):
        # Pickle and copy through __init__: __setattr__ is frozen, sources a read-only view.
        return (DistEnv, self._key() + (self.sources,))

    @property
    def unknown(self) -> "dict[str, str]":
        """The fields the environment does not say, each with why and how to supply it."""
        return {name: self.sources.get(name, UNKNOWN)[len(UNKNOWN):] for name in FIELDS if getattr(self, name) is None}

    def value(self, name: str):
        """The field ``name``; DistEnvError saying why and how to supply it when it is unknown."""
        value = getattr(self, name)
        if value is None:
            raise DistEnvError(f"the {name.replace('_', ' ')} is unknown: {self.unknown[name]}")
        return value

    def torch_env(self) -> dict[str, str]:
        """The variables ``init_process_group("env://")``, DeepSpeed and accelerate read.
        DistEnvError naming every unknown field, why, and how to supply it."""
        unknown = self.unknown
        if unknown:
            reasons = "; ".join(f"the {name.replace('_', ' ')}: {why}" for name, why in unknown.items())
            raise DistEnvError(f"torch needs {', '.join(unknown)}, which this environment does not say ({reasons})")
        return {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "NODE_RANK": str(self.node_rank),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }

    def as_dict(self) -> dict:
        """Plain data for JSON: the fields, the launcher and the sources."""
        out: dict = {name: getattr(self, name) for name in FIELDS}
        out["launcher"] = self.launcher
        out["sources"] = dict(self.sources)
        return out


DEFAULT_PORT = 29500  # torch's own default, used outside any job

#: Every scheduler's job id variable ends with one of these (tests/env/test_env_resolve.py holds each
#: scheduler's to it, :func:`hpcdist.env.job_id.job_id_variables`).
JOB_ID_SUFFIXES = ("JOB_ID", "JOBID")


def in_a_job(environ) -> bool:
    """Whether a job id variable may be set: False when no variable's name ends as one does, and
    then nothing of the schedulers (nor the port rule) is imported to learn that a process outside
    any job is in none. ``environ``: a mapping or an :class:`EnvReader` (scanned, not recorded)."""
    names = environ.names() if isinstance(environ, EnvReader) else environ
    return any(name.endswith(JOB_ID_SUFFIXES) for name in names)


#: The most digits a launcher's number may have: int64's, far past any rank, size or port, and
#: well below Python's limit on int() (4300 digits, a ValueError with advice for programmers).
MAX_DIGITS = 18


def shown(value: str, limit: int = 40) -> str:
    """A variable's value for a message, quoted: escaped where not printable (bytes that are
    not UTF-8 as ``\\xff``, not as Python's surrogates) and cut after ``limit`` characters."""
    cut = value[:limit]
    out = "".join(f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else repr(c)[1:-1] for c in cut)
    return f"'{out}...' ({len(value)} characters)" if len(value) > limit else f"'{out}'"


def is_text(value: str) -> bool:
    """False for a value holding bytes that are not UTF-8 (os.environ keeps them as surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def hostname() -> str:
    """``socket.gethostname()``, without importing socket (half of Python's start) where nothing
    has: ``os.uname().nodename`` is that name (glibc and musl's gethostname read it; macOS's both
    read kern.hostname). Where socket is loaded (torch, mpi4py, a test standing in), it is asked."""
    import sys

    if "socket" in sys.modules or not hasattr(os, "uname"):
        import socket

        return socket.gethostname()
    return os.uname().nodename


class EnvReader:
    def __init__(self, environ: "Mapping[str, str]"):
        self.environ = environ
        #: name -> value (None when unset), in the order first consulted.
        self.consulted: dict[str, str | None] = {}
        # os.environ.get of an unset name raises and catches two KeyErrors (~8,000 instructions, a
        # set's lookup ~100) and a rank lookup asks for ~50 names, most unset: os.environ is asked
        # only for the names it has, taken once here.
        self._names = set(environ) if environ is os.environ else None

    def names(self):
        """The environment's names: those taken at the start for os.environ, else the mapping."""
        return self.environ if self._names is None else self._names

    def get(self, name: str) -> str | None:
        names = self._names
        value = None if names is not None and name not in names else self.environ.get(name)
        self.consulted.setdefault(name, value)
        # LOCAL_RANK=-1 is "not distributed", the default many training scripts export.
        return None if name == "LOCAL_RANK" and value is not None and value.strip() == "-1" else value

    def has(self, name: str) -> bool:
        """Set at all, even to an empty string (torchrun's own test does so)."""
        return self.get(name) is not None

    def has_all(self, *names: str) -> bool:
        return all([self.has(n) for n in names])  # a list: record every name

    def has_any(self, *names: str) -> bool:
        return any([self.has(n) for n in names])

    def text(self, name: str) -> str | None:
        """A string value; set-but-empty is an error, not "unset"."""
        value = self.get(name)
        if value is None:
            return None
        if not value.strip():
            raise DistEnvError(
                f"{name} is set but empty. Unset it, or set it to a value "
                f"(look for a stray `export {name}=` in the job script)."
            )
        if not is_text(value):
            raise DistEnvError(
                f"{name}={shown(value)} is not UTF-8 text. It is normally set by the launcher: "
                f"unset it or fix the job script that sets it."
            )
        return value.strip()

    def integer(self, name: str, meaning: str) -> int | None:
        """A non-negative integer, or None when unset.

        ``meaning`` says what the variable is read as, for the error message.
        """
        value = self.get(name)
        if value is None:
            return None
        text = value.strip()
        # ASCII digits only: int() would also take "+1", "1_0" and other scripts' digits.
        if not (text.isascii() and text.isdigit()):
            raise DistEnvError(
                f"{name}={shown(value)} is not a non-negative integer; hpcdist reads it as the "
                f"{meaning}. It is normally set by the launcher: unset it or fix the "
                f"job script that sets it."
            )
        if len(text.lstrip("0")) > MAX_DIGITS:
            raise DistEnvError(
                f"{name}={shown(value)} is too large for a {meaning} (over {MAX_DIGITS} digits). "
                f"It is normally set by the launcher: unset it or fix the job script that sets it."
            )
        return int(text)

    def first(self, names: tuple[str, ...], meaning: str) -> tuple[int, str] | None:
        """The first of ``names`` that is set, as ``(value, "NAME=value")``."""
        for name in names:
            number = self.integer(name, meaning)
            if number is not None:
                return number, f"{name}={number}"
        return None
