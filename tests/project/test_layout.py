"""The package's shape, as the layout in CONTRIBUTING.md promises it: small modules, each package
saying what it owns, no import circles, and scheduler and launcher knowledge each in its own
place; and tests/ mirroring it (docs/testing.md, "Where a test lives")."""

from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "hpcdist")
#: "No module over about 500 lines."
MAX_LINES = 520


def modules() -> dict[str, str]:
    """Module name -> file, for every module of the package."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[module.removesuffix(".__init__")] = path
    return found


def imports_of(module: str, path: str, known: dict[str, str]) -> set[str]:
    """The package's modules that ``module`` imports, at the top or inside functions."""
    out = set()
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        # The root package is imported before any of its modules anyway (for __version__).
        out.update(n for n in names if n in known and n not in (module, "hpcdist"))
    out.update(m for m in name_keyed_loads(open(path, encoding="utf-8").read(), known) if m != module)
    return out


#: Loads by name at the call: each is an edge to every module it may load.
_NAME_KEYED = (
    (re.compile(r"\bschedulers\.get\(|get_scheduler\(|schedulers\.all_schedulers\("),
     r"hpcdist\.schedulers\.[a-z]+\.submit$"),
    (re.compile(r"\blaunchers\.get\("), r"hpcdist\.launchers\.[a-z]+$"),
    # hpcdist.schedulers.job_side(name) and part(name, "ids"/"limits"/"submit"): the one loader.
    (re.compile(r"\bjob_side\("), r"hpcdist\.schedulers\.[a-z]+\.job$"),
    (re.compile(r"\bpart\([^)]*\"submit\"\)"), r"hpcdist\.schedulers\.[a-z]+\.submit$"),
    (re.compile(r"\bpart\([^)]*\"ids\"\)"), r"hpcdist\.schedulers\.[a-z]+\.ids$"),
    (re.compile(r"\bpart\([^)]*\"limits\"\)"), r"hpcdist\.schedulers\.[a-z]+\.limits$"),
    (re.compile(r"__import__\(f\"\{__name__\}\.\{name\}\""), None),  # a package's own modules (launchers)
)


def name_keyed_loads(text: str, known: dict) -> set[str]:
    """The modules a registry loads by name (``schedulers.get(name)``, ``launchers.get(name)``,
    ``hpcdist.schedulers.job_side(name)`` and ``part(name, ...)``): the import circle test counts
    them as edges."""
    out = set()
    for call, targets in _NAME_KEYED:
        if targets is None or not call.search(text):
            continue
        wanted = re.compile(targets)
        out.update(m for m in known if wanted.match(m) and not m.endswith(("base", "batch", "rules", "retry")))
    return out


def test_no_module_is_over_about_500_lines():
    sizes = {m: sum(1 for _ in open(p, encoding="utf-8")) for m, p in modules().items()}
    big = {m: n for m, n in sizes.items() if n > MAX_LINES}
    assert big == {}, f"modules over {MAX_LINES} lines: {big}"


def test_every_module_opens_with_a_docstring_that_says_what_it_owns():
    missing = [m for m, p in modules().items()
               if not ast.get_docstring(ast.parse(open(p, encoding="utf-8").read()))]
    assert missing == []


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports: at the top, inside functions (a lazy import only
    hides a circle until the call), a package's to its own modules, and every module a registry
    loads by name (:func:`name_keyed_loads`)."""
    known = modules()
    return {m: imports_of(m, p, known) for m, p in known.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    """No module imports, even lazily or by name, one that imports it back: the launchers, the
    containers, the allocation readers, the rank path, and the schedulers too. Their registry
    (:mod:`hpcdist.schedulers.registry`: ``get`` and the checks by name) sits above the scheduler
    modules; the package holds the names they share, the id grammars sit below base, and the job
    folder asks a scheduler's in-job module what its ids look like."""
    assert [sorted(group) for group in circles(import_graph())] == []


def test_launchers_and_schedulers_point_one_way():
    """Launchers and containers import no scheduler, schedulers no launcher (a name-keyed load
    counts): what one needs of the other is handed in (hpcdist.submission.spec, render). A scheduler
    may use the containers (Slurm's pyxis and Shifter directives): they are below both."""
    graph = import_graph()
    wrong = sorted(f"{m} -> {n}" for m, targets in graph.items() for n in targets
                   if (m.startswith(("hpcdist.launchers", "hpcdist.containers")) and n.startswith("hpcdist.schedulers"))
                   or (m.startswith("hpcdist.schedulers") and n.startswith("hpcdist.launchers")))
    assert wrong == []


#: Where code may name a scheduler: its own folder, and code that reads what other tools set
#: (submitit's executor name, the variables a launcher exports in the job).
SCHEDULER_HOMES = ("hpcdist.schedulers", "hpcdist.env", "hpcdist.api")
_BRANCH = re.compile(r"""(?:==|!=|\bin\b)\s*\(?[^)\n]*["'](?:slurm|pbs|torque|pro|local)["']""")


