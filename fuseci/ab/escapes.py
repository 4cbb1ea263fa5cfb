"""Which top-level definitions of a module other code may reach without naming them (they
*escape*: a registry, ``torch.ops`` or a dict keeps them), read with :mod:`ast`; a case fingerprint
(:mod:`fuseci.ab.cases`) counts them for every case of the module.

A function or class escapes when a decorator may keep it; a class also when its creation runs
code that may keep it: a base class not known to be inert (one with ``__init_subclass__``, one of
another module of the tree, installed code not in :data:`SAFE_BASES`), a class keyword, such a
decorator on a method, or a class attribute made by a call. A decorator keeps nothing when it is
installed code in :data:`PURE_DECORATORS`, or a function of the tree whose parameter and inner
functions are only returned, called or handed to ``functools.wraps``, with no ``global`` or
``nonlocal`` (a factory: when it only returns such decorators).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Mapping, Sequence

from fuseci.ab.effects import imported_as, qualified
from fuseci.config.resolve import dotted

#: Decorators of installed code that wrap or compile a function and keep it nowhere another
#: case could call it from.
PURE_DECORATORS = frozenset(
    {"staticmethod", "classmethod", "property", "typing.overload", "typing.final", "typing.no_type_check"}
    | {"functools.cache", "functools.lru_cache", "functools.cached_property", "functools.wraps"}
    | {"functools.total_ordering", "dataclasses.dataclass", "abc.abstractmethod"}
    | {"contextlib.contextmanager", "contextlib.asynccontextmanager", "triton.jit", "triton.autotune"}
    | {"triton.heuristics", "torch.compile", "torch.no_grad", "torch.inference_mode", "torch.enable_grad"}
    | {"torch.jit.script", "torch.jit.ignore", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd"}
    | {"torch.amp.custom_fwd", "torch.amp.custom_bwd", "cupy.fuse", "jax.jit"}
    | {"numba.jit", "numba.njit", "numba.cuda.jit", "numba.vectorize"}
)
#: Base classes of installed code whose subclasses are registered nowhere.
SAFE_BASES = frozenset(
    {"torch.autograd.Function", "torch.nn.Module", "enum.Enum", "enum.IntEnum", "enum.Flag", "enum.IntFlag"}
    | {"typing.NamedTuple", "typing.Generic", "typing.Protocol", "abc.ABC"}
)
#: Calls a class body may make without handing the class to anyone.
_PURE_CLASS_CALLS = frozenset({"dataclasses.field"})
#: Calls that only copy a wrapped function's metadata.
_WRAPS = frozenset({"wraps", "functools.wraps", "update_wrapper", "functools.update_wrapper"})

_Function = ast.FunctionDef | ast.AsyncFunctionDef
Resolver = Callable[[str], "ast.FunctionDef | ast.AsyncFunctionDef | bool"]
"""What an imported dotted name stands for: a function of the tree, True for installed code, False: unknown."""

_BUILTINS = frozenset(dir(builtins))


def _keeps(fn: _Function, watched: set[str]) -> bool:
    """Whether ``fn`` may keep one of ``watched`` (parameters) or its inner functions other than by returning."""
    nested = {n.name for n in ast.walk(fn) if isinstance(n, _Function | ast.ClassDef) and n is not fn}
    names = watched | nested
    parents = {child: parent for parent in ast.walk(fn) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Global | ast.Nonlocal):
            return True
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
            parent = parents.get(node)
            if isinstance(parent, ast.Return):
                continue
            if isinstance(parent, ast.Call) and (parent.func is node or dotted(parent.func) in _WRAPS):
                continue
            return True
    return False


def keeps_what_it_decorates(fn: _Function, factory: bool) -> bool:
    """Whether the decorator (``factory``: decorator factory) ``fn`` may keep what it decorates (module docstring)."""
    if not factory:
        params = [*fn.args.posonlyargs, *fn.args.args]
        return not params or _keeps(fn, {params[0].arg})
    inner = {n.name: n for n in fn.body if isinstance(n, _Function)}
    returned = [s.value.id for s in fn.body if isinstance(s, ast.Return) and isinstance(s.value, ast.Name)]
    if not returned or any(r not in inner for r in returned) or _keeps(fn, set()):
        return True
    return any(keeps_what_it_decorates(inner[r], factory=False) for r in returned)


class Escapes:
    """The top-level definitions of one module that escape (see the module's docstring)."""

    def __init__(
        self, defs: Mapping[str, Sequence[ast.stmt]], names: Mapping[str, set[str]], resolver: Resolver
    ) -> None:
        self.defs, self.names, self.resolver = defs, names, resolver

    def of(self) -> set[str]:
        """The names of the escaping definitions."""
        return {name for name, nodes in self.defs.items() if any(self._escapes(n, set()) for n in nodes)}

    def _escapes(self, node: ast.stmt, seen: set[str]) -> bool:
        if isinstance(node, _Function):
            return any(self._keeps(d) for d in node.decorator_list)
        if isinstance(node, ast.ClassDef):
            return self._class_escapes(node, seen | {node.name})
        return False

    def _keeps(self, decorator: ast.expr) -> bool:
        """Whether a decorator (an expression in a ``@`` line) may keep what it decorates."""
        factory = isinstance(decorator, ast.Call)
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        root = dotted(func).partition(".")[0]
        if isinstance(func, ast.Name) and func.id in self.defs:
            nodes = self.defs[func.id]
            return len(nodes) != 1 or not isinstance(nodes[0], _Function) or keeps_what_it_decorates(nodes[0], factory)
        if root in self.names:
            imported = imported_as(func, self.names)
            return not imported or any(self._imported_keeps(q, factory) for q in imported)
        return not (root in _BUILTINS and root not in self.defs and dotted(func) in PURE_DECORATORS)

    def _imported_keeps(self, name: str, factory: bool) -> bool:
        found = self.resolver(name)
        if isinstance(found, bool):
            return not (found and name in PURE_DECORATORS)
        return keeps_what_it_decorates(found, factory)

    def _class_escapes(self, node: ast.ClassDef, seen: set[str]) -> bool:
        if node.keywords or any(self._keeps(d) for d in node.decorator_list):
            return True
        if any(not self._inert_base(b, seen) for b in node.bases):
            return True
        return any(self._member_escapes(s, seen) for s in node.body)

    def _member_escapes(self, stmt: ast.stmt, seen: set[str]) -> bool:
        if isinstance(stmt, _Function | ast.ClassDef):
            return self._escapes(stmt, seen)
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign) and stmt.value is not None:
            calls = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)]
            return any(not (qualified(c.func, self.names) & _PURE_CLASS_CALLS) for c in calls)
        return False

    def _inert_base(self, base: ast.expr, seen: set[str]) -> bool:
        """Whether creating a subclass of ``base`` runs no code that may keep the subclass."""
        base = base.value if isinstance(base, ast.Subscript) else base
        root = dotted(base).partition(".")[0]
        if isinstance(base, ast.Name) and base.id in self.defs:
            nodes = self.defs[base.id]
            if base.id in seen or len(nodes) != 1 or not isinstance(nodes[0], ast.ClassDef):
                return False
            cls = nodes[0]
            hooks = any(isinstance(s, _Function) and s.name == "__init_subclass__" for s in cls.body)
            return not hooks and not self._class_escapes(cls, seen | {cls.name})
        if root in self.names:
            imported = imported_as(base, self.names)
            return bool(imported) and all(self.resolver(q) is True and q in SAFE_BASES for q in imported)
        return isinstance(base, ast.Name) and base.id in _BUILTINS
