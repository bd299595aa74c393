"""Hostile values in every field a user can set: refused by name, or carried literally.

The corpus is tests/hostile.py. For every field x payload x scheduler (Slurm,
PBS Pro, Torque, local) x launcher, either the job spec refuses the value with
a ValidationError naming the field, or the script renders, passes ``bash -n``,
and its directives are exactly the expected ones (no line broken, none added).
Where refusing or carrying is not a matter of taste it is pinned: a NUL or a
byte that is not UTF-8 is refused everywhere, a line break wherever it would
split a line, a leading ``-`` wherever a command would read it as an option;
script arguments and ``--env`` values carry anything else.

Then the scripts run. Launchers, ``module`` and ``conda`` cannot all run here,
so a STUB stands in for them (tests/hostile.py: it records its argv and
environment); everything else in the script is real, and each run checks that
the stub got exactly what was asked and that no payload created the
sentinel. In these runs hpcdist's own commands (``hpcdist hostfile``,
``hpcdist env``) are stubbed too: they take no user value (their arguments
are fixed words), and running them for real hundreds of times would cost a
minute. The real local jobs at the end run everything for real: ``hpcdist
submit --scheduler local`` with the real torchrun and mpirun, every payload
in the arguments and the environment, from a working folder whose name is
itself a payload.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pytest

import hostile
from hostile import Payload, corpus, directive_lines, expected_directive_lines
from launch import clean_env, need

from hpcdist.submission.render import launch_lines
from hpcdist.submission.render import render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCHEDULERS = [("slurm", None), ("pbs", "pro"), ("pbs", "torque"), ("local", None)]
SCHEDULER_IDS = ["slurm", "pbs-pro", "pbs-torque", "local"]
LAUNCHERS = {
    "torchrun": {"launcher": "torchrun"},
    "deepspeed": {"launcher": "deepspeed", "deepspeed_config": "ds_config.json"},
    "deepspeed-nossh": {"launcher": "deepspeed", "no_ssh": True},
    "mpirun-openmpi": {"launcher": "mpirun"},
    "mpirun-mpich": {"launcher": "mpirun", "mpi": "mpich"},
    "srun": {"launcher": "srun"},
    "accelerate": {"launcher": "accelerate"},
}
#: A placeholder sentinel for in-process renders (nothing runs them); runs use tmp_path.
NOWHERE = "/nonexistent/hpcdist-hostile/PWNED"
PAYLOADS = corpus(NOWHERE)


def launchers_for(scheduler: str) -> list[str]:
    return [name for name in LAUNCHERS if name != "srun" or scheduler == "slurm"]


def base_values(scheduler, dialect, launcher="torchrun") -> dict:
    values = dict(scheduler=scheduler, dialect=dialect, nodes=2, procs_per_node=2, script="train.py",
                  script_args=["--lr", "0.1"], walltime="1h" if scheduler != "local" else None)
    values.update(LAUNCHERS[launcher])
    return values


# --------------------------------------------------------------------------
# The fields, and what each must do with a payload
# --------------------------------------------------------------------------

def _text(p: Payload) -> bool:
    return p.argv_safe


def _line(p: Payload) -> bool:
    return p.argv_safe and p.one_line


def _word(p: Payload) -> bool:
    return _line(p) and p.value != "" and not p.value.startswith("-")


def _program(p: Payload) -> bool:
    """A word bash runs as a program where it starts a command."""
    return (_word(p) and not re.match(r"[A-Za-z_][A-Za-z0-9_]*=", p.value) and not p.value.startswith("%")
            and p.value not in ("time", "if", "!", "{", "}", "[["))


def _name(p: Payload) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p.value) is not None


def _stray_percent(p: Payload) -> bool:
    return "%" in p.value.replace("%j", "").replace("%x", "")


def _slurm_pattern(p: Payload) -> bool:
    return "%j" in p.value or "%x" in p.value


def _pdsh_env(values: dict) -> bool:
    """DeepSpeed's pdsh runner re-exports variables inside double quotes (see spec.py)."""
    return (values.get("launcher") == "deepspeed" and not values.get("no_ssh")
            and values.get("scheduler") != "local" and values.get("nodes", 1) > 1)


@dataclass(frozen=True)
class Field:
    name: str
    flag: str  # ValidationError.field when the value is refused
    put: Callable[[dict, str], dict]  # values with the payload in this field
    must_accept: Callable[[Payload, dict], bool] = lambda p, values: False
    must_refuse: Callable[[Payload, dict], bool] = lambda p, values: not _line(p)
    launch: bool = False  # reaches the launch line: every launcher, not one
    launchers: tuple[str, ...] | None = None  # only where the field is used
    schedulers: tuple[str, ...] = ("slurm", "pbs", "local")


def _set(key):
    return lambda values, value: {**values, key: value}


def _add(key):
    return lambda values, value: {**values, key: list(values.get(key, ())) + [value]}


def _directive_value(values, value):
    option = {"slurm": "--comment=", "pbs": "-v HOSTILE="}.get(values["scheduler"], "--comment=")
    return {**values, "directives": [option + value]}


