"""Named cluster profiles in TOML: ``hpcdist.toml`` here, then ``~/.config/hpcdist/config.toml``.

::

    default = "mycluster"            # used when --profile is not given (optional)

    [profiles.mycluster]
    scheduler = "pbs"
    dialect = "pro"
    queue = "gpu"
    account = "proj42"
    modules = ["cuda/12.1"]
    sources = ["/opt/site/profile.d/cuda.sh"]
    conda = "torch"
    gpus_per_node = 4
    walltime = "12h"
    template_dir = "site-templates"     # its slurm/job.sh.j2 replaces ours; relative to this file

Site presets ship with hpcdist (``hpcdist/sites/<name>.toml``: ALCF Polaris and Aurora,
NCAR Derecho, NCI Gadi, a generic Torque site; on Slurm NERSC Perlmutter, LUMI-G, OLCF Frontier,
IDRIS Jean Zay, a university cluster after Princeton's guide), each written from its site's public user
guide, which it cites. ``--profile polaris`` uses one with no file of the user's; a profile
of the same name in the user's files is laid over it, key by key. ``hpcdist profiles``
lists them all and shows one.

A profile's values sit between hpcdist's defaults and the command-line
flags: a flag wins over the profile, and list flags (``--module``,
``--source``, ``--env``, ``--directive``, ``--propagate``) add to the
profile's lists. Unknown keys and wrong types are errors naming the key and
the file.
"""

from __future__ import annotations

import json
import os

from hpcdist.schedulers import registry as schedulers
from hpcdist import validate as v
from hpcdist.submission.options import OPTIONS, REMOTE_OPTIONS, value_checks
from hpcdist.submission.spec import build_spec

PROJECT_FILE = "hpcdist.toml"
#: The site presets shipped with hpcdist.
SITES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sites")

#: key -> type of its value (list means a list of strings; dict, a table of strings).
KEYS: dict[str, type] = {o.key: o.kind for o in OPTIONS if o.profile}
#: The keys that send a job from a laptop (hpcdist.remote reads them; the job spec never sees them).
REMOTE_KEYS: dict[str, type] = {o.key: o.kind for o in REMOTE_OPTIONS}
#: The keys about the site, not the job: ``required``, the settings its scheduler refuses a job
#: without (a preset's: Polaris's qsub refuses one with no -A or walltime). No flag sets them.
SITE_KEYS: dict[str, type] = {"required": list}
#: Keys whose flags add to the profile's list instead of replacing it.
LIST_KEYS = tuple(key for key, kind in KEYS.items() if kind in (list, dict))


#: Keys whose value is a path relative to the profile's file.
_PATHS = ("template", "template_dir")


#: Set by a laptop's hpcdist on the login node (hpcdist.remote): the laptop's profile came as flags
#: already, and a default one here (the snapshot's hpcdist.toml) would add its lists twice.
NO_DEFAULT = "HPCDIST_NO_DEFAULT_PROFILE"


class ProfileError(ValueError):
    pass


class Profile(dict):
    """A profile's values (as :func:`load_profile` checked them), and where each was written:
    ``path``, ``name``, and ``written`` (key -> (the key, the value) as in the file), so that a
    later error about one of them names the file and the key instead of a flag nobody typed."""

    def __init__(self, values=(), path: str = "", name: str = "", written: dict | None = None,
                 where: dict | None = None, notes: list[str] | None = None):
        super().__init__(values)
        self.path, self.name, self.written = path, name, written or {}
        #: Lines for the user: profile files ignored, the default chosen (:func:`load_profile`).
        self.notes = notes or []
        #: key -> the file that set it, where it differs from ``path`` (a preset under the user's profile).
        self.where = where or {}

    def over(self, base: "Profile") -> "Profile":
        """This profile laid over ``base`` (a preset): its keys replace the preset's."""
        where = {key: base.where.get(key, base.path) for key in base}
        where.update((key, self.where.get(key, self.path)) for key in self)
        return Profile({**base, **self}, self.path, self.name, {**base.written, **self.written}, where)


def presets() -> dict[str, str]:
    """The site presets shipped with hpcdist: name -> file."""
    try:
        names = sorted(os.listdir(SITES_DIR))
    except OSError:
        return {}
    return {n[:-len(".toml")]: os.path.join(SITES_DIR, n) for n in names if n.endswith(".toml")}


def user_file() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "hpcdist", "config.toml")


class Untrusted(ProfileError):
    """A profile file another user wrote or could write: ignored, and the message says so."""


