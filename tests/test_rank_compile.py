"""``hpcdist.rank.compile_script``: the script compiled as ``compile()`` would, without making
Python's AST classes (compile()'s first call: ~12M instructions, a third of ``python SCRIPT``).

The code object must be compile()'s in every part; whatever the cheap way cannot do as compile()
would (a compiler's warning or error, a tracer already set) must go to compile() itself.
"""

import subprocess
import sys
import warnings
from unittest import mock

import pytest

from hpcdist import rank
from launch import clean_env

SOURCES = {
    "empty": b"",
    "script": (b'"""doc"""\nimport os\nx: int = 1\ndef f(a, *, b=2):\n    return [i for i in range(a) if i % b]\n'
               b'class C:\n    y: "str" = "s"\n    def m(self):\n        return lambda z: z + 1\n'
               b'async def g():\n    await g()\ntry:\n    pass\nexcept Exception as e:\n    raise\n'),
    # A future import of the script's own; none inherited from hpcdist.rank (dont_inherit).
    "future": b"from __future__ import annotations\nx: undefined = 1\ndef f() -> Foo: pass\n",
    "latin1": "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n".encode("latin-1"),
    "bom_crlf": b"\xef\xbb\xbfs = '\xc3\xa9'\r\nt = 2\r\n",
}
CODE = type(compile("", "", "exec"))


def same(a, b) -> bool:
    """Two code objects alike in every co_ attribute, their positions, and the code inside them."""
    if type(a) is not type(b):
        return False
    if isinstance(a, CODE):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # co_lnotab
            names = [n for n in dir(a) if n.startswith("co_") and not callable(getattr(a, n))]
            alike = all(same(getattr(a, n), getattr(b, n)) for n in names)
        return alike and list(a.co_positions()) == list(b.co_positions())
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_code_is_compiles_and_compile_is_not_called(name, tmp_path):
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a tracer is set (coverage, a debugger): compile() does the work, as it should")
    path = str(tmp_path / f"{name}.py")
    expected = compile(SOURCES[name], path, "exec", dont_inherit=True)
    with mock.patch("builtins.compile", side_effect=AssertionError("compile() called")):
        got = rank.compile_script(SOURCES[name], path)
    assert got.co_filename == path and same(got, expected)


def test_a_tracer_already_set_gets_compiles_own_work():
    before = sys.gettrace()
    sys.settrace(lambda *args: None)
    try:
        with mock.patch("builtins.compile", wraps=compile) as spy:
            got = rank.compile_script(b"x = 1\n", "/x/t.py")
    finally:
        sys.settrace(before)
    assert spy.call_count == 1 and got.co_filename == "/x/t.py"


@pytest.mark.parametrize("source, said", [
    ("x = 1\nif x is 1:\n    pass\n", "SyntaxWarning"),  # a compiler's warning
    ("def f(:\n    pass\n", "SyntaxError"),
])
def test_the_compilers_words_name_the_script(source, said, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(source)
    proc = subprocess.run([sys.executable, "-m", "hpcdist.rank", str(script)], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == (0 if said == "SyntaxWarning" else 1), proc.stderr
    assert said in proc.stderr and str(script) in proc.stderr and "<string>" not in proc.stderr, proc.stderr
