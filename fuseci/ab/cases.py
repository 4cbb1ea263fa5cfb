"""What one case's measurement depends on in its tree, read statically: the fingerprint that
lets ``fuseci ab`` measure only the cases of a changed suite whose own code changed.

For each ``module:function`` a case's variants and reference name, a case's fingerprint covers:

* the function's own definition (decorators, defaults and annotations included) and, followed
  transitively, every top-level ``def`` and ``class`` of the same module that it refers to by
  name;
* the module's import-time code, which runs for every case: every top-level statement that is
  not a definition (imports, assignments, ``if`` blocks, expressions), the decorators, defaults,
  annotations (and class bases and class-body statements) of every top-level definition, and the
  definitions that code refers to;
* every other file of the tree the module imports, transitively (as the suite's fingerprint
  follows them, :func:`fuseci.ab.fingerprint.walk`), and the ``__init__.py`` of every package on
  the way, as whole-file hashes.

Code is compared as :func:`ast.dump` without positions: comments, blank lines and definitions
moved in the file do not count; any change of code does (a docstring is code).

The whole module file counts instead (any change of it changes every case that names the
module) when static reading cannot follow it: the module's source uses one of :data:`DYNAMIC`,
a name the case's code refers to is neither a top-level definition, nor bound by the module's
own statements, nor local, nor a builtin (a ``from x import *``, a name made at run time), the
named function is not a top-level ``def``, a file the module imports imports it back, or the
file cannot be read or parsed.

Nothing is imported or run: files are only read and parsed. What a case fingerprint cannot see
is what a suite's cannot see (:mod:`fuseci.ab.fingerprint`), and state one case's code leaves
for another's in the harness process (a module-level cache filled by one case's function and
read by another's): cases are taken as independent.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from dataclasses import dataclass
from pathlib import Path

from fuseci.ab.fingerprint import MAX_PARSED_BYTES, Walked, find_module, installed, rel_path, search_roots, walk
from fuseci.config.model import Suite

#: What a module's source may use that static reading cannot follow: a module using any of these
#: (as a name, a dotted name, an imported module, an attribute or a statement) counts as a whole.
DYNAMIC: frozenset[str] = frozenset(
    {
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "eval",
        "exec",
        "compile",
        "__import__",
        "importlib",
        "inspect",
        "sys.modules",
        "__dict__",
        "__globals__",
        "global",
    }
)

#: Names every module has without binding them.
_IMPLICIT = frozenset(dir(builtins)) | {"__file__", "__cached__", "__builtins__", "__annotations__", "__path__"}

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True, slots=True)
class CasePrint:
    """What one case's measurement depends on in its tree, as far as can be read."""

    parts: tuple[str, ...]
    """Each a line ``kind name digest``, sorted: equal parts, identical inputs."""

    @property
    def digest(self) -> str:
        """One SHA-256 over the parts."""
        return _sha("\n".join(self.parts))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _uses_dynamic(tree: ast.Module) -> str:
    """The first of :data:`DYNAMIC` the module uses; empty when none."""
    for node in ast.walk(tree):
        used: list[str] = []
        if isinstance(node, ast.Name | ast.Attribute):
            used.append(_dotted(node))
            if isinstance(node, ast.Attribute):
                used.append(node.attr if node.attr.startswith("__") else "")
        elif isinstance(node, ast.Import):
            used += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            used += [node.module.split(".")[0], *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Global):
            used.append("global")
        for name in used:
            if name in DYNAMIC:
                return name
    return ""


def _bound(node: ast.AST) -> set[str]:
    """Every name ``node`` binds anywhere inside it (more than its scope binds, never less)."""
    names: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, _Def):
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
    return names