def _load(path: str, mine: bool = True) -> dict:
    """The file's tables, its top level checked: only ``default`` (a string) and ``profiles`` (tables).
    ``mine``: the file must be the user's alone (:class:`Untrusted` otherwise), as checked on the
    file opened: a profile's ``setup``, ``sources``, ``python`` and ``env_expand`` run in the job,
    and a project folder is often shared (a colleague's file, or anyone's in a sticky folder)."""
    try:  # not at the top: a render with no profile file reads no TOML (tomllib costs it 4%)
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            if mine:
                _check_mine(path, os.fstat(f.fileno()))
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{path} is not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                           f"TOML files are UTF-8") from None
    except OSError as e:
        raise ProfileError(f"{path} cannot be read: {e.strerror or e}") from None
    unknown = set(data) - {"default", "profiles"}
    if unknown:
        raise ProfileError(f"{path}: unknown top-level key {sorted(unknown)[0]!r}; "
                           f"a profile file holds `default` and `[profiles.NAME]` tables")
    if "default" in data and not (isinstance(data["default"], str) and data["default"]):
        raise ProfileError(f"{path}: default = {data['default']!r} must be the name of a profile, "
                           f'e.g. default = "mycluster"')
    if not isinstance(data.get("profiles", {}), dict):
        raise ProfileError(f"{path}: profiles = {data['profiles']!r} must be tables: [profiles.NAME]")
    return data


def _check_mine(path: str, st: os.stat_result) -> None:
    from hpcdist.jobs.folders import not_ours  # not at the top: pwd, only when a profile file is read

    problem = not_ours(st)
    if problem is not None:
        owner, mode = problem
        fix = (f"chmod go-w {path}" if owner.endswith(")") else
               "copy what you trust into a file of your own (~/.config/hpcdist/config.toml), or give it as flags")
        raise Untrusted(f"ignored {path}: it is {owner}, {mode}; hpcdist reads only profile files that are yours "
                        f"and that no one else can write (a profile's setup, sources and python run in your jobs): "
                        f"{fix}")


def _found(files: list[str], notes: list[str]) -> list[tuple[str, dict]]:
    """``(path, tables)`` of each file that exists and is the user's alone; a line in ``notes`` for each ignored."""
    found = []
    for path in files:
        if os.path.isfile(path):
            try:
                found.append((path, _load(path)))
            except Untrusted as e:
                notes.append(str(e))
    return found


def load_profile(name: str | None, files: list[str] | None = None) -> dict:
    """The values of profile ``name`` (or of the ``default`` one), checked; {} when none applies.
    Its ``notes``: a line for each profile file ignored (another user's), and which profile a
    file's ``default`` chose, for the user to see (the caller prints them)."""
    if name is None and os.environ.get(NO_DEFAULT) or name == NO_PROFILE:
        return Profile()
    files = files if files is not None else [PROJECT_FILE, user_file()]
    notes: list[str] = []
    found = _found(files, notes)
    chosen_by = ""
    if name is None:
        name, chosen_by = next(((data["default"], f" (the default in {path})") for path, data in found
                                if "default" in data), (None, ""))
        if name is None:
            return Profile(notes=notes)
        notes.append(f"using profile {name}{chosen_by}; --profile NAME chooses another, "
                     f"--profile {NO_PROFILE} uses none")
    mine = next(((path, data["profiles"][name]) for path, data in found if name in data.get("profiles", {})), None)
    preset = presets().get(name)
    if preset is not None:
        base = _check(_load(preset, mine=False)["profiles"][name], name, preset)
        profile = base if mine is None else _check(mine[1], name, mine[0]).over(base)
        profile.notes = notes
        return profile
    if mine is not None:
        profile = _check(mine[1], name, mine[0])
        profile.notes = notes
        return profile
    where = " or ".join(files)
    known = sorted({p for _, data in found for p in data.get("profiles", {})})
    import difflib  # the error path's alone

    close = difflib.get_close_matches(name, [*known, *presets()], n=1)
    raise ProfileError(f"no profile {name!r}{chosen_by} in {where}" + (f"; known: {', '.join(known)}" if known else "")
                       + f"; site presets: {', '.join(presets())}; {NO_PROFILE}: no profile"
                       + "".join(f"; {note}" for note in notes if note.startswith("ignored "))
                       + (f"; did you mean {close[0]}?" if close else ""))


