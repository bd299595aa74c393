"""The hosts of a job and their slots, from any allocation, and the hostfiles launchers read.

An :class:`Allocation` is an ordered list of ``(host, slots)``:

- PBS: ``$PBS_NODEFILE`` holds one line per slot (per MPI process); a host's
  count is its number of lines, in order of first appearance. Lines of one
  host need not be adjacent (several chunks can land on one host), and names
  are kept as written (Torque may write FQDNs; ``n1`` and ``n1.domain`` stay
  two hosts).
- Slurm: ``SLURM_JOB_NODELIST`` paired with ``SLURM_TASKS_PER_NODE`` (inside
  an srun step, the ``SLURM_STEP_*`` pair, because srun rewrites
  ``SLURM_TASKS_PER_NODE`` to the step's counts but leaves the job's node
  list). The two must have the same length.
- Otherwise this host alone.

``slots_per_node`` sets one count for every host: one rank per GPU when the
allocation counted CPUs.
"""

from __future__ import annotations

import os


#: ``to_hostfile`` formats.
HOSTFILE_FORMATS = ("deepspeed", "openmpi", "mpich", "hosts", "nodes")
#: The most slots one host may have: far above any node's cores, far below a typo's
#: ``SLURM_TASKS_PER_NODE=99999999999``, whose ``hosts`` hostfile would fill the memory.
MAX_SLOTS_PER_HOST = 65_536
#: The most lines of a ``hosts`` hostfile (one per slot), as many as hostlist expands.
MAX_HOSTFILE_LINES = 1_048_576
#: Slurm step ids that are not srun tasks (batch script, extern step). Also read by
#: :mod:`hpcdist.env.detectors`, which imports it from here.
SLURM_NON_TASK_STEP_IDS = ("batch", "extern", "4294967291", "4294967292")


class AllocationError(ValueError):
    """The allocation is empty, unreadable or inconsistent. Names the variables read."""


class Allocation:
    """Ordered ``(host, slots)`` pairs and ``source``, the variables (and files) read.

    A plain class, not a dataclass: ``hpcdist hostfile`` runs in every job
    script, and ``import dataclasses`` alone costs more than the rest of it.
    """

    __slots__ = ("hosts", "source")

    def __init__(self, hosts, source: str):
        self.hosts: tuple[tuple[str, int], ...] = tuple(hosts)
        self.source = source
        if not self.hosts:
            raise AllocationError(f"the allocation from {self.source} has no hosts")
        for host, slots in self.hosts:
            if not host or any(c.isspace() for c in host):
                raise AllocationError(f"bad host name {host!r} in the allocation from {self.source}")
            if slots < 1:
                raise AllocationError(
                    f"host {host} has {slots} slots in the allocation from {self.source}; "
                    f"every host needs at least one"
                )
            if slots > MAX_SLOTS_PER_HOST:
                raise AllocationError(
                    f"host {host} has {slots} slots in the allocation from {self.source}; "
                    f"no node has more than {MAX_SLOTS_PER_HOST} (is the count garbled?)"
                )

    def __eq__(self, other):
        return isinstance(other, Allocation) and (self.hosts, self.source) == (other.hosts, other.source)

    def __repr__(self):
        return f"Allocation(hosts={self.hosts!r}, source={self.source!r})"

    @property
    def host_names(self) -> list[str]:
        return [host for host, _ in self.hosts]

    @property
    def total_slots(self) -> int:
        return sum(slots for _, slots in self.hosts)

    @classmethod
    def from_slurm(
        cls,
        nodelist: str,
        tasks_per_node: str,
        source: str | None = None,
        nodelist_var: str = "SLURM_JOB_NODELIST",
        counts_var: str = "SLURM_TASKS_PER_NODE",
    ) -> "Allocation":
        # Imported here: `hpcdist render` and PBS jobs read no Slurm node list.
        from hpcdist.hostlist import HostlistError, expand, expand_counts

        source = source or f"{nodelist_var}={nodelist} {counts_var}={tasks_per_node}"
        try:
            hosts = expand(nodelist)
        except HostlistError as e:
            raise AllocationError(f"{nodelist_var} cannot be read: {e}") from None
        try:
            counts = expand_counts(tasks_per_node)
        except HostlistError as e:
            raise AllocationError(f"{counts_var} cannot be read: {e}") from None
        if len(hosts) != len(counts):
            raise AllocationError(
                f"{nodelist_var}={nodelist} expands to {len(hosts)} hosts but "
                f"{counts_var}={tasks_per_node} gives {len(counts)} counts; the two must "
                f"describe the same nodes (are they from the same job and step?)"
            )
        merged: dict[str, int] = {}
        for host, count in zip(hosts, counts):
            merged[host] = merged.get(host, 0) + count
        return cls(tuple(merged.items()), source)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, slots_per_node: int | None = None
    ) -> "Allocation":
        env = os.environ if environ is None else environ
        path = env.get("PBS_NODEFILE")
        if path is not None:
            lines = read_pbs_nodefile_lines(path)
            alloc = cls(_count_in_order(lines), f"PBS_NODEFILE={path}")
        elif env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"):
            alloc = _from_slurm_env(env, slots_per_node)
        else:
            import socket

            host = socket.gethostname()
            alloc = cls(((host, slots_per_node or 1),), f"this host ({host}): no PBS or Slurm allocation")
        return alloc.with_slots(slots_per_node) if slots_per_node else alloc

    def with_slots(self, slots_per_node: int) -> "Allocation":
        if slots_per_node < 1:
            raise AllocationError(f"slots per node must be at least 1, not {slots_per_node}")
        return Allocation(
            tuple((host, slots_per_node) for host, _ in self.hosts),
            f"{self.source}, {slots_per_node} slots per node",
        )

    def to_hostfile(self, fmt: str = "deepspeed") -> str:
        if fmt in ("deepspeed", "openmpi"):
            lines = [f"{host} slots={slots}" for host, slots in self.hosts]
        elif fmt == "mpich":
            lines = [f"{host}:{slots}" for host, slots in self.hosts]
        elif fmt == "hosts":
            if self.total_slots > MAX_HOSTFILE_LINES:
                raise AllocationError(
                    f"the allocation from {self.source} has {self.total_slots} slots: a `hosts` hostfile "
                    f"(one line per slot) would have more than {MAX_HOSTFILE_LINES} lines; use the deepspeed, "
                    f"openmpi or mpich format (one line per host)"
                )
            lines = [host for host, slots in self.hosts for _ in range(slots)]
        elif fmt == "nodes":
            lines = self.host_names
        else:
            raise AllocationError(
                f"unknown hostfile format {fmt!r}; use one of {', '.join(HOSTFILE_FORMATS)}"
            )
        return "\n".join(lines) + "\n"