def _loaded(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _lazy_annotations(tree: ast.Module) -> bool:
    """Whether the module has ``from __future__ import annotations`` (annotations not evaluated)."""
    return any(
        isinstance(s, ast.ImportFrom) and s.module == "__future__" and any(a.name == "annotations" for a in s.names)
        for s in tree.body
    )


def _import_time(node: ast.stmt, annotations: bool) -> list[ast.AST]:
    """What of a statement runs when its module is imported (a function's annotations only with
    ``annotations``)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        a = node.args
        every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x is not None)]
        notes = [*(x.annotation for x in every if x.annotation is not None), *([node.returns] if node.returns else [])]
        return [
            *node.decorator_list,
            *a.defaults,
            *(d for d in a.kw_defaults if d is not None),
            *(notes if annotations else []),
        ]
    if isinstance(node, ast.ClassDef):
        body = [part for s in node.body for part in _import_time(s, annotations)]
        return [*node.decorator_list, *node.bases, *node.keywords, *body]
    return [node]


class Source:
    """One module file read for its cases: its definitions and its import-time code."""

    def __init__(self, data: bytes | None, path: str) -> None:
        self.whole = "unreadable" if data is None else hashlib.sha256(data).hexdigest()
        self.why = "" if data is not None else "it cannot be read"
        self.defs: dict[str, list[_Def]] = {}
        self.known: set[str] = set()
        self.shared = ""
        tree = self._parse(data, path)
        if tree is None:
            return
        others: list[ast.stmt] = []
        for stmt in tree.body:
            if isinstance(stmt, _Def):
                self.defs.setdefault(stmt.name, []).append(stmt)
            else:
                others.append(stmt)
        self.known = set(self.defs) | {n for s in others for n in _bound(s)} | _IMPLICIT
        annotations = not _lazy_annotations(tree)
        at_import: list[ast.AST] = [part for s in tree.body for part in _import_time(s, annotations)]
        followed = self._closure(_loaded(at_import))
        if followed is None:
            return
        self.shared = _sha("\n".join([*map(_dump, at_import), *self._dumps(followed)]))

    def _parse(self, data: bytes | None, path: str) -> ast.Module | None:
        if data is None:
            return None
        if len(data) > MAX_PARSED_BYTES:
            self.why = "it is too large to read"
            return None
        try:
            tree = ast.parse(data, filename=path)
        except (SyntaxError, ValueError):
            self.why = "it does not parse"
            return None
        dynamic = _uses_dynamic(tree)
        if dynamic:
            self.why = f"it uses {dynamic}"
            return None
        return tree

    def _closure(self, names: set[str]) -> set[str] | None:
        """The top-level definitions ``names`` reach, transitively; None (and :attr:`why` set)
        when a name one of them refers to cannot be resolved."""
        todo, reached = sorted(names & set(self.defs)), set[str]()
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            for node in self.defs[name]:
                local = _bound(node)
                for used in sorted(_loaded([node])):
                    if used in self.defs:
                        todo.append(used)
                    elif used not in local and used not in self.known:
                        self.why = f"{name} refers to {used}, which is not defined in the module"
                        return None
        return reached

    def _dumps(self, names: set[str]) -> list[str]:
        return [_dump(node) for name in sorted(names) for node in self.defs[name]]

    def function(self, name: str) -> str | None:
        """The digest of ``name``'s code and what it calls in the module; None when the whole
        module must count instead (:attr:`why` says why)."""
        if not self.shared:
            return None
        if name not in self.defs:
            self.why = f"{name} is not a top-level def"
            return None
        reached = self._closure({name})
        return None if reached is None else _sha("\n".join(self._dumps(reached)))


@dataclass(frozen=True, slots=True)
class _Module:
    """A named module as one tree holds it."""

    own: str
    """Its own file, tree-relative."""
    source: Source
    walked: Walked


def case_prints(suite: Suite, tree: Path) -> dict[str, CasePrint]:
    """Each case's fingerprint (by case id) of ``suite`` (its file inside ``tree``) as measured in
    ``tree``."""
    tree = tree.resolve()
    roots = search_roots(suite, tree)
    modules: dict[str, _Module | str] = {}

    def module(name: str) -> _Module | str:
        if name not in modules:
            found = find_module(name, roots, tree)
            if found is None or not found or found[-1][1] != name:
                modules[name] = f"{'outside' if installed(name.split('.')[0]) else 'missing'} {name}"
            else:
                path = found[-1][0].resolve()
                try:
                    data: bytes | None = path.read_bytes()
                except OSError:
                    data = None
                own = rel_path(path, tree)
                modules[name] = _Module(own, Source(data, own), walk(found, roots, tree))
        return modules[name]

    out: dict[str, CasePrint] = {}
    for case in suite.cases:
        parts: set[str] = set()
        for ref in case.functions:
            name, _, function = ref.partition(":")
            got = module(name)
            if isinstance(got, str):
                parts.add(got)
                continue
            cyclic = got.own in got.walked.imported
            parts.update(f"file {p} {d}" for p, d in got.walked.files.items() if p != got.own or cyclic)
            if not got.walked.complete:
                parts.add("incomplete")
            code = None if cyclic else got.source.function(function)
            if code is None:
                parts.add(f"file {got.own} {got.source.whole}")
            else:
                parts.add(f"module {got.own} {got.source.shared}")
                parts.add(f"function {ref} {code}")
        out[case.id] = CasePrint(tuple(sorted(parts)))
    return out


def changed_cases(base: Suite, base_tree: Path, head: Suite, head_tree: Path) -> tuple[str, ...]:
    """The head's cases (in suite order) whose fingerprint differs from the base's same case, or
    that the base does not have."""
    before = case_prints(base, base_tree)
    after = case_prints(head, head_tree)
    return tuple(c.id for c in head.cases if c.id not in before or before[c.id].digest != after[c.id].digest)
