"""How a PBS job asks for its nodes: the request lines of the PBS template, and the checks of a user's own.

The shapes PBS sites use (their guides are cited in the presets, ``hpcdist/sites/``):

- PBS Pro chunks, the default: ``-l select=N:ncpus=C:mpiprocs=P[:ngpus=G][:mem=M][:RES=V...]``
  and ``-l place=scatter``. ``bare_select`` leaves the counts out (``select=2:system=polaris``)
  for sites that give whole nodes (ALCF Polaris and Aurora); ``chunk_resources`` adds site
  resources to each chunk (``system=polaris``, ``gpu_type=a100``).
- PBS Pro job-wide (``request = "job-wide"``): ``-l ncpus=``, ``-l ngpus=``, ``-l mem=`` for
  the whole job, no select (NCI Gadi).
- Torque: ``-l nodes=N:ppn=P[:gpus=G]`` (the dialect's own; the Pro settings are refused).

A user's own ``select`` or ``place`` (flag, profile, or a ``-l select=`` / ``-l place=``
directive) replaces hpcdist's line and is checked against ``--nodes`` and
``--procs-per-node``. ``job_resources`` are ``-l NAME=VALUE`` lines of their own
(``filesystems=home:eagle``, ``storage=gdata/a00``, ``jobfs=100GB``).
"""

from __future__ import annotations

import re

from hpcdist.patterns import Pattern
from hpcdist.schedulers.rules import directive_tokens, option_values
from hpcdist.validate import ValidationError

#: ``request``'s values.
SHAPES = ("select", "job-wide")

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
#: One resource of a chunk: its value may not hold the chunk's own separators (: + ,).
_CHUNK_RESOURCE = Pattern(rf"({_NAME})=([A-Za-z0-9_.@%/-]+)", re.A)
#: One job-wide resource line: ``filesystems=home:eagle``, ``storage=gdata/a00+scratch/a00``.
_JOB_RESOURCE = Pattern(rf"({_NAME})=([A-Za-z0-9_.:/+@%-]+)", re.A)
#: A select: chunks joined by +, each ``[N:]RES=V[:RES=V...]`` or a bare count.
_CHUNK = Pattern(rf"(?:([0-9]+)(?::|$))?((?:{_NAME}=[A-Za-z0-9_.@%/-]+(?::|$))*)", re.A)

#: Chunk resources hpcdist writes itself from the job's numbers (unless ``bare_select``).
COUNTED = {"ncpus": "--procs-per-node x --cpus-per-proc", "mpiprocs": "--procs-per-node",
           "ngpus": "--gpus-per-node", "mem": "--mem"}
#: ``-l`` resources a job resource line may not set: hpcdist writes them from its own settings.
WRITTEN = {"select": "--select", "place": "--place", "nodes": "--nodes", "walltime": "--walltime",
           "ncpus": "--procs-per-node", "ngpus": "--gpus-per-node", "mem": "--mem", "mpiprocs": "--procs-per-node"}
_ARRANGEMENTS = ("free", "pack", "scatter", "vscatter")
_SHARING = ("excl", "shared", "exclhost")


def _error(field, value, rule, fix):
    return ValidationError(field, value, rule, fix)


def check_chunk_resource(text: str, field: str = "--chunk-resource") -> str:
    if not _CHUNK_RESOURCE.fullmatch(text):
        raise _error(field, text, "is not one chunk resource NAME=VALUE (letters, digits and _ . @ % / - in the "
                     "value; : + , separate chunks and resources).", f"Write for example {field} system=polaris.")
    return text


def check_job_resource(text: str, field: str = "--resource") -> str:
    m = _JOB_RESOURCE.fullmatch(text)
    if not m:
        raise _error(field, text, "is not one PBS resource NAME=VALUE (no spaces, quotes or commas: one "
                     "resource per flag).", f"Write for example {field} filesystems=home:eagle.")
    name = m.group(1).lower()
    if name in WRITTEN:
        raise _error(field, text, f"sets {name}, which hpcdist writes itself from {WRITTEN[name]}.",
                     f"Use {WRITTEN[name]} instead.")
    return text


def parse_select(text: str, field: str = "--select") -> list[tuple[int, dict]]:
    """A select's chunks: (count, {resource: value}), ``select=`` in front or not."""
    body = text[len("select="):] if text.startswith("select=") else text
    chunks = []
    for part in body.split("+"):
        m = _CHUNK.fullmatch(part)
        if not part or not m or (m.group(1) is None and not m.group(2)):
            raise _error(field, text, f"is not a PBS select: {part!r} is not a chunk N:NAME=VALUE:...",
                         f"Write for example {field} 2:ncpus=64:mpiprocs=4:ngpus=4.")
        pairs = [p.split("=", 1) for p in m.group(2).split(":") if p]
        chunks.append((int(m.group(1) or 1), {k.lower(): val for k, val in pairs}))
    return chunks


