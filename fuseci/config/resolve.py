"""Whether a suite's ``module:function`` references resolve, decided from the file system and
the modules' source alone: nothing is imported or run (even ``find_spec`` runs a package's
``__init__``). A reference whose names its source cannot show is *not verified*, never valid."""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import itertools
import os
import site
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.machinery import BuiltinImporter, FrozenImporter, ModuleSpec, SourceFileLoader
from pathlib import Path
from typing import Any, cast

from fuseci.config.model import Suite

#: Largest module source parsed; a kernel module is a few hundred lines.
MAX_SOURCE_BYTES = 4 << 20


def search_path(suite: Suite, cwd: Path | None = None) -> list[Path]:
    """What the harness adds to ``sys.path``, in order: its working directory (``cwd``; None: this process's),
    then the directory above the suite file."""
    return [Path.cwd() if cwd is None else cwd, suite.path.resolve().parent.parent]


@dataclass(frozen=True, slots=True)
class Resolution:
    """What reading a reference's module told about it."""

    problem: str = ""
    """Why the reference cannot be called (empty when nothing is wrong as far as can be told)."""
    unverified: str = ""
    """Why its module exists but its names could not be read (empty when they were)."""


@dataclass(frozen=True, slots=True)
class Unresolved:
    """One reference of a suite that does not resolve, or that could not be verified."""

    line: int
    """Line of the reference in the suite file (0 when unknown)."""
    field: str
    """Where it is, as messages name fields: ``case 'c1'.variants.fused``."""
    ref: str
    """The ``module:function`` reference."""
    resolution: Resolution
    """What was found."""


def environment_dirs() -> tuple[Path, ...]:
    """Where this interpreter's own code lives, resolved: the standard library, the site directories and a whole
    virtual environment. A file under one is installed code, never a tree's, even inside a repository."""
    paths = sysconfig.get_paths()
    dirs = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths] + _site_dirs()
    if sys.prefix != sys.base_prefix:  # a virtual environment: all of it (its bin/ too) is installed
        dirs.append(sys.prefix)
    return tuple(dict.fromkeys(Path(os.path.realpath(d)) for d in dirs if d))


def _site_dirs() -> list[str]:
    return [*site.getsitepackages(), site.getusersitepackages()] if hasattr(site, "getsitepackages") else []


def _read_source(path: Path) -> bytes | None:
    """A source file's bytes, or None when it is larger than :data:`MAX_SOURCE_BYTES` (OSError when unreadable)."""
    with path.open("rb") as f:
        raw = f.read(MAX_SOURCE_BYTES + 1)
    return raw if len(raw) <= MAX_SOURCE_BYTES else None


def _literal_str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _editable_entries(source: Path) -> dict[str, Path]:
    """An editable finder's top-level names → locations: setuptools' ``MAPPING``, editables' ``F.map_module``."""
    try:
        raw = _read_source(source)
        tree = ast.parse(raw or b"", filename=str(source))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, Path] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in node.targets):
                for key, value in zip(node.value.keys, node.value.values, strict=False):
                    name, where = (_literal_str(key) if key else None), _literal_str(value)
                    if name and where:
                        found.setdefault(name, Path(where))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "map_module":
            args = [_literal_str(a) for a in node.args[:2]]
            if len(args) == 2 and args[0] and args[1]:
                found.setdefault(args[0], Path(args[1]))
    return found


@functools.lru_cache(maxsize=1)
def _editable_map() -> dict[str, Path]:
    """Top-level name → location of every editable install, from the finders in the site directories."""
    found: dict[str, Path] = {}
    for directory in dict.fromkeys(Path(d) for d in _site_dirs()):
        for finder in sorted([*directory.glob("__editable__*finder.py"), *directory.glob("_editable_impl_*.py")]):
            for name, where in _editable_entries(finder).items():
                found.setdefault(name, where)
    return found


def editable_locations() -> dict[str, Path]:
    """Top-level name → location (a package directory or a module file) of every editable install."""
    return dict(_editable_map())


def _spec_at(name: str, location: Path) -> ModuleSpec | None:
    """The spec of module ``name`` at ``location`` (a package directory or a module file)."""
    if location.is_dir():
        init = location / "__init__.py"
        if init.is_file():
            return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(location)])
        namespace = ModuleSpec(name, None, is_package=True)
        namespace.submodule_search_locations = [str(location)]
        return namespace
    return importlib.util.spec_from_file_location(name, location) if location.is_file() else None


def _path_hook_finder(entry: str) -> Any:
    """The finder of one search path entry: the import system's cached one, else a path hook's (never imports)."""
    cached = sys.path_importer_cache.get(entry)
    if cached is not None:
        return cached
    for hook in sys.path_hooks:
        try:
            return hook(entry)
        except ImportError:  # this hook does not handle such an entry (not a directory, not a zip)
            continue
    return None