def describe(name: str | None = None, files: list[str] | None = None) -> str:
    """``hpcdist profiles``: every profile and preset, one line each; with ``name``, what it sets
    (a preset's file as shipped, with its sources, then the user's keys laid over it)."""
    files = files if files is not None else [PROJECT_FILE, user_file()]
    shipped = presets()
    if name is None:
        notes: list[str] = []
        found = _found(files, notes)
        rows = [(n, path) for path, data in found for n in data.get("profiles", {})]
        rows += [(n, f"site preset ({path})") for n, path in shipped.items()]
        width = max((len(n) for n, _ in rows), default=0)
        lines = [f"{n:<{width}}  {where}" for n, where in rows]
        return "\n".join(lines + [f"# {note}" for note in notes]
                         + ["", "hpcdist profiles NAME shows one; use it with --profile NAME."]) + "\n"
    if name == NO_PROFILE:
        return (f"# {NO_PROFILE}: no profile (--profile {NO_PROFILE}: hpcdist's defaults and your "
                "flags alone)\n")
    profile = load_profile(name, files)  # checked, and an error names what exists
    out = []
    if name in shipped:
        with open(shipped[name], encoding="utf-8") as f:
            out.append(f.read().rstrip("\n"))
    mine = [(key, profile.written[key]) for key in profile if profile.where.get(key, profile.path) == profile.path
            and profile.path != shipped.get(name)]
    if mine:
        out.append(f"# Your settings{' over the preset' if out else ''}, from {profile.path}:")
        out += [f"{raw_key} = {_toml(value)}" for _, (raw_key, value) in mine]
    out += [f"# {note}" for note in profile.notes if note.startswith("ignored ")]
    return "\n".join(out) + "\n"


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _check(table: dict, name: str, path: str) -> dict:
    if not isinstance(table, dict):
        raise ProfileError(f"{path}: profiles.{name} must be a table")
    checks = _value_checks(table)
    out, written = {}, {}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        if key not in KEYS and key not in REMOTE_KEYS and key not in SITE_KEYS:
            import difflib  # only for a misspelt key (it costs a render 1%)

            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted({**KEYS, **REMOTE_KEYS}))}"
            raise ProfileError(f"{path}: profiles.{name}.{raw_key} is not a setting hpcdist knows; {hint}")
        want = KEYS.get(key) or REMOTE_KEYS.get(key) or SITE_KEYS[key]
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
        if want is list:
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if want is dict:
            ok = isinstance(value, dict) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                 for v in value.values())
            value = {str(k): str(v) for k, v in value.items()} if ok else value
        if not ok:
            kind = {list: "a list of strings", dict: "a table of strings", str: "a string",
                    int: "a whole number", bool: "true or false"}[want]
            raise ProfileError(f"{path}: profiles.{name}.{raw_key} = {value!r} must be {kind}")
        _check_value(key, value, checks, f"{path}: profiles.{name}.{raw_key}")
        written[key] = (raw_key, value)
        if key in _PATHS:
            value = os.path.join(os.path.dirname(os.path.abspath(path)), value)
        out[key] = value
    return Profile(out, path, name, written)


def _value_checks(table: dict) -> dict:
    """The job spec's own check of each value (:func:`hpcdist.submission.options.value_checks`), for the
    profile's, so that a mistake names the key and the file instead of a flag nobody typed."""
    checks = value_checks(table.get("scheduler") if table.get("scheduler") in schedulers.NAMES else None)
    checks.update((o.key, lambda x, o=o: o.check(x, o, None)) for o in REMOTE_OPTIONS)
    # Which scheduler a dialect is for may come from a flag: the profile's is checked as PBS's.
    checks["dialect"] = lambda x: schedulers.check_dialect("pbs", x)
    checks["required"] = _required_key
    return checks


def _required_key(key: str) -> None:
    if key not in KEYS:
        import difflib  # only for a misspelt key

        close = difflib.get_close_matches(key, KEYS, n=1)
        raise v.ValidationError("required", key, "is not a setting hpcdist knows.",
                                f"Did you mean {close[0]}?" if close else "")


#: What a missing setting looks like given, in the message that asks for it.
_EXAMPLE = {"account": "PROJECT", "walltime": "1h", "queue": "QUEUE"}


def missing_required(profile: dict, flags: dict, spec) -> str | None:
    """Why ``spec`` would be refused by the profile's site, or None: the settings the profile's
    ``required`` names that neither it nor a flag gave (``--profile polaris`` with no --account or
    --walltime, which Polaris's qsub refuses). Only for a job on the profile's own scheduler."""
    required = profile.get("required") or ()
    if not required or spec.scheduler != profile.get("scheduler", spec.scheduler):
        return None
    by_key = {o.key: o for o in OPTIONS}
    missing = [by_key[key] for key in required
               if flags.get(key) in (None, [], ()) and key not in profile]
    if not missing:
        return None
    names = " and ".join(o.flag for o in missing)
    give = " ".join(f"{o.flag} {_EXAMPLE.get(o.key) or o.metavar or o.key.upper()}"
                    for o in missing)
    name = getattr(profile, "name", "") or "this"
    where = getattr(profile, "where", {}).get("required") or getattr(profile, "path", "")
    return (f"{names} {'is' if len(missing) == 1 else 'are'} missing: profile {name}'s scheduler "
            f"refuses a job without {'it' if len(missing) == 1 else 'them'} (required = "
            f"{json.dumps(list(required))} in {where}); give {give} (before the script)")