FIELDS = [
    Field("job-name", "--job-name", _set("job_name")),
    # A script named -x is a file, written ./-x (a path, never the launcher's option).
    Field("script", "SCRIPT", _set("script"), must_accept=lambda p, v: _line(p) and p.value != "",
          must_refuse=lambda p, v: not (_line(p) and p.value != ""), launch=True),
    Field("script-args", "ARGS", lambda v, x: {**v, "script_args": [x, "--x", x]},
          must_accept=lambda p, v: _text(p), must_refuse=lambda p, v: not _text(p), launch=True),
    Field("env-value", "--env", lambda v, x: {**v, "env": [f"HOSTILE={x}"]},
          must_accept=lambda p, v: _text(p) and not (_pdsh_env(v) and any(c in p.value for c in '$`"\\\n')),
          must_refuse=lambda p, v: not _text(p), launch=True),
    Field("env-name", "--env", lambda v, x: {**v, "env": [(x, "1")]}, must_refuse=lambda p, v: not _name(p),
          launch=True),
    Field("propagate", "--propagate", _add("propagate"), must_refuse=lambda p, v: not _name(p), launch=True),
    # Containers: the image reaches every launch line (quoted); a bind is a plain absolute path (its
    # list separator ',' and what double quotes expand refused) and reaches it too.
    Field("container-image", "--container-image", _set("container_image"), must_accept=lambda p, v: _word(p),
          must_refuse=lambda p, v: not _word(p), launch=True, launchers=("torchrun", "mpirun", "none")),
    Field("container-bind", "--container-bind", lambda v, x: {**v, "container_image": "img", "container_binds": [x]},
          must_refuse=lambda p, v: not (_word(p) and p.value.startswith("/")
                                        and not any(c in p.value for c in ',$`"\\')),
          launch=True, launchers=("torchrun", "mpirun", "none")),
    Field("module", "--module", _add("modules"), must_accept=lambda p, v: _word(p),
          must_refuse=lambda p, v: not _word(p)),
    Field("source", "--source", _add("sources"), must_accept=lambda p, v: _word(p),
          must_refuse=lambda p, v: not _word(p)),
    Field("conda", "--conda", _set("conda"), must_accept=lambda p, v: _word(p),
          must_refuse=lambda p, v: not _word(p)),
    Field("venv", "--venv", _set("venv"), must_accept=lambda p, v: _word(p),
          must_refuse=lambda p, v: not _word(p)),
    # The local backend refuses what it cannot do (tests/schedulers/test_local_backend.py): no queue, account,
    # qos, array, dependency or mail there.
    Field("queue", "--queue", _set("queue"), schedulers=("slurm", "pbs")),
    Field("account", "--account", _set("account"), schedulers=("slurm", "pbs")),
    Field("qos", "--qos", _set("qos"), schedulers=("slurm",)),
    Field("directive-value", "--directive", _directive_value, must_accept=lambda p, v: _line(p),
          schedulers=("slurm", "pbs")),
    Field("directive-raw", "--directive", _add("directives"), schedulers=("slurm", "pbs")),
    # sbatch reads "double quotes" in #SBATCH lines: a '"' cannot be carried there.
    # The local backend replaces %j and %x in it, and refuses any other %; PBS writes the path as
    # given, and refuses Slurm's %j and %x.
    Field("output", "--output", _set("output"),
          must_accept=lambda p, v: _line(p) and not (v.get("scheduler") == "slurm" and '"' in p.value)
          and not (v.get("scheduler") == "local" and _stray_percent(p))
          and not (v.get("scheduler") == "pbs" and _slurm_pattern(p)),
          must_refuse=lambda p, v: not _line(p) or (v.get("scheduler") == "local" and _stray_percent(p))
          or (v.get("scheduler") == "pbs" and _slurm_pattern(p))),
    Field("array", "--array", _set("array"), schedulers=("slurm", "pbs")),
    Field("dependency", "--dependency", _set("dependency"), schedulers=("slurm", "pbs")),
    Field("mail", "--mail", _set("mail_user"), schedulers=("slurm", "pbs")),
    Field("python", "--python", _set("python"), must_accept=lambda p, v: _program(p),
          must_refuse=lambda p, v: not _program(p), launch=True,
          launchers=("mpirun-openmpi", "mpirun-mpich", "srun")),
    Field("mpiexec", "--mpiexec", _set("mpiexec"), must_accept=lambda p, v: _program(p),
          must_refuse=lambda p, v: not _program(p), launch=True, launchers=("mpirun-openmpi", "mpirun-mpich")),
    Field("deepspeed-config", "--deepspeed-config", _set("deepspeed_config"), must_accept=lambda p, v: _word(p),
          must_refuse=lambda p, v: not _word(p), launch=True, launchers=("deepspeed",)),
    Field("walltime", "--walltime", _set("walltime"), must_refuse=lambda p, v: True),
    Field("mem", "--mem", _set("mem"), must_refuse=lambda p, v: True),
    Field("nodes", "--nodes", _set("nodes"), must_refuse=lambda p, v: True),
    Field("ssh-port", "--ssh-port", _set("ssh_port"), must_refuse=lambda p, v: True),
    Field("signal-margin", "--signal-margin", _set("signal_margin"), must_refuse=lambda p, v: True),
    Field("hang-timeout", "--hang-timeout", _set("hang_timeout"), must_refuse=lambda p, v: True),
    Field("hang-floor", "--hang-floor", _set("hang_floor"), must_refuse=lambda p, v: True),
    Field("start-timeout", "--start-timeout", _set("start_timeout"), must_refuse=lambda p, v: True),
    Field("requeue", "--requeue", _set("requeue"), must_refuse=lambda p, v: True),
    Field("max-restarts", "--max-restarts", _set("max_restarts"), must_refuse=lambda p, v: True),
    Field("min-nodes", "--min-nodes", _set("min_nodes"), must_refuse=lambda p, v: True),
    Field("spare-nodes", "--spare-nodes", _set("spare_nodes"), must_refuse=lambda p, v: True),
    Field("exclude-nodes", "--exclude-nodes", _add("exclude_nodes"), schedulers=("slurm", "pbs")),
    Field("launcher", "--launcher", _set("launcher"), must_refuse=lambda p, v: True),
    Field("mpi", "--mpi", _set("mpi"), must_refuse=lambda p, v: True),
    Field("pbs-spread", "--pbs-spread", _set("pbs_spread"), must_refuse=lambda p, v: True),
    Field("dialect", "--dialect", _set("dialect"), must_refuse=lambda p, v: p.value != "", schedulers=("pbs",)),
    Field("template-dir", "--template-dir", _set("template_dir"), must_refuse=lambda p, v: not _line(p)),
    # PBS's request (hpcdist.schedulers.pbs.request): each value by its grammar, written into #PBS lines.
    Field("project", "--project", _set("project"), schedulers=("pbs",)),
    Field("gpu-type", "--gpu-type", lambda v, x: {**v, "gpu_type": x, "gpus_per_node": 2}, schedulers=("slurm", "pbs")),
    Field("mem-per-gpu", "--mem-per-gpu", lambda v, x: {**v, "mem_per_gpu": x, "gpus_per_node": 2},
          must_refuse=lambda p, v: True, schedulers=("slurm",)),
    Field("request", "--request", _set("request"), must_refuse=lambda p, v: True, schedulers=("pbs",)),
    Field("select", "--select", _set("select"), schedulers=("pbs",)),
    Field("place", "--place", _set("place"), must_refuse=lambda p, v: True, schedulers=("pbs",)),
    Field("chunk-resource", "--chunk-resource", _add("chunk_resources"), schedulers=("pbs",)),
    Field("resource", "--resource", _add("job_resources"), schedulers=("pbs",)),
    # Issue 15: Slurm's node features and hint; binding in the launcher's words; the value of
    # --env-expand is written in double quotes, so only what cannot run a command is carried.
    Field("constraint", "--constraint", _set("constraint"), schedulers=("slurm",)),
    Field("hint", "--hint", _set("hint"), must_refuse=lambda p, v: True, schedulers=("slurm",)),
    Field("cpu-bind", "--cpu-bind", _set("cpu_bind"), launch=True,
          launchers=("mpirun-openmpi", "mpirun-mpich", "srun")),
    Field("gpu-bind", "--gpu-bind", _set("gpu_bind"), launch=True, launchers=("srun",), schedulers=("slurm",)),
    Field("gpu-map", "--gpu-map", _set("gpu_map"), must_refuse=lambda p, v: True, launch=True,
          launchers=("mpirun-openmpi", "srun")),
    Field("env-expand", "--env-expand", lambda v, x: {**v, "env_expand": [f"HOSTILE={x}"]},
          must_refuse=lambda p, v: not _line(p) or any(c in p.value for c in ('"', "`", "\\", "$(")), launch=True),
    Field("setup-on", "--setup-on", _set("setup_on"), must_refuse=lambda p, v: True),
]
# Values that reach the script through render()'s arguments, not the spec.
RENDER_ARGS = {
    "workdir": "the folder you submit from",
    "job-dir": "the job folder",
    "command-line": None,  # the header comment: not checked, a line break becomes a space
}

