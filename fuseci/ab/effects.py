"""What a module file does that reaches other files, read from its source with :mod:`ast`
(nothing imported or run; wherever it stands in the file: more than runs, never less): the modules
it may import, the files it reads, the directories it adds to ``sys.path``, the shared registries
it uses, and whatever of that it names only at run time (:attr:`Effects.unknown`).

A path is *named* when it is built only from string literals, the module's ``__file__`` and
names the module assigns once at top level, with ``pathlib.Path`` (``/``, ``parent``,
``with_name``, ``with_suffix``, ``joinpath``, ``resolve``, ``absolute``), ``os.path`` (``join``,
``dirname``, ``abspath``, ``realpath``, ``normpath``), ``str``, ``os.fspath`` and f-strings; a
relative path is taken from the harness's working directory, the tree's root.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fuseci.config.resolve import dotted

#: Calls that start a process, which may read any file.
_PROCESSES = ("subprocess.", "os.system", "os.popen", "os.exec", "os.spawn", "os.posix_spawn", "pty.spawn")
#: Calls that load code by path or build it at run time.
_CODE_LOADERS = frozenset(
    {"importlib.util.spec_from_file_location", "importlib.machinery.SourceFileLoader", "runpy.run_path"}
    | {"importlib.machinery.SourcelessFileLoader", "importlib.machinery.ExtensionFileLoader", "runpy.run_module"}
    | {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}
)
_OPENERS = frozenset(
    {"open", "io.open", "io.open_code", "os.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open", "tarfile.open"}
)
#: Library calls that read the files they are given: qualified name → (positional arguments,
#: keywords) that name files or directories.
READERS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "numpy.load": ((0,), ("file",)),
    "numpy.fromfile": ((0,), ("file",)),
    "numpy.loadtxt": ((0,), ("fname",)),
    "numpy.genfromtxt": ((0,), ("fname",)),
    "numpy.memmap": ((0,), ("filename",)),
    "cupy.load": ((0,), ("file",)),
    "cupy.fromfile": ((0,), ("file",)),
    "torch.load": ((0,), ("f",)),
    "torch.ops.load_library": ((0,), ("path",)),
    "torch.utils.cpp_extension.load": ((1,), ("sources", "extra_include_paths")),
    "torch.utils.cpp_extension.load_inline": ((), ("extra_include_paths",)),
    "cupy.RawModule": ((), ("path",)),
    "ctypes.CDLL": ((0,), ("name",)),
    "ctypes.PyDLL": ((0,), ("name",)),
    "ctypes.cdll.LoadLibrary": ((0,), ("name",)),
    "os.listdir": ((0,), ("path",)),
    "os.scandir": ((0,), ("path",)),
    "os.walk": ((0,), ("top",)),
    "glob.glob": ((0,), ("pathname",)),
    "glob.iglob": ((0,), ("pathname",)),
    "zipfile.ZipFile": ((0,), ("file",)),
    "h5py.File": ((0,), ("name",)),
    "safetensors.torch.load_file": ((0,), ("filename",)),
    "pkgutil.get_data": ((), ()),
}
#: Methods that read the path they are called on.
_PATH_READS = frozenset({"read_text", "read_bytes", "open", "iterdir", "glob", "rglob"})
#: CuPy's compilers, whose ``options`` may name include directories (``-I``).
_CUDA_COMPILERS = frozenset({"cupy.RawKernel", "cupy.RawModule", "cupy.ElementwiseKernel", "cupy.ReductionKernel"})
#: Registries of a framework that any module imported into the harness process may fill, and
#: any other may call through: a module that uses one depends on every module of its suite.
SHARED_REGISTRIES = ("torch.ops",)

#: Calls that join the paths they are given.
_PATH_JOINS = frozenset(
    {"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.PurePosixPath", "Path"}
    | {"str", "os.fspath", "os.path.join"}
)
_PATH_IDENTITY = frozenset({"os.path.abspath", "os.path.realpath", "os.path.normpath"})


@dataclass(frozen=True, slots=True)
class Effects:
    """What one module file reaches beyond its own source."""

    imports: frozenset[str] = frozenset()
    """Every module name it may import (after ``from X import y``, ``X.y`` too: ``y`` may be a submodule)."""
    reads: tuple[Path, ...] = ()
    """Files and directories it reads, absolute and normalised."""
    paths: tuple[Path, ...] = ()
    """Directories it adds to ``sys.path``, absolute and normalised."""
    unknown: tuple[str, ...] = ()
    """What it does that cannot be named statically, each ``line N: what``."""
    registries: tuple[str, ...] = ()
    """The :data:`SHARED_REGISTRIES` it uses."""


def import_target(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute module ``from ... import`` reads from; None when it climbs above the top-level package."""
    if not node.level:
        return node.module or ""
    package = module if is_package else module.rpartition(".")[0]
    base_parts = [p for p in package.split(".") if p]
    if node.level - 1 > len(base_parts):
        return None
    base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
    return ".".join(p for p in (base, node.module or "") if p)


