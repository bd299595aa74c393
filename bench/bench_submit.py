#!/usr/bin/env python3
"""Benchmark ``hpcdist submit --dry-run`` against torchx and submitit.

The same job everywhere: a script for 2 nodes x 4 GPUs, rendered and
printed, nothing submitted.  Every command runs as a subprocess from a
temporary folder that holds an empty ``train.py``, interleaved (A, B, C, ...,
then again, the starting command rotated each round), and the table shows the
median wall time after warm-up runs.  Bytecode caching is on for every timed
run (PYTHONDONTWRITEBYTECODE unset, PYTHONPYCACHEPREFIX in a temporary folder
that the warm-up runs fill), as for installed packages.

- ``python -c pass`` and the jinja2 floor run with the project's interpreter
  (``--python``, default: the repository's .venv), as does hpcdist;
- submitit and torchx run with the comparison interpreter (``--bench-python``,
  default: the one running this script, i.e. bench/.venv under run.sh).

Targets (from the issue): hpcdist at least 4x faster than torchx's dry run,
faster than ``import submitit`` alone, and within 1.5x of the jinja2 floor.

Prints a markdown section on stdout.  Not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"

TORCHX_FASTER = 4.0  # torchx / hpcdist at least this
FLOOR_WITHIN = 1.5  # hpcdist / jinja2 floor at most this

JINJA_FLOOR = "import jinja2; jinja2.Template('#PBS -N {{ n }}').render(n='x')"

# submitit has no public call that writes the sbatch script without
# submitting it: SlurmExecutor.submit() renders it and runs sbatch in one go.
# _make_sbatch_string() is the private function submit() uses for the text
# (SlurmExecutor._make_submission_file_text calls it with these arguments).
SUBMITIT_SCRIPT = """\
import sys, submitit
from submitit.slurm.slurm import _make_sbatch_string
ex = submitit.SlurmExecutor(folder=sys.argv[1])
ex.update_parameters(job_name="train", nodes=2, gpus_per_node=4, ntasks_per_node=4, time=90)
print(_make_sbatch_string(command=ex._submitit_command_str, folder=ex.folder, **ex.parameters))
"""

# torchx's Slurm dry run asks `sinfo` for the partition's memory.  A stub
# answers at once (as a cluster would, minus the round trip to slurmctld), so
# the timing does not depend on whether this machine has Slurm configured: a
# real sinfo with no controller to reach retries for about 9 s.  SlurmExecutor
# refuses to start unless `srun` is on PATH; its stub is never run.
SINFO_STUB = '#!/bin/sh\nprintf "PARTITION,MEMORY\\ngpu*,512000\\n"\n'
SRUN_STUB = '#!/bin/sh\necho "srun stub: the benchmark submits nothing" >&2\nexit 1\n'


class Case:
    def __init__(self, key, label, argv, *, expect=(), note=""):
        self.key = key
        self.label = label  # shown in the table
        self.argv = argv
        self.expect = expect  # substrings the output must contain
        self.note = note
        self.failed = ""  # why it cannot be timed, or ""
        self.check = ""  # what the output check found


def make_cases(python: str, bench_python: str, tmp: Path) -> list[Case]:
    torchx = Path(bench_python).parent / "torchx"
    hpcdist_args = ["submit", "--dry-run", "--scheduler", "pbs", "--nodes", "2",
                    "--gpus-per-node", "4", "--launcher", "torchrun", "train.py"]
    torchx_args = ["run", "--dryrun", "--scheduler", "slurm", "dist.ddp",
                   "-j", "2x4", "--gpu", "4", "--script", "train.py"]
    return [
        Case("pass", "`python -c pass`", [python, "-c", "pass"]),
        Case("import_jinja2", '`python -c "import jinja2"`', [python, "-c", "import jinja2"],
             note="for reference: the floor less its template"),
        Case("floor", f'jinja2 floor: `python -c "{JINJA_FLOOR}"`',
             [python, "-c", JINJA_FLOOR]),
        Case("hpcdist", "`hpcdist " + " ".join(hpcdist_args) + "`",
             [python, "-m", "hpcdist", *hpcdist_args],
             expect=("#PBS -l select=2:", "ngpus=4", "--nnodes=2", "--nproc-per-node=4"),
             note="`python -m hpcdist`, PBS script printed"),
        Case("import_submitit", '`python -c "import submitit"`',
             [bench_python, "-c", "import submitit"]),
        Case("submitit", "submitit: SlurmExecutor + `_make_sbatch_string` (private API)",
             [bench_python, "-c", SUBMITIT_SCRIPT, str(tmp / "submitit")],
             expect=("#SBATCH --nodes=2", "#SBATCH --gpus-per-node=4",
                     "#SBATCH --ntasks-per-node=4"),
             note="sbatch script printed; no public API renders it without submitting"),
        Case("torchx", "`torchx " + " ".join(torchx_args) + "`",
             [str(torchx), *torchx_args],
             expect=("#SBATCH", "--gpus-per-task=4", "--nnodes 2", "--nproc_per_node 4"),
             note="AppDef + sbatch script printed; `sinfo` stubbed"),
    ]


def child_env(pycache: str, stub_bin: Path, config_home: Path) -> dict[str, str]:
    env = dict(os.environ)
    # bytecode as for an installed package: written by the warm-up runs into a
    # temporary folder outside the repo, read by the timed ones
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    env.pop("PYTHONSTARTUP", None)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + old if old else "")
    env["PATH"] = str(stub_bin) + os.pathsep + env.get("PATH", "")
    # no user profile or tool configuration changes what gets rendered
    env["XDG_CONFIG_HOME"] = str(config_home)
    for name in ("SLURM_JOB_ID", "PBS_JOBID", "SLURM_CONF"):
        env.pop(name, None)
    return env


def check(case: Case, env: dict, cwd: Path) -> None:
    try:
        proc = subprocess.run(case.argv, capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=120)
    except FileNotFoundError:
        case.failed = f"not found: `{case.argv[0]}`"
        return
    except subprocess.TimeoutExpired:
        case.failed = "did not finish in 120 s"
        return
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        case.failed = ("not installed" if "ModuleNotFoundError" in last else last[:120])
        return
    missing = [s for s in case.expect if s not in proc.stdout]
    if missing:
        case.check = "output lacks " + ", ".join(f"`{s}`" for s in missing)
    elif case.expect:
        case.check = "2 nodes x 4 GPUs: " + ", ".join(f"`{s}`" for s in case.expect)


def time_cases(cases: list[Case], env: dict, cwd: Path, reps: int, warmup: int):
    times: dict[str, list[float]] = {c.key: [] for c in cases}
    for rep in range(warmup + reps):
        # rotate who goes first, so no command always follows the same one
        k = rep % len(cases)
        for case in cases[k:] + cases[:k]:
            start = time.perf_counter()
            subprocess.run(case.argv, env=env, cwd=cwd, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elapsed = time.perf_counter() - start
            if rep >= warmup:
                times[case.key].append(elapsed)
    return {key: statistics.median(ts) for key, ts in times.items()}


def parse_importtime(stderr: str) -> dict[str, tuple[int, int, int]]:
    """-X importtime lines -> {module: (self us, cumulative us, depth)}."""
    out = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:"):].split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        out[name.strip()] = (int(self_us), int(cum_us), depth)
    return out


def import_profile(hpcdist: Case, floor: Case, env: dict, cwd: Path, runs: int = 7) -> list[str]:
    """Medians over a few `-X importtime` runs of the hpcdist dry run and the floor."""
    samples: dict[str, list[dict]] = {"hpcdist": [], "floor": []}
    for _ in range(runs):
        for key, case in (("hpcdist", hpcdist), ("floor", floor)):
            argv = [case.argv[0], "-X", "importtime", *case.argv[1:]]
            proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
            samples[key].append(parse_importtime(proc.stderr))

    def medians(runs_: list[dict]) -> dict[str, tuple[float, float, int]]:
        names = set().union(*runs_)
        return {n: (statistics.median(r[n][0] for r in runs_ if n in r),
                    statistics.median(r[n][1] for r in runs_ if n in r),
                    next(r[n][2] for r in runs_ if n in r)) for n in names}

    hp = medians(samples["hpcdist"])
    fl = medians(samples["floor"])
    top = sorted(hp.items(), key=lambda kv: -kv[1][1])[:10]
    extra = sorted(((n, v) for n, v in hp.items() if n not in fl), key=lambda kv: -kv[1][0])
    lines = ["### Import profile of the hpcdist dry run", ""]
    lines.append(
        f"`python -X importtime -m hpcdist submit --dry-run ...`, median of {runs} runs "
        "(bytecode cached).  `-X importtime` adds its own overhead; a module is charged to "
        "the module that imports it first (\"`__main__` or a function\": not imported by "
        "another module)."
    )
    lines.append("")
    lines.append("| module (top 10 cumulative) | cumulative | self | imported by |")
    lines.append("|---|---|---|---|")
    order = list(samples["hpcdist"][0])  # import order of one run, for the parent
    for name, (self_us, cum_us, depth) in top:
        parent = "`__main__` or a function"
        if depth > 0 and name in order:
            # the parent is the next module after it in the list at depth - 1
            run0 = samples["hpcdist"][0]
            for later in order[order.index(name) + 1:]:
                if run0[later][2] == depth - 1:
                    parent = f"`{later}`"
                    break
        lines.append(f"| `{name}` | {cum_us / 1e3:.1f} ms | {self_us / 1e3:.1f} ms | {parent} |")
    lines.append("")
    total = sum(v[0] for _, v in extra) / 1e3
    listed = ", ".join(f"`{n}` {v[0] / 1e3:.1f}" for n, v in extra[:12])
    lines.append(
        f"Modules the dry run imports that the jinja2 floor does not: {len(extra)}, "
        f"{total:.1f} ms of self time in all; the largest (ms): {listed}."
    )
    lines.append("")
    return lines


def dist_version(python: str, name: str) -> str:
    code = f"from importlib.metadata import version; print(version({name!r}))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "not installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30,
                        help="timed repetitions per command (median; at least 15)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--python", default=str(PROJECT_PYTHON),
                        help="the project's interpreter: pass, jinja2 floor, hpcdist")
    parser.add_argument("--bench-python", default=sys.executable,
                        help="interpreter with submitit and torchx")
    args = parser.parse_args(argv)
    # absolute (cases run from a temporary folder), symlinks kept (a venv's python is one)
    args.python = os.path.abspath(args.python)
    args.bench_python = os.path.abspath(args.bench_python)
    reps = max(15, args.reps)
    warmup = max(1, args.warmup)

    tmpdir = tempfile.TemporaryDirectory(prefix="hpcdist-bench-submit-")
    tmp = Path(tmpdir.name)
    work = tmp / "job"
    work.mkdir()
    (work / "train.py").write_text("")
    stub_bin = tmp / "bin"
    stub_bin.mkdir()
    for name, text in (("sinfo", SINFO_STUB), ("srun", SRUN_STUB)):
        (stub_bin / name).write_text(text)
        (stub_bin / name).chmod(0o755)
    (tmp / "config").mkdir()
    (tmp / "submitit").mkdir()
    env = child_env(str(tmp / "pycache"), stub_bin, tmp / "config")

    cases = make_cases(args.python, args.bench_python, tmp)
    for case in cases:
        check(case, env, work)
    runnable = [c for c in cases if not c.failed]
    load_before = os.getloadavg()[0]
    medians = time_cases(runnable, env, work, reps, warmup)
    load_after = os.getloadavg()[0]
    by_key = {c.key: c for c in cases}
    profile = []
    if not by_key["hpcdist"].failed and not by_key["floor"].failed:
        profile = import_profile(by_key["hpcdist"], by_key["floor"], env, work)
    tmpdir.cleanup()

    versions = {
        "hpcdist": dist_version(args.python, "hpcdist"),
        "jinja2": dist_version(args.python, "jinja2"),
        "submitit": dist_version(args.bench_python, "submitit"),
        "torchx": dist_version(args.bench_python, "torchx"),
    }
    bare = medians.get("pass")
    lines = ["## Submit dry run: hpcdist, torchx, submitit", ""]
    lines.append(
        f"Each command as a subprocess from a folder holding an empty `train.py`, stdout "
        f"and stderr to /dev/null; median of {reps} interleaved rounds (first command "
        f"rotated each round) after {warmup} warm-up rounds; Python timer "
        f"(subprocess.run, perf_counter); Python {platform.python_version()}; bytecode "
        "cached (PYTHONDONTWRITEBYTECODE unset, PYTHONPYCACHEPREFIX in a temporary "
        "folder).  "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f".  `pass`, the floor and hpcdist run with `{args.python}`; submitit and "
        f"torchx with `{args.bench_python}` (the same CPython, another venv).  "
        "The job: 2 nodes x 4 GPUs, torchrun; each output is checked before timing.  "
        f"Load average (1 min) before / after the timing: {load_before:.2f} / "
        f"{load_after:.2f} on {os.cpu_count()} CPUs (other work on the machine shows here)."
    )
    lines.append("")
    lines.append("| command | median | vs `python -c pass` | output check | notes |")
    lines.append("|---|---|---|---|---|")
    for case in cases:
        if case.failed:
            lines.append(f"| {case.label} | {case.failed} | | | {case.note} |")
            continue
        value = medians[case.key]
        ratio = f"{value / bare:.2f}x" if bare else ""
        lines.append(f"| {case.label} | {value * 1e3:.1f} ms | {ratio} | {case.check} "
                     f"| {case.note} |")
    lines.append("")

    def target(text: str, a: str, b: str, ok) -> str:
        if a not in medians or b not in medians:
            return f"| {text} | | n/a (not measured) |"
        r = medians[a] / medians[b]
        return f"| {text} | {r:.2f}x | " + ("yes" if ok(r) else "**no**") + " |"

    lines.append("| target | ratio | met |")
    lines.append("|---|---|---|")
    lines.append(target(f"hpcdist at least {TORCHX_FASTER:g}x faster than torchx "
                        "(torchx / hpcdist)", "torchx", "hpcdist",
                        lambda r: r >= TORCHX_FASTER))
    lines.append(target("hpcdist faster than `import submitit` alone "
                        "(import submitit / hpcdist)", "import_submitit", "hpcdist",
                        lambda r: r > 1.0))
    lines.append(target(f"hpcdist within {FLOOR_WITHIN:g}x of the jinja2 floor "
                        "(hpcdist / floor)", "hpcdist", "floor",
                        lambda r: r <= FLOOR_WITHIN))
    lines.append("")
    lines.append(
        "Notes: submitit has no public way to produce its sbatch script without "
        "submitting (`SlurmExecutor.submit()` renders and runs `sbatch` in one step), so "
        "its row calls the private `submitit.slurm.slurm._make_sbatch_string()` with the "
        "executor's parameters, as `submit()` does.  torchx's Slurm dry run runs "
        "`sinfo --format %P,%m` for the partition memory; a stub `sinfo` on PATH answers "
        "at once (a real cluster adds a controller round trip, so torchx's figure is a "
        "lower bound).  A stub `srun` is on PATH because `SlurmExecutor` refuses to "
        "start without one; it is never run."
    )
    lines.append("")
    lines.extend(profile)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
