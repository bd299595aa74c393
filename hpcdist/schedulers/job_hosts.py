"""What every scheduler's in-job reader of an allocation shares: :class:`Allocation` (ordered
``(host, slots)`` pairs), :class:`AllocationError`, the host name check and the node file reader.

Where it runs: inside the job (its set-up, its supervisor) and in every rank that reads its hosts.

Below :mod:`hpcdist.allocation` (the one reader, which asks each scheduler's
``<name>/job.py``'s ``allocation`` in turn and re-exports all of this as its public face) and below
each ``hpcdist.schedulers.<name>.job``: the readers import this, never the module that loads them by
name. A plain class, not a dataclass: the rank lookup imports this module, where ``dataclasses``
alone would cost more than all the rest.
"""


#: ``to_hostfile`` formats.
HOSTFILE_FORMATS = ("deepspeed", "openmpi", "mpich", "hosts", "nodes")
#: The most slots one host may have: far above any node's cores, far below a typo's
#: ``SLURM_TASKS_PER_NODE=99999999999``, whose ``hosts`` hostfile would fill the memory.
MAX_SLOTS_PER_HOST = 65_536
#: The most lines of a ``hosts`` hostfile (one per slot), as many as hostlist expands.
MAX_HOSTFILE_LINES = 1_048_576


class AllocationError(ValueError):
    """The allocation is empty, unreadable or inconsistent. Names the variables read."""


class Allocation:
    """Ordered ``(host, slots)`` pairs, ``source`` (the variables and files read), and whether
    rank 0 runs on the first host (``rank0_first``: not under Slurm's arbitrary placement)."""

    __slots__ = ("hosts", "source", "rank0_first")

    def __init__(self, hosts, source: str, rank0_first: bool = True):
        self.hosts: tuple = tuple(hosts)
        self.source = source
        self.rank0_first = rank0_first
        if not self.hosts:
            raise AllocationError(f"the allocation from {self.source} has no hosts")
        for host, slots in self.hosts:
            check_host(host, self.source)
            if slots < 1:
                raise AllocationError(f"host {host} has {slots} slots in the allocation from {self.source}; "
                                      f"every host needs at least one")
            if slots > MAX_SLOTS_PER_HOST:
                raise AllocationError(f"host {host} has {slots} slots in the allocation from {self.source}; "
                                      f"no node has more than {MAX_SLOTS_PER_HOST} (is the count garbled?)")

    def __eq__(self, other):
        return isinstance(other, Allocation) and (self.hosts, self.source) == (other.hosts, other.source)

    def __repr__(self):
        return f"Allocation(hosts={self.hosts!r}, source={self.source!r})"

    @property
    def host_names(self) -> list:
        return [host for host, _ in self.hosts]

    @property
    def total_slots(self) -> int:
        return sum(slots for _, slots in self.hosts)

    def slots_of(self, host: str) -> int:
        return dict(self.hosts).get(host, 0)

    def with_slots(self, slots_per_node: int) -> "Allocation":
        if slots_per_node < 1:
            raise AllocationError(f"slots per node must be at least 1, not {slots_per_node}")
        return Allocation(tuple((host, slots_per_node) for host, _ in self.hosts),
                          f"{self.source}, {slots_per_node} slots per node", self.rank0_first)

    def position(self) -> "int | None":
        """This host's index among the hosts (by full or short name), or None."""
        import socket

        here, names = socket.gethostname(), self.host_names
        if here in names:
            return names.index(here)
        short = [h.split(".")[0] for h in names]
        return short.index(here.split(".")[0]) if here.split(".")[0] in short else None

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
                    f"openmpi or mpich format (one line per host)")
            lines = [host for host, slots in self.hosts for _ in range(slots)]
        elif fmt == "nodes":
            lines = self.host_names
        else:
            raise AllocationError(f"unknown hostfile format {fmt!r}; use one of {', '.join(HOSTFILE_FORMATS)}")
        return "\n".join(lines) + "\n"



def check_host(host, source: str) -> None:
    """A host name as launchers and ssh read it: ASCII letters, digits and ``- . _``, not first
    ``-`` or ``.``, so that no command takes it for an option (a name from a node file is handed
    to mpirun, pdsh and ssh: ``-oProxyCommand=...`` ran a command) and no byte-order mark, NUL or
    U+FFFD (a byte that was not UTF-8) reaches a hostfile. String methods only, no ``re``: every
    rank reads the allocation."""
    if not (host and host.isascii() and host[0] not in "-." and len(host) <= 253
            and host.replace("-", "a").replace(".", "a").replace("_", "a").isalnum()):
        raise AllocationError(f"bad host name {ascii(host)} in the allocation from {source}: a host name is ASCII "
                              f"letters, digits and - . _, and does not begin with '-' or '.'")


def this_host(slots: int = 1) -> Allocation:
    import socket

    host = socket.gethostname()
    return Allocation(((host, slots),), f"this host ({host}): no PBS or Slurm allocation")


def count_in_order(lines) -> tuple:
    """``(host, number of its lines)`` in order of first appearance (a node file's lines of one
    host need not be adjacent: several chunks can land on one host)."""
    counts: dict = {}
    get = counts.get
    for host in lines:
        counts[host] = get(host, 0) + 1
    return tuple(counts.items())




#: The largest node file read (a typo pointing at /dev/zero must not fill the memory): 100,000
#: nodes of 64 slots with names of 60 characters.
MAX_NODEFILE_BYTES = 400 * 1024 * 1024


def read_host_lines(path: str, variable: str) -> list:
    """The host names of a node file (one per line, blank lines skipped), checked: a regular
    file, read once, one word per line and no ``host:N`` or ``host slots=N``."""
    import os
    import stat

    try:
        # O_NONBLOCK: opening a FIFO for reading would wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise AllocationError(f"{variable}={path!r} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AllocationError(f"{variable}={path!r} is not a regular file: a node file lists one host per line")
        if info.st_size > MAX_NODEFILE_BYTES:
            raise AllocationError(f"{variable}={path!r} holds {info.st_size} bytes, more than any node file "
                                  f"({MAX_NODEFILE_BYTES}): is it the right file?")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as e:
        raise AllocationError(f"{variable}={path!r} cannot be read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    return host_lines(b"".join(chunks).decode("utf-8", "replace"), f"{variable}={path}")


def host_lines(text: str, source: str) -> list:
    """The non-blank lines of a node file, each one host name. Linear and cheap (a node file of
    10,000 nodes of 8 slots is 80,000 lines): one comprehension, and the checks over the whole
    text in C; only a file that fails them is read again line by line, for the message."""
    found = [line.strip() for line in text.splitlines()]
    found = [line for line in found if line]
    if len(found) != len(text.split()) or ":" in text:
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if line and (line.split() != [line] or ":" in line):
                raise AllocationError(f"line {number} of {source} is {raw!r}: a node file has one host name per "
                                      f"line (not `host slots=N` or `host:N`)")
    if not found:
        raise AllocationError(f"{source} is empty: no hosts were allocated")
    return found
