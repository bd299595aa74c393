"""The in-job control flow stays readable (issue 48): no function or method in hpcdist/injob/ or
hpcdist/progress/ is longer than 80 lines (its ``def`` line to its last, docstring included), and
the entry points a reader starts from say what they do."""

from __future__ import annotations

import ast
import glob
import os

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "hpcdist")
FOLDERS = ("injob", "progress")
MOST_LINES = 80


def functions(path: str):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_in_the_in_job_folders_is_over_80_lines():
    long = []
    for folder in FOLDERS:
        for path in sorted(glob.glob(os.path.join(PACKAGE, folder, "*.py"))):
            long += [f"{os.path.relpath(path, PACKAGE)}:{node.lineno} {node.name}: "
                     f"{node.end_lineno - node.lineno + 1} lines"
                     for node in functions(path) if node.end_lineno - node.lineno + 1 > MOST_LINES]
    assert long == []


def test_the_in_job_entry_points_say_what_they_do():
    wanted = {"injob/supervise.py": ["supervise", "run"], "progress/monitor.py": ["run"],
              "env/__init__.py": ["explain"], "injob/doctor.py": ["check"]}
    missing = []
    for name, names in wanted.items():
        found = {node.name: node for node in functions(os.path.join(PACKAGE, name))}
        missing += [f"{name}: {n}" for n in names if n not in found or not ast.get_docstring(found[n])]
    assert missing == []