MATRIX = [(f, s, d, sid) for f in FIELDS for (s, d), sid in zip(SCHEDULERS, SCHEDULER_IDS) if s in f.schedulers]


def _bash_syntax_errors(texts: dict[str, str], folder) -> dict[str, str]:
    """``bash -n`` on every script: {key: error} for those that fail (one bash per script, one loop)."""
    if not texts:
        return {}
    paths = {}
    for n, (key, text) in enumerate(texts.items()):
        path = os.path.join(folder, f"{n}.sh")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        paths[path] = key
    loop = 'for f; do out=$(bash -n "$f" 2>&1) || printf "%s\\0%s\\0" "$f" "$out"; done'
    proc = subprocess.run(["xargs", "-0", "-P", "2", "-n", "64", "bash", "-c", loop, "bash"],
                          input=b"".join(p.encode() + b"\0" for p in paths), capture_output=True, timeout=300)
    words = proc.stdout.decode(errors="replace").split("\0")[:-1]
    return {paths[words[i]]: words[i + 1] for i in range(0, len(words), 2)}


def _check_outcome(field_name, flag, payload, values, must_accept, must_refuse, problems):
    """Build the spec; check a refusal's form, or return the spec."""
    try:
        spec = build_spec(values, check_files=False)
    except ValidationError as e:
        if must_accept:
            problems.append(f"{payload.id}: refused but must be carried: {e}")
        elif e.field != flag:
            problems.append(f"{payload.id}: refused under {e.field!r}, not {flag!r}: {e}")
        elif not e.rule or not str(e).startswith(f"{flag} "):
            problems.append(f"{payload.id}: the message does not name the field and the rule: {e}")
        return None
    if must_refuse:
        problems.append(f"{payload.id}: carried but must be refused ({field_name}={payload.value[:60]!r})")
        return None
    return spec


