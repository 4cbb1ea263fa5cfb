"""A case's fingerprint (fuseci.ab.cases): which cases of a changed suite ``fuseci ab`` measures,
read from source without importing it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import ROOT, write

from fuseci.ab.cases import DYNAMIC, Source, changed
from fuseci.ab.fingerprint import fingerprint
from fuseci.ab.reader import Tree
from fuseci.config.model import Suite
from fuseci.config.parse import load_suite


def changed_cases(base: Suite, base_tree: Path | Tree, head: Suite, head_tree: Path | Tree) -> tuple[str, ...]:
    """The head's cases whose fingerprint differs from the base's, as ``fuseci ab`` decides them."""
    return changed(fingerprint(base, base_tree).cases, fingerprint(head, head_tree).cases, [c.id for c in head.cases])


#: A module with three cases' functions: two share a helper, all read a module-level constant
#: through the helper or directly.
_MODULE = '''"""Kernels."""

from __future__ import annotations

import math

from pkg.util import twice

SCALE = 2.0


def _helper(x):
    return x * SCALE


def a(x):
    # a comment
    return _helper(x)


def b(x):
    return _helper(x) + 1


@twice
def c(x, k=math.pi):
    total = x + k
    return total
'''

_SUITE = (
    "suite: s\ncases:\n"
    + "".join(
        f"  - id: {n}\n    inputs:\n      x: {{shape: [4]}}\n    variants:\n"
        f"      unfused: pkg.mod:{n}\n      fused: pkg.mod:{n}\n"
        for n in ("a", "b", "c")
    )
    + "  - id: other\n    inputs:\n      x: {shape: [4]}\n    variants:\n"
    "      unfused: pkg.plain:f\n      fused: pkg.plain:f\n"
)


def _tree(root: Path, module: str = _MODULE) -> Path:
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "mod.py", module)
    write(root / "pkg" / "util.py", "def twice(f):\n    return f\n")
    write(root / "pkg" / "plain.py", "def f(x):\n    return x\n")
    return write(root / "suites" / "s.yaml", _SUITE)


def _changed(tmp_path: Path, edit) -> tuple[str, ...]:
    """The cases measured after ``edit(head_root)`` changes the head's tree."""
    base, head = tmp_path / "base", tmp_path / "head"
    _tree(base)
    shutil.copytree(base, head)
    edit(head)
    return changed_cases(load_suite(base / "suites" / "s.yaml"), base, load_suite(head / "suites" / "s.yaml"), head)


def _replace(old: str, new: str, path: str = "pkg/mod.py"):
    def edit(root: Path) -> None:
        target = root / path
        text = target.read_text()
        assert old in text
        target.write_text(text.replace(old, new))

    return edit


@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        # comments, blank lines and moved definitions are not code changes
        (_replace("# a comment", "# another comment\n\n"), ()),
        (_replace("def b(x):\n    return _helper(x) + 1\n", ""), ("b",)),  # b's function is gone: b changed
        # one function's body: only its case
        (_replace("return _helper(x) + 1", "return 1 + _helper(x)"), ("b",)),
        (_replace("total = x + k\n    return total", "t = x + k\n    return t"), ("c",)),  # a renamed local
        # a helper two functions call: both
        (_replace("return x * SCALE", "return SCALE * x"), ("a", "b")),
        # module-level code runs for every case: a constant, a new import, a new statement
        (_replace("SCALE = 2.0", "SCALE = 3.0"), ("a", "b", "c")),
        (_replace("import math\n", "import math\nimport json\n"), ("a", "b", "c")),
        # decorators and defaults run at import: every case of the module
        (_replace("@twice\n", ""), ("a", "b", "c")),
        (_replace("k=math.pi", "k=math.e"), ("a", "b", "c")),
        # annotations do not under `from __future__ import annotations`: the function's case only
        (_replace("def c(x, k", "def c(x: float, k"), ("c",)),
        # an imported project module: every case whose module imports it
        (_replace("return f", "return f  # same", "pkg/util.py"), ("a", "b", "c")),
        (_replace("return x", "return +x", "pkg/plain.py"), ("other",)),
        # a package __init__ on the way runs for every module under it
        (_replace("", "X = 1\n", "pkg/__init__.py"), ("a", "b", "c", "other")),
    ],
    ids=[
        "comment",
        "function-removed",
        "body",
        "renamed-local",
        "shared-helper",
        "constant",
        "import",
        "decorator",
        "default",
        "annotation",
        "imported-module",
        "other-module",
        "package-init",
    ],
)
def test_only_the_cases_whose_code_changed_are_measured(tmp_path: Path, edit, changed: tuple[str, ...]) -> None:
    assert _changed(tmp_path, edit) == changed


def test_an_unused_top_level_function_changes_no_case(tmp_path: Path) -> None:
    assert _changed(tmp_path, _replace("def a(x):", "def unused():\n    return 1\n\n\ndef a(x):")) == ()


