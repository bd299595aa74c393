"""Slurm node lists: expand, compress, and the tasks-per-node count format.

Where it runs: wherever a node list is read (the login node, the job script's set-up, a rank).

The package holds one module per job: :mod:`~hpcdist.hostlist.nodelists` (:func:`expand`),
:mod:`~hpcdist.hostlist.compression` (:func:`compress`), :mod:`~hpcdist.hostlist.counts`
(:func:`expand_counts`), and :mod:`~hpcdist.hostlist.errors` (:class:`HostlistError`, the limits).

This is hpcdist's own implementation of Slurm's 1-D host list syntax (the
``SLURM_JOB_NODELIST`` / ``scontrol show hostnames`` grammar).  It uses the
standard library only (``re`` and ``itertools``) so that importing it costs
next to nothing: :func:`expand` imports ``re`` only for what Slurm's variables
never hold (whitespace, or a malformed list to diagnose), and :func:`compress`
and :func:`expand_counts` load on first use.

Grammar
-------
A node list is a sequence of *items* separated by commas and whitespace.
Runs of separators and leading or trailing ones are skipped (``a,,b`` is
``a b``); a comma inside ``[...]`` belongs to the bracket::

    nodelist := sep* item (sep+ item)* sep*        sep := "," | whitespace
    item     := text (("[" ranges "]") text)*      (at least one character)
    text     := any characters except , [ ] { and whitespace
    ranges   := range ("," range)*
    range    := DIGITS | DIGITS "-" DIGITS          (ASCII digits only)

* The zero-padding width of a range is the length of its low bound:
  ``n[009-011]`` gives n009 n010 n011, ``n[1-04]`` gives n1 n2 n3 n4,
  ``n[01-100]`` gives n01 ... n99 n100 (this is what Slurm itself prints).
* Digits written before ``[`` are literal text (``n1[0-2]`` is n10 n11 n12),
  and text may follow ``]`` (``cn[1-2]-ib`` is cn1-ib cn2-ib; Slurm accepts
  that since 23.02.5).
* A name without brackets is taken literally, ``-`` included (``tux0-5``).

Order
-----
Slurm's order, duplicates kept: items left to right, ranges left to right.
With several bracket groups G1..Gk in one item, Gk varies fastest; the others
are looped with G(k-1) outermost, then G(k-2), ..., G1 innermost of those.
For two groups that is plain lexicographic order (``r[1-2]n[1-2]`` gives
r1n1 r1n2 r2n1 r2n2); for three, ``[1-2][1-2][1-2]`` gives 111 112 211 212
121 122 221 222, as Slurm's recursion on the rightmost bracket of the prefix
does.  This order matters: the i-th host pairs with the i-th entry of
``SLURM_TASKS_PER_NODE`` (see :func:`expand_counts`).

Limits and strictness
---------------------
* At most :data:`MAX_RANGE` (65,536) hosts in one ``lo-hi`` range, as in
  Slurm (``n[1-65537]`` fails there with "Too many hosts in range").
* At most ``max_hosts`` names in all (default :data:`MAX_HOSTS`, 1,048,576);
  the count is checked before any name is built, so ``n[1-60000][1-60000]``
  fails at once instead of filling memory.
* Numbers in brackets have at most 64 digits.
* Stricter than Slurm, which forgives some typos: ``n[1-]`` (Slurm reads
  n1), a lone ``]`` or an unclosed ``[``, spaces inside brackets, empty range
  elements, and ``{`` (Slurm sends such lists to the controller to expand;
  not supported here) are all errors.  An empty node list is an error too.

Every error is a :class:`HostlistError`, a :class:`ValueError` that carries
the input (``text``) and the 0-based ``position`` of the problem.

Why not an existing library
---------------------------
* python-hostlist is GPL-2.0-or-later (hpcdist is Apache-2.0), removes
  duplicates by default, caps a list at 100,000 names, treats ``"a b"`` as
  one name, and orders three or more bracket groups lexicographically.
* ClusterShell sorts and de-duplicates (a ``NodeSet`` is a set), rejects
  Slurm's own output ``n[01-100]`` ("padding length mismatch"), ``a,,b`` and
  adjacent brackets, and is 3-8x slower to expand.

This module is written from Slurm's documented behaviour and observed
results, not from either library's (or Slurm's) code.
"""

from hpcdist.hostlist.errors import MAX_HOSTS, MAX_RANGE, HostlistError
from hpcdist.hostlist.nodelists import expand


# Loaded on first use: every rank expands its job's node list, few ranks need the others.
def __getattr__(name):
    if name == "compress":
        from hpcdist.hostlist.compression import compress as value
    elif name == "expand_counts":
        from hpcdist.hostlist.counts import expand_counts as value
    else:
        raise AttributeError(f"module 'hpcdist.hostlist' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "MAX_HOSTS",
    "MAX_RANGE",
    "HostlistError",
    "compress",
    "expand",
    "expand_counts",
]