@pytest.mark.parametrize("field,scheduler,dialect", [(f, s, d) for f, s, d, _ in MATRIX],
                         ids=[f"{f.name}-{sid}" for f, _, _, sid in MATRIX])
def test_field_refuses_or_carries_every_payload(field, scheduler, dialect, tmp_path):
    launchers = launchers_for(scheduler) if field.launch else ["torchrun"]
    if field.launchers:
        launchers = [name for name in launchers if name in field.launchers]
    problems: list[str] = []
    texts, specs = {}, {}
    for payload in PAYLOADS:
        for launcher in launchers:
            values = field.put(base_values(scheduler, dialect, launcher), payload.value)
            spec = _check_outcome(field.name, field.flag, payload, values, field.must_accept(payload, values),
                                  field.must_refuse(payload, values), problems)
            if spec is None:
                continue
            key = f"{payload.id} / {launcher}"
            texts[key] = render(spec, workdir="/home/alice/project")
            specs[key] = spec
    for key, error in _bash_syntax_errors(texts, tmp_path).items():
        problems.append(f"{key}: bash -n fails: {error}")
    for key, text in texts.items():
        if not text.startswith("#!/bin/bash\n"):
            problems.append(f"{key}: the first line is not #!/bin/bash")
        got, want = directive_lines(text, scheduler), expected_directive_lines(specs[key])
        if got != want:
            problems.append(f"{key}: directives differ:\n  got  {_short(got, 2000)}\n  want {_short(want, 2000)}")
    assert not problems, f"{field.name} on {scheduler} {dialect or ''}:\n" + "\n".join(problems)