@pytest.mark.parametrize(
    "dynamic",
    [
        "getattr(math, 'pi')",
        "globals()",
        "eval('1')",
        "__import__('json')",
        "sys.modules",
        "vars()",
    ],
)
def test_a_module_static_reading_cannot_follow_counts_as_a_whole(tmp_path: Path, dynamic: str) -> None:
    """With getattr (and the rest of DYNAMIC) anywhere in the module, a change to any of its code
    changes every case that names it, even one no function calls."""
    module = _MODULE.replace("def b(x):", f"def _dyn():\n    import sys\n    return {dynamic}\n\n\ndef b(x):")

    def edit(root: Path) -> None:
        target = root / "pkg" / "mod.py"
        target.write_text(target.read_text().replace("return x + 1", "return 1 + x"))

    base, head = tmp_path / "base", tmp_path / "head"
    _tree(base, module.replace("return _helper(x) + 1", "return x + 1"))
    shutil.copytree(base, head)
    edit(head)
    got = changed_cases(load_suite(base / "suites" / "s.yaml"), base, load_suite(head / "suites" / "s.yaml"), head)
    assert got == ("a", "b", "c")
    assert Source((base / "pkg" / "mod.py").read_bytes(), "mod.py").why.startswith("it uses ")


def test_the_dynamic_features_are_declared_once() -> None:
    for name in ("getattr", "globals", "locals", "vars", "eval", "exec", "__import__", "importlib", "setattr"):
        assert name in DYNAMIC
    assert {"sys.modules", "inspect"} <= DYNAMIC


@pytest.mark.parametrize(
    ("module", "why"),
    [
        ("from pkg.util import *\n\n\ndef a(x):\n    return twice(x)\n", "a refers to twice"),
        ("def _f(x):\n    return x\n\n\na = _f\n", "a is not a top-level def"),
        ("def a(x):\n    return (\n", "it does not parse"),
    ],
)
def test_what_cannot_be_resolved_counts_the_whole_module(tmp_path: Path, module: str, why: str) -> None:
    source = Source(module.encode(), "mod.py")
    assert source.function("a") is None and why in source.why
    # and then a change anywhere in the file changes the case
    base, head = tmp_path / "base", tmp_path / "head"
    _tree(base, module + "\n\ndef b(x):\n    return x\n\n\ndef c(x):\n    return x\n")
    shutil.copytree(base, head)
    target = head / "pkg" / "mod.py"
    target.write_text(target.read_text() + "\n\ndef unused():\n    return 2\n")
    got = changed_cases(load_suite(base / "suites" / "s.yaml"), base, load_suite(head / "suites" / "s.yaml"), head)
    assert "a" in got


def test_a_module_imported_back_by_what_it_imports_counts_as_a_whole(tmp_path: Path) -> None:
    def edit(root: Path) -> None:
        target = root / "pkg" / "mod.py"
        target.write_text(target.read_text() + "\n\ndef unused():\n    return 2\n")

    base, head = tmp_path / "base", tmp_path / "head"
    _tree(base)
    write(base / "pkg" / "util.py", "import pkg.mod\n\n\ndef twice(f):\n    return f\n")
    shutil.copytree(base, head)
    edit(head)
    assert changed_cases(
        load_suite(base / "suites" / "s.yaml"), base, load_suite(head / "suites" / "s.yaml"), head
    ) == (
        "a",
        "b",
        "c",
    )


def test_a_case_added_on_the_head_is_measured(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    _tree(base)
    shutil.copytree(base, head)
    suite = head / "suites" / "s.yaml"
    suite.write_text(
        suite.read_text()
        + "  - id: d\n    inputs:\n      x: {shape: [4]}\n    variants:\n      unfused: pkg.mod:a\n      fused: pkg.mod:b\n"
    )
    got = changed_cases(load_suite(base / "suites" / "s.yaml"), base, load_suite(suite), head)
    assert got == ("d",)


def test_the_shipped_suites_cases_are_told_apart(tmp_path: Path) -> None:
    """On the shipped kernels: a changed body of scale_relu_add_fused changes that case alone;
    a module-level constant of kernels/elementwise.py every elementwise case."""
    for tree in ("base", "head"):
        (tmp_path / tree / "suites").mkdir(parents=True)
        shutil.copy(ROOT / "suites" / "elementwise.yaml", tmp_path / tree / "suites")
        shutil.copytree(ROOT / "kernels", tmp_path / tree / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    base, head = tmp_path / "base", tmp_path / "head"
    suite = "suites/elementwise.yaml"
    prints = fingerprint(load_suite(base / suite), base).cases
    assert len(prints) == 5 and len({p.digest for p in prints.values()}) == 5
    kernel = head / "kernels" / "elementwise.py"
    original = kernel.read_text()
    kernel.write_text(
        original.replace("(out,) = _SCALE_RELU_ADD(", "(result,) = _SCALE_RELU_ADD(").replace(
            "return out.reshape(x.shape)\n\n\ndef scale_relu_add_reference",
            "return result.reshape(x.shape)\n\n\ndef scale_relu_add_reference",
        )
    )
    assert kernel.read_text() != original
    assert changed_cases(load_suite(base / suite), base, load_suite(head / suite), head) == ("scale_relu_add",)
    kernel.write_text(original.replace("import math\n", "import math\n\n_STUDY = 1\n"))
    assert len(changed_cases(load_suite(base / suite), base, load_suite(head / suite), head)) == 5