def check_select(text: str, field: str = "--select") -> str:
    parse_select(text, field)
    return text[len("select="):] if text.startswith("select=") else text


def check_place(text: str, field: str = "--place") -> str:
    """``scatter``, ``pack:excl``, ``vscatter:group=switch``: one arrangement, one sharing, one group."""
    body = text[len("place="):] if text.startswith("place=") else text
    seen = {}
    for token in body.split(":"):
        kind = ("arrangement" if token in _ARRANGEMENTS else "sharing" if token in _SHARING
                else "grouping" if re.fullmatch(rf"group={_NAME}", token, re.A) else None)
        if kind is None or kind in seen:
            why = f"{token!r} is not a PBS placement" if kind is None else f"it gives two {kind}s"
            raise _error(field, text, f"is not a PBS place: {why} (one of {', '.join(_ARRANGEMENTS)}; "
                         f"{', '.join(_SHARING)}; group=RESOURCE).", f"Write for example {field} scatter:excl.")
        seen[kind] = token
    return body


# --- the job spec's rules ------------------------------------------------------------------

def check_request(values: dict, given: dict, torque: bool) -> None:
    """The rules that tie the request settings to each other and to the job's numbers.
    ``values``: the spec being built (a user's ``-l select=`` / ``-l place=`` directive moves
    into ``select``/``place`` here); ``given``: as given (what was set, not defaulted)."""
    pro_only = [(key, flag) for key, flag in (("select", "--select"), ("place", "--place"),
                                              ("chunk_resources", "--chunk-resource"),
                                              ("bare_select", "--bare-select")) if values.get(key)]
    if values.get("request", "select") != "select":
        pro_only.append(("request", "--request"))
    if torque and pro_only:
        key, flag = pro_only[0]
        raise _error(flag, _shown(values[key]), "is PBS Pro's; Torque asks for nodes with -l nodes=N:ppn=P.",
                     "Leave it out (hpcdist writes nodes= from --nodes, --procs-per-node and --gpus-per-node), "
                     "or use --dialect pro if the server is PBS Pro/OpenPBS.")
    if torque:
        return
    _adopt_directives(values)
    if values.get("request") == "job-wide":
        for key, flag in (("select", "--select"), ("chunk_resources", "--chunk-resource"),
                          ("bare_select", "--bare-select"), ("gpu_type", "--gpu-type")):
            if values.get(key):
                raise _error(flag, _shown(values[key]), "describes select chunks, but --request is job-wide "
                             "(-l ncpus=,ngpus=,mem= for the whole job, no select).",
                             "Drop one of them; site resources of a job-wide request go in --resource.")
        return
    if values.get("select"):
        _check_own_select(values, given)
    elif not values.get("bare_select"):
        for resource in values.get("chunk_resources", ()):
            name = resource.split("=", 1)[0].lower()
            if name in COUNTED:
                raise _error("--chunk-resource", resource, f"sets {name}, which hpcdist writes into each chunk "
                             f"from {COUNTED[name]}.", f"Use {COUNTED[name]}, or --bare-select to write none.")
    place = values.get("place")
    if place and values.get("exclusive") and "shared" in place.split(":"):
        raise _error("--place", place, "shares the nodes, but --exclusive asks for them alone.", "Drop one of them.")


def _shown(value) -> str:
    return " ".join(value) if isinstance(value, tuple) else str(value)


def _adopt_directives(values: dict) -> None:
    """A ``-l select=`` or ``-l place=`` directive replaces hpcdist's line: it moves into
    ``select``/``place`` (checked as the flag is), and is written once, where hpcdist writes it."""
    kept = []
    for line in values.get("directives", ()):
        toks = directive_tokens(line)
        resources = [item for value in option_values(toks, short="-l") for item in (value or "").split(",")]
        names = {item.split("=", 1)[0].strip().lower() for item in resources}
        if not {"select", "place"} & names:
            kept.append(line)
            continue
        if len(resources) != 1 or len(toks) > 2:
            raise _error("--directive", line, "sets select or place together with other options or resources.",
                         "Give select and place each in a directive of its own (-l select=...).")
        key, text = resources[0].split("=", 1)
        key = key.strip().lower()
        if values.get(key):
            raise _error("--directive", line, f"sets {key}, and so does --{key} {values[key]}.", "Keep one of them.")
        values[key] = (check_select if key == "select" else check_place)(text, "--directive")
    values["directives"] = tuple(kept)


