"""What one case's measurement depends on in its tree, read statically (nothing imported or run):
the fingerprint that lets ``fuseci ab`` measure only the cases of a changed suite whose own code
changed. What it covers, when the whole module file counts instead, and what it cannot see:
docs/CI.md, "Case by case"."""

from __future__ import annotations

import ast
import builtins
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fuseci.ab.effects import aliases, imported_as, qualified
from fuseci.ab.escapes import Escapes, Resolver
from fuseci.ab.reader import MAX_PARSED_BYTES, Reader, Tree, Walked, rel_path, suite_walk
from fuseci.config.model import Suite
from fuseci.config.resolve import dotted
from fuseci.judge.baseline import IMPORT_TIME, SourcePart, SourcePrint

#: What a module's source may use that static reading cannot follow: a module using any of these
#: (as a name, a dotted name under any name its imports give it, an imported module, an attribute
#: or a statement) counts as a whole.
DYNAMIC: frozenset[str] = frozenset(
    {"getattr", "setattr", "delattr", "globals", "locals", "vars", "eval", "exec", "compile", "__import__"}
    | {"__builtins__", "importlib", "inspect", "runpy", "pkgutil", "gc", "sys.modules", "sys._getframe"}
    | {"operator.attrgetter", "operator.methodcaller", "__dict__", "__globals__", "__getattribute__"}
    | {"f_globals", "f_locals", "f_back", "global"}
)
#: Modules whose every name a ``from m import *`` would make dynamic.
_STAR_DYNAMIC = frozenset({"sys", "builtins", "importlib", "inspect", "gc", "operator"})

