"""A tree as ``fuseci ab``'s side imports from it, read statically (nothing imported or run):
where the modules a suite names are found (:class:`Tree`, :class:`Reader`), and every file of the
tree that importing them may run or read (:meth:`Reader.walk`, :func:`suite_walk`)."""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from fuseci.ab.effects import effects
from fuseci.config.model import Suite
from fuseci.config.resolve import ModuleFinder, editable_locations, environment_dirs, suite_finder

#: Largest source file parsed for its imports (a larger one is still hashed).
MAX_PARSED_BYTES = 4 << 20
#: Most files one fingerprint follows; past it the suite counts as changed (``complete`` False).
MAX_FILES = 5_000
#: Most rounds of following imports again after a file added a directory to ``sys.path``.
MAX_ROUNDS = 8


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a link loop
        return False


def _installed_code(path: Path, env: tuple[Path, ...]) -> bool:
    """Whether ``path`` is under one of ``env`` (:func:`~fuseci.config.resolve.environment_dirs`)."""
    return any(_inside(path, d) for d in env)


@dataclass(frozen=True, slots=True)
class Tree:
    """A tree as the harness processes measuring in it import from it."""

    root: Path
    """The tree's root, resolved: the harness's working directory, first on its search path."""
    roots: tuple[Path, ...] = ()
    """More directories of this tree the environment imports from, in order (first on ``PYTHONPATH``)."""
    installed: tuple[str, ...] | None = None
    """The rest of the interpreter's search path (None: ``sys.path`` as it is)."""
    repo: Path | None = None
    """The repository's working tree: a module there but outside :attr:`root` is never an installed one."""


def _entry(entry: str) -> Path:
    return Path(os.path.realpath(entry or os.getcwd()))


def tree_of(root: Path, repo: Path | None = None) -> Tree:
    """How the harness measuring in ``root`` (a checkout of ``repo``) imports: every directory inside ``repo``
    this interpreter finds modules through (``sys.path``, editable installs) becomes that of ``root``,
    but the interpreter's own and one that would put a ``fuseci`` package first."""
    root = root.resolve()
    if repo is None:
        return Tree(root)
    repo = repo.resolve()
    env = environment_dirs()
    mapped: list[Path] = []
    installed: list[str] = []
    for entry in sys.path:
        where = _entry(entry)
        if where.exists() and where.is_relative_to(repo) and not any(where.is_relative_to(d) for d in env):
            mapped.append(root / where.relative_to(repo))
        else:
            installed.append(entry)
    for name, location in sorted(editable_locations().items()):
        where = _entry(str(location))
        if where.is_relative_to(repo) and where.name in (name, f"{name}.py"):
            mapped.append(root / where.parent.relative_to(repo))
    roots = tuple(p for p in dict.fromkeys(mapped) if p != root and not (p / "fuseci").exists())
    return Tree(root, roots, tuple(installed), repo)


#: A module file to follow: its path, the dotted name it runs as, whether it is a package's.
ModuleFile = tuple[Path, str, bool]


@dataclass(frozen=True, slots=True)
class Located:
    """Where a module name leads, from one tree."""

    files: tuple[ModuleFile, ...] = ()
    """The files of the tree importing it runs (each package's ``__init__.py``, then its own)."""
    own: bool = False
    """Whether the last of :attr:`files` is the module's own file (not a package's on the way)."""
    outside: bool = False
    """Found, outside the tree and the repository: installed code."""
    unproven: str = ""
    """Why it cannot be followed (in the repository outside this tree, or a package setting ``__path__``)."""


@dataclass(frozen=True, slots=True)
class Walked:
    """The files an import graph reaches inside a tree."""

    files: dict[str, str]
    """Tree-relative path → SHA-256 of its bytes (or ``unreadable``, or ``absent`` for a missing file read)."""
    complete: bool
    """False when :data:`MAX_FILES` was reached before the end."""
    imported: frozenset[str]
    """Tree-relative paths reached through an import of a file (itself too), not only as a start."""
    unproven: tuple[str, ...] = ()
    """What could not be followed, each ``path:line what``."""
    paths: frozenset[Path] = frozenset()
    """Directories of the tree that files add to ``sys.path``."""
    registries: frozenset[str] = frozenset()
    """Tree-relative paths of the files using a shared registry (:data:`fuseci.ab.effects.SHARED_REGISTRIES`)."""


class Reader:
    """The files of one tree that a suite's modules reach, found as the harness finds them."""

    def __init__(self, suite: Suite, tree: Path | Tree) -> None:
        self.tree = tree if isinstance(tree, Tree) else tree_of(tree)
        self.root = self.tree.root
        self.suite = suite
        self.added: tuple[Path, ...] = ()
        self.env = environment_dirs()
        self.finder = self._finder()

    def _finder(self) -> ModuleFinder:
        return suite_finder(
            self.suite, self.root, before=self.added, after=self.tree.roots, installed=self.tree.installed
        )

    def add(self, paths: Iterable[Path]) -> bool:
        """Search ``paths`` (directories files add to ``sys.path``) first from now on; whether any was new."""
        new = sorted(set(paths) - set(self.added))
        if new:
            self.added = (*new, *self.added)
            self.finder = self._finder()
        return bool(new)

    def locate(self, name: str) -> Located:
        """Where module ``name`` leads from this tree."""
        found = self.finder.find(name)
        files: list[ModuleFile] = []
        for spec in found.specs:
            if not spec.origin or not spec.has_location:
                continue  # built in, frozen, or a namespace package: no file of its own
            path = Path(spec.origin)
            if _inside(path, self.root) and not _installed_code(path, self.env):
                files.append((path, spec.name, spec.submodule_search_locations is not None))
            elif self.tree.repo is not None and _inside(path, self.tree.repo) and not _installed_code(path, self.env):
                return Located(
                    unproven=f"module {spec.name} is found at {path}, in the repository but outside this tree"
                )
            else:
                return Located(outside=True)
        if found.resolution is not None and found.resolution.unverified and files:
            return Located(tuple(files), unproven=found.resolution.unverified)
        own = found.resolution is None and bool(found.specs) and bool(files) and files[-1][1] == name
        return Located(tuple(files), own=own, outside=found.resolution is None and not files)

    def walk(self, start: Iterable[ModuleFile]) -> Walked:
        """Every file of the tree importing ``start`` may run or read, transitively, each hashed once."""
        return _Walk(self).run(list(start))


