"""The job options' checks of one value each, and :class:`Elsewhere` (an owner's function named, not
imported): :mod:`hpcdist.submission.options` declares each option with one of these.

Where it runs: on the login node (and a laptop that renders), before the flags are parsed.
Plain functions only: `hpcdist render` and `submit` import this with the table.
"""

from __future__ import annotations

from hpcdist import validate as v


class Elsewhere:
    """A value another module owns, named ``"module:name"`` and looked up on first use: a choice
    list (iterated, tested with ``in``) or a check (called)."""

    __slots__ = ("ref", "_found")

    def __init__(self, ref: str) -> None:
        self.ref, self._found = ref, None

    def get(self):
        if self._found is None:
            module, _, name = self.ref.partition(":")
            self._found = getattr(__import__(module, fromlist=[name]), name)
        return self._found

    def __iter__(self):
        return iter(self.get())

    def __contains__(self, item) -> bool:
        return item in self.get()

    def __len__(self) -> int:
        return len(self.get())

    def __bool__(self) -> bool:  # a check or a list is there, whatever its length
        return True

    def __call__(self, *args):
        return self.get()(*args)

    def __repr__(self) -> str:
        return f"Elsewhere({self.ref!r})"


#: The owners' names, looked up where they are declared.


# The per-value checks: (value, option, scheduler) -> the value as held.

def _one_of(x, o, _):
    return v.check_choice(x, o.flag, o.choices)


def _at_least_1(x, o, _):
    return v.check_positive(x, o.flag)


def _at_least_0(x, o, _):
    return v.check_positive(x, o.flag, allow_zero=True)


def _port(x, o, _):
    return v.check_positive(x, o.flag, most=65535, limit="the highest TCP port",
                            fix="Give the port sshd listens on on the nodes (22 unless your site says otherwise).")


def _walltime(x, o, _):
    return v.parse_walltime(str(x), o.flag)


def _memory(x, o, _):
    return v.parse_memory(str(x), o.flag)


def _node_memory(x, o, _):
    """Memory per node; ``0`` (or ``all``) is all of each node's memory (Slurm's ``--mem=0``)."""
    return 0 if str(x).strip().lower() in ("0", "all") else v.parse_memory(str(x), o.flag)


def _name(x, o, _):
    return v.check_name(str(x), o.flag)


#: The scheduler's rules for a job name (before the scheduler is known, a profile without one:
#: Slurm's, the widest), and for a directive line.
_job_name = Elsewhere("hpcdist.schedulers.registry:option_job_name")
_directive = Elsewhere("hpcdist.schedulers.registry:option_directive")


def _text(x, o, _):
    return v.check_text(str(x), o.flag)


def _word(x, o, _):
    """One word of a command: not empty, no leading '-'."""
    return v.check_word(str(x), o.flag)


#: ``module`` verbs a --module value may start with (a bare name is loaded), and whether they take names.
MODULE_VERBS = {"load": True, "unload": True, "use": True, "unuse": True, "swap": True, "purge": False,
                "reset": False}


def _module(x, o, _):
    """A module to load (``cuda/12.1``), or a ``module`` command: ``use /soft/modulefiles``, ``purge``,
    ``swap PrgEnv-cray PrgEnv-gnu``. Each name is one word (quoted in the script)."""
    x = v.check_word(str(x), o.flag)
    verb, *names = x.split() or [""]
    if verb not in MODULE_VERBS or len(names) == 0 and MODULE_VERBS[verb]:
        return x  # a module's name (a name with a space is quoted whole, as before)
    if names and not MODULE_VERBS[verb]:
        raise v.ValidationError(o.flag, x, f"module {verb} takes no names.", f"Give {o.flag} {verb} alone.")
    for name in names:
        v.check_word(name, o.flag)
    return " ".join([verb, *names])


def module_words(value: str) -> list[str]:
    """The words after ``module`` for a --module value (:func:`_module` checked it)."""
    verb, *names = value.split() or [""]
    return [verb, *names] if verb in MODULE_VERBS and (names or not MODULE_VERBS[verb]) else ["load", value]


def _program(x, o, _):
    """A word that bash also runs as a program."""
    return v.check_program(str(x), o.flag)


def _array(x, o, _):
    return v.check_array(str(x), o.flag)


def _dependency(x, o, _):
    return v.check_dependency(str(x), o.flag)


def _mail(x, o, _):
    return v.check_mail(str(x), o.flag)


