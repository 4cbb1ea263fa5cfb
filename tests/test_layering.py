"""The package's layers: whole packages in one order, no module importing from a package above its own.

Every import counts, at module level or inside a function, ``TYPE_CHECKING`` ones too. The
order is declared once, here, and docs/DEVELOPMENT.md says the same."""

from __future__ import annotations

import ast
from pathlib import Path

import fuseci

ROOT = Path(fuseci.__file__).parent

#: Bottom to top, one whole package (or top-level module) a layer: a module may import from its own
#: package and those below, so no import runs upward and no two packages import each other. A name
#: stands for the module or package and everything under it.
LAYERS: tuple[str, ...] = (
    "fuseci",
    "fuseci.errors",
    "fuseci.wording",
    "fuseci.validation",
    "fuseci.config",
    "fuseci.files",
    "fuseci.records",
    "fuseci.frames",
    "fuseci.measure",
    "fuseci.harness",
    "fuseci.judge",
    "fuseci.ledger",
    "fuseci.store",
    "fuseci.doctor",
    "fuseci.reporters",
    "fuseci.ab",
    "fuseci.api",
    "fuseci.cli",
    "fuseci.__main__",
)


def layer_of(name: str) -> int | None:
    """The layer of a module, or of a name imported from one (``fuseci.judge.verdict.Verdict``);
    None for a package or module under ``fuseci`` that no layer names."""
    parts = name.split(".")
    top = ".".join(parts[:2])
    if top in LAYERS:
        return LAYERS.index(top)
    if len(parts) > 1 and ((ROOT / parts[1]).is_dir() or (ROOT / f"{parts[1]}.py").exists()):
        return None  # a package or module that must be placed
    return 0  # the package's own names (``fuseci.__version__``)


def stated() -> str:
    """The order as docs/DEVELOPMENT.md states it: each layer's package, bottom first."""
    return " → ".join(f"`{n.removeprefix('fuseci.')}`" for n in LAYERS[1:])


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, import as written, imported name)`` for every fuseci import of a file."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    source = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        text = ast.get_source_segment(source, node) or ""
        out += [(node.lineno, text.splitlines()[0], name) for name in found if name.split(".")[0] == "fuseci"]
    return out


def test_every_module_has_a_layer() -> None:
    unplaced = [_module(p) for p in sorted(ROOT.rglob("*.py")) if layer_of(_module(p)) is None]
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_no_import_runs_back_up() -> None:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        own = layer_of(_module(path))
        assert own is not None
        for line, text, name in imports(path):
            theirs = layer_of(name)
            if theirs is not None and theirs > own:
                where = path.relative_to(ROOT.parent)
                problems.append(f"{where}:{line}: {text.strip()} ({name} is above {_module(path)})")
    assert not problems, "imports that run back up the layers:\n" + "\n".join(problems)


def test_development_md_states_the_order() -> None:
    text = (ROOT.parent / "docs" / "DEVELOPMENT.md").read_text(encoding="utf-8")
    assert stated() in " ".join(text.split()), f"docs/DEVELOPMENT.md should state the layers as: {stated()}"


def test_layers_are_whole_packages() -> None:
    cut = [n for n in LAYERS if n.count(".") > 1]
    assert not cut, f"a layer names part of a package (the package holds two things: split it): {cut}"


def test_no_two_modules_share_a_base_name() -> None:
    seen: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(path.name, []).append(_module(path))
    shared = {name: mods for name, mods in seen.items() if len(mods) > 1 and name != "history.py"}
    assert not shared, f"modules that share a base name (give each the name of what it holds): {shared}"


#: Types that may share a name: parallel device runtimes, one class each of the same role.
SAME_ROLE = {"Event": {"fuseci.harness.arrays.device_cupy", "fuseci.harness.arrays.device_torch"}}


def public_types(path: Path) -> set[str]:
    """The public classes and type aliases a module defines at its top level (in either branch
    of a top-level ``if``, as ``if TYPE_CHECKING:`` ... ``else:`` declares them)."""
    body: list[ast.stmt] = []
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        body += [*node.body, *node.orelse] if isinstance(node, ast.If) else [node]
    names = set()
    for node in body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            typeish = isinstance(value, ast.Subscript) or (
                isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr)
            )
            typeish |= isinstance(value, ast.Call) and ast.unparse(value.func) in ("TypeVar", "NewType")
            if typeish and name[:1].isupper() and not (name.isupper() and len(name) > 1):  # not a CONSTANT
                names.add(name)
    return {n for n in names if not n.startswith("_")}


def test_public_types_have_one_meaning_each() -> None:
    where: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for name in public_types(path):
            where.setdefault(name, set()).add(_module(path))
    shared = {n: sorted(mods) for n, mods in where.items() if len(mods) > 1 and mods != SAME_ROLE.get(n)}
    assert not shared, f"public types that share a name (name each for what it is): {shared}"


def test_the_type_scan_sees_classes_aliases_and_both_branches(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "class A: ...\nB = dict[str, int]\nC = int | None\nT = TypeVar('T')\nMAX = tuple[int]\n_P = list[int]\n"
        "if TYPE_CHECKING:\n    D = int\nelse:\n    D = Annotated[int, 0]\nx = f()\n"
    )
    assert public_types(module) == {"A", "B", "C", "T", "D"}