#: Names every module has without binding them.
_IMPLICIT = frozenset(dir(builtins)) | {"__file__", "__cached__", "__builtins__", "__annotations__", "__path__"}

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True, slots=True)
class CasePrint:
    """What one case's measurement depends on in its tree, as far as can be read."""

    parts: tuple[str, ...]
    """Each a line ``kind name digest``, sorted: equal parts, identical inputs."""
    unproven: tuple[str, ...] = ()
    """What the case depends on that the reader cannot follow (sorted): the case is then always measured."""
    files: frozenset[str] = frozenset()
    """Tree-relative files the parts cover whole (what the case's code may run or read there)."""
    functions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Tree-relative file of a module covered function by function → the top-level definitions covered
    (the case's functions, what they refer to, the module's import-time code and escaping definitions)."""

    @property
    def digest(self) -> str:
        """One SHA-256 over the parts."""
        return _sha("\n".join(self.parts))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _uses_dynamic(tree: ast.Module, names: dict[str, set[str]]) -> str:
    """The first of :data:`DYNAMIC` the module uses (under any name); empty when none."""
    for node in ast.walk(tree):
        used: set[str] = set()
        if isinstance(node, ast.Name | ast.Attribute):
            used = qualified(node, names)
            if isinstance(node, ast.Attribute) and node.attr.startswith(("__", "f_")):  # x.__dict__, frame.f_globals
                used.add(node.attr)
        elif isinstance(node, ast.Import):
            used = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            used = {node.module.split(".")[0], *(f"{node.module}.{a.name}" for a in node.names)}
            if node.module in _STAR_DYNAMIC and any(a.name == "*" for a in node.names):
                return f"from {node.module} import *"
        elif isinstance(node, ast.Global):
            used = {"global"}
        if found := sorted(used & DYNAMIC):
            return found[0]
    return ""


def _reaches_itself(tree: ast.Module, names: dict[str, set[str]], module: str) -> str:
    """How the module refers to itself through an imported name (``_self.f``); empty when it does not."""
    if not module:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute):
            through = imported_as(node, names)
            if any(q == module or q.startswith(module + ".") for q in through):
                return f"it reaches itself through {dotted(node)} (line {node.lineno})"
    getattr_defs = [
        s.name for s in tree.body if isinstance(s, ast.FunctionDef) and s.name in ("__getattr__", "__dir__")
    ]
    return f"it defines a module {getattr_defs[0]}" if getattr_defs else ""


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
    """What of a statement runs when its module is imported (a function's annotations only with ``annotations``)."""
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
    """One module file read for its cases: its definitions and its import-time code.

    ``module`` is the dotted name it runs as (to see it reach itself); ``resolver`` tells what an imported
    decorator or base class is (:data:`fuseci.ab.escapes.Resolver`; by default nothing is known)."""

    def __init__(self, data: bytes | None, path: str, module: str = "", resolver: Resolver | None = None) -> None:
        self.whole = "unreadable" if data is None else hashlib.sha256(data).hexdigest()
        self.why = "" if data is not None else "it cannot be read"
        self.module = module
        self.defs: dict[str, list[_Def]] = {}
        self.known: set[str] = set()
        self.shared = ""
        self.followed: frozenset[str] = frozenset()
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
        escaped = Escapes(self.defs, self.names, resolver or (lambda name: False)).of()
        followed = self._closure(_loaded(at_import) | escaped)
        if followed is None:
            return
        self.followed = frozenset(followed)
        self.shared = _sha("\n".join([*map(_dump, at_import), *self._dumps(followed)]))

    def _parse(self, data: bytes | None, path: str) -> ast.Module | None:
        self.names: dict[str, set[str]] = {}
        if data is None:
            return None
        if len(data) > MAX_PARSED_BYTES:
            self.why = "it is too large to read"
            return None
        if not path.endswith(".py"):
            self.why = "it is not Python source"
            return None
        try:
            tree = ast.parse(data, filename=path)
        except (SyntaxError, ValueError):
            self.why = "it does not parse"
            return None
        self.names = aliases(tree, self.module, path.endswith("__init__.py"))
        dynamic = _uses_dynamic(tree, self.names)
        self.why = f"it uses {dynamic}" if dynamic else _reaches_itself(tree, self.names, self.module)
        return None if self.why else tree

    def _closure(self, names: set[str]) -> set[str] | None:
        """The top-level definitions ``names`` reach, transitively; None (:attr:`why` set) on an unresolved name."""
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

    def _reached(self, name: str) -> set[str] | None:
        if not self.shared:
            return None
        if name not in self.defs:
            self.why = f"{name} is not a top-level def"
            return None
        return self._closure({name})

    def function(self, name: str) -> str | None:
        """The digest of ``name``'s code and what it calls; None when the whole module counts (:attr:`why`)."""
        reached = self._reached(name)
        return None if reached is None else _sha("\n".join(self._dumps(reached)))

    def covered(self, name: str) -> frozenset[str]:
        """The top-level definitions a case of ``name`` depends on: what it reaches, and what import-time code
        reaches or escapes (empty when the whole module counts)."""
        reached = self._reached(name)
        return frozenset() if reached is None else frozenset(reached) | self.followed


@dataclass(frozen=True, slots=True)
class _Module:
    """A named module as one tree holds it."""

    own: str
    """Its own file, tree-relative."""
    source: Source
    walked: Walked


class Prints:
    """The case fingerprints of one suite in one tree, from one reading: the suite's walk first
    (:attr:`suite_files`; it finds the directories files add to ``sys.path``), then each case's."""

    def __init__(self, suite: Suite, tree: Path | Tree) -> None:
        self.reader = Reader(suite, tree)
        self.root = self.reader.root
        self.suite_files, self.outside, self.missing = suite_walk(self.reader)
        """Every file the suite's named modules reach; those installed, and those found nowhere."""
        self.modules: dict[str, _Module | tuple[str, str]] = {}
        self.reading: set[str] = set()

    def module(self, name: str) -> _Module | tuple[str, str]:
        """A named module, or (its part, why it cannot be followed) when it is not in the tree."""
        if name not in self.modules:
            self.reading.add(name)
            self.modules[name] = self._read(name)
            self.reading.discard(name)
        return self.modules[name]

    def _read(self, name: str) -> _Module | tuple[str, str]:
        located = self.reader.locate(name)
        if located.unproven:
            return f"unproven {name}", f"{name}: {located.unproven}"
        if located.outside:
            return f"outside {name}", ""
        if not located.own:
            return f"missing {name}", f"{name}: a module the suite names, found nowhere"
        path = located.files[-1][0].resolve()
        try:
            data: bytes | None = path.read_bytes()
        except OSError:
            data = None
        own = rel_path(path, self.root)
        return _Module(own, Source(data, own, name, self.resolve), self.reader.walk(located.files))

    def resolve(self, qualified_name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | bool:
        """What a decorator or base class named ``qualified_name`` is (:data:`Resolver`)."""
        module, _, attr = qualified_name.rpartition(".")
        if not module or module in self.reading:
            return False
        located = self.reader.locate(module)
        if located.outside:
            return True
        if not located.own:
            return False
        got = self.module(module)
        if isinstance(got, tuple) or not got.source.shared:
            return False
        nodes = got.source.defs.get(attr, [])
        one = nodes[0] if len(nodes) == 1 else None
        return one if isinstance(one, ast.FunctionDef | ast.AsyncFunctionDef) else False

    def case(self, functions: tuple[str, ...]) -> CasePrint:
        """The fingerprint of a case that calls ``functions`` (``module:function`` each)."""
        parts: set[str] = set()
        unproven: set[str] = set()
        files: set[str] = set()
        covered: dict[str, frozenset[str]] = {}
        for ref in functions:
            name, _, function = ref.partition(":")
            got = self.module(name)
            if isinstance(got, tuple):
                parts.add(got[0])
                unproven.update([got[1]] if got[1] else [])
                continue
            walked = got.walked
            if walked.registries:  # any module of the suite may fill what it calls through
                walked = self.suite_files
            cyclic = got.own in got.walked.imported
            parts.update(f"file {p} {d}" for p, d in walked.files.items() if p != got.own or cyclic)
            files.update(p for p in walked.files if p != got.own)
            unproven.update(walked.unproven)
            if not walked.complete:
                parts.add("incomplete")
            code = None if cyclic else got.source.function(function)
            if code is None:
                parts.add(f"file {got.own} {got.source.whole}")
                files.add(got.own)
            else:
                parts.add(f"module {got.own} {got.source.shared}")
                parts.add(f"function {ref} {code}")
                covered[got.own] = covered.get(got.own, frozenset()) | got.source.covered(function)
        return CasePrint(tuple(sorted(parts)), tuple(sorted(unproven)), frozenset(files), covered)


def _lines(nodes: list[_Def]) -> tuple[int, int]:
    """The first and last line of a definition (every one of its name), decorators included."""
    first = min(min([n.lineno, *(d.lineno for d in n.decorator_list)]) for n in nodes)
    return first, max(n.end_lineno or n.lineno for n in nodes)


def _part(line: str) -> SourcePart | None:
    """A part of a :class:`CasePrint` its definitions do not say: a whole file, import-time code, the outside."""
    kind, _, rest = line.partition(" ")
    if kind == "function":
        return None
    if kind in ("file", "module"):
        path, _, digest = rest.rpartition(" ")
        return SourcePart(path, "" if kind == "file" else IMPORT_TIME, digest)
    return SourcePart("", line, "")


def source_print(prints: Prints, case: CasePrint) -> SourcePrint:
    """``case`` (made by ``prints``) as a baseline keeps it: its parts, each definition with its lines."""
    sources = {m.own: m.source for m in prints.modules.values() if not isinstance(m, tuple)}
    parts = [p for line in case.parts if (p := _part(line)) is not None]
    for file, names in case.functions.items():
        defs = sources[file].defs if file in sources else {}
        for name in sorted(names):
            if nodes := defs.get(name):
                parts.append(SourcePart(file, name, _sha("\n".join(map(_dump, nodes))), _lines(nodes)))
    return SourcePrint(tuple(sorted(parts, key=lambda p: p.key)), case.unproven)


def source_prints(suite: Suite, tree: Path | Tree) -> dict[str, SourcePrint]:
    """Each case's fingerprint of ``suite`` (its file inside ``tree``) as measured there, as a baseline keeps it.

    Raises:
        OSError: the suite's files cannot be read.
    """
    prints = Prints(suite, tree)
    return {case.id: source_print(prints, prints.case(case.functions)) for case in suite.cases}


def changed(before: Mapping[str, CasePrint], after: Mapping[str, CasePrint], order: Sequence[str]) -> tuple[str, ...]:
    """The cases of ``order`` whose fingerprint differs, that ``before`` lacks, or either side cannot prove."""
    return tuple(
        c
        for c in order
        if c not in before or before[c].digest != after[c].digest or before[c].unproven or after[c].unproven
    )
