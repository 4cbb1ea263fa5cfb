"""What crosses from one package of fuseci to another is a declared type: no public function, method
or dataclass field that another package reaches takes or gives a JSON object left untyped
(``dict[str, Any]``, ``Mapping[str, Any]``, ``list[Any]``, a bare ``dict`` or ``list``). Such a
dict stays inside the function that parses a file (:mod:`fuseci.files`, the file edge, and each
document's ``to_json``/``from_json``).

Read statically, with ast: a public function or class reaches another package when that package
imports it (``from fuseci.a.b import f``, or ``b.f`` after ``from fuseci.a import b``), or when a
class or function that reaches it names it in an annotation."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import fuseci

ROOT = Path(fuseci.__file__).parent

#: An annotation of a JSON object or list whose values are not typed.
UNTYPED = re.compile(r"\b(?:dict|Mapping|MutableMapping)\[str, Any\]|\blist\[Any\]|^(?:dict|list)$")
#: A document's serialisers: the file edge, where its dict is made or parsed.
EDGE = frozenset({"to_json", "from_json"})
#: The packages of the file edge itself (reading and writing any document's text).
EDGE_PACKAGES = frozenset({"fuseci.files"})

Def = ast.FunctionDef | ast.ClassDef


def _modules(root: Path) -> dict[str, ast.Module]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _annotations(node: Def) -> list[tuple[str, ast.expr]]:
    """(member, annotation) of a function's parameters and return, or a class's public fields and
    its public methods' parameters and returns (the serialisers left out)."""
    if isinstance(node, ast.FunctionDef):
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        return [(node.name, a.annotation) for a in args if a.annotation] + (
            [(node.name, node.returns)] if node.returns else []
        )
    out: list[tuple[str, ast.expr]] = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and not item.target.id.startswith("_"):
            out.append((f"{node.name}.{item.target.id}", item.annotation))
        elif isinstance(item, ast.FunctionDef) and not item.name.startswith("_") and item.name not in EDGE:
            out += [(f"{node.name}.{m}", a) for m, a in _annotations(item)]
    return out


def crossing_untyped(root: Path = ROOT) -> list[str]:
    """``module.member: annotation (reached from packages)`` for each untyped JSON that crosses."""
    modules = _modules(root)
    top = root.name
    defs: dict[tuple[str, str], Def] = {
        (module, node.name): node
        for module, tree in modules.items()
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_") and node.name not in EDGE
    }
    reached: dict[tuple[str, str], set[str]] = {}
    scope: dict[str, dict[str, tuple[str, str]]] = {}  # module → its names of other modules' definitions
    for module, tree in modules.items():
        names = scope.setdefault(module, {})
        attributes: dict[str, set[str]] = {}
        imports = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                attributes.setdefault(node.value.id, set()).add(node.attr)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == top:
                imports.append(node)
        for node in imports:
            for alias in node.names:
                full, local = f"{node.module}.{alias.name}", alias.asname or alias.name
                if full in modules:  # a module: the definitions it is used for
                    for attr in attributes.get(local, ()):
                        reached.setdefault((full, attr), set()).add(_package(module))
                        names[f"{local}.{attr}"] = (full, attr)
                else:
                    assert node.module is not None
                    reached.setdefault((node.module, alias.name), set()).add(_package(module))
                    names[local] = (node.module, alias.name)
    changed = True
    while changed:  # what a reaching definition names in its annotations reaches as far
        changed = False
        for (module, name), users in list(reached.items()):  # a name a package re-exports
            target = scope.get(module, {}).get(name)
            if (module, name) not in defs and target is not None and not users <= reached.setdefault(target, set()):
                reached[target] |= users
                changed = True
        for (module, name), node in defs.items():
            users = reached.get((module, name), set()) - {_package(module)}
            for _, ann in _annotations(node) if users else ():
                for ref in ast.walk(ann):
                    key = ast.unparse(ref) if isinstance(ref, (ast.Name, ast.Attribute)) else None
                    target = scope[module].get(key or "") or ((module, key) if (module, key) in defs else None)
                    if target is not None and not users <= reached.setdefault(target, set()):
                        reached[target] |= users
                        changed = True
    found = []
    for (module, name), node in defs.items():
        users = reached.get((module, name), set()) - {_package(module)}
        if not users or _package(module) in {p.replace("fuseci", top, 1) for p in EDGE_PACKAGES}:
            continue
        for member, ann in _annotations(node):
            text = ast.unparse(ann)
            if UNTYPED.search(text):
                found.append(f"{module}.{member}: {text} (reached from {', '.join(sorted(users))})")
    return sorted(found)


def test_no_untyped_json_crosses_a_package() -> None:
    assert crossing_untyped() == []


def test_the_check_finds_a_dict_handed_to_another_package(tmp_path: Path) -> None:
    """A tree of two packages: a record's field typed ``dict[str, Any]`` and a function's
    ``Mapping[str, Any]`` reach the other package (the field through the function that returns
    its class), a serialiser's and a dict used at home do not count."""
    root = tmp_path / "pkg"
    (root / "low").mkdir(parents=True)
    (root / "high").mkdir()
    for d in (root, root / "low", root / "high"):
        (d / "__init__.py").write_text("")
    (root / "low" / "rows.py").write_text(
        "from typing import Any\n"
        "from collections.abc import Mapping\n"
        "class Row:\n    facts: dict[str, Any]\n    def to_json(self) -> dict[str, Any]: ...\n"
        "class Home:\n    raw: dict[str, Any]\n"
        "def read(data: Mapping[str, Any]) -> Row: ...\n"
        "def typed(n: int) -> Row: ...\n"
    )
    (root / "high" / "use.py").write_text("from pkg.low import rows\n\nx = rows.read({})\n")
    assert crossing_untyped(root) == [
        "pkg.low.rows.Row.facts: dict[str, Any] (reached from pkg.high)",
        "pkg.low.rows.read: Mapping[str, Any] (reached from pkg.high)",
    ]
