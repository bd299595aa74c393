"""Hostile strings, and what a job script must do with them: carry them, or refuse them.

One corpus for every test that puts user values into a job script: rendered
in-process (tests/submission/test_hostile.py), run here under the local backend, and
submitted on a real scheduler (the test cluster). Each payload that a shell
would execute, were it ever pasted unquoted, creates a *sentinel* file; the
corpus takes the sentinel's path as a parameter, so a test checks that no
sentinel exists after the job::

    from hostile import corpus, directive_lines, expected_directive_lines

    payloads = corpus("/shared/scratch/hostile-1234/PWNED")
    values = hostile_job_values(payloads, {"scheduler": "slurm", "script": "dump_argv.py", ...})
    spec = build_spec(values)
    assert directive_lines(render(spec), "slurm") == expected_directive_lines(spec)
    ... submit, wait ...
    assert not os.path.exists(sentinel)
    assert dumped["argv"] == list(spec.script_args)          # DUMP_PROGRAM's output

Helpers:

- :func:`corpus` -- the payloads (:class:`Payload`: id, value, whether it would execute);
- :func:`directive_lines` -- the lines a scheduler reads as directives, by its own rule
  (from the top, up to the first line that is neither blank nor a comment);
- :func:`expected_directive_lines` -- the directive lines a spec must give, written out
  independently of the templates (update it with the templates' directives);
- :func:`hostile_job_values` -- one job that carries every payload a field accepts in
  every list-valued field (script arguments, ``--env`` values, modules, sources, directives);
- :data:`DUMP_PROGRAM` -- a tiny training "program" that writes its argv and its
  ``HOSTILE_*`` variables as JSON, so a test compares them with what was asked;
- :data:`STUB` and :func:`install_stubs` -- a stand-in for launchers, ``module`` and
  ``conda`` where the real one cannot run here (it records its argv and environment).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass

#: Each scheduler's directive prefix (the local backend reads none).
DIRECTIVE_PREFIX = {"slurm": "#SBATCH", "pbs": "#PBS"}


@dataclass(frozen=True)
class Payload:
    """One hostile string. ``executes``: a shell running it unquoted would create the sentinel."""

    id: str
    value: str
    executes: bool

    @property
    def argv_safe(self) -> bool:
        """Can be an argument or an environment value at all (no NUL, encodable as UTF-8)."""
        return "\0" not in self.value and _utf8(self.value)

    @property
    def one_line(self) -> bool:
        return "\n" not in self.value and "\r" not in self.value

    @property
    def file_name_safe(self) -> bool:
        """Can name a file or folder below the current folder (each part at most 255 bytes)."""
        if not self.argv_safe or not self.value or self.value.startswith("/"):
            return False
        parts = self.value.split("/")
        return all(p not in ("", ".", "..") and len(p.encode()) <= 255 for p in parts)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./-]+")


def corpus(sentinel: str) -> list[Payload]:
    """The hostile strings; those that would execute create ``sentinel`` (a plain absolute path)."""
    if not (os.path.isabs(sentinel) and _PLAIN_PATH.fullmatch(sentinel)):
        raise ValueError(f"the sentinel must be a plain absolute path ([A-Za-z0-9_./-]), not {sentinel!r}")
    s = sentinel
    executing = [
        ("dollar-paren", f"$(touch {s})"),
        ("backticks", f"`touch {s}`"),
        ("semicolon", f"; touch {s}"),
        ("and", f"&& touch {s}"),
        ("or", f"|| touch {s}"),
        ("pipe", f"| touch {s}"),
        ("background", f"& touch {s}"),
        ("redirect", f"> {s}"),
        ("newline", f"x\ntouch {s}"),
        ("crlf", f"x\r\ntouch {s}"),
        ("single-quote-breakout", f"'; touch {s}; '"),
        ("double-quote-breakout", f'"; touch {s}; "'),
        ("backslash-quote", f"\\'; touch {s} #"),
        ("ifs", f"$(touch${{IFS}}{s})"),
        ("process-substitution", f"<(touch {s})"),
        ("nested", f"x' \"$(touch {s})\" `touch {s}` '"),
        ("directive-injection", f"x\n#SBATCH --output={s}\n#PBS -o {s}\ntouch {s}"),
        ("eval", f"$(eval 'touch {s}')"),
    ]
    # Executes nothing in a shell, but a program or a scheduler reading it as an option writes there.
    option = [("option-injection", f"-o {s}")]
    inert = [
        ("empty", ""),
        ("space", " "),
        ("spaces-and-tab", "a  b\tc"),
        ("single-quote", "'"),
        ("double-quote", '"'),
        ("backslash", "\\"),
        ("trailing-backslash", "x\\"),
        ("home", "$HOME"),
        ("ifs-literal", "${IFS}"),
        ("ansi-c", "$'\\x41'"),
        ("arithmetic", "$((6*7))"),
        ("bang", "!"),
        ("history", "!! !-1"),
        ("glob", "*"),
        ("glob-class", "?[a-z]"),
        ("brace", "{a,b}"),
        ("hash", "#"),
        ("comment", "x # not a comment"),
        ("percent", "%j %x %% %A"),
        ("tilde", "~"),
        ("tilde-user", "~root/x"),
        ("double-dash", "--"),
        ("dash", "-"),
        ("help", "--help"),
        ("equals", "a=b"),
        ("keyword", "time"),
        ("parentheses", "(x)"),
        ("angles", "<x>"),
        ("unicode", "日本語 ünïcödé"),
        ("rtl-emoji", "\u202eevil\u202c 🚀"),
        ("unicode-line-breaks", "a\u2028b\u2029c\x85d"),
        ("controls", "a\x0b\x0c\x1b[31mred\x7fb"),
        ("long", "x" * 100_000),
        ("nul", "a\0b"),
        ("not-utf8", "a\udcffb"),  # the byte 0xff, as Python decodes it from argv
    ]
    return ([Payload(i, v, True) for i, v in executing] + [Payload(i, v, False) for i, v in option]
            + [Payload(i, v, False) for i, v in inert])


def directive_lines(script: str, scheduler: str) -> list[str]:
    """The lines ``scheduler`` reads as directives in ``script``.

    sbatch and qsub read the ``#SBATCH``/``#PBS`` lines from the top of the
    script up to the first line that is neither blank nor a comment; the rest
    is ignored ("before any executable commands", sbatch(1), qsub(1B)). Lines
    are split on ``\\n`` only, as they do (not on ``\\r`` or U+2028).
    """
    prefix = DIRECTIVE_PREFIX.get(scheduler)
    out = []
    for line in script.split("\n"):
        if line.strip() and not line.lstrip().startswith("#"):
            break
        if prefix and line.startswith(prefix) and (len(line) == len(prefix) or line[len(prefix)] in " \t"):
            out.append(line)
    return out


def expected_directive_lines(spec) -> list[str]:
    """The directive lines ``spec`` must render to, in order: the user's raw
    directives first, then hpcdist's own, every value from a flag quoted as its
    scheduler reads it (sbatch: "double quotes" where needed; qsub: shell quoting).

    Written out here, not derived from the templates, so that a value that
    breaks out of its line (or a template that drops one) shows. Update it
    with the templates' directives (the golden files change then too).
    """
    from hpcdist.schedulers.pbs.submit import format_pbs_mem, format_pbs_walltime
    from hpcdist.schedulers.slurm.submit import format_slurm_mem, format_slurm_time

    q = shlex.quote
    lines = list(spec.directives)
    if spec.scheduler == "slurm":
        d = "#SBATCH "

        def q(value):  # sbatch's own rule for an #SBATCH value: "double quotes", no shell quoting
            text = str(value)
            return text if text and not any(c.isspace() or c in "'\"\\" for c in text) else f'"{text}"'

        lines += [d + f"--job-name={q(spec.job_name)}", d + f"--nodes={spec.nodes}",
                  d + f"--ntasks-per-node={spec.procs_per_node}"]
        lines += [d + "--gpus-per-node=" + (f"{q(spec.gpu_type)}:" if spec.gpu_type else "")
                  + str(spec.gpus_per_node)] if spec.gpus_per_node else []
        lines += [d + f"--cpus-per-task={spec.cpus_per_proc}"] if spec.cpus_per_proc else []
        lines += [d + f"--mem={format_slurm_mem(spec.mem_mb)}"] if spec.mem_mb is not None else []
        lines += [d + f"--mem-per-gpu={format_slurm_mem(spec.mem_per_gpu_mb)}"] if spec.mem_per_gpu_mb else []
        lines += [d + f"--time={format_slurm_time(spec.walltime_s)}"] if spec.walltime_s else []
        lines += [d + f"--partition={q(spec.queue)}"] if spec.queue else []
        lines += [d + f"--account={q(spec.account)}"] if spec.account else []
        lines += [d + f"--qos={q(spec.qos)}"] if spec.qos else []
        # sbatch reads "double quotes" in #SBATCH lines, and a constraint's characters need none.
        lines += [d + f"--constraint={spec.constraint}"] if spec.constraint else []
        lines += [d + "--exclude=" + ",".join(spec.excluded_nodes)] if spec.exclude_nodes else []
        lines += [d + f"--hint={spec.hint}"] if spec.hint else []
        out = spec.output or "%x-%j.out"  # sbatch reads "double quotes" there, not single ones
        lines += [d + "--output=" + (out if out and not any(c.isspace() or c in "'\"\\" for c in out)
                                     else f'"{out}"')]
        lines += [d + f"--array={q(spec.array)}"] if spec.array else []
        lines += [d + f"--dependency={q(spec.dependency)}"] if spec.dependency else []
        lines += [d + f"--mail-user={q(spec.mail_user)}", d + "--mail-type=END,FAIL"] if spec.mail_user else []
        lines += [d + "--exclusive"] if spec.exclusive else []
        lines += [d + "--open-mode=append"]  # Slurm's own requeue appends to the log
    elif spec.scheduler == "pbs":
        d = "#PBS "
        ncpus = spec.procs_per_node * (spec.cpus_per_proc or 1)
        lines += [d + f"-N {q(spec.job_name)}"]
        if spec.dialect == "torque":
            lines += [d + f"-l nodes={spec.nodes}:ppn={ncpus}"
                      + (f":gpus={spec.gpus_per_node}" + (f":{spec.gpu_type}" if spec.gpu_type else "")
                         if spec.gpus_per_node else "")]
            lines += [d + f"-l mem={format_pbs_mem(spec.mem_mb * spec.nodes)}"] if spec.mem_mb else []
        elif spec.request == "job-wide":
            lines += [d + f"-l ncpus={ncpus * spec.nodes}"]
            lines += [d + f"-l ngpus={spec.gpus_per_node * spec.nodes}"] if spec.gpus_per_node else []
            lines += [d + f"-l mem={format_pbs_mem(spec.mem_mb * spec.nodes)}"] if spec.mem_mb else []
            lines += [d + f"-l place={q(spec.place)}"] if spec.place else []
        else:
            counts = "" if spec.bare_select else (
                f":ncpus={ncpus}:mpiprocs={spec.procs_per_node}"
                + (f":ngpus={spec.gpus_per_node}" if spec.gpus_per_node else "")
                + (f":mem={format_pbs_mem(spec.mem_mb)}" if spec.mem_mb else ""))
            model = [f"gpu_type={spec.gpu_type}"] if spec.gpu_type else []
            select = spec.select or f"{spec.nodes}{counts}" + "".join(
                ":" + r for r in model + list(spec.chunk_resources))
            lines += [d + f"-l select={q(select)}",
                      d + "-l place=" + q(spec.place or "scatter") + (":excl" if spec.exclusive else "")]
        lines += [d + f"-l {q(r)}" for r in spec.job_resources]
        lines += [d + f"-l walltime={format_pbs_walltime(spec.walltime_s)}"] if spec.walltime_s else []
        lines += [d + f"-q {q(spec.queue)}"] if spec.queue else []
        lines += [d + f"-A {q(spec.account)}"] if spec.account else []
        lines += [d + f"-P {q(spec.project)}"] if spec.project else []
        lines += [d + "-j oe"]
        lines += [d + "-k oed"] if spec.dialect != "torque" else []  # PBS Pro: the log written in place
        lines += [d + f"-o {q(spec.output)}"] if spec.output else []
        lines += [d + ("-t " if spec.dialect == "torque" else "-J ") + q(spec.array)] if spec.array else []
        lines += [d + f"-W {q('depend=' + spec.dependency)}"] if spec.dependency else []
        lines += [d + f"-M {q(spec.mail_user)}", d + "-m ae"] if spec.mail_user else []
    return lines


def accepted(values: dict) -> bool:
    """Whether the job spec takes ``values`` (files are not checked)."""
    from hpcdist.submission.spec import build_spec
    from hpcdist.validate import ValidationError

    try:
        build_spec(values, check_files=False)
    except ValidationError:
        return False
    return True


def hostile_job_values(payloads: list[Payload], base: dict, *, sources_exist: bool = True) -> dict:
    """``base`` (job spec values) plus every payload that each list-valued field accepts.

    Script arguments get every payload (in order), ``--env`` gets
    ``HOSTILE_<n>=<payload n>``, modules and directives every payload the spec
    accepts there (a directive as ``--comment=<payload>`` on Slurm, ``-v
    HOSTILE=<payload>`` on PBS). Sources only with ``sources_exist`` and for
    payloads that can name a file: the caller creates them below the working
    folder (see :func:`write_source_files`). Each payload is tried alone first,
    so one that a field refuses does not keep the others out.
    """
    values = dict(base)
    values["script_args"] = list(base.get("script_args", ()))
    values["env"] = list(base.get("env", ()))
    for key in ("modules", "sources", "directives"):
        values[key] = list(base.get(key, ()))

    def take(key, item):
        trial = dict(values, **{key: values[key] + [item]})
        if accepted(trial):
            values[key].append(item)

    for n, p in enumerate(payloads):
        take("script_args", p.value)
        take("env", f"HOSTILE_{n}={p.value}")
        take("modules", p.value)
        if sources_exist and p.file_name_safe:
            take("sources", p.value)
        scheduler = base.get("scheduler", "local")
        if scheduler == "slurm":
            take("directives", f"--comment={p.value}")
        elif scheduler == "pbs":
            take("directives", f"-v HOSTILE={p.value}")
    return values


#: Written into each sourced file: records which path bash sourced.
SOURCE_FILE = 'printf "%s\\0" "${BASH_SOURCE[0]}" >> "$STUB_CALLS/sourced"\n'


def write_source_files(folder: str, paths) -> None:
    """Create each relative ``path`` below ``folder`` as a file that records its sourcing."""
    for path in paths:
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(SOURCE_FILE)


#: A stand-in for a program that cannot run here (a launcher, ``module``, ``conda``):
#: it records its name, argv and environment in ``$STUB_CALLS``; when its
#: argv holds ``bash -c CMD`` (a per-node agent line) it runs CMD as node 0 would.
STUB = r"""#!/bin/bash
record="$STUB_CALLS/call.${EPOCHREALTIME/[.,]/}.$$.$RANDOM"  # names sort in time order
printf '%s\0' "${0##*/}" "$@" > "$record.argv"
env -0 > "$record.env"
args=("$@")
if [ "${args[*]:0:3}" = "-m hpcdist job-setup" ]; then  # a stub python: the job's set-up writes job.env
  for ((i = 3; i + 1 < ${#args[@]}; i++)); do [ "${args[i]}" = --dir ] && dir=${args[i+1]}; done
  { printf 'export MASTER_ADDR=n1 MASTER_PORT=29500 HPCDIST_JOB_ID=4242 '
    printf 'HPCDIST_NODEFILE=%s/nodes HPCDIST_HOSTFILE=%s/hostfile\nmpi_env=()\n' "$dir" "$dir"
  } > "$dir/job.env"
  exit 0
fi
for ((i = 0; i + 2 < ${#args[@]}; i++)); do
  if [ "${args[i]}" = bash ] && [ "${args[i+1]}" = -c ]; then
    SLURM_NODEID=0 OMPI_COMM_WORLD_RANK=0 exec bash -c "${args[i+2]}"
  fi
done
exit 0
"""


def install_stubs(bin_dir: str, names) -> None:
    os.makedirs(bin_dir, exist_ok=True)
    for name in names:
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            f.write(STUB)
        os.chmod(path, 0o755)


def read_calls(calls_dir: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """The stub calls recorded in ``calls_dir``: ``(name, argv, environment)``, oldest first."""
    calls = []
    for name in sorted(os.listdir(calls_dir)):
        if not name.endswith(".argv"):
            continue
        base = os.path.join(calls_dir, name[:-5])
        with open(base + ".argv", "rb") as f:
            words = [w.decode() for w in f.read().split(b"\0")[:-1]]
        with open(base + ".env", "rb") as f:
            env = dict(item.decode().split("=", 1) for item in f.read().split(b"\0")[:-1])
        calls.append((words[0], words[1:], env))
    return calls


def read_sourced(calls_dir: str) -> list[str]:
    try:
        with open(os.path.join(calls_dir, "sourced"), "rb") as f:
            return [w.decode() for w in f.read().split(b"\0")[:-1]]
    except FileNotFoundError:
        return []


#: A training "program": writes its arguments and its HOSTILE_* variables as
#: JSON into the folder ``$DUMP_DIR`` (one file per process).
DUMP_PROGRAM = """\
import json, os, sys
record = {"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith("HOSTILE_")}}
with open(os.path.join(os.environ["DUMP_DIR"], f"{os.getpid()}.json"), "w") as f:
    json.dump(record, f)
"""


def read_dumps(folder: str) -> list[dict]:
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                out.append(json.load(f))
    return out
