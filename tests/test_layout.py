"""The package's shape, as the layout in CONTRIBUTING.md promises it: small modules, each package
saying what it owns, no import circles, and scheduler and launcher knowledge in their homes."""

from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    return out


def test_no_module_is_over_about_500_lines():
    sizes = {m: sum(1 for _ in open(p, encoding="utf-8")) for m, p in modules().items()}
    big = {m: n for m, n in sizes.items() if n > MAX_LINES}
    assert big == {}, f"modules over {MAX_LINES} lines: {big}"


def test_every_module_opens_with_a_docstring_that_says_what_it_owns():
    missing = [m for m, p in modules().items()
               if not ast.get_docstring(ast.parse(open(p, encoding="utf-8").read()))]
    assert missing == []


def test_no_import_circles():
    known = modules()
    # Every edge counts, a package's to its own modules too: a registry that imports its modules
    # by name at the call (importlib) is not an import of them.
    graph = {m: imports_of(m, p, known) for m, p in known.items()}
    # Imports inside functions count too: a lazy import only hides a circle until the call.
    circles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join(path + [start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert circles == []


#: Where code may name a scheduler: its home, and code that reads what other tools set
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
    """Choices the CLI lists without importing a module (its --help stays fast) match the module."""
    from hpcdist import launchers, schedulers
    from hpcdist.launchers.mpi import FLAVOURS
    from hpcdist.schedulers.pbs import DIALECTS

    assert tuple(DIALECTS) == schedulers.DIALECTS["pbs"]
    assert set(FLAVOURS) == {"openmpi", "mpich", "intel", "pals"}
    assert launchers.DEEPSPEED_RUNNERS == ("pdsh", "openmpi", "slurm")
    assert [launchers.get(name).name for name in launchers.NAMES] == list(launchers.NAMES)
    assert [schedulers.get(name).name for name in schedulers.NAMES] == list(schedulers.NAMES)