@pytest.mark.parametrize("what", list(RENDER_ARGS))
@pytest.mark.parametrize("scheduler,dialect", SCHEDULERS, ids=SCHEDULER_IDS)
def test_render_arguments_refuse_or_carry_every_payload(what, scheduler, dialect, tmp_path):
    """The submit folder, the job folder and the command line come from the system, not the spec."""
    spec = build_spec(base_values(scheduler, dialect), check_files=False)
    problems, texts = [], {}
    for payload in PAYLOADS:
        if what == "command-line":
            if not payload.argv_safe:
                continue  # no argv holds it
            kwargs = {"command_line": shlex.join(["hpcdist", "submit", "train.py", payload.value])}
        else:
            kwargs = {"workdir" if what == "workdir" else "job_dir": "/home/alice/" + payload.value}
        try:
            texts[payload.id] = render(spec, **kwargs)
        except ValidationError as e:
            if what == "command-line" or _line(payload):
                problems.append(f"{payload.id}: refused: {e}")
            elif e.field != RENDER_ARGS[what]:
                problems.append(f"{payload.id}: refused under {e.field!r}: {e}")
            continue
        if what != "command-line" and not _line(payload):
            problems.append(f"{payload.id}: a {what} with a line break or NUL was rendered")
    for key, error in _bash_syntax_errors(texts, tmp_path).items():
        problems.append(f"{key}: bash -n fails: {error}")
    for key, text in texts.items():
        if directive_lines(text, scheduler) != expected_directive_lines(spec):
            problems.append(f"{key}: directives differ: {directive_lines(text, scheduler)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("field", [f for f in FIELDS if not f.launch], ids=lambda f: f.name)
def test_fields_rendered_with_one_launcher_never_reach_the_launch_line(field):
    """Why the matrix renders these fields with one launcher only: no launcher's line holds them."""
    marker = "hostile_marker_7f3a"
    for (scheduler, dialect), _ in zip(SCHEDULERS, SCHEDULER_IDS):
        if scheduler not in field.schedulers:
            continue
        for launcher in launchers_for(scheduler):
            values = field.put(base_values(scheduler, dialect, launcher), marker)
            try:
                spec = build_spec(values, check_files=False)
            except ValidationError:
                continue
            assert not [line for line in launch_lines(spec) if marker in line], (field.name, launcher)


def test_the_corpus_is_what_the_issue_lists():
    ids = {p.id for p in PAYLOADS}
    for needed in ("dollar-paren", "backticks", "semicolon", "and", "newline", "nul", "long", "unicode",
                   "option-injection", "single-quote", "double-quote", "backslash", "home", "ifs-literal",
                   "bang", "glob", "hash", "percent", "rtl-emoji", "double-dash", "tilde", "not-utf8"):
        assert needed in ids
    assert len(next(p for p in PAYLOADS if p.id == "long").value) >= 100_000
    assert all(NOWHERE in p.value for p in PAYLOADS if p.executes)
    # the sentinel really would be created by the executing payloads, unquoted
    with pytest.raises(ValueError):
        corpus("relative/PWNED")


def test_executing_payloads_do_execute_when_not_quoted(tmp_path):
    """The corpus is hostile for real: pasted into a line unquoted, or inside quotes it breaks out
    of, each executing payload creates the sentinel."""
    sentinel = tmp_path / "PWNED"
    missed = []
    for p in corpus(str(sentinel)):
        if not p.executes:
            continue
        for line in (f"echo {p.value}", f"false {p.value}", f"echo '{p.value}'", f'echo "{p.value}"'):
            subprocess.run(["bash", "-c", line], capture_output=True, timeout=30, cwd=tmp_path)
            deadline = time.monotonic() + 2  # <(...) runs in the background
            while not sentinel.exists() and time.monotonic() < deadline and "<(" in p.value:
                time.sleep(0.05)
            if sentinel.exists():
                break
        else:
            missed.append(p.id)
        sentinel.unlink(missing_ok=True)
    assert not missed, f"these payloads execute nothing even unquoted: {missed}"


# --------------------------------------------------------------------------
# Running the scripts: stubs for what cannot run here, the rest real
# --------------------------------------------------------------------------

STUBBED = ("srun", "mpirun", "mpiexec", "mpiexec.hydra", "torchrun", "deepspeed", "accelerate", "module", "conda")
#: Stands in for hpcdist in the many single-field runs (see the module docstring).
HPCDIST_STUB = r"""#!/bin/bash
case "$1" in
  job-setup) while [ $# -gt 0 ]; do [ "$1" = --dir ] && dir=$2; shift; done
             port=$((20000 + RANDOM % 30000))
             { printf 'export MASTER_ADDR=n1 MASTER_PORT=%s HPCDIST_JOB_ID=4242 ' "$port"
               printf 'HPCDIST_NODEFILE=%s/nodes HPCDIST_HOSTFILE=%s/hostfile\n' "$dir" "$dir"
               echo 'mpi_env=()'
             } > "$dir/job.env" ;;
  hostfile) out=; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
            printf 'n1 slots=2\nn2 slots=2\n' > "$out" ;;
  env) echo 29500 ;;
  *) while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done  # a wrapper (supervise -- CMD): run CMD
     [ $# -gt 0 ] && shift && exec "$@" ;;
esac
"""


def scheduler_env(scheduler, cwd, tmp_path) -> dict:
    """What the scheduler would set (two nodes, n1 and n2), for running a script here."""
    if scheduler == "slurm":
        return {"SLURM_SUBMIT_DIR": str(cwd), "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "n[1-2]",
                "SLURM_TASKS_PER_NODE": "2(x2)"}
    if scheduler == "pbs":
        nodefile = tmp_path / "pbs_nodefile"
        nodefile.write_text("n1\nn1\nn2\nn2\n")
        return {"PBS_O_WORKDIR": str(cwd), "PBS_JOBID": "4242.server", "PBS_NODEFILE": str(nodefile)}
    return {"HPCDIST_JOB_ID": "4242"}


def run_script(text, scheduler, tmp_path, *, stub_hpcdist: bool, cwd=None):
    """Run a job script here with the stubs first on PATH. Returns (process, calls, sourced)."""
    cwd = cwd or tmp_path / "work"
    os.makedirs(cwd, exist_ok=True)
    calls = tmp_path / "calls"
    calls.mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    hostile.install_stubs(str(bin_dir), STUBBED)
    if stub_hpcdist:
        (bin_dir / "hpcdist").write_text(HPCDIST_STUB)
        (bin_dir / "hpcdist").chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text(text, encoding="utf-8")
    env = clean_env(STUB_CALLS=str(calls), TMPDIR=str(tmp_path))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env.update(scheduler_env(scheduler, cwd, tmp_path))
    proc = subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True, timeout=120)
    return proc, hostile.read_calls(str(calls)), hostile.read_sourced(str(calls))


PROGRAM_LAUNCHERS = {"torchrun": "torchrun", "deepspeed": "deepspeed", "deepspeed-nossh": "deepspeed",
                     "mpirun-openmpi": "mpirun", "mpirun-mpich": "mpiexec.hydra", "srun": "srun",
                     "accelerate": "accelerate"}


def program_call(calls, spec, launcher_id):
    """The stub call that starts the training program: its argv ends with the program's words."""
    program = [spec.script, *spec.script_args]
    if spec.deepspeed_config:  # passed on under every launcher
        program += ["--deepspeed_config", spec.deepspeed_config]
    if spec.launcher in ("mpirun", "srun"):  # each rank through hpcdist.rank
        program = [spec.python, "-m", "hpcdist.rank", *program]
    name = os.path.basename(spec.mpiexec) if spec.mpiexec else PROGRAM_LAUNCHERS[launcher_id]
    # PBS spreads per-node launchers with mpirun: the launcher is then a word of mpirun's call.
    found = [(argv, env) for n, argv, env in calls
             if argv[-len(program):] == program and (n == name or name in argv)]
    return found, program