@pytest.mark.parametrize("module", sorted(modules()))
def test_only_a_schedulers_home_branches_on_its_name(module):
    if module.startswith(SCHEDULER_HOMES):
        return
    lines = [f"{n}: {line.strip()}" for n, line in enumerate(open(modules()[module], encoding="utf-8"), 1)
             if _BRANCH.search(line.split("#")[0]) and not line.lstrip().startswith(("#", '"', "'"))]
    assert lines == [], f"{module} decides by a scheduler's name; ask the scheduler instead"


def test_options_are_at_the_bottom():
    """The job options' table imports no scheduler, launcher or container module: their names
    and checks are named there, and looked up where they are declared."""
    known = modules()
    below = imports_of("hpcdist.submission.options", known["hpcdist.submission.options"], known)
    assert not [m for m in below if m.startswith(("hpcdist.schedulers", "hpcdist.launchers", "hpcdist.containers"))]


def test_the_registries_name_what_their_modules_hold():
    """Choices the CLI lists without importing a module (its --help stays fast) match the module,
    and so does what the schedulers' shared checks say of another scheduler without loading it."""
    from hpcdist import launchers, schedulers
    from hpcdist.launchers.mpi import FLAVOURS
    from hpcdist.schedulers import registry
    from hpcdist.schedulers.base import _grammars
    from hpcdist.schedulers.pbs.submit import DIALECTS

    assert tuple(DIALECTS) == schedulers.DIALECTS["pbs"]
    assert set(FLAVOURS) == {"openmpi", "mpich", "intel", "pals"}
    assert launchers.DEEPSPEED_RUNNERS == ("pdsh", "openmpi", "slurm")
    assert [launchers.get(name).name for name in launchers.NAMES] == list(launchers.NAMES)
    every = registry.all_schedulers()
    assert [s.name for s in every] == list(schedulers.NAMES)
    assert {s.name: s.title for s in every} == schedulers.TITLES
    assert {s.name: s.directive_prefix for s in every if s.directive_prefix} == schedulers.DIRECTIVE_PREFIXES
    assert tuple(s.name for s in every if s.elastic_agents) == schedulers.ELASTIC
    assert tuple(s.name for s in every if s.dialects) == tuple(schedulers.DIALECTS)
    assert tuple(s.name for s in every if s.queued) == schedulers.QUEUED == tuple(_grammars())
    assert all(s.ids is _grammars()[s.name] for s in every if s.queued)


#: The package root holds the public faces and little else (the house, issue 38).
MAX_ROOT_MODULES = 15


def test_the_package_root_holds_at_most_fifteen_modules():
    root = sorted(name for name in os.listdir(PACKAGE) if name.endswith(".py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at hpcdist/: {root}"


def folders() -> list[str]:
    """The package's folders that hold code or data, as ``hpcdist/<name>/``."""
    return sorted(f"hpcdist/{name}/" for name in os.listdir(PACKAGE)
                  if os.path.isdir(os.path.join(PACKAGE, name)) and name != "__pycache__")


def test_every_folder_says_where_its_code_runs():
    """Each place and feature is a folder whose ``__init__`` says where its code runs."""
    places = ("login node", "job script", "inside the job", "rank", "laptop", "node", "training")
    silent = []
    for folder in folders():
        init = os.path.join(ROOT, folder, "__init__.py")
        if not os.path.exists(init):
            continue  # data only (the site presets)
        doc = (ast.get_docstring(ast.parse(open(init, encoding="utf-8").read())) or "").lower()
        if not any(place in doc for place in places):
            silent.append(folder)
    assert silent == [], f"these folders' __init__ do not say where their code runs: {silent}"


def test_contributing_names_exactly_the_trees_folders():
    text = open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8").read()
    layout = text.split("<!-- --8<-- [start:layout] -->")[1].split("<!-- --8<-- [end:layout] -->")[0]
    named = sorted(set(re.findall(r"^(hpcdist/[a-z_]+/)", layout, re.M)))
    assert named == folders()
    modules_named = sorted(set(re.findall(r"^(hpcdist/[a-z_]+\.py)", layout, re.M)))
    assert modules_named == sorted(f"hpcdist/{n}" for n in os.listdir(PACKAGE) if n.endswith(".py")
                                   and n not in ("__init__.py", "__main__.py"))


def test_a_ranks_lookup_loads_nothing_of_the_login_side_the_job_folder_or_the_job_set_up():
    """``import hpcdist.env; get_rank()`` outside any launcher, and under torchrun: every rank pays
    for each module it loads (bench/bench_floor.py measures it in instructions)."""
    import subprocess
    import sys

    probe = ("import sys, hpcdist.env; hpcdist.env.get_rank(); "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith('hpcdist'))))")
    torchrun = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", GROUP_RANK="0",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", TORCHELASTIC_RUN_ID="x")
    for extra in ({}, torchrun):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": ROOT, **extra}
        loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                check=True).stdout.split()
        heavy = [m for m in loaded if m.startswith(("hpcdist.submission", "hpcdist.jobs", "hpcdist.injob",
                                                    "hpcdist.cli", "hpcdist.schedulers", "hpcdist.launchers",
                                                    "hpcdist.progress", "hpcdist.allocation"))]
        assert heavy == [], f"with {extra or 'no launcher'}: {loaded}"


