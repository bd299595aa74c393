#!/usr/bin/env python3
"""What ``hpcdist render`` hands its template, written out as plain data for ``floor_render.py``.

Run with a tree of hpcdist on ``PYTHONPATH`` (bench_floor.py does, for each tree it compares):
``python capture_render.py OUT.py RENDER_ARGS...``. It runs ``hpcdist render RENDER_ARGS`` once,
catching the template's one render: the template's name, the environment's settings (loaders'
folders, trim and strip, sandboxed or not), the values given (objects become namespaces of their
public attributes; hpcdist's shell syntax stays shell syntax) and the result of every call to one
of hpcdist's own filters. OUT.py then holds them as Python literals: the floor imports it and
renders with jinja2 alone, doing none of hpcdist's work (no flags, no checks, no filters).
Not a test.
"""

import contextlib
import io
import sys

import jinja2

#: jinja2's own filters: the floor has them too.
BUILTIN_FILTERS = set(jinja2.Environment().filters)


def literal(value, raw_types) -> str:
    """``value`` as Python source for the floor's module."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return f"Raw({str(value)!r})" if type(value) in raw_types else repr(str(value))
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v, raw_types) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v, raw_types)}" for k, v in value.items()) + "}"
    fields = {}
    for name in dir(value):
        if name.startswith("_"):
            continue
        try:
            attribute = getattr(value, name)
        except Exception:  # a property that needs what the render does not give
            continue
        if not callable(attribute):
            fields[name] = literal(attribute, raw_types)
    return "NS(" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")"


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    caught = {}
    render = jinja2.Template.render

    def catching(self, *a, **k):
        env = self.environment
        own = {name: f for name, f in env.filters.items() if name not in BUILTIN_FILTERS}
        calls = caught.setdefault("calls", {})

        def recorded(name, f):
            def call(*fa, **fk):
                result = f(*fa, **fk)
                calls[(name, repr((fa, sorted(fk.items()))))] = result
                return result
            return call

        for name, f in own.items():
            if name != "raw":  # the floor's own Raw
                env.filters[name] = recorded(name, f)
        caught.update(template=self.name, context=dict(*a, **k), env=env, filters=sorted(own),
                      raw_types={type(f("")) for name, f in own.items() if name == "raw"})
        try:
            return render(self, *a, **k)
        finally:
            env.filters.update(own)

    jinja2.Template.render = catching
    from hpcdist.cli import main as hpcdist

    sys.argv = ["hpcdist", "render", *args]  # the script's first lines quote the command line
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        hpcdist(["render", *args])
    env, raw = caught["env"], caught["raw_types"]
    folders = []
    for loader in getattr(env.loader, "loaders", [env.loader]):
        for inner in ([loader] if not hasattr(loader, "mapping") else loader.mapping.values()):
            folders.append([str(p) for p in getattr(inner, "searchpath", [])])
    settings = dict(trim_blocks=env.trim_blocks, lstrip_blocks=env.lstrip_blocks,
                    keep_trailing_newline=env.keep_trailing_newline, autoescape=False)
    lines = [
        f"# Written by bench/capture_render.py from `hpcdist render {' '.join(args)}`.",
        "from types import SimpleNamespace as NS",
        "",
        "class Raw(str):",
        "    '''Shell syntax already: printed as is.'''",
        "",
        f"TEMPLATE = {caught['template']!r}",
        f"SANDBOXED = {type(env).__name__ != 'Environment'}",
        f"FOLDERS = {folders!r}",
        f"SETTINGS = {settings!r}",
        f"FILTERS = {caught['filters']!r}",
        "CALLS = {" + ", ".join(f"{k!r}: {literal(v, raw)}" for k, v in caught.get("calls", {}).items()) + "}",
        "CONTEXT = {" + ", ".join(f"{k!r}: {literal(v, raw)}" for k, v in caught["context"].items()) + "}",
    ]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
