"""Which of the paths ``fuseci ab``'s two trees differ in the cases can see: a case is skipped only
when every change is proven to reach other cases only (:func:`seen`). Nothing is imported or
run: files are read and parsed."""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib import metadata
from pathlib import Path

from fuseci.ab.git import PathChange
from fuseci.config.resolve import editable_locations
from fuseci.config.yaml_loader import load_yaml
from fuseci.errors import FuseciError

#: Start-up modules Python's ``site`` imports in every process, wherever they are on the path.
STARTUP = frozenset({"sitecustomize", "usercustomize"})
#: Names a module uses to find files relative to itself without naming them.
_BESIDE = frozenset(
    {"__file__", "__spec__", "__path__", "__loader__", "__package__", "resources", "pkg_resources", "pkgutil"}
)
#: Names a module uses to reach files relative to the working directory (the tree's root).
_CWD = frozenset({"getcwd", "getcwdb", "cwd", "chdir"})
#: Most bytes of one file scanned for names (a larger one is scanned up to there).
MAX_SCANNED = 64 << 20
#: Suffixes of a module file (a package is a directory).
_MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".pyd")


@dataclass(frozen=True, slots=True)
class Scanned:
    """What one file depended on names and where its code may look without naming."""

    text: str
    """Its string literals, one a line (Python source), or its bytes as Latin-1 (any other file)."""
    beside: str | None = None
    """The tree-relative directory (``""``: the whole tree) whose files it may reach unnamed; None: none."""


@dataclass(frozen=True, slots=True)
class Sight:
    """What one side's compared suites are proven to depend on, and what their code names."""

    root: Path
    """The side's tree."""
    explained: frozenset[str]
    """Tree-relative files a fingerprint holds (module files, files read, suite files)."""
    scanned: Mapping[str, Scanned] = field(default_factory=dict)
    """Each file depended on, scanned."""
    search: tuple[str, ...] = ("",)
    """Tree-relative directories the side imports from (``""``: the root)."""


def _literals(tree: ast.Module) -> str:
    """The string and bytes literals of Python source, statement strings (docstrings) left out."""
    skipped = {id(s.value) for s in ast.walk(tree) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skipped:
            if isinstance(node.value, str):
                out.append(node.value)
            elif isinstance(node.value, bytes):
                out.append(node.value.decode("latin-1"))
    return "\n".join(out)


def _names(tree: ast.Module) -> set[str]:
    """Every name, attribute and imported name of Python source."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update(node.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update(node.module.split("."))
    return found


def scan(path: Path, rel: str) -> Scanned:
    """One file depended on, scanned (an unreadable one names nothing: its hash says it changed)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCANNED)
    except OSError:
        return Scanned("")
    try:
        tree = ast.parse(data) if path.suffix == ".py" else None
    except (SyntaxError, ValueError):
        tree = None
    if tree is None:
        return Scanned(data.decode("latin-1"))
    names = _names(tree)
    beside = "" if names & _CWD else (rel.rpartition("/")[0] if names & _BESIDE else None)
    return Scanned(_literals(tree), beside)


def _suite_values(path: Path) -> str:
    """Every scalar value under a suite file's ``params`` (what its functions get, maybe a file), one a line."""
    try:
        document = load_yaml(path)
    except (FuseciError, OSError):
        return ""
    out: list[str] = []
    todo: list[tuple[object, bool]] = [(document, False)]
    while todo:
        value, passed = todo.pop()
        if isinstance(value, dict):
            todo.extend((v, passed or k == "params") for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, passed) for v in value)
        elif passed and value is not None:
            out.append(str(value))
    return "\n".join(out)


def sight(root: Path, files: Iterable[str], suites: Iterable[str], search: Sequence[Path] = ()) -> Sight:
    """One side's :class:`Sight` of the ``files`` its fingerprints hold, its ``suites`` and ``search`` dirs."""
    files, suites = set(files), set(suites)
    scanned = {rel: scan(root / rel, rel) for rel in sorted(files) if (root / rel).is_file()}
    scanned |= {rel: Scanned(_suite_values(root / rel)) for rel in sorted(suites)}
    dirs = ["", *(p.relative_to(root).as_posix() for p in search if p.is_relative_to(root))]
    return Sight(root, frozenset(files | suites), scanned, tuple(dict.fromkeys(dirs)))


def _pattern(path: str) -> re.Pattern[str]:
    """What names ``path``: its last part whole as a token; without its suffixes as a whole
    literal, a path's part or before a suffix (``libk`` for ``libk.so``, never the word in
    prose); its suffix as a glob writes it (``*.ptx``); or a directory on its way written as a
    directory (``data``, ``data/...``, ``.../data``)."""
    *dirs, name = path.split("/")
    stem, _, suffix = name.partition(".")
    alternatives = [rf"(?<![\w.-]){re.escape(name)}(?![\w-])"]
    if stem and stem != name:
        alternatives.append(rf"(?:^|(?<=/)){re.escape(stem)}(?=$|[./])")
    if suffix:
        alternatives.append(rf"(?<![\w-])\.{re.escape(suffix.rpartition('.')[2])}(?![\w-])")
    if dirs:
        d = "|".join(re.escape(x) for x in dict.fromkeys(dirs) if x)
        alternatives.append(rf"(?<![\w.-])(?:{d})(?=/)|(?<=/)(?:{d})(?![\w.-])|^(?:{d})$")
    return re.compile("|".join(alternatives), re.MULTILINE)


