"""A sweep's parameter sets: from ``--sweep KEY=V1,V2`` (their cartesian product) or from a
file (``--sweep-file``: one set a line, or a JSON or YAML list), checked before the queue.

Each set is a dict ``{key: value}`` (both text), every set naming the same keys in the same
order. A key ``lr`` is given to the script as ``--lr VALUE`` (appended to its arguments); in the
job script its value is the variable ``sweep_lr`` (:func:`variable`), set by the subjob's index.
"""

from __future__ import annotations

import re

from hpcdist.validate import ValidationError, check_text

SWEEP, SWEEP_FILE = "--sweep", "--sweep-file"
#: The most sets one sweep holds: the job script has a line per set of its array.
MAX_SETS = 100_000
#: A key: what the script's flag is named after (``lr`` -> ``--lr``), and the shell variable.
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def check_key(key: str, field: str, given: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValidationError(field, given, f"the key {key!r} is not a parameter name: a letter, then letters, "
                              "digits, _ or - (64 at most); it becomes the script's flag --KEY.",
                              "Name it as the script's flag is named, without the dashes: lr=1e-3,3e-4.")
    return key


def variable(key: str) -> str:
    """The job script's variable that holds the key's value: ``sweep_lr``, ``sweep_batch_size``."""
    return "sweep_" + key.replace("-", "_")


def flag(key: str) -> str:
    return "--" + key


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """``KEY=V1,V2,...`` -> (key, values), refused with the field, the value and the fix."""
    text = check_text(str(text), SWEEP)
    key, eq, rest = text.partition("=")
    key = key.strip()
    if not eq:
        raise ValidationError(SWEEP, text, "a sweep is KEY=VALUES: the key, '=', then its values separated by commas.",
                              f"Write e.g. {SWEEP} 'lr=1e-3,3e-4'.")
    check_key(key, SWEEP, text)
    values = [v.strip() for v in rest.split(",")]
    if not rest.strip():
        raise ValidationError(SWEEP, text, f"the key {key} has no values: a sweep runs each value once.",
                              f"Give one or more after '=': {key}=1,2.")
    if "" in values:
        raise ValidationError(SWEEP, text, f"the key {key} has an empty value (two commas, or one at the end).",
                              "Remove the extra comma; a value with a comma goes in a --sweep-file.")
    if len(set(values)) < len(values):
        twice = next(v for v in values if values.count(v) > 1)
        raise ValidationError(SWEEP, text, f"the value {twice} of {key} is given twice: its runs would be the same.",
                              "Give each value once.")
    return key, values


def option_check(value, option, scheduler) -> str:
    """``--sweep``'s check as :mod:`hpcdist.submission.options` runs it: one value alone."""
    parse_sweep(str(value))
    return str(value)


def product(sweeps: list[str]) -> list[dict]:
    """The cartesian product of the ``--sweep`` values, the first key varying slowest (as nested
    loops in the order given): ``lr=1,2`` ``batch=32,64`` -> lr=1 batch=32, lr=1 batch=64, ..."""
    parsed, seen = [], {}
    for text in sweeps:
        key, values = parse_sweep(text)
        if key in seen or variable(key) in {variable(k) for k in seen}:
            raise ValidationError(SWEEP, text, f"the key {key} is swept twice "
                                  f"(also in {SWEEP} {seen.get(key) or '...'!r}).",
                                  f"Give each key once, with all its values: {key}=A,B,C.")
        seen[key] = text
        parsed.append((key, values))
    sets = [{}]
    for key, values in parsed:
        count = len(sets) * len(values)
        if count > MAX_SETS:
            raise too_many(SWEEP, " ".join(sweeps), count)
        sets = [{**s, key: value} for s in sets for value in values]
    return sets


def too_many(field: str, value: str, count: int) -> ValidationError:
    return ValidationError(field, value, f"{count:,} parameter sets: hpcdist runs at most {MAX_SETS:,} in one sweep "
                           "(its job script holds a line per set).", "Sweep fewer values, or split the sweep in parts.")


def read_file(path: str) -> list[dict]:
    """The sets of a ``--sweep-file``: a JSON list of objects (``.json``), a YAML list of mappings
    (``.yaml``, ``.yml``), else one set a line, ``KEY=VALUE`` words as a shell splits them
    (``lr=1e-3 batch=32``; blank lines and ``#`` comments skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError(SWEEP_FILE, path, f"cannot be read: {getattr(e, 'strerror', None) or e}.",
                              "Give a file of parameter sets (one a line, or a JSON or YAML list).") from None
    if path.endswith(".json"):
        import json

        try:
            items = json.loads(text)
        except ValueError as e:
            raise ValidationError(SWEEP_FILE, path, f"is not JSON: {e}.",
                                  'Write a list of objects: [{"lr": 0.001}].') from None
        return checked_sets(items, path)
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise ValidationError(SWEEP_FILE, path, "is YAML, and PyYAML is not installed here.",
                                  "pip install pyyaml, or write the sets as JSON or one a line.") from None
        try:
            items = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValidationError(SWEEP_FILE, path, f"is not YAML: {str(e).splitlines()[0]}.",
                                  "Write a list of mappings: - {lr: 0.001, batch: 32}.") from None
        return checked_sets(items, path)
    import shlex

    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:  # shlex only where the line quotes or escapes (it costs a 10,000-line file half a second)
            words = shlex.split(line) if any(c in line for c in "'\"\\#") else line.split()
        except ValueError as e:
            raise ValidationError(SWEEP_FILE, f"{path}:{number}", f"{e} in {line!r}.", "Close the quote.") from None
        one = {}
        for word in words:
            key, eq, value = word.partition("=")
            if not eq:
                raise ValidationError(SWEEP_FILE, f"{path}:{number}", f"{word!r} is not KEY=VALUE.",
                                      "Write each parameter as KEY=VALUE: lr=1e-3 batch=32.")
            if key in one:
                raise ValidationError(SWEEP_FILE, f"{path}:{number}", f"the key {key} is given twice in this set.",
                                      "Give each key once a line.")
            one[key] = value
        items.append(one)
    return checked_sets(items, path)


def checked_sets(items, where: str) -> list[dict]:
    """Sets as read from a file (or given by the API), checked: a non-empty list of mappings of
    the same keys, each value text, a number or a boolean (written as the script reads it)."""
    if not isinstance(items, list) or not items:
        raise ValidationError(SWEEP_FILE, where, "holds no parameter sets: it must be a non-empty list of sets.",
                              "Write one set a line (lr=1e-3 batch=32), or a JSON or YAML list of them.")
    if len(items) > MAX_SETS:
        raise too_many(SWEEP_FILE, where, len(items))
    sets, keys, checked = [], None, set()
    for number, item in enumerate(items, 1):
        here = f"{where}, set {number}"
        if not isinstance(item, dict) or not item:
            raise ValidationError(SWEEP_FILE, here, f"is {type(item).__name__} {item!r}, not a set of KEY=VALUE.",
                                  "Give each set as a mapping of parameters: {lr: 0.001, batch: 32}.")
        one = {}
        for key, value in item.items():
            if key not in checked:
                checked.add(check_key(str(key), SWEEP_FILE, here))
            one[str(key)] = _text(value, here, key)
        if keys is None:
            keys = list(one)
        elif sorted(one) != sorted(keys):
            missing = sorted(set(keys) - set(one)) or sorted(set(one) - set(keys))
            raise ValidationError(SWEEP_FILE, here, f"names {', '.join(sorted(one))}, the first set "
                                  f"{', '.join(keys)}: every set must name the same keys "
                                  f"(differs in {', '.join(missing)}).",
                                  "Give every set every key.")
        sets.append({key: one[key] for key in keys})
    _no_twins(sets, where)
    return sets


def _text(value, where: str, key) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (int, float)):
        value = repr(value)
    elif not isinstance(value, str):
        raise ValidationError(SWEEP_FILE, where, f"the value of {key} is {type(value).__name__} {value!r}: a "
                              "parameter is text or a number.", "Write it as text.")
    if value.isprintable() and value.isascii():  # the common case, at once: check_text for the rest
        return value
    return check_text(value, SWEEP_FILE)


def _no_twins(sets: list[dict], where: str) -> None:
    seen = {}
    for number, one in enumerate(sets, 1):
        key = tuple(one.items())
        if key in seen:
            raise ValidationError(SWEEP_FILE, f"{where}, set {number}", f"is the same as set {seen[key]}: "
                                  "its run would be the same.", "Remove one of them.")
        seen[key] = number


def parameter_sets(sweeps: list[str] | tuple = (), sweep_file: str | None = None) -> list[dict] | None:
    """The sweep's sets from the flags, or None when neither flag was given."""
    if sweeps and sweep_file:
        raise ValidationError(SWEEP_FILE, sweep_file, f"{SWEEP} and {SWEEP_FILE} were both given: a sweep's sets "
                              "come from one of them.", f"Put every set in the file, or use {SWEEP} alone.")
    if sweep_file:
        return read_file(sweep_file)
    if sweeps:
        return product(list(sweeps))
    return None


def words(one: dict) -> str:
    """A set as a person reads it: ``lr=1e-3 batch=32``."""
    from hpcdist.shell import quote

    return " ".join(f"{key}={quote(value)}" for key, value in one.items())