def test_the_job_set_up_loads_nothing_of_the_ranks_lookup_nor_the_progress_code(tmp_path):
    """``hpcdist job-setup`` runs in every job before its launcher: the port rule is
    :mod:`hpcdist.ports`, which loads none of :mod:`hpcdist.env` (its detectors and model), and a
    script without a progress folder loads none of :mod:`hpcdist.progress`."""
    import subprocess
    import sys

    probe = ("import sys; from hpcdist.cli import main; "
             "status = main(['job-setup', '--scheduler', 'slurm', '--nodes', '2', '--dir', sys.argv[1]]); "
             "print(status, ' '.join(sorted(m for m in sys.modules if m.startswith('hpcdist'))))")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": ROOT, "SLURM_JOB_ID": "4242",
           "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "4(x2)"}
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "0" and "MASTER_PORT" in (tmp_path / "job.env").read_text(), out
    assert [m for m in out[1:] if m.startswith(("hpcdist.env", "hpcdist.progress"))] == [], out


# ------------------------------------------------------------ tests/ mirrors hpcdist/ (issue 48)

TESTS = os.path.join(ROOT, "tests")
#: The one folder of tests that is no package folder: the checks of the project as a whole
#: (docs/testing.md, "Where a test lives").
WHOLE_PROJECT = "project"


def test_files_by_folder() -> dict[str, list[str]]:
    """Folder under tests/ (``.`` for tests/ itself) -> the test files in it, at any depth."""
    found: dict[str, list[str]] = {}
    for folder, subfolders, files in os.walk(TESTS):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        names = sorted(name for name in files if name.startswith("test_") and name.endswith(".py"))
        if names:
            found[os.path.relpath(folder, TESTS)] = names
    return found


test_files_by_folder.__test__ = False  # a helper of the rows below, not a row


def package_folder_names() -> set[str]:
    return {folder.split("/")[1] for folder in folders()}


def test_every_folder_of_tests_is_a_package_folder_or_the_whole_projects():
    packages = package_folder_names()
    assert WHOLE_PROJECT not in packages, f"hpcdist/{WHOLE_PROJECT}/ is new: rename tests/project/"
    stray = {folder: names for folder, names in test_files_by_folder().items()
             if folder != "." and folder not in packages | {WHOLE_PROJECT}}
    assert stray == {}, (f"test files in folders that mirror no hpcdist/<folder>/: {stray}; move "
                         f"each to tests/<the package folder it tests>/ or tests/{WHOLE_PROJECT}/ "
                         "(docs/testing.md)")


def test_a_test_at_the_root_of_tests_is_named_after_a_root_module():
    modules = [name[:-3] for name in os.listdir(PACKAGE)
               if name.endswith(".py") and not name.startswith("__")]
    unnamed = [name for name in test_files_by_folder().get(".", [])
               if not any(re.fullmatch(rf"test_{module}(_\w+)?\.py", name) for module in modules)]
    assert unnamed == [], (f"tests/{unnamed}: tests/ itself holds the tests of hpcdist's root "
                           "modules, each named test_<module>[_what].py; move the others to "
                           "tests/<package folder>/ (docs/testing.md)")


def test_data_folders_of_tests_are_named_apart_from_the_package_folders():
    """A folder of tests named after a package folder holds that package's tests and nothing
    else: the sites' own examples lie in tests/site_examples/, their presets' tests in
    tests/sites/."""
    mixed = {}
    for name in sorted(package_folder_names() | {WHOLE_PROJECT}):
        folder = os.path.join(TESTS, name)
        if os.path.isdir(folder):
            others = sorted(set(os.listdir(folder)) - set(test_files_by_folder().get(name, []))
                            - {"__pycache__"})
            if others:
                mixed[f"tests/{name}/"] = others
    assert mixed == {}, f"data beside a package folder's tests: {mixed}; give it a folder apart"


def test_test_files_names_are_unique_and_no_folder_of_tests_is_a_python_package():
    """pytest's default import mode imports a test file by its name alone, from its folder put on
    sys.path (and the conftest puts them all there): two files of one name would be one module."""
    names = [name for files in test_files_by_folder().values() for name in files]
    names += [name for name in os.listdir(TESTS)
              if name.endswith(".py") and not name.startswith("test_")]  # the helpers
    twice = sorted({name for name in names if names.count(name) > 1})
    assert twice == [], f"files of tests named alike: {twice}"
    packages = [folder for folder, _, files in os.walk(TESTS) if "__init__.py" in files]
    assert packages == [], f"__init__.py in {packages}: tests import by file name (docs/testing.md)"