class _Walk:
    """One walk of an import graph (:meth:`Reader.walk`)."""

    def __init__(self, reader: Reader) -> None:
        self.reader, self.root = reader, reader.root
        self.files: dict[str, str] = {}
        self.imported: set[str] = set()
        self.unproven: list[str] = []
        self.paths: set[Path] = set()
        self.registries: set[str] = set()

    def run(self, todo: list[ModuleFile]) -> Walked:
        seen: set[Path] = set()
        complete = True
        while todo:
            where, module, is_package = todo.pop()
            path = where.resolve()
            if path in seen:
                continue
            if len(seen) >= MAX_FILES:
                complete = False
                break
            seen.add(path)
            todo.extend(self._file(path, module, is_package))
        return Walked(
            self.files,
            complete,
            frozenset(self.imported),
            tuple(sorted(set(self.unproven))),
            frozenset(self.paths),
            frozenset(self.registries),
        )

    def _file(self, path: Path, module: str, is_package: bool) -> list[ModuleFile]:
        """Hash one module file; what it imports, to follow."""
        rel = rel_path(path, self.root)
        try:
            data = path.read_bytes()
        except OSError:
            self.files[rel] = "unreadable"
            return []
        self.files[rel] = _sha(data)
        if path.suffix != ".py" or len(data) > MAX_PARSED_BYTES:
            return []  # compiled, or too large to read: its bytes are hashed
        try:
            parsed = ast.parse(data, filename=str(path))
        except (SyntaxError, ValueError):  # the harness will say so; the bytes are hashed
            return []
        found = effects(parsed, module, is_package, path, self.root)
        self.unproven += [f"{rel}:{u.removeprefix('line ')}" for u in found.unknown]
        self.paths.update(p for p in found.paths if _inside(p, self.root))
        if found.registries:
            self.registries.add(rel)
        for read in found.reads:
            if _inside(read, self.root) and not _installed_code(read, self.reader.env):
                hashes, whole = _read_hashes(read, self.root)
                self.files.update(hashes)
                if not whole:
                    where = rel_path(read.resolve(), self.root)
                    self.unproven.append(f"{rel}: reads {where}/, which holds more than {MAX_FILES} files")
        return self._imports(found.imports, rel)

    def _imports(self, names: Iterable[str], rel: str) -> list[ModuleFile]:
        out: list[ModuleFile] = []
        for name in sorted(names):
            located = self.reader.locate(name)
            if located.unproven:
                self.unproven.append(f"{rel}: imports {name}: {located.unproven}")
            if located.own:
                self.imported.add(rel_path(located.files[-1][0].resolve(), self.root))
            out.extend(located.files)
        return out


def _read_hashes(path: Path, root: Path) -> tuple[dict[str, str], bool]:
    """Tree-relative path → SHA-256 of a file read (or ``absent``), or of every file under a directory read
    (no ``__pycache__``), at most :data:`MAX_FILES`; and whether that is all of them."""
    if path.is_dir():
        listed = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        out = {rel_path(p.resolve(), root): _hash_file(p) for p in listed[:MAX_FILES]}
        return out or {rel_path(path.resolve(), root) + "/": "empty"}, len(listed) <= MAX_FILES
    return {rel_path(path.resolve(), root): _hash_file(path) if path.exists() else "absent"}, True


def _hash_file(path: Path) -> str:
    try:
        return _sha(path.read_bytes())
    except OSError:
        return "unreadable"


def suite_walk(reader: Reader) -> tuple[Walked, set[str], set[str]]:
    """Every file of the tree the suite's named modules reach, following the directories they add to
    ``sys.path`` (``reader`` searches them from then on); and the named modules installed, and missing."""
    names = sorted({ref.split(":")[0] for c in reader.suite.cases for ref in c.functions})
    for _ in range(MAX_ROUNDS):
        located = {name: reader.locate(name) for name in names}
        walked = reader.walk(f for where in located.values() for f in where.files)
        if not reader.add(walked.paths):
            break
    else:
        walked = _with_unproven(walked, f"sys.path edits still add directories after {MAX_ROUNDS} rounds")
    for name, where in located.items():
        if where.unproven:
            walked = _with_unproven(walked, f"{name}: {where.unproven}")
    outside = {name for name, where in located.items() if where.outside}
    missing = {name for name, where in located.items() if not (where.own or where.outside or where.unproven)}
    return walked, outside, missing


def _with_unproven(walked: Walked, reason: str) -> Walked:
    return replace(walked, unproven=tuple(sorted({*walked.unproven, reason})))


def rel_path(path: Path, tree: Path) -> str:
    return path.relative_to(tree).as_posix() if path.is_relative_to(tree) else path.as_posix()