def _package_sets_path(spec: ModuleSpec) -> bool:
    """Whether a package's ``__init__`` may extend its ``__path__`` (``pkgutil.extend_path``): submodules anywhere."""
    origin = spec.origin
    if not origin or not origin.endswith(".py"):
        return False
    try:
        raw = _read_source(Path(origin))
    except OSError:
        return False
    return raw is None or b"__path__" in raw


@dataclass(frozen=True, slots=True)
class Found:
    """What looking a dotted module name up found."""

    specs: tuple[ModuleSpec, ...]
    """The spec of each package on the way, then the module's own: as far as they were found."""
    resolution: Resolution | None = None
    """Why the module itself was not found (None when it was: ``specs`` ends with its spec)."""


class ModuleFinder:
    """Modules found on one search path from the file system alone, nothing imported or run: a
    top-level name among Python's built-in and frozen modules, then in the first of ``roots``
    that holds it (as :class:`importlib.machinery.PathFinder` finds it), then in the maps of the
    editable installs; each submodule by the same search in its parent package's directories."""

    def __init__(self, roots: Sequence[Path | str]) -> None:
        self.roots = [str(r) for r in roots]
        self._finder = functools.cache(_path_hook_finder)
        self._found: dict[str, Found] = {}

    def _find_in(self, name: str, entries: list[str]) -> ModuleSpec | None:
        """Module ``name`` in the first of ``entries`` that holds it (a namespace package: from every entry). Not
        ``PathFinder.find_spec``, whose namespace packages look their parent up in ``sys.modules``."""
        portions: list[str] = []
        for entry in entries:
            finder = self._finder(entry)
            spec = finder.find_spec(name) if finder is not None and hasattr(finder, "find_spec") else None
            if spec is None:
                continue
            if spec.loader is not None:
                return cast(ModuleSpec, spec)
            portions += list(spec.submodule_search_locations or ())
        if not portions:
            return None
        namespace = ModuleSpec(name, None, is_package=True)
        namespace.submodule_search_locations = portions
        return namespace

    def find(self, module: str) -> Found:
        """Module ``module`` and the packages on the way to it (cached)."""
        if module not in self._found:
            self._found[module] = self._search(module)
        return self._found[module]

    def _search(self, module: str) -> Found:
        parts = module.split(".")
        if not all(p.isidentifier() for p in parts):
            return Found((), Resolution(problem=f"{module!r} is not a module name"))
        top = parts[0]
        spec = BuiltinImporter.find_spec(top) or FrozenImporter.find_spec(top) or self._find_in(top, self.roots)
        if spec is None and top in _editable_map():
            spec = _spec_at(top, _editable_map()[top])
        if spec is None:
            where = ", ".join(dict.fromkeys(self.roots[:2]))
            hint = _close_module(top, self.roots[:2])
            return Found((), Resolution(problem=f"no module {top!r} in {where} or the installed packages{hint}"))
        specs = [spec]
        for i, part in enumerate(parts[1:], 2):
            parent = specs[-1]
            if parent.submodule_search_locations is None:
                why = f"{parent.name!r} ({parent.origin}) is a module, not a package: it has no submodule {part!r}"
                return Found(tuple(specs), Resolution(problem=why))
            inside = list(parent.submodule_search_locations)
            found = self._find_in(".".join(parts[:i]), inside)
            if found is not None:
                specs.append(found)
            elif _package_sets_path(parent):
                why = (
                    f"package {parent.name!r} ({parent.origin}) sets its own __path__ when imported, so where "
                    f"{part!r} is cannot be read from the file system"
                )
                return Found(tuple(specs), Resolution(unverified=why))
            else:
                where = ", ".join(inside[:2]) or "no directory"
                why = f"package {parent.name!r} ({where}) has no module {part!r}{_close_module(part, inside[:2])}"
                return Found(tuple(specs), Resolution(problem=why))
        return Found(tuple(specs))


