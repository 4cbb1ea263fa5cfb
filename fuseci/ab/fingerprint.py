"""What a suite's measurement depends on in its tree, read statically: the fingerprint that lets
``fuseci ab`` skip a suite that did not change.

A suite's fingerprint covers:

* the bytes of its suite file;
* the source of every module its variants and references name (``module:function``), found on
  the harness's search path inside the tree (the tree's root, then the directory above the suite
  file), with the ``__init__.py`` of every package on the way;
* every module those import, transitively, that resolves to a file inside the same tree: read
  with :mod:`ast` from ``import``, ``from ... import`` (relative ones too), and
  ``importlib.import_module("name")`` / ``__import__("name")`` with a literal name, wherever they
  are in the file (inside functions, under ``if``: more than runs, never less);
* the version of the fuseci that measures.

It cannot see what is not Python source of the tree reached that way: a file a kernel reads at
run time (a ``.cu`` file, a table, a ``.so``), a module imported under a computed name,
installed packages (the same for both sides of one job: one environment measures both), the
environment (variables, driver, compilers, the GPU). A suite that depends on those should be
run with ``--all``, or its extra files named in the suite so that editing them changes the
suite file.

Nothing is imported or run: files are only read and parsed.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fuseci import __version__
from fuseci.config.model import Suite

#: Largest source file parsed for its imports (a larger one is still hashed).
MAX_PARSED_BYTES = 4 << 20
#: Most files one fingerprint follows; past it the suite counts as changed (``complete`` False).
MAX_FILES = 5_000


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a suite's measurement depends on in its tree, as far as can be read."""

    suite_file: str
    """SHA-256 of the suite file's bytes."""
    files: dict[str, str] = field(default_factory=dict)
    """Tree-relative path (``/``-separated) → SHA-256 of each module file followed."""
    outside: tuple[str, ...] = ()
    """Modules the suite names that are not in the tree (installed packages), sorted."""
    missing: tuple[str, ...] = ()
    """Modules the suite names that are found nowhere, sorted."""
    fuseci_version: str = __version__
    """The fuseci that measures."""
    complete: bool = True
    """False when :data:`MAX_FILES` was reached: the suite is then never skipped."""

    @property
    def beside_files(self) -> tuple[object, ...]:
        """Everything but the module files: equal on both sides, only module files differ."""
        return (self.suite_file, self.fuseci_version, self.outside, self.missing, self.complete)

    @property
    def digest(self) -> str:
        """One SHA-256 over everything above: equal digests, identical inputs."""
        h = hashlib.sha256()
        for part in (
            f"fuseci {self.fuseci_version}",
            f"suite {self.suite_file}",
            *(f"file {p} {d}" for p, d in sorted(self.files.items())),
            *(f"outside {m}" for m in self.outside),
            *(f"missing {m}" for m in self.missing),
            f"complete {self.complete}",
        ):
            h.update(part.encode("utf-8", "surrogateescape") + b"\n")
        return h.hexdigest()


def differences(a: Fingerprint, b: Fingerprint) -> list[str]:
    """What differs between two fingerprints, for people: ``the suite file``, each changed,
    added or removed module file, the fuseci version."""
    out: list[str] = []
    if a.fuseci_version != b.fuseci_version:
        out.append(f"fuseci {a.fuseci_version} -> {b.fuseci_version}")
    if a.suite_file != b.suite_file:
        out.append("the suite file")
    for p in sorted(set(a.files) | set(b.files)):
        if p not in a.files:
            out.append(f"{p} (added)")
        elif p not in b.files:
            out.append(f"{p} (removed)")
        elif a.files[p] != b.files[p]:
            out.append(p)
    if (a.outside, a.missing) != (b.outside, b.missing):
        out.append("which named modules are installed or missing")
    if not (a.complete and b.complete):
        out.append(f"more than {MAX_FILES} files to follow")
    return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a link loop
        return False