def _check_value(key: str, value, checks: dict, where: str) -> None:
    try:
        if isinstance(value, (list, dict)):
            for item in (value.items() if isinstance(value, dict) else value):
                checks[key](item)
        elif key in checks:
            checks[key](value)
    except v.ValidationError as e:
        raise ProfileError(f"{where} = {value!r}: {e.rule}" + (f" {e.fix}" if e.fix else "")) from None


def merge(profile: dict, flags: dict) -> dict:
    """Flags over the profile; list flags add to the profile's lists."""
    merged = {key: value for key, value in profile.items()  # not the job's
              if key not in REMOTE_KEYS and key not in SITE_KEYS}
    for key, value in flags.items():
        if value is None:
            continue
        if key in LIST_KEYS and key in merged:
            base = merged[key]
            base = [f"{k}={v}" for k, v in base.items()] if isinstance(base, dict) else list(base)
            merged[key] = base + list(value)
        else:
            merged[key] = value
    if isinstance(merged.get("env"), dict):
        merged["env"] = [f"{k}={v}" for k, v in merged["env"].items()]
    return merged


def build(profile: dict, flags: dict, *, check_files: bool = True):
    """:func:`hpcdist.submission.spec.build_spec` over the profile and the flags (:func:`merge`). A
    :class:`~hpcdist.validate.ValidationError` about a value the profile gave (a folder that
    does not exist, a rule that ties it to a flag) becomes a :class:`ProfileError` naming the
    file, the key and the value as written there; one about a flag's value stays as it was.
    Settings the job does not take (:class:`~hpcdist.validate.NotHere`: a profile's queue and
    walltime under ``--scheduler local``) are left out one by one and the job built again, so
    that one message names them all (a user fixing one per try met the next on the next)."""
    merged = merge(profile, flags)
    refused: list[Exception] = []
    while True:
        try:
            spec = build_spec(merged, check_files=check_files)
        except v.NotHere as e:
            key = next((o.key for o in OPTIONS if e.field in o.flags), None)
            refused.append(_blame(e, profile, flags) or e)
            if key not in merged:  # nothing to leave out: said as it is
                break
            del merged[key]
        except v.ValidationError as e:
            if refused:  # perhaps only for what was left out: the refusals come first
                break
            raise _blame(e, profile, flags) or e from None
        else:
            if not refused:
                return spec
            break
    raise _refusals(refused, profile, merge(profile, flags).get("scheduler", "local"))


#: The profile that is none: ``--profile none`` uses no profile, not even a file's default one.
NO_PROFILE = "none"


def _refusals(refused: list[Exception], profile: dict, scheduler: str) -> Exception:
    """One error for every setting the job does not take, each with its fix; where the profile
    gave one, the way to try the job without the profile (``--profile none``)."""
    name = getattr(profile, "name", "")
    without = (f"to try the job without profile {name}: --profile {NO_PROFILE}"
               if any(isinstance(e, ProfileError) for e in refused) else "")
    if len(refused) == 1:
        error = refused[0]
        if not without:
            return error
        return ProfileError(f"{error} Or, {without}.")
    lines = [f"{len(refused)} settings are not taken by this job (--scheduler {scheduler}), each "
             f"with its fix:"] + [f"  {e}" for e in refused]
    return ProfileError("\n".join(lines + ([f"Or, {without}."] if without else [])))


def _blame(error, profile: dict, flags: dict) -> ProfileError | None:
    """``error`` as the profile's, when the value it names came from the profile; else None."""
    if not isinstance(profile, Profile):
        return None
    option = next((o for o in OPTIONS if error.field in o.flags and o.key in profile.written), None)
    if option is None:
        return None
    given = flags.get(option.key)
    if option.is_list:
        # Flags add to the profile's list: the item named is the profile's unless a flag gave it.
        if given and str(error.value) in _items(given):
            return None
    elif given is not None:
        return None
    raw_key, raw_value = profile.written[option.key]
    path = profile.where.get(option.key, profile.path)
    rule, fix = error.rule, error.fix
    if option.key in _PATHS:
        if not os.path.isabs(raw_value):
            rule = f"{rule.rstrip('.')} ({error.value}: a profile's paths are relative to its file)."
        fix = "Check the path, or remove the line (hpcdist's own templates are used without it)."
    return ProfileError(f"{path}: profiles.{profile.name}.{raw_key} = {raw_value!r}: {rule}"
                        + (f" {fix}" if fix else ""))


def _items(given) -> set[str]:
    """The values a list flag gave, as an error may name them (``--env A=b``: also ``A`` and ``b``)."""
    items = set()
    for item in (given.items() if isinstance(given, dict) else given):
        if isinstance(item, tuple):
            items.update(map(str, item))
        else:
            items.add(str(item))
            items.update(str(item).split("=", 1))
    return items