def _close_module(name: str, roots: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for a module or package close to ``name`` in ``roots`` (500 entries each), or ``""``."""
    found: set[str] = set()
    for root in roots:
        try:
            with os.scandir(root) as entries:
                for entry in itertools.islice(entries, 500):
                    stem = entry.name[:-3] if entry.name.endswith(".py") else entry.name
                    if stem.isidentifier() and (entry.name.endswith(".py") or entry.is_dir()):
                        found.add(stem)
        except OSError:
            continue
    close = difflib.get_close_matches(name, sorted(found), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def suite_finder(
    suite: Suite,
    cwd: Path | None = None,
    *,
    before: Sequence[Path] = (),
    after: Sequence[Path] = (),
    installed: Sequence[Path | str] | None = None,
) -> ModuleFinder:
    """The finder of the modules ``suite`` names, searching as its harness in ``cwd`` imports: ``before``,
    :func:`search_path`, ``after``, then ``installed`` (None: this interpreter's ``sys.path``)."""
    rest = [p for p in sys.path if p] if installed is None else installed
    return ModuleFinder([*before, *search_path(suite, cwd), *after, *rest])


def _top_level_names(body: list[ast.stmt]) -> tuple[set[str], bool]:
    """The names a module's top level defines (in every branch too), and whether it may define unseen others."""
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


def module_imports(tree: ast.Module) -> set[str]:
    """The top-level packages a module imports anywhere (``torch`` for ``import torch.nn``); relative ones: none."""
    return {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0)
        for alias in node.names
    } - {""}


def _source_of(spec: ModuleSpec) -> Path | Resolution:
    """The Python source file of a module that was found, or why its names cannot be read."""
    origin = spec.origin
    if spec.loader is None or origin is None:  # a namespace package: a directory, no module of its own
        where = ", ".join(spec.submodule_search_locations or [])
        return Resolution(
            problem=f"{spec.name!r} is a namespace package ({where}, no __init__.py): it defines no functions"
        )
    if isinstance(spec.loader, SourceFileLoader) and Path(origin).is_file():
        return Path(origin)
    if origin in ("built-in", "frozen"):
        return Resolution(unverified=f"module {spec.name!r} is built into Python: its names cannot be read from source")
    return Resolution(
        unverified=f"module {spec.name!r} ({origin}) has no Python source to read (a compiled extension?)"
    )


def _parsed(module: str, finder: ModuleFinder) -> tuple[Path, ast.Module] | Resolution:
    """The source file of ``module`` and its syntax tree, or why they cannot be read."""
    found = finder.find(module)
    if found.resolution is not None:
        return found.resolution
    source = _source_of(found.specs[-1])
    if isinstance(source, Resolution):
        return source
    try:
        raw = _read_source(source)
        if raw is None:
            return Resolution(unverified=f"module {module!r} ({source}) is over {MAX_SOURCE_BYTES >> 20} MiB: not read")
        return source, ast.parse(raw, filename=str(source))
    except (OSError, SyntaxError, ValueError) as exc:
        return Resolution(problem=f"module {module!r} ({source}) cannot be read: {type(exc).__name__}: {exc}")


def resolve(ref: str, finder: ModuleFinder) -> Resolution:
    """Whether ``module:function`` can be called, as far as the module's source tells."""
    module, _, func = ref.partition(":")
    parsed = _parsed(module, finder)
    if isinstance(parsed, Resolution):
        return parsed
    source, tree = parsed
    names, open_ended = _top_level_names(tree.body)
    if func in names:
        return Resolution()
    if open_ended:
        return Resolution(
            unverified=f"module {module!r} ({source}) does not define {func!r} in its source, but may at run time "
            "(from ... import *, or a module __getattr__)"
        )
    close = difflib.get_close_matches(func, sorted(n for n in names if not n.startswith("_")), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return Resolution(problem=f"module {module!r} ({source}) defines no {func!r}{hint}")


def resolve_suite(suite: Suite) -> list[Unresolved]:
    """Every reference of the suite that does not resolve or could not be verified, by line."""
    finder = suite_finder(suite)
    out: list[Unresolved] = []
    seen: dict[str, Resolution] = {}
    for case in suite.cases:
        refs = [(v.line, f"case {case.id!r}.variants.{v.id}", v.fn) for v in case.variants]
        if case.reference:
            refs.append((case.reference_line, f"case {case.id!r}.reference", case.reference))
        for line, field, ref in refs:
            found = seen.get(ref)
            if found is None:
                found = seen[ref] = resolve(ref, finder)
            if found.problem or found.unverified:
                out.append(Unresolved(line, field, ref, found))
    return sorted(out, key=lambda f: f.line)


#: Decorators, by the dotted name written, that leave the parameters of what they wrap as they
#: are: a function under any other decorator is not read (its wrapper may take other names).
SAME_PARAMETERS = frozenset(
    {
        *("torch.compile", "torch.no_grad", "torch.inference_mode", "torch.enable_grad"),
        *("functools.cache", "functools.lru_cache", "cache", "lru_cache"),
    }
)


@dataclass(frozen=True, slots=True)
class Parameters:
    """What a function's source says it takes, for a call by keyword (as the harness calls)."""

    function: str
    """The ``def`` read (``g`` for ``f = torch.compile(g)``)."""
    keywords: tuple[str, ...]
    """Names a keyword argument may have (every parameter but the positional-only ones)."""
    required: tuple[str, ...]
    """Of those, the ones without a default."""
    positional_only: tuple[str, ...]
    """Positional-only parameters without a default: no keyword call can give them."""
    open: bool
    """True with ``*args`` or ``**kwargs``: any other name may be passed."""
    kinds: tuple[tuple[str, str, str], ...] = ()
    """Each parameter whose source says its scalar type: name, type (``float``...) and why (``default 1e-06``)."""
    module_imports: frozenset[str] = frozenset()
    """The top-level packages its module imports (:func:`module_imports`)."""
    kernel: str = ""
    """The decorator that makes it a GPU kernel, not a function the harness can call (``triton.jit``), or ``""``."""
    literals: tuple[tuple[str, object], ...] = ()
    """Each keyword parameter whose default is a literal (``1e-06``, ``True``, ``"x"``) and that value."""


#: The scalar types a parameter's annotation or default may say, by their source.
SCALAR_TYPES = ("float", "int", "bool", "str")
#: Decorators, by what their name is imported as, that make a ``def`` a GPU kernel: it is
#: launched (``kernel[grid](...)``), never called as the harness calls a variant. Any of Triton's.
KERNEL_DECORATORS = frozenset({"numba.cuda.jit", "cupyx.jit.rawkernel"})


def _kinds(
    node: ast.FunctionDef | ast.AsyncFunctionDef, defaults: dict[str, ast.expr]
) -> tuple[tuple[str, str, str], ...]:
    out = []
    for p in (*node.args.args, *node.args.kwonlyargs):
        shown = ast.unparse(p.annotation) if p.annotation is not None else ""
        default = defaults.get(p.arg)
        value = default.value if isinstance(default, ast.Constant) else None
        if shown in SCALAR_TYPES:
            out.append((p.arg, shown, f"annotated {shown}"))
        elif p.annotation is None and type(value).__name__ in SCALAR_TYPES:
            out.append((p.arg, type(value).__name__, f"default {value!r}"))
    return tuple(out)


def _kernel(node: ast.FunctionDef | ast.AsyncFunctionDef, imports: dict[str, str]) -> str:
    """The decorator that makes ``node`` a GPU kernel (:data:`KERNEL_DECORATORS`), as written."""
    for d in node.decorator_list:
        name = dotted(d.func if isinstance(d, ast.Call) else d)
        head, _, rest = name.partition(".")
        full = ".".join(filter(None, (imports.get(head, head), rest)))
        if full.split(".")[0] == "triton" or full in KERNEL_DECORATORS:
            return name
    return ""


def dotted(node: ast.AST) -> str:
    """``a.b.c`` of a name or an attribute chain; empty for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _of_def(node: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module) -> Parameters | None:
    imports = {
        alias.asname or alias.name.split(".")[0]: (
            alias.name if isinstance(n, ast.Import) else f"{n.module or ''}.{alias.name}".lstrip(".")
        )
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for alias in n.names
    }
    kernel = _kernel(node, imports)
    if kernel:
        return Parameters(node.name, (), (), (), True, kernel=kernel)
    if any(dotted(d.func if isinstance(d, ast.Call) else d) not in SAME_PARAMETERS for d in node.decorator_list):
        return None
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults) :], a.defaults, strict=True))
    defaults |= {p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None}
    keywords = [p.arg for p in (*a.args, *a.kwonlyargs)]
    return Parameters(
        node.name,
        tuple(keywords),
        tuple(n for n in keywords if n not in defaults),
        tuple(p.arg for p in a.posonlyargs if p.arg not in defaults),
        a.vararg is not None or a.kwarg is not None,
        _kinds(node, defaults),
        frozenset(module_imports(tree)),
        literals=tuple((n, d.value) for n, d in defaults.items() if n in keywords and isinstance(d, ast.Constant)),
    )


def parameters(ref: str, finder: ModuleFinder) -> Parameters | None:
    """The parameters of ``module:function`` as its source shows them, nothing imported; None when they cannot be
    read: no module or source, a name bound more than once or not by a ``def`` (a partial, a class), a ``def``
    under a decorator not in :data:`SAME_PARAMETERS`. A name bound to ``torch.compile(g)`` is read as ``g``."""
    module, _, func = ref.partition(":")
    parsed = _parsed(module, finder)
    if isinstance(parsed, Resolution):
        return None
    tree = parsed[1]
    defs: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom)):
            for name in _top_level_names([node])[0]:
                defs.setdefault(name, []).append(node)
    stmt = defs[func][0] if len(defs.get(func, [])) == 1 else None
    wrapped = stmt.value if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
    if isinstance(wrapped, ast.Call) and dotted(wrapped.func) == "torch.compile" and wrapped.args:
        inner = wrapped.args[0]
        stmt = defs[inner.id][0] if isinstance(inner, ast.Name) and len(defs.get(inner.id, [])) == 1 else None
    return _of_def(stmt, tree) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