def _yes_no(x, _o, _s):
    return bool(x)


def _source(x, o, _):
    # bash looks a name without a slash up in $PATH before the current folder (`source
    # setup.sh` could read /usr/bin/setup.sh): a file here is named as one.
    x = v.check_word(str(x), o.flag)
    return x if "/" in x else "./" + x


def _env(x, o, _):
    """NAME=VALUE as typed, or a (name, value) pair (a profile's table, the API's dict)."""
    name, value = v.parse_env_assignment(x, o.flag) if isinstance(x, str) else tuple(x)
    return v.check_env_settable(name, o.flag), v.check_text(str(value), o.flag, allow_newline=True)


_container_bind = Elsewhere("hpcdist.containers:option_bind")


def _env_name(x, o, _):
    return v.check_env_name(str(x), o.flag)


#: The line that ends the every-node setup file in the script (a here-document's end).
SETUP_END = "HPCDIST_SETUP_END"


def _setup_line(x, o, _):
    """A shell line of the user's, run as written (a profile's string may hold several lines)."""
    x = v.check_text(str(x), o.flag, allow_newline=True)
    if SETUP_END in x.splitlines():
        raise v.ValidationError(o.flag, x, f"a line {SETUP_END} would end the setup file the script writes.",
                                "Rename that line's word.")
    return x


def _env_expand(x, o, _):
    """NAME=VALUE whose $VAR and ${VAR} expand in the job: written in double quotes, so nothing
    else in it may be read by the shell (no command substitution, no quotes, no backslash)."""
    name, value = _env(x, o, _)
    value = v.check_text(value, o.flag)  # one line
    bad = [c for c in ('"', "`", "\\", "$(") if c in value]
    if bad:
        raise v.ValidationError(o.flag, f"{name}={value}", f"holds {bad[0]}: only $VAR and ${{VAR}} expand in the job "
                                "(the value is written in double quotes).",
                                "Compute the value in a --setup line (export NAME=...) instead.")
    return name, value


#: How the ranks of a node share its GPUs (--gpu-map).
GPU_MAPS = ("local-rank", "per-task", "visible-devices")


def _binding(x, o, _):
    """A binding in the launcher's own words: one word (cores, list:0:16:32:48, mask_cpu:0xfe,0xfe00)."""
    return v.check_binding(str(x), o.flag)


def _constraint(x, o, _):
    return v.check_constraint(str(x), o.flag)


def _pbs_request(name):
    """A check of :mod:`hpcdist.schedulers.pbs.request` (``name(text, flag)``), on the value as text."""
    found = Elsewhere(f"hpcdist.schedulers.pbs.request:{name}")

    def check(x, o, _):
        return found(v.check_text(str(x), o.flag), o.flag)
    return check


def _script(x, o, _):
    x = v.check_text(str(x), o.flag)
    if not x:
        raise v.ValidationError(o.flag, x, "no training script was given.",
                                "Add the script path: hpcdist submit ... train.py")
    # A script named -x (given after `--`) would be read as the launcher's option: it is a
    # file here, named as one, as _source does.
    return v.check_word("./" + x if x.startswith("-") else x, o.flag)


def _argument(x, o, _):
    return v.check_text(str(x), o.flag, allow_newline=True)


#: Every job option, in the order of JobSpec's fields (a group's flags show in this order).


def _node_names(x, o, _):
    """Nodes by name: a Slurm node list (``n1,n2``, ``n[1-3]``) or ``@FILE`` (names, one or more a
    line, ``#`` comments: the ``bad_nodes`` a job with restarts wrote). Held as ``n1,n2``."""
    from hpcdist.hostlist import expand

    text = str(x)
    fix = ("Give node names (n1,n2 or n[1-3]), or @FILE: a file of names, as the bad_nodes file "
           "in a job's folder (hpcdist status --json: its folder).")
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = ",".join(line.split("#")[0].strip() for line in f)
        except (OSError, UnicodeDecodeError) as e:
            raise v.ValidationError(o.flag, str(x), f"cannot be read: {getattr(e, 'strerror', e)}.",
                                    fix) from None
    try:
        names = expand(text) if text.strip(", \t\n") else []
    except ValueError as e:
        raise v.ValidationError(o.flag, str(x), f"is not a node list: {e}", fix) from None
    if not names:
        raise v.ValidationError(o.flag, str(x), "names no node.", fix)
    return ",".join(v.check_name(name, o.flag) for name in names)