def _short(value, limit=300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit // 2] + " ... " + text[-limit // 2:]


def module_words(value: str) -> list[str]:
    """What ``module`` is called with for a --module value: a verb and its names, or load and the name."""
    verb, *names = value.split() or [""]
    if verb in ("use", "unuse", "load", "unload", "swap") and names or verb in ("purge", "reset") and not names:
        return [verb, *names]
    return ["load", value]


def check_run(proc, calls, sourced, spec, launcher_id, sentinel, problems, label):
    if sentinel.exists():
        problems.append(f"{label}: THE SENTINEL EXISTS: a payload was executed")
        sentinel.unlink()
    if proc.returncode != 0:
        problems.append(f"{label}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
        return
    found, program = program_call(calls, spec, launcher_id)
    if not found:
        seen = [(n, argv[-len(program):]) for n, argv, _ in calls]
        problems.append(f"{label}: no launcher call ends with the program {_short(program)}; calls: {_short(seen)}")
        return
    for argv, env in found:
        for name, value in spec.env:
            if env.get(name) != value:
                problems.append(f"{label}: {name} arrived as {_short(env.get(name))}, not {_short(value)}")
    modules = [argv for n, argv, _ in calls if n == "module"]
    if modules != [module_words(m) for m in spec.modules]:
        problems.append(f"{label}: module calls {_short(modules, 2000)} != {_short(list(spec.modules), 2000)}")
    conda = [argv for n, argv, _ in calls if n == "conda" and argv[:1] != ["shell.bash"]]
    if conda != ([["activate", spec.conda]] if spec.conda else []):
        problems.append(f"{label}: conda calls {_short(conda)}")
    want_sourced = list(spec.sources) + ([spec.venv + "/bin/activate"] if spec.venv else [])
    if sourced != want_sourced:
        problems.append(f"{label}: sourced {_short(sourced, 2000)} != {_short(want_sourced, 2000)}")


RUN_CASES = [(s, d, sid, launcher) for (s, d), sid in zip(SCHEDULERS, SCHEDULER_IDS) for launcher in launchers_for(s)]


@pytest.mark.parametrize("scheduler,dialect,launcher", [c[:2] + c[3:] for c in RUN_CASES],
                         ids=[f"{sid}-{launcher}" for _, _, sid, launcher in RUN_CASES])
def test_one_job_with_every_payload_runs_and_executes_none(scheduler, dialect, launcher, tmp_path):
    """Script arguments, --env values, modules, sources and directives carry the whole corpus at once."""
    sentinel = tmp_path / "PWNED"
    payloads = corpus(str(sentinel))
    work = tmp_path / "work"
    work.mkdir()
    values = hostile.hostile_job_values(payloads, base_values(scheduler, dialect, launcher))
    hostile.write_source_files(str(work), values["sources"])
    spec = build_spec(values, check_files=False)
    # Every payload that can be an argument is one (the matrix above says why the others are refused).
    assert list(spec.script_args[2:]) == [p.value for p in payloads if p.argv_safe]
    assert len(spec.modules) >= 20 and len(spec.sources) >= 15 and len(spec.env) >= 20
    text = render(spec, workdir=str(work))
    assert directive_lines(text, scheduler) == expected_directive_lines(spec)
    proc, calls, sourced = run_script(text, scheduler, tmp_path, stub_hpcdist=True, cwd=work)
    problems: list[str] = []
    check_run(proc, calls, sourced, spec, launcher, sentinel, problems, f"{scheduler}-{launcher}")
    assert not problems, "\n".join(problems)


SINGLE_FIELDS = {  # field -> spec key; each payload goes into all of them at once where they accept it
    "mpirun-openmpi": ("job_name", "queue", "account", "qos", "output", "array", "dependency", "mail_user",
                       "conda", "script", "python", "mpiexec"),
    "deepspeed": ("venv", "deepspeed_config"),
}


# PBS is left out: its script differs from Slurm's only in directives (checked by the matrix, and
# comments to bash) and in `cd "$PBS_O_WORKDIR"`; these launch lines are the same on both.
@pytest.mark.parametrize("scheduler,dialect", [("slurm", None), ("local", None)], ids=["slurm", "local"])
def test_each_payload_in_the_single_valued_fields_runs_and_executes_none(scheduler, dialect, tmp_path):
    sentinel = tmp_path / "PWNED"
    jobs = []
    for n, payload in enumerate(corpus(str(sentinel))):
        for launcher, keys in SINGLE_FIELDS.items():
            values = base_values(scheduler, dialect, launcher)
            for key in keys:
                if key in ("mpiexec", "venv", "python") and not payload.file_name_safe:
                    continue  # bash must find it as a file here, and it cannot be one
                trial = {**values, key: payload.value}
                if hostile.accepted(trial):
                    values = trial
            spec = build_spec(values, check_files=False)
            if spec == build_spec(base_values(scheduler, dialect, launcher), check_files=False):
                continue  # refused everywhere: the matrix checked the refusals
            jobs.append((f"{payload.id}-{launcher}", n, spec, launcher))

    def one(job):
        label, n, spec, launcher = job
        case = tmp_path / f"case{n}-{launcher}"
        work = case / "work"
        work.mkdir(parents=True)
        if spec.venv:
            hostile.write_source_files(str(work), [spec.venv + "/bin/activate"])
        # The programs this job runs itself: its MPI launcher, and its python (the launch block checks
        # that it can import hpcdist). Stubs, where bash will look.
        for program in {spec.mpiexec, spec.python} - {None, "", "python"}:
            where = work / program if "/" in program else case / "bin" / program
            hostile.install_stubs(str(where.parent), [where.name])
        text = render(spec, workdir=str(work))
        problems: list[str] = []
        if directive_lines(text, scheduler) != expected_directive_lines(spec):
            problems.append(f"{label}: directives differ")
        proc, calls, sourced = run_script(text, scheduler, case, stub_hpcdist=True, cwd=work)
        check_run(proc, calls, sourced, spec, launcher, sentinel, problems, label)
        return problems

    assert len(jobs) >= 20
    with ThreadPoolExecutor(2) as pool:
        problems = [p for found in pool.map(one, jobs) for p in found]
    assert not sentinel.exists()
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------
# Real local jobs through `hpcdist submit`, real launchers
# --------------------------------------------------------------------------

def _need(program):
    if shutil.which(program, path=clean_env()["PATH"]) is None:
        need(program)  # skips, saying how to install it


def _submit_real(tmp_path, flags, payloads, *, first_args=()):
    """`hpcdist submit --scheduler local --wait` from a hostile folder; returns (proc, dumps, args, env)."""
    sentinel = tmp_path / "PWNED"
    folder_payload = next(p for p in payloads if p.id == "dollar-paren")
    work = tmp_path / folder_payload.value.lstrip("/")  # a working folder named $(touch .../PWNED)
    work.mkdir(parents=True)
    program = work / "dump_argv.py"
    program.write_text(hostile.DUMP_PROGRAM)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    args = [*first_args, *(p.value for p in payloads if p.argv_safe)]
    env_flags = [f"HOSTILE_{n}={p.value}" for n, p in enumerate(payloads) if p.argv_safe]
    argv = [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "local", "--wait", *flags]
    for item in env_flags:
        argv += ["--env", item]
    argv += [str(program), *args]
    env = clean_env(DUMP_DIR=str(dumps), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert not sentinel.exists(), "a payload was executed"
    return proc, hostile.read_dumps(str(dumps)), args, dict(item.split("=", 1) for item in env_flags)


@pytest.mark.parametrize("flags,program", [
    (["--procs-per-node", "2"], "torchrun"),
    (["--procs-per-node", "2", "--launcher", "mpirun"], "mpirun"),
], ids=["torchrun", "mpirun"])
def test_real_local_job_gets_every_payload_exactly(flags, program, tmp_path):
    _need(program)
    proc, dumps, args, env = _submit_real(tmp_path, flags, corpus(str(tmp_path / "PWNED")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(dumps) == 2, proc.stdout[-3000:]
    for dump in dumps:
        assert dump["argv"] == args
        assert {k: v for k, v in dump["env"].items() if k[8:].isdigit()} == env


@pytest.mark.parametrize("flags,program", [([], "torchrun"), (["--launcher", "deepspeed"], "deepspeed")],
                         ids=["torchrun", "deepspeed"])
def test_a_real_job_gets_a_leading_double_dash(flags, program, tmp_path):
    _need(program)
    proc, dumps, args, _ = _submit_real(tmp_path, flags, [p for p in corpus(str(tmp_path / "PWNED"))
                                                            if p.id == "dollar-paren"], first_args=["--", "--"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # `hpcdist submit x.py -- --` means the script's arguments are ["--"] (argparse, as torchrun itself);
    # DeepSpeed's launcher puts its --local_rank first, as it always does.
    first = ["--local_rank=0"] if program == "deepspeed" else []
    assert [d["argv"] for d in dumps] == [first + ["--", "$(touch " + str(tmp_path / "PWNED") + ")"]]


# --------------------------------------------------------------------------
# What cannot be carried is refused before anything is written
# --------------------------------------------------------------------------

@pytest.mark.parametrize("values,field", [
    ({"script_args": ["a\0b"]}, "ARGS"),
    ({"env": ["A=a\0b"]}, "--env"),
    ({"env": {"A": "a\0b"}}, "--env"),
    ({"modules": ["a\0b"]}, "--module"),
    ({"script_args": ["a\udcffb"]}, "ARGS"),
    ({"env": ["A=\udc80"]}, "--env"),
    ({"conda": "\udcff"}, "--conda"),
    ({"directives": ["--comment=\udcff"], "scheduler": "slurm"}, "--directive"),
], ids=["nul-arg", "nul-env", "nul-env-dict", "nul-module", "byte-arg", "byte-env", "byte-conda", "byte-directive"])
def test_nul_and_bytes_that_are_not_utf8_are_refused_by_the_api(values, field, tmp_path, monkeypatch):
    import hpcdist

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("")
    options = {k: v for k, v in values.items() if k != "script_args"}
    with pytest.raises(ValidationError) as info:
        hpcdist.submit("t.py", *values.get("script_args", ()), **options)
    assert info.value.field == field and ("NUL" in str(info.value) or "not UTF-8" in str(info.value))
    assert not (tmp_path / ".hpcdist").exists() or not os.listdir(tmp_path / ".hpcdist" / "jobs")


def test_an_argument_that_is_not_utf8_is_refused_by_the_cli(tmp_path):
    """It crashed with UnicodeEncodeError while writing job.sh, leaving a half-made job folder."""
    (tmp_path / "t.py").write_text("")
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "t.py", b"a\xffb"], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "ARGS" in proc.stderr and "not UTF-8" in proc.stderr and "Traceback" not in proc.stderr
    assert not os.path.isdir(tmp_path / ".hpcdist" / "jobs") or not os.listdir(tmp_path / ".hpcdist" / "jobs")


@pytest.mark.parametrize("scheduler", ["local", "slurm"])
def test_a_submit_folder_with_a_line_break_is_refused_and_leaves_nothing(scheduler, tmp_path):
    """Its path lands in the script (`cd`, the exit file, #SBATCH --output): a line break would split a directive."""
    work = tmp_path / "a\n#SBATCH --wrap=x"
    work.mkdir()
    (work / "t.py").write_text("")
    env = clean_env()
    env["PATH"] = os.path.join(ROOT, "tests", "fakes") + os.pathsep + env["PATH"]  # sbatch is a fake here
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "submit", "--scheduler", scheduler, "t.py"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the folder you submit from" in proc.stderr and "line break" in proc.stderr
    assert os.listdir(work / ".hpcdist" / "jobs") == []


def test_profile_values_with_nul_are_refused_naming_the_key_and_the_file(tmp_path):
    from hpcdist.submission.profiles import ProfileError, load_profile

    path = tmp_path / "hpcdist.toml"
    path.write_text('[profiles.a]\nconda = "a\\u0000b"\n')
    with pytest.raises(ProfileError) as info:
        load_profile("a", [str(path)])
    assert str(path) in str(info.value) and "profiles.a.conda" in str(info.value) and "NUL" in str(info.value)


def test_bash_readonly_variables_are_refused_before_the_queue():
    with pytest.raises(ValidationError, match="--env 'UID'.*read-only"):
        build_spec({"script": "t.py", "env": ["UID=5"]}, check_files=False)
    build_spec({"script": "t.py", "propagate": ["UID"]}, check_files=False)  # passing it on is fine
    text = "export UID=5\necho after\n"
    proc = subprocess.run(["bash", "-euc", text], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "after" not in proc.stdout  # what the job would have done


def test_dataclass_fields_are_all_in_the_matrix():
    """A new JobSpec field must be added to FIELDS (or here, with the reason it takes no text)."""
    from hpcdist.submission.spec import JobSpec

    covered = {"job_name", "script", "script_args", "env", "propagate", "modules", "sources", "conda", "venv",
               "queue", "account", "qos", "directives", "output", "array", "dependency", "mail_user", "python",
               "mpiexec", "deepspeed_config", "walltime_s", "mem_mb", "nodes", "ssh_port", "launcher", "mpi",
               "pbs_spread", "dialect", "template_dir", "signal_margin_s", "hang_timeout_s", "hang_floor_s",
               "start_timeout_s", "requeue", "max_restarts", "min_nodes", "spare_nodes", "exclude_nodes",
               "project", "request", "select", "place", "chunk_resources", "job_resources", "gpu_type",
               "mem_per_gpu_mb", "constraint", "hint", "cpu_bind", "gpu_bind", "gpu_map", "env_expand", "setup_on",
               "container_image", "container_binds"}
    no_text = {"scheduler", "gpus_per_node", "procs_per_node", "cpus_per_proc", "exclusive", "no_ssh", "bare_select",
               "preflight",
               "deepspeed_runner", "notes", "container_runtime", "container_gpu",
               "template",  # a file read by jinja2 (its folder and name), never written into the script
               # The user's own shell lines, written as they are by design (and marked so): their file's
               # path is checked as one word (tests/submission/test_setup_binding.py runs them).
               "setup", "setup_file",
               "max_array_size", "max_running", "max_submit_jobs", "stage_env",  # numbers, a yes/no
               # A sweep's values reach the script in its case block: tests/sweeps/test_sweeps.py runs the
               # hostile corpus through it; --stage-dir takes plain characters and $VARIABLE parts only
               # (tests/submission/test_stage_env.py); the sweep file is read at submit, never written in.
               "sweep", "sweep_file", "stage_dir"}
    names = {f.name for f in dataclasses.fields(JobSpec)}
    assert names == covered | no_text, names ^ (covered | no_text)