def aliases(tree: ast.AST, module: str = "", is_package: bool = False) -> dict[str, set[str]]:
    """Each name an import binds anywhere in the module → the dotted names it may stand for."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                out.setdefault(local, set()).add(a.name if a.asname else local)
        elif isinstance(node, ast.ImportFrom):
            target = import_target(node, module, is_package)
            for a in node.names:
                if target is not None and a.name != "*":
                    out.setdefault(a.asname or a.name, set()).add(f"{target}.{a.name}" if target else a.name)
    return out


def imported_as(node: ast.AST, names: Mapping[str, set[str]]) -> set[str]:
    """The dotted names ``node`` (a name or attribute chain) stands for through the imports binding its root."""
    root, _, rest = dotted(node).partition(".")
    return {f"{q}.{rest}" if rest else q for q in names.get(root, ())} if root else set()


def qualified(node: ast.AST, names: Mapping[str, set[str]]) -> set[str]:
    """The dotted names ``node`` may stand for: as written, and through imports (``builtins.x`` as ``x`` too)."""
    written = dotted(node)
    if not written:
        return set()
    out = {written, *imported_as(node, names)}
    return out | {q.removeprefix("builtins.") for q in out if q.startswith("builtins.")}


def _writes_only(mode: ast.expr | None) -> bool:
    """Whether an ``open`` mode is a literal that only writes (``w``, ``a``, ``x``, no ``+``)."""
    if not isinstance(mode, ast.Constant) or not isinstance(mode.value, str):
        return False
    return "r" not in mode.value and "+" not in mode.value


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if 0 <= position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


class _Reader:
    """One module's source, read for its effects."""

    def __init__(self, tree: ast.Module, module: str, is_package: bool, file: Path, cwd: Path) -> None:
        self.tree, self.module, self.is_package = tree, module, is_package
        self.file, self.cwd = file, cwd
        self.names = aliases(tree, module, is_package)
        self.assigned = _assigned_once(tree)
        self.imports: set[str] = set()
        self.reads: list[Path] = []
        self.paths: list[Path] = []
        self.unknown: list[str] = []
        self.registries: set[str] = set()

    def effects(self) -> Effects:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                self._store(node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                quals = qualified(node, self.names)
                self.registries.update(r for r in SHARED_REGISTRIES if any(q.startswith(r) for q in quals))
        return Effects(
            frozenset(n for n in self.imports if n),
            tuple(dict.fromkeys(self.reads)),
            tuple(dict.fromkeys(self.paths)),
            tuple(dict.fromkeys(self.unknown)),
            tuple(sorted(self.registries)),
        )

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            self.imports.update(a.name for a in node.names)
            return
        target = import_target(node, self.module, self.is_package)
        if target is None:
            return
        self.imports.add(target)
        self.imports.update(f"{target}.{a.name}" if target else a.name for a in node.names if a.name != "*")

    def _say(self, node: ast.AST, what: str) -> None:
        self.unknown.append(f"line {getattr(node, 'lineno', 0)}: {what}")

    def _call(self, node: ast.Call) -> None:
        quals = qualified(node.func, self.names)
        if quals & {"importlib.import_module", "__import__"}:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.imports.add(first.value)
            else:
                self._say(node, "imports a module it names at run time")
        elif quals & _CODE_LOADERS:
            self._say(node, f"loads or builds code at run time ({sorted(quals & _CODE_LOADERS)[0]})")
        elif any(q.startswith(_PROCESSES) for q in quals):
            self._say(node, "starts a process, which may read any file")
        elif quals & {"pkgutil.extend_path", "pkgutil.get_data"}:
            self._say(node, f"finds files at run time ({sorted(quals)[0]})")
        elif "site.addsitedir" in quals:
            self._add_path(_argument(node, 0, "sitedir"), node)
        elif quals & _OPENERS:
            mode = None if "os.open" in quals else _argument(node, 1, "mode")
            if not _writes_only(mode):
                self._read(_argument(node, 0, "file"), node)
        elif any(q in READERS for q in quals):
            self._library_read(node, next(q for q in sorted(quals) if q in READERS))
        elif isinstance(node.func, ast.Attribute) and not self._sys_path_call(node):
            self._method_read(node)
        if quals & _CUDA_COMPILERS:
            position = 2 if quals & {"cupy.RawKernel", "cupy.RawModule"} else -1
            self._include_dirs(_argument(node, position, "options"), node)

    def _method_read(self, node: ast.Call) -> None:
        """``p.read_text()``, ``p.open()``, ``p.glob(...)``: a read of the path ``p``."""
        assert isinstance(node.func, ast.Attribute)
        on_module = dotted(node.func.value).partition(".")[0] in self.names  # ``np.load``, not ``p.open``
        if node.func.attr not in _PATH_READS or on_module:
            return
        if node.func.attr != "open" or not _writes_only(_argument(node, 0, "mode")):
            self._read(node.func.value, node)

    def _library_read(self, node: ast.Call, qual: str) -> None:
        positions, keywords = READERS[qual]
        given = [a for i in positions if (a := _argument(node, i, "\0")) is not None]
        given += [k.value for k in node.keywords if k.arg in keywords]
        for arg in given:
            for item in arg.elts if isinstance(arg, ast.List | ast.Tuple) else [arg]:
                self._read(item, node)

    def _include_dirs(self, options: ast.expr | None, node: ast.Call) -> None:
        if options is None:
            return
        if not isinstance(options, ast.List | ast.Tuple):
            self._say(node, "compiles CUDA code with options it builds at run time (include directories?)")
            return
        for item in options.elts:
            text = self.value(item)
            if text is None:
                self._say(node, "compiles CUDA code with an option it builds at run time (an include directory?)")
            elif text.startswith(("-I", "--include-path=")):
                self.reads.append(self._absolute(text.removeprefix("--include-path=").removeprefix("-I")))

    def _sys_path_call(self, node: ast.Call) -> bool:
        """A call of a ``sys.path`` method: handled (True) or not one (False)."""
        assert isinstance(node.func, ast.Attribute)
        receiver = qualified(node.func.value, self.names)
        if receiver & {"sys.meta_path", "sys.path_hooks"}:
            self._say(node, "installs an import hook")
            return True
        if "__path__" in receiver:
            self._say(node, "sets its package's __path__")
            return True
        if "sys.path" not in receiver:
            return False
        method = node.func.attr
        if method == "insert" and len(node.args) == 2:
            self._add_path(node.args[1], node)
        elif method == "append" and node.args:
            self._add_path(node.args[0], node)
        elif method == "extend" and node.args:
            self._add_paths(node.args[0], node)
        elif method not in ("index", "count", "copy"):
            self._say(node, f"edits sys.path (sys.path.{method})")
        return True

    def _store(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            quals = qualified(base, self.names)
            if "sys.path" in quals and not isinstance(node, ast.Delete) and node.value is not None:
                self._add_paths(node.value, node)
            elif "sys.path" in quals or quals & {"sys.meta_path", "sys.path_hooks"}:
                self._say(node, "edits sys.path or the import hooks")
            elif isinstance(base, ast.Name) and base.id == "__path__":
                self._say(node, "sets its package's __path__")

    def _add_paths(self, value: ast.expr, node: ast.AST) -> None:
        parts = [value]
        while parts:
            item = parts.pop()
            if isinstance(item, ast.BinOp) and isinstance(item.op, ast.Add):
                parts += [item.left, item.right]
            elif isinstance(item, ast.List | ast.Tuple):
                for elt in item.elts:
                    self._add_path(elt, node)
            elif "sys.path" not in qualified(item, self.names):
                self._say(node, "sets sys.path to entries it names at run time")

    def _add_path(self, value: ast.expr | None, node: ast.AST) -> None:
        text = None if value is None else self.value(value)
        if text is None:
            self._say(node, "adds a sys.path entry it names at run time")
        else:
            self.paths.append(self._absolute(text))

    def _read(self, value: ast.expr | None, node: ast.AST) -> None:
        text = None if value is None else self.value(value)
        if text is None:
            self._say(node, "reads a file it names at run time")
        else:
            self.reads.append(self._absolute(text))

    def _absolute(self, text: str) -> Path:
        return Path(posixpath.normpath(posixpath.join(self.cwd.as_posix(), text)))

    def value(self, node: ast.expr, depth: int = 0) -> str | None:
        """The path (or string) ``node`` evaluates to when it is named (see the module's docstring), else None."""
        if depth > 30:
            return None
        match node:
            case ast.Constant(value=str() as text):
                return text
            case ast.Name(id="__file__"):
                return self.file.as_posix()
            case ast.Name(id=name) if name in self.assigned:
                return self.value(self.assigned[name], depth + 1)
            case ast.JoinedStr(values=parts):
                texts = [self._formatted(p, depth) for p in parts]
                return None if any(t is None for t in texts) else "".join(t for t in texts if t is not None)
            case ast.BinOp(left=left, op=ast.Div() | ast.Add() as op, right=right):
                a, b = self.value(left, depth + 1), self.value(right, depth + 1)
                if a is None or b is None:
                    return None
                return posixpath.join(a, b) if isinstance(op, ast.Div) else a + b
            case ast.Attribute(value=inner, attr="parent"):
                got = self.value(inner, depth + 1)
                return None if got is None else posixpath.dirname(posixpath.normpath(got))
            case ast.Call():
                return self._called(node, depth)
        return None

    def _formatted(self, part: ast.expr, depth: int) -> str | None:
        if isinstance(part, ast.FormattedValue):
            return None if part.format_spec is not None else self.value(part.value, depth + 1)
        return self.value(part, depth + 1)

    def _called(self, node: ast.Call, depth: int) -> str | None:
        args = [self.value(a, depth + 1) for a in node.args]
        if node.keywords or any(a is None for a in args):
            return None
        texts = [a for a in args if a is not None]
        quals = qualified(node.func, self.names)
        if quals & _PATH_JOINS and texts:
            return posixpath.join(*texts)
        if quals & _PATH_IDENTITY and len(texts) == 1:
            return texts[0]
        if "os.path.dirname" in quals and len(texts) == 1:
            return posixpath.dirname(texts[0])
        if not isinstance(node.func, ast.Attribute):
            return None
        receiver = self.value(node.func.value, depth + 1)
        return None if receiver is None else _path_method(receiver, node.func.attr, texts)


def _path_method(receiver: str, method: str, texts: list[str]) -> str | None:
    """A ``pathlib`` method's result on a named path."""
    if method in ("resolve", "absolute", "as_posix", "expanduser") and not texts:
        return receiver
    if method == "with_name" and len(texts) == 1:
        return posixpath.join(posixpath.dirname(posixpath.normpath(receiver)), texts[0])
    if method == "with_suffix" and len(texts) == 1:
        return posixpath.splitext(receiver)[0] + texts[0]
    if method == "joinpath":
        return posixpath.join(receiver, *texts)
    return None


def _assigned_once(tree: ast.Module) -> dict[str, ast.expr]:
    """Top-level names assigned exactly once in the whole module (``name = value``), and their values."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.alias):
            local = node.asname or node.name.split(".")[0]
            counts[local] = counts.get(local, 0) + 1
    out: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            name, value = stmt.target.id, stmt.value
        else:
            continue
        if counts.get(name) == 1:
            out[name] = value
    return out


def effects(tree: ast.Module, module: str, is_package: bool, file: Path, cwd: Path) -> Effects:
    """What ``module`` (parsed as ``tree``, from ``file``) reaches beyond its source, run in ``cwd``."""
    return _Reader(tree, module, is_package, file, cwd).effects()
