"""Adding a scheduler is its folder and one registration line (hpcdist/schedulers/__init__.py,
CONTRIBUTING.md "A new scheduler"): a toy scheduler, written at test time into a folder outside
the package and found through the package's path, renders a script, submits it and reads its
allocation, with no hpcdist file edited.

The toy's submit program is a FAKE (a shell script here): there is no toy scheduler to run; what
is real is every hpcdist part it goes through (the CLI, the registry, the template loader, the job
folder, the id grammar, the allocation reader and the in-job interface's check).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The one line a new scheduler adds to hpcdist/schedulers/__init__.py, run here by the test.
REGISTRATION = 'register("toy", "Toy", directive_prefix="#TOY")'

TOY = {
    "__init__.py": '''
        """Toy: a scheduler added at test time (tests/schedulers/test_new_scheduler.py).

        Where it runs: ``submit`` on the login node, ``job`` inside the job.
        """
        ''',
    "submit.py": '''
        """Toy's submit side: on the login node."""

        from hpcdist.schedulers.base import JobId, JobStatus
        from hpcdist.schedulers.batch import BatchScheduler
        from hpcdist.schedulers.rules import JobNameRules
        from hpcdist.schedulers.toy.ids import GRAMMAR
        from hpcdist.schedulers.toy.job import JOB_ID_VARIABLES


        class Toy(BatchScheduler):
            name = "toy"
            title = "Toy"
            submit_program = "toysub"
            queue_command = "toyq"
            cancel_command = "toydel"
            job_id_variable = JOB_ID_VARIABLES[0]
            recorded_id_shell = "${TOY_JOB_ID:-}"
            job_names = JobNameRules("Toy", "A-Za-z0-9_.-", "letters, digits, _ . -", 100)
            ids = GRAMMAR
            directive_prefix = "#TOY"
            directive_example = "--queue=q"

            def directives(self, spec):
                return [*spec.directives, self.directive(f"--nodes={spec.nodes}")]

            def spread(self, spec, words, hpcdist, mpi):
                return ["toyrun", *words]

            def parse_submission(self, proc):
                return JobId(id=proc.stdout.strip(), scheduler="toy")

            def query_statuses(self, jobs, job_ids):
                return [JobStatus("PENDING") for _ in jobs]


        def scheduler(dialect=None):
            return Toy()
        ''',
    "ids.py": '''
        """Toy's job ids (``toy-123``): on the login node."""

        from hpcdist.patterns import Pattern
        from hpcdist.schedulers.job_ids import IdGrammar

        _ID = Pattern(r"toy-([0-9]+)")


        class ToyIds(IdGrammar):
            title = "Toy"
            expected = "toy-123"

            def split(self, text):
                m = _ID.fullmatch(text)
                return (m.group(1), None) if m else None

            def matches(self, job, other):
                return other == job.id


        GRAMMAR = ToyIds()
        ''',
    "job.py": '''
        """Toy inside the job: its id and its hosts."""

        JOB_ID_VARIABLES = ("TOY_JOB_ID",)


        def allocation(environ, step=False, slots=True):
            hosts = environ.get("TOY_HOSTS")
            if hosts is None:
                return None
            from hpcdist.schedulers.job_hosts import Allocation, count_in_order

            return Allocation(count_in_order(hosts.split(",")), f"TOY_HOSTS={hosts}")


        NOT_SENT = (r"toysub: cannot reach the toy server",)
        MAYBE_SENT = (r"toysub: no answer",)
        NOT_CONFIGURED = (r"toysub: no toy server configured",)
        HINTS = ((r"toysub: unknown queue", "check --queue: `toyq -Q` lists the queues"),)
        ''',
    "toy.sh.j2": '''
        {% extends "hpcdist/job.sh.j2" %}
        {% block workdir %}
        cd "$TOY_SUBMIT_DIR"
        {% endblock %}
        ''',
}

#: The FAKE submit program: keeps the script it was given, answers with an id.
TOYSUB = """#!/bin/sh
cp "$1" "$TOY_SPOOL/submitted.sh"
echo toy-42
"""


def run_hpcdist(folder, args, env, cwd):
    """``hpcdist ARGS`` with the toy registered: its folder on the package's path and the line
    a new scheduler adds to hpcdist/schedulers/__init__.py, before the rest of hpcdist loads."""
    boot = (f"import sys, hpcdist.schedulers as schedulers; "
            f"schedulers.__path__.append({str(folder)!r}); schedulers.{REGISTRATION}; "
            f"from hpcdist.cli import main; raise SystemExit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", boot, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def write_toy(root):
    folder = root / "toy"
    folder.mkdir(parents=True)
    for name, text in TOY.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def count_in(path, pattern):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return {int(n) for n in re.findall(pattern, f.read())}


def package_changes() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "hpcdist"], cwd=ROOT,
                          capture_output=True, text=True).stdout


def test_the_recipe_and_the_toy_agree_on_the_files_a_scheduler_is():
    """CONTRIBUTING.md and hpcdist/schedulers/__init__.py say how many files a new queued
    scheduler's folder holds; the toy below is that folder."""
    contributing = count_in("CONTRIBUTING.md", r"a folder of (\d+) files")
    package = count_in("hpcdist/schedulers/__init__.py", r"a folder of (\d+) files")
    assert contributing == package == {len(TOY)}


def test_a_toy_scheduler_renders_submits_and_reads_its_allocation(tmp_path):
    before = package_changes()
    plugins = tmp_path / "plugins"
    write_toy(plugins)
    bin_dir, spool, work = tmp_path / "bin", tmp_path / "spool", tmp_path / "work"
    for folder in (bin_dir, spool, work):
        folder.mkdir()
    (bin_dir / "toysub").write_text(TOYSUB)
    (bin_dir / "toysub").chmod(0o755)
    (work / "train.py").write_text("print('hi')\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "PYTHONPATH": ROOT,
           "TOY_SPOOL": str(spool), "HPCDIST_HOME": str(tmp_path / "hpcdist-home")}

    job = ["--scheduler", "toy", "--nodes", "2", "--", "train.py"]
    rendered = run_hpcdist(plugins, ["render", *job], env, work)
    assert rendered.returncode == 0, rendered.stderr
    script = rendered.stdout
    assert "#TOY --nodes=2" in script and 'cd "$TOY_SUBMIT_DIR"' in script and "toyrun" in script

    submitted = run_hpcdist(plugins, ["submit", *job], env, work)
    assert submitted.returncode == 0, submitted.stderr
    assert "toy-42" in submitted.stdout + submitted.stderr
    assert "#TOY --nodes=2" in (spool / "submitted.sh").read_text()

    in_job = {**env, "TOY_JOB_ID": "toy-42", "TOY_HOSTS": "t1,t1,t2"}
    hosts = run_hpcdist(plugins, ["hostfile", "--format", "deepspeed"], in_job, work)
    assert hosts.returncode == 0, hosts.stderr
    assert hosts.stdout.splitlines() == ["t1 slots=2", "t2 slots=1"]

    assert package_changes() == before, "adding the toy changed files of the package"


def test_a_job_side_that_lacks_what_the_interface_names_is_told_so(tmp_path):
    plugins = tmp_path / "plugins"
    folder = write_toy(plugins)
    (folder / "job.py").write_text('"""Toy inside the job."""\n'
                                   'JOB_ID_VARIABLES = ("TOY_JOB_ID",)\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": ROOT, "TOY_HOSTS": "t1"}
    load = (f"import hpcdist.schedulers as s; s.__path__.append({str(plugins)!r}); "
            f"s.{REGISTRATION}; s.job_side('toy')")
    proc = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    lacks = "allocation, NOT_SENT, MAYBE_SENT, NOT_CONFIGURED, HINTS"
    assert f"job.py does not define {lacks}" in proc.stderr
