"""The floor of ``python -m hpcdist.rank SCRIPT``: the script run in process as hpcdist.rank runs it, nothing else.

bench_rank_start.py copies this file into a package beside a copy of
``hpcdist/__init__.py`` and starts it as ``python -m hpcdist.floor SCRIPT``,
so that it pays what any module started with ``python -m`` pays (runpy and
what it imports, the package's ``__init__``). Then, as
:func:`hpcdist.rank.run`: the script's ``__main__`` module, its source read
and compiled as hpcdist.rank compiles it (its ``compile_script``, from a copy of
``hpcdist/rank.py`` beside this one: builtin ``compile()``'s first call in a process
would build the ``ast`` module's ~120 node types), the last atexit handler that lets go of it with a full
collection, and the script run. No rank is resolved, nothing is exported, no
argument is read but the script's path. Not part of hpcdist; not a test.
"""

import atexit
import builtins
import importlib.machinery
import io
import os
import sys
import types


def _let_go(module) -> None:
    import gc

    module.__dict__.clear()
    gc.collect()


def main() -> None:
    script_path = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script_path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script_path, __builtins__=builtins, __spec__=None, __package__=None,
                         __cached__=None, __loader__=importlib.machinery.SourceFileLoader("__main__", script_path))
    with io.open_code(script_path) as f:
        source = f.read()
    from hpcdist.rank import compile_script

    compiled = compile_script(source, script_path)
    sys.modules["__main__"] = main
    atexit.register(_let_go, main)
    exec(compiled, main.__dict__)


if __name__ == "__main__":
    main()