def _under(path: str, directory: str) -> bool:
    return directory == "" or path == directory or path.startswith(directory + "/")


def environment_paths(roots: Iterable[Path], environ: Mapping[str, str] | None = None) -> set[str]:
    """The tree-relative paths environment values name inside one of ``roots`` (split at ``os.pathsep``;
    a relative one as given, a whole root left out): what a case may open through ``os.environ``."""
    real = [Path(os.path.realpath(r)) for r in roots]
    out: set[str] = set()
    for value in (os.environ if environ is None else environ).values():
        for entry in value.split(os.pathsep):
            if not entry or "\n" in entry:
                continue
            if not os.path.isabs(entry):
                parts = Path(entry).parts
                if ("/" in entry or "." in entry.strip(".")) and ".." not in parts and len(entry) < 4096:
                    out.add(Path(*parts).as_posix())
                continue
            where = Path(os.path.realpath(entry))
            for r in real:
                if where != r and where.is_relative_to(r):
                    out.add(where.relative_to(r).as_posix())
    return out


def _shadowable() -> frozenset[str]:
    """Top-level module names a file atop a search path could replace: the standard library's and installed
    distributions', but fuseci's and the repository's own packages installed in editable mode."""
    try:
        installed = set(metadata.packages_distributions())
    except Exception:  # a broken distribution's metadata: the standard library still counts
        installed = set()
    return frozenset({*sys.stdlib_module_names, *installed} - {"fuseci", *editable_locations()})


@dataclass(frozen=True, slots=True)
class Forced:
    """What the changes between the sides force."""

    everything: tuple[str, ...] = ()
    """Each change that has every case of every suite measured, said for people."""
    data: tuple[str, ...] = ()
    """Explained changes of files other than Python source (tree-relative), for :func:`naming`."""


#: Why a change of the commits that no fingerprint holds and no case names forces everything.
NOT_PROVEN = "held by no fingerprint: a case may read it under a name built at run time (`--ignore` a pattern for it if none can)"


def seen(
    changes: Sequence[PathChange], sights: Sequence[Sight], environment: set[str], ignore: Sequence[str] = ()
) -> Forced:
    """Sort ``changes`` by the rule of docs/CI.md ("Skipping is decided from the diff"); ``ignore``: the
    patterns (``fnmatch``, ``*`` matching ``/`` too) of paths the user says no case reads."""
    explained = set().union(*(s.explained for s in sights)) if sights else set()
    shadowable: frozenset[str] | None = None
    everything: list[str] = []
    data: list[str] = []
    for change in changes:
        committed = change.kind not in ("untracked", "ignored")
        if not committed and _bytecode(change.path):
            continue  # Python reads a cached module only beside its source, and checks it against it
        why = _startup(change.path)
        if not why and change.plain and change.path in explained:
            if not change.path.endswith(".py"):
                data.append(change.path)
            continue
        if not why:
            if shadowable is None:
                shadowable = _shadowable()
            why = _reached(change.path, sights, environment, shadowable)
        if not why and committed and not any(fnmatchcase(change.path, p) for p in ignore):
            why = NOT_PROVEN
        if why:
            what = "changed" if change.kind == "modified" else change.kind
            everything.append(f"{change.path} ({what}; {why})")
    return Forced(tuple(everything), tuple(data))


def _bytecode(path: str) -> bool:
    return "__pycache__" in path.split("/") or path.endswith((".pyc", ".pyo"))


def _startup(path: str) -> str:
    parts = path.split("/")
    if path.endswith(".pth") or any(p.partition(".")[0] in STARTUP for p in parts):
        return "a start-up file Python runs in every process"
    return ""


def _reached(path: str, sights: Sequence[Sight], environment: set[str], shadowable: frozenset[str]) -> str:
    """Why a case may reach the unexplained ``path``; empty when none can."""
    if any(_under(path, e) or _under(e, path) for e in environment):
        return "named by an environment variable"
    pattern = _pattern(path)
    for s in sights:
        for rel, scanned in s.scanned.items():
            if scanned.beside is not None and _under(path, scanned.beside):
                where = "the tree" if scanned.beside == "" else f"{scanned.beside}/"
                return f"{rel} finds files in {where} without naming them"
            if pattern.search(scanned.text):
                return f"named in {rel}"
        for d in s.search:
            rest = path[len(d) + 1 :] if d else path
            top = rest.split("/")[0]
            if _under(path, d) and top.partition(".")[0] in shadowable and _module_like(s.root / d, rest):
                return f"may take the place of the module {top.partition('.')[0]} at the top of a search path"
    return ""


def _module_like(directory: Path, rest: str) -> bool:
    """Whether ``rest`` (in the search path ``directory``) is a module at its top or in a package there
    (a namespace directory never takes an installed module's place)."""
    top, _, inner = rest.partition("/")
    if not inner:
        return top.endswith(_MODULE_SUFFIXES) or (directory / top / "__init__.py").is_file()
    return inner == "__init__.py" or (directory / top / "__init__.py").is_file()


def naming(path: str, files: Iterable[str], sight_: Sight) -> bool:
    """Whether a file of ``files`` (a case's) names the data file ``path``."""
    pattern = _pattern(path)
    return any(pattern.search(sight_.scanned[f].text) for f in files if f in sight_.scanned)
