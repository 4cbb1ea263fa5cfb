"""Whether a suite's ``module:function`` references resolve, decided without importing them.

``fuseci check`` runs on any machine, before a GPU is involved: importing a kernel module
would import CuPy (absent on a CPU machine) and run the module's top level. Instead the module
is found on the same search path the harness uses (the current directory, the directory above
the suite file, then Python's path) and its source is parsed: a function defined, a class, a
name assigned or imported at top level all count. A module whose names cannot be known from
its source (a compiled extension, ``from x import *``, a module ``__getattr__``) is taken on
trust; the harness still checks it when it runs.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import sys
from pathlib import Path

from fuseci.config.model import Suite

#: Largest module source parsed; a kernel module is a few hundred lines.
MAX_SOURCE_BYTES = 4 << 20


def search_path(suite: Suite) -> list[Path]:
    """Where ``module:function`` references are looked up besides installed packages: the same
    places the harness adds to ``sys.path``."""
    return [Path.cwd(), suite.path.resolve().parent.parent]


def _module_file(module: str, roots: list[Path]) -> Path | None:
    parts = module.split(".")
    for root in roots:
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


def _installed(module: str) -> Path | str | None:
    """The source of an installed module; ``"trusted"`` when it exists without Python source;
    None when it cannot be found. Finding a submodule imports its parents: a parent that fails to
    import (it needs CuPy, say) counts as found, on trust."""
    try:
        spec = importlib.util.find_spec(module)
    except Exception:  # a parent package failed to import (it needs CuPy, say): cannot be judged here
        return "trusted"
    if spec is None:
        return None
    origin = spec.origin
    if origin and origin.endswith(".py") and Path(origin).is_file():
        return Path(origin)
    return "trusted"


def _top_level_names(body: list[ast.stmt]) -> tuple[set[str], bool]:
    """The names a module's top level defines (in every branch of its ifs and trys too), and
    whether it may define others that its source does not show."""
    found: set[str] = set()
    open_ended = False
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            open_ended |= node.name == "__getattr__"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                found |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    open_ended = True
                else:
                    found.add(alias.asname or alias.name.split(".")[0])
        else:
            nested = [
                *getattr(node, "body", []),
                *getattr(node, "orelse", []),
                *getattr(node, "finalbody", []),
                *(s for h in getattr(node, "handlers", []) for s in h.body),
            ]
            if nested and isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                more, unknown = _top_level_names(nested)
                found |= more
                open_ended |= unknown
    return found, open_ended


def problem(ref: str, roots: list[Path]) -> str:
    """Why ``module:function`` cannot be called, or ``""`` when it can (as far as the source
    tells)."""
    module, _, func = ref.partition(":")
    found = _module_file(module, roots) or _installed(module)
    if found is None:
        where = ", ".join(str(r) for r in roots[:2])
        return f"no module {module!r} in {where} or the installed packages"
    if not isinstance(found, Path):
        return ""
    source = found
    try:
        raw = source.read_bytes()[: MAX_SOURCE_BYTES + 1]
        if len(raw) > MAX_SOURCE_BYTES:
            return ""
        tree = ast.parse(raw, filename=str(source))
    except (OSError, SyntaxError, ValueError) as exc:
        return f"module {module!r} ({source}) cannot be read: {type(exc).__name__}: {exc}"
    names, open_ended = _top_level_names(tree.body)
    if func in names or open_ended:
        return ""
    close = difflib.get_close_matches(func, sorted(n for n in names if not n.startswith("_")), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"module {module!r} ({source}) defines no {func!r}{hint}"


def unresolved(suite: Suite) -> list[tuple[int, str, str]]:
    """Every reference of the suite that does not resolve: (line, field, why), in file order."""
    roots = [*search_path(suite), *(Path(p) for p in sys.path if p)]
    out: list[tuple[int, str, str]] = []
    seen: dict[str, str] = {}
    for case in suite.cases:
        refs = [(v.line, f"case {case.id!r}.variants.{v.id}", v.fn) for v in case.variants]
        if case.reference:
            refs.append((case.reference_line, f"case {case.id!r}.reference", case.reference))
        for line, field, ref in refs:
            why = seen.setdefault(ref, problem(ref, roots))
            if why:
                out.append((line, field, f"{ref!r}: {why}"))
    return sorted(out, key=lambda item: item[0])
