#!/usr/bin/env python3
"""The floor of ``hpcdist render``: what any Jinja-based tool pays for the same script.

``import jinja2``, one Environment built as hpcdist's is (the same loaders
over the same templates folder, a bytecode cache in ``$XDG_CACHE_HOME``,
strict undefined names, a shell-quoting ``finalize``), and one render of
``slurm.sh.j2`` (beside the schedulers since issue 27) with the values hpcdist gives it for
bench_floor.py's job (2 nodes x 4 GPUs under Slurm, 90 minutes, torchrun),
here as plain data: no flags parsed, no values checked, no hpcdist import.
It prints the same script as ``hpcdist render`` (bench_floor.py checks
that, byte for byte), so nothing is left out of the comparison but hpcdist's
own work.

Usage: ``python floor_render.py TEMPLATES_DIR COMMAND_LINE VERSION [--argparse]``; with
``--argparse``, also ``import argparse`` and one ArgumentParser that parses nothing: what a
command-line tool built on argparse pays before its first flag. Not a test.
"""

import os
import sys
from shlex import quote
from types import SimpleNamespace

import jinja2


class Raw(str):
    """Shell syntax already: printed as is."""


def finalize(value):
    return value if isinstance(value, Raw) else quote(str(value))


def main() -> None:
    templates, command_line, version = sys.argv[1:4]
    if sys.argv[4:] == ["--argparse"]:
        import argparse

        argparse.ArgumentParser(prog="hpcdist").parse_args([])
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "floor", "jinja2")
    os.makedirs(cache, exist_ok=True)
    ours = jinja2.FileSystemLoader(templates)
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.PrefixLoader({"hpcdist": ours}), jinja2.FileSystemLoader([]), ours]),
        bytecode_cache=jinja2.FileSystemBytecodeCache(cache), undefined=jinja2.StrictUndefined,
        finalize=finalize, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters.update(raw=Raw, module=Raw)
    spec = SimpleNamespace(
        scheduler="slurm", nodes=2, procs_per_node=4, gpus_per_node=4, walltime_s=5400, stops_on_warning=False,
        requeue=0, signal_margin=300, modules=(), sources=(), conda=None, venv=None, env=(), env_expand=())
    directives = ["#SBATCH --job-name=train", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4",
                  "#SBATCH --gpus-per-node=4", "#SBATCH --time=01:30:00", "#SBATCH --output=%x-%j.out"]
    launch = ('srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=4 --kill-on-bad-exit=1 \\\n'
              '  torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d \\\n'
              '  --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$HPCDIST_JOB_ID" \\\n'
              '  train.py')
    sys.stdout.write(env.get_template("slurm.sh.j2").render(
        spec=spec, version=version, command_lines=[command_line], scheduler=SimpleNamespace(name="slurm"),
        submit_command="sbatch <this file>", directives=directives, workdir=os.getcwd(), job_dir=None,
        job_files=None, image=None, container_lines=[], setup=SimpleNamespace(batch=[], every_node=[]),
        job_setup=Raw('python -m hpcdist job-setup --scheduler slurm --nodes 2 --dir "$run_dir"'),
        allocation_comment="The nodes; the master is the first node, its port from the job id.",
        launch_lines=[Raw(launch)], requeue=Raw(""),
        launch_comment="Start torchrun on every node with srun: 4 processes each, meeting at the master."))


if __name__ == "__main__":
    main()