def _check_own_select(values: dict, given: dict) -> None:
    """A user's select against --nodes, --procs-per-node and --gpus-per-node: each number the
    select says and the flag did not is taken from the select; the two disagreeing is an error."""
    select = values["select"]
    chunks = parse_select(select)
    arrangement = (values.get("place") or "scatter").split(":")[0]
    counts = {"nodes": sum(n for n, _ in chunks) if arrangement in ("scatter", "vscatter") else None}
    for key, resource in (("procs_per_node", "mpiprocs"), ("gpus_per_node", "ngpus")):
        said = {res.get(resource) for _, res in chunks}
        counts[key] = int(said.pop()) if len(said) == 1 and None not in said and said != {""} else None
    flags = {"nodes": "--nodes", "procs_per_node": "--procs-per-node", "gpus_per_node": "--gpus-per-node"}
    for key, count in counts.items():
        if count is None:
            continue
        if key not in given:
            values[key] = count
        elif values.get(key) != count:
            what = {"nodes": f"{count} chunk{'s' * (count != 1)} (one node each, place={arrangement})",
                    "procs_per_node": f"mpiprocs={count} per chunk",
                    "gpus_per_node": f"ngpus={count} per chunk"}[key]
            raise _error("--select", select, f"asks for {what}, but {flags[key]} is {values.get(key)}.",
                         f"Make them agree: {flags[key]} {count}, or a select that says {values.get(key)}.")
    if "gpus_per_node" in values and "procs_per_node" not in given and counts["procs_per_node"] is None:
        values["procs_per_node"] = values["gpus_per_node"] or values.get("procs_per_node", 1)


# --- the lines -----------------------------------------------------------------------------

def request(spec, torque: bool, format_mem) -> list[str]:
    """The ``-l`` resources, in order: the node request, then the site's own (``job_resources``)."""
    if torque:
        # A GPU model is a node property after gpus= (TORQUE's nodes grammar: [:gpus=<gpu>][:<property>...]).
        gpus = (f":gpus={spec.gpus_per_node}" + (f":{spec.gpu_type}" if spec.gpu_type else "")
                if spec.gpus_per_node else "")
        lines = [f"nodes={spec.allocated_nodes}:ppn={spec.cpus_per_node}{gpus}"]
        if spec.mem_mb:  # Torque's mem is the whole job's
            lines.append(f"mem={format_mem(spec.mem_mb * spec.allocated_nodes)}")
    elif spec.request == "job-wide":
        lines = job_wide(spec, format_mem)
    else:
        lines = [f"select={select(spec, format_mem)}"]
    chosen = None if torque else place(spec)
    return lines + ([f"place={chosen}"] if chosen else []) + list(spec.job_resources)


def select(spec, format_mem) -> str:
    """The value of ``-l select=``."""
    if spec.select:
        return spec.select
    words = [str(spec.allocated_nodes)]  # the spares too (--spare-nodes)
    if not spec.bare_select:
        words += [f"ncpus={spec.cpus_per_node}", f"mpiprocs={spec.procs_per_node}"]
        if spec.gpus_per_node:
            words.append(f"ngpus={spec.gpus_per_node}")
        if spec.mem_mb:
            words.append(f"mem={format_mem(spec.mem_mb)}")
    # A GPU model is the gpu_type chunk resource (NCAR Derecho's name; a site with another name
    # gives it with --chunk-resource).
    model = [f"gpu_type={spec.gpu_type}"] if spec.gpu_type else []
    return ":".join(words + model + list(spec.chunk_resources))


def place(spec) -> str | None:
    """The value of ``-l place=`` (None: no line; a job-wide request has one only when asked)."""
    chosen = spec.place or (None if spec.request == "job-wide" else "scatter")
    if spec.exclusive and not (chosen and {"excl", "exclhost"} & set(chosen.split(":"))):
        chosen = f"{chosen}:excl" if chosen else "excl"
    return chosen


def job_wide(spec, format_mem) -> list[str]:
    """The ``-l`` lines of a job-wide request: the whole job's CPUs, GPUs and memory."""
    lines = [f"ncpus={spec.allocated_nodes * spec.cpus_per_node}"]
    if spec.gpus_per_node:
        lines.append(f"ngpus={spec.allocated_nodes * spec.gpus_per_node}")
    if spec.mem_mb:
        lines.append(f"mem={format_mem(spec.allocated_nodes * spec.mem_mb)}")
    return lines