def find_module(name: str, roots: Iterable[Path], tree: Path) -> list[tuple[Path, str, bool]] | None:
    """The files importing module ``name`` runs when found on ``roots``: the ``__init__.py`` of
    each package on the way, then the module's own file, each with the dotted name it runs as and
    whether it is a package's. Found as the import system's path finder would: a package
    directory before a module file of the same name. None when no root holds it inside ``tree``;
    a namespace package contributes no file."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for root in roots:
        files: list[tuple[Path, str, bool]] = []
        base = root
        for i, part in enumerate(parts):
            package = base / part
            init = package / "__init__.py"
            dotted = ".".join(parts[: i + 1])
            if init.is_file():
                files.append((init, dotted, True))
                base = package
            elif i == len(parts) - 1 and (base / f"{part}.py").is_file():
                files.append((base / f"{part}.py", dotted, False))
            elif package.is_dir():  # a namespace package: nothing of its own runs
                base = package
            else:
                break
        else:
            if all(_inside(f, tree) for f, _, _ in files) and _inside(base, tree):
                return files
    return None


def _imported_names(tree_ast: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name the source may import (and, after ``from X import y``, ``X.y`` too,
    which is a module when ``y`` is a submodule)."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree_ast):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level - 1 > len(base_parts):
                    continue
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                target = ".".join(p for p in (base, node.module or "") if p)
            else:
                target = node.module or ""
            if target:
                names.add(target)
            names.update(f"{target}.{a.name}" if target else a.name for a in node.names if a.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return {n for n in names if n}


def search_roots(suite: Suite, tree: Path) -> list[Path]:
    """The harness's search path for a suite measured in ``tree`` (its working directory), in
    order: ``tree``, then the directory above the suite file."""
    return list(dict.fromkeys([tree, suite.path.resolve().parent.parent]))


def named_modules(suite: Suite) -> list[str]:
    """Every module the suite's variants and references name, sorted."""
    return sorted({ref.split(":")[0] for c in suite.cases for ref in c.functions})


def fingerprint(suite: Suite, tree: Path) -> Fingerprint:
    """The fingerprint of ``suite`` (its file inside ``tree``) as measured in ``tree``.

    Raises:
        OSError: the suite file cannot be read.
    """
    tree = tree.resolve()
    roots = search_roots(suite, tree)
    suite_sha = _sha(suite.path.read_bytes())
    outside: set[str] = set()
    missing: set[str] = set()
    todo: list[tuple[Path, str, bool]] = []

    def follow(name: str, named: bool) -> None:
        found = find_module(name, roots, tree)
        if found is None:
            if named:
                (outside if installed(name.split(".")[0]) else missing).add(name)
            return
        todo.extend(found)

    for name in named_modules(suite):
        follow(name, named=True)
    walked = walk(todo, roots, tree)
    return Fingerprint(
        suite_file=suite_sha,
        files=walked.files,
        outside=tuple(sorted(outside)),
        missing=tuple(sorted(missing)),
        complete=walked.complete,
    )


@dataclass(frozen=True, slots=True)
class Walked:
    """The module files an import graph reaches inside a tree."""

    files: dict[str, str]
    """Tree-relative path → SHA-256 of its bytes (``unreadable`` when it could not be read)."""
    complete: bool
    """False when :data:`MAX_FILES` was reached before the end."""
    imported: frozenset[str]
    """Tree-relative paths reached through an import of another file (not only as a start)."""


def walk(start: Iterable[tuple[Path, str, bool]], roots: list[Path], tree: Path) -> Walked:
    """Every file of ``tree`` that importing ``start`` (files, each with the dotted name it runs
    as and whether it is a package's ``__init__.py``) may run, following imports transitively
    (:func:`find_module`), each hashed once."""
    todo = list(start)
    files: dict[str, str] = {}
    imported: set[str] = set()
    seen: set[Path] = set()
    complete = True
    while todo:
        where, module, is_package = todo.pop()
        path = where.resolve()
        rel = rel_path(path, tree)
        if path in seen:
            continue
        if len(seen) >= MAX_FILES:
            complete = False
            break
        seen.add(path)
        try:
            data = path.read_bytes()
        except OSError:
            files[rel] = "unreadable"
            continue
        files[rel] = _sha(data)
        if len(data) > MAX_PARSED_BYTES:
            continue
        try:
            parsed = ast.parse(data, filename=str(path))
        except (SyntaxError, ValueError):  # the harness will say so; the bytes are hashed
            continue
        for name in sorted(_imported_names(parsed, module, is_package)):
            found = find_module(name, roots, tree)
            if found is not None:
                imported.update(rel_path(f.resolve(), tree) for f, _, _ in found if f.resolve() != path)
                todo.extend(found)
    return Walked(files, complete, frozenset(imported))


def rel_path(path: Path, tree: Path) -> str:
    return path.relative_to(tree).as_posix() if path.is_relative_to(tree) else path.as_posix()


def installed(top: str) -> bool:
    """Whether a top-level module is importable from the installed packages (found, not imported)."""
    import importlib.util

    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False
