#!/usr/bin/env python3
"""The floor of ``hpcdist render``: what any Jinja-based tool pays for the same script.

``import jinja2``, one Environment built as hpcdist's is (the same kind, sandboxed or not, over the
same template folders, a bytecode cache in ``$XDG_CACHE_HOME``, strict undefined names, a
shell-quoting ``finalize``), and one render of the same template with the values hpcdist gives
it, here as plain data written out by ``capture_render.py`` (a module it imports): no flags
parsed, no values checked, hpcdist's filters answered from the capture, no hpcdist import. It
prints the same script as ``hpcdist render`` (bench_floor.py checks that, byte for byte), so
nothing is left out of the comparison but hpcdist's own work.

Usage: ``python floor_render.py CONTEXT_FOLDER [--argparse]`` (the folder holding
``floor_context.py``); with ``--argparse``, also ``import argparse`` and one ArgumentParser that
parses nothing: what a command-line tool built on argparse pays before its first flag. Not a test.
"""

import os
import sys
from shlex import quote

import jinja2


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    import floor_context as captured

    if sys.argv[2:] == ["--argparse"]:
        import argparse

        argparse.ArgumentParser(prog="hpcdist").parse_args([])
    Raw = captured.Raw

    def finalize(value):
        return value if isinstance(value, Raw) else quote(str(value))

    def answered(name):
        return lambda *a, **k: captured.CALLS[(name, repr((a, sorted(k.items()))))]

    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "floor", "jinja2")
    os.makedirs(cache, exist_ok=True)
    if captured.SANDBOXED:
        from jinja2.sandbox import SandboxedEnvironment as Environment
    else:
        Environment = jinja2.Environment
    first, search, ours = (jinja2.FileSystemLoader(folders) for folders in captured.FOLDERS)
    env = Environment(loader=jinja2.ChoiceLoader([jinja2.PrefixLoader({"hpcdist": first}), search, ours]),
                      bytecode_cache=jinja2.FileSystemBytecodeCache(cache), undefined=jinja2.StrictUndefined,
                      finalize=finalize, **captured.SETTINGS)
    env.filters.update({name: Raw if name == "raw" else answered(name) for name in captured.FILTERS})
    sys.stdout.write(env.get_template(captured.TEMPLATE).render(**captured.CONTEXT))


if __name__ == "__main__":
    main()