def read_pbs_nodefile_lines(path: str) -> list[str]:
    """The host lines of a PBS node file (one per slot), checked."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise AllocationError(f"PBS_NODEFILE={path!r} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    return _nodefile_lines(text, f"PBS_NODEFILE={path}")


def _nodefile_lines(text: str, source: str) -> list[str]:
    # Linear, and looped over in C, not per character in Python. With no ":" and no whitespace
    # but line breaks (in ASCII the other whitespace is " ", "\t" and "\x1f"), the non-blank
    # lines are text.split()'s words. Otherwise: the lines stripped, blank ones dropped; each
    # holds one name when, joined by spaces and split again, they give as many words as lines.
    if ":" not in text and text.isascii() and " " not in text and "\t" not in text and "\x1f" not in text:
        lines = text.split()
    else:
        lines = list(filter(None, map(str.strip, text.splitlines())))
        if ":" in text or len(" ".join(lines).split()) != len(lines):
            # A line holds a ":" or whitespace inside: find the first, for its number.
            for number, raw in enumerate(text.splitlines(), 1):
                line = raw.strip()
                if ":" in line or len(line.split()) > 1:
                    raise AllocationError(
                        f"line {number} of {source} is {raw!r}: a PBS node file has one host name per "
                        f"line (not `host slots=N` or `host:N`)"
                    )
    if not lines:
        raise AllocationError(f"{source} is empty: no hosts were allocated")
    return lines


def _count_in_order(lines: list[str]) -> tuple[tuple[str, int], ...]:
    # Counter counts in C and keeps the order of first appearance (it is a dict); under the CLI
    # collections is imported already (argparse imports re, re functools, functools collections).
    from collections import Counter

    return tuple(Counter(lines).items())


def _from_slurm_env(env: Mapping[str, str], slots_per_node: int | None) -> Allocation:
    in_step = (env.get("SLURM_STEP_ID") or "").strip() not in ("", *SLURM_NON_TASK_STEP_IDS)
    if in_step and env.get("SLURM_STEP_NODELIST"):
        pairs = [("SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")]
    else:
        pairs = [("SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE"), ("SLURM_NODELIST", "SLURM_TASKS_PER_NODE")]
    nodelist_var, counts_var = next((p for p in pairs if env.get(p[0])), pairs[0])
    nodelist = env[nodelist_var]
    counts = env.get(counts_var)
    if counts is None:
        if not slots_per_node:
            raise AllocationError(
                f"{nodelist_var}={nodelist} is set but {counts_var} is not, so the slots per "
                f"host are unknown; pass --slots-per-node N"
            )
        from hpcdist.hostlist import HostlistError, expand

        try:
            hosts = expand(nodelist)
        except HostlistError as e:
            raise AllocationError(f"{nodelist_var} cannot be read: {e}") from None
        return Allocation(
            tuple(dict.fromkeys(hosts, slots_per_node).items()), f"{nodelist_var}={nodelist}"
        )
    return Allocation.from_slurm(nodelist, counts, nodelist_var=nodelist_var, counts_var=counts_var)
