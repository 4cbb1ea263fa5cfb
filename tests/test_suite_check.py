"""``fuseci check``, the CPU gate: what it calls valid, what it refuses, what it runs (nothing),
what it says about every file and which report files it writes."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

import pytest
from helpers import write
from typer.testing import CliRunner

from fuseci.cli import app

runner = CliRunner()


def _suite(unfused: str, fused: str, *, suite: str = "demo", shape: str = "[67108864]") -> str:
    return (
        f"suite: {suite}\n"
        "cases:\n"
        "  - id: c1\n"
        "    inputs:\n"
        f"      x: {{shape: {shape}}}\n"
        "    variants:\n"
        f"      unfused: {unfused}\n"
        f"      fused: {fused}\n"
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory, the current directory of the test."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str):
    return runner.invoke(app, ["check", *args])


# --- 1. a module that does not exist is an error ----------------------------------------------


@pytest.mark.parametrize(
    "ref",
    [
        "nosuchpkg.mod:f",  # no such top-level package
        "nosuchpkg:f",
        "yaml.nosuchmodule:f",  # an installed package without that submodule
        "json.nosuchmodule:f",  # a standard-library package without it
        "fuseci.config.nosuchmodule:f",
    ],
)
def test_a_module_that_does_not_exist_is_an_error(project: Path, ref: str) -> None:
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n")
    path = write(project / "suites" / "s.yaml", _suite("mykern.ops:f", ref))
    result = check(str(path))
    assert result.exit_code == 3, result.output
    module = ref.partition(":")[0]
    missing = "nosuchpkg" if module.startswith("nosuchpkg") else module.split(".")[-1]
    assert f"no module {missing!r}" in result.stderr
    assert f"{path}:8: case 'c1'.variants.fused: {ref!r}" in result.stderr
    assert "valid" not in result.stdout.replace("0 valid", "")


def test_a_module_that_is_a_file_has_no_submodules(project: Path) -> None:
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n")
    path = write(project / "suites" / "s.yaml", _suite("mykern.ops:f", "mykern.ops.more:f"))
    result = check(str(path))
    assert result.exit_code == 3
    assert "'mykern.ops' (" in result.stderr and "is a module, not a package" in result.stderr


def test_modules_are_found_on_the_search_path_and_in_namespace_packages(project: Path) -> None:
    write(project / "mykern" / "__init__.py", "")
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n")
    write(project / "nspkg" / "inner" / "ops.py", "def g(x):\n    return x\n")  # no __init__.py anywhere
    path = write(project / "suites" / "s.yaml", _suite("mykern.ops:f", "nspkg.inner.ops:g"))
    result = check(str(path))
    assert result.exit_code == 0, result.output
    assert f"{path}: suite demo: 1 case, 2 variants: ok" in result.stdout


def test_an_installed_module_is_read_from_its_source(project: Path) -> None:
    path = write(project / "suites" / "s.yaml", _suite("fuseci.config.names:is_id", "fuseci.config.names:is_idd"))
    result = check(str(path))
    assert result.exit_code == 3
    assert "defines no 'is_idd'; did you mean 'is_id'?" in result.stderr


def test_an_editable_install_is_found_from_its_finder_read_as_source(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fuseci.config import resolve

    site_dir = project / "site-packages"
    write(project / "src" / "edpkg" / "__init__.py", "")
    write(project / "src" / "edpkg" / "ops.py", "def f(x):\n    return x\n")
    write(project / "other" / "edmod.py", "def g(x):\n    return x\n")
    # setuptools' finder and the editables package's, never imported: importing them would raise
    write(
        site_dir / "__editable___edpkg_1_0_finder.py",
        f"raise SystemExit(9)\nMAPPING = {{'edpkg': {str(project / 'src' / 'edpkg')!r}}}\n",
    )
    write(
        site_dir / "_editable_impl_edmod.py",
        f"raise SystemExit(9)\nF.map_module('edmod', {str(project / 'other' / 'edmod.py')!r})\n",
    )
    monkeypatch.setattr(resolve.site, "getsitepackages", lambda: [str(site_dir)])
    resolve._editable_map.cache_clear()
    try:
        path = write(project / "suites" / "s.yaml", _suite("edpkg.ops:f", "edmod:g"))
        result = check(str(path))
        assert result.exit_code == 0, result.output
        bad = write(project / "suites" / "s.yaml", _suite("edpkg.ops:f", "edpkg.nosuch:g"))
        result = check(str(bad))
        assert result.exit_code == 3 and "has no module 'nosuch'" in result.stderr
    finally:
        resolve._editable_map.cache_clear()


# --- 2. check never imports or runs the code it reads --------------------------------------------

SIDE_EFFECTS = """\
import pathlib
print("IMPORTED")
pathlib.Path(__file__).with_name("ran").write_text("ran")
raise SystemExit(7)
"""


@pytest.mark.parametrize("ref", ["sidefx.ops:f", "sidefx.nosuch:f", "sidefx.ops.deeper:f", "sidefx:f"])
def test_check_runs_no_package_init(project: Path, ref: str, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project / "site" / "sidefx" / "__init__.py", SIDE_EFFECTS)
    write(project / "site" / "sidefx" / "ops.py", SIDE_EFFECTS + "def f(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(project / "site"))  # importable, as an installed package is
    path = write(project / "suites" / "s.yaml", _suite("sidefx.ops:f", ref))
    before = set(sys.modules)
    result = check(str(path))
    assert result.exit_code in (0, 3), result.output  # never the SystemExit's 7
    assert "IMPORTED" not in result.output
    assert not (project / "site" / "sidefx" / "ran").exists()
    assert not {m for m in set(sys.modules) - before if m.startswith("sidefx")}
    if ref == "sidefx.ops:f":
        assert result.exit_code == 0 and ": ok" in result.stdout
    if ref == "sidefx:f":  # the package's __init__ defines no f: read, not run
        assert "defines no 'f'" in result.stderr


# --- what exists but cannot be read is "not verified", never "valid" ------------------------------


def test_a_compiled_extension_or_a_star_import_is_not_verified(project: Path) -> None:
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n")
    write(project / "mykern" / "star.py", "from os.path import *\n")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    write(project / "mykern" / f"fast{suffix}", "not really compiled: it is never loaded")
    path = write(project / "suites" / "s.yaml", _suite("mykern.fast:f", "mykern.star:f"))
    result = check(str(path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{path}: suite demo: 1 case, 2 variants: 2 references not verified: ")
    assert "'mykern.fast:f'" in lines[0] and "no Python source" in lines[0]
    assert "'mykern.star:f'" in lines[0] and "from ... import *" in lines[0]
    assert "valid" not in lines[0] and ": ok" not in lines[0]
    assert lines[1] == "fuseci check: 1 suite file, 1 not verified"


# --- 3. the report files are written whether or not every suite is valid --------------------------

REPORT_OPTIONS = {"junit": "check.xml", "json": "check.json", "markdown": "check.md", "html": "check.html"}


def _report_args(directory: Path) -> list[str]:
    return [arg for name, file in REPORT_OPTIONS.items() for arg in (f"--{name}", str(directory / file))]


def test_every_report_file_is_written_when_every_suite_is_valid(project: Path) -> None:
    import json
    import xml.etree.ElementTree as ET

    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    path = write(project / "suites" / "s.yaml", _suite("mykern.ops:f", "mykern.ops:g"))
    out = project / "out"
    out.mkdir()
    (out / "check.xml").write_text("<testsuites><testsuite failures='1'/></testsuites>")  # an old failing report
    result = check(str(path), *_report_args(out))
    assert result.exit_code == 0, result.output
    root = ET.parse(out / "check.xml").getroot()
    assert int(root.get("tests")) >= 1 and root.get("failures") == "0" and root.get("errors") == "0"
    assert json.loads((out / "check.json").read_text())["suites"][0]["suite"] == "demo"
    assert "demo" in (out / "check.md").read_text()
    assert (out / "check.html").read_text().startswith("<!DOCTYPE html>")


def test_the_report_files_hold_each_problem_and_each_valid_file(project: Path) -> None:
    import xml.etree.ElementTree as ET

    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    good = write(project / "suites" / "good.yaml", _suite("mykern.ops:f", "mykern.ops:g", suite="good"))
    bad = write(project / "suites" / "bad.yaml", _suite("mykern.ops:f", "mykern.ops:nope", suite="bad"))
    result = check(str(good), str(bad), "--junit", str(project / "check.xml"))
    assert result.exit_code == 3
    suites = {s.get("name"): s for s in ET.parse(project / "check.xml").getroot().iter("testsuite")}
    assert suites["good"].get("failures") == "0" and suites["good"].get("errors") == "0"
    assert int(suites["bad"].get("errors")) + int(suites["bad"].get("failures")) == 1


def test_a_report_file_may_not_replace_a_suite_file(project: Path) -> None:
    path = write(project / "suites" / "s.yaml", _suite("mykern.ops:f", "mykern.ops:g"))
    before = path.read_text()
    result = check(str(path), "--junit", str(path))
    assert result.exit_code == 3
    assert path.read_text() == before
    assert "would replace it" in result.stderr


# --- 4. every problem of every file, one line per valid file, a summary ---------------------------


def test_every_problem_of_every_file_is_listed_with_a_summary(project: Path) -> None:
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    good = write(project / "suites" / "good.yaml", _suite("mykern.ops:f", "mykern.ops:g", suite="good"))
    also = write(project / "suites" / "also.yaml", _suite("mykern.ops:f", "mykern.ops:g", suite="also"))
    bad = write(
        project / "suites" / "bad.yaml",
        "suite: bad\n"
        "owner: me\n"  # 2: unknown key
        "cases:\n"
        "  - id: c1\n"
        "    inputs:\n"
        "      x: {shape: [0], dtype: float128}\n"  # 6: two problems in one input
        "    variants:\n"
        "      unfused: mykern.ops:f\n"
        "      fused: 3\n"  # 9
        "    gates: {launches: five percent, dram_bytes: 3%}\n"  # 10: two problems
        "  - id: c1\n"  # 11: a duplicate
        "    inputs: {x: {shape: [67108864]}}\n"
        "    variants: {unfused: 'mykern.ops:f', fused: 'mykern.ops:g'}\n",
    )
    result = check(str(good), str(bad), str(also))
    assert result.exit_code == 3
    errors = result.stderr.splitlines()
    assert all(e.startswith(f"fuseci: error: {bad}:") for e in errors), errors
    assert [int(e.split(":")[3]) for e in errors] == [2, 6, 6, 9, 10, 10, 11]
    assert "unknown key 'owner'" in errors[0]
    assert "inputs.x.shape: expected a list of positive integers" in errors[1]
    assert "inputs.x.dtype: unsupported dtype 'float128'" in errors[2]
    assert "duplicate case id (first defined on line 4)" in errors[6]
    assert result.stdout.splitlines() == [
        f"{good}: suite good: 1 case, 2 variants: ok",
        f"{also}: suite also: 1 case, 2 variants: ok",
        "fuseci check: 3 suite files, 2 valid, 1 with 7 problems",
    ]


def test_a_file_with_a_problem_found_across_files_is_not_called_valid(project: Path) -> None:
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n")
    path = write(project / "suites" / "s.yaml", _suite("mykern.ops:f", "mykern.ops:g"))
    result = check(str(path))
    assert result.exit_code == 3
    assert result.stdout.splitlines() == ["fuseci check: 1 suite file, 1 with 1 problem"]
    assert "defines no 'g'" in result.stderr


def test_a_hostile_file_lists_its_first_problems_and_counts_the_rest(project: Path) -> None:
    from fuseci.config.check import MAX_LISTED

    cases = "".join(f"  - {{id: 'c{i}/', inputs: {{}}, variants: {{}}}}\n" for i in range(MAX_LISTED * 3))
    path = write(project / "suites" / "s.yaml", "suite: s\ncases:\n" + cases)
    result = check(str(path))
    assert result.exit_code == 3
    errors = result.stderr.splitlines()
    assert len(errors) == MAX_LISTED + 1
    found = MAX_LISTED * 3 * 3  # per case: its id, its inputs, its variants
    assert (
        errors[-1]
        == f"fuseci: error: {path}: {found - MAX_LISTED} more problems not listed; fix those above and check again"
    )
    assert result.stdout.splitlines() == [f"fuseci check: 1 suite file, 1 with {found} problems"]


# --- 16. the YAML mistakes a newcomer makes get the fix -------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            _suite("mykern.ops:f", "mykern.ops:g") + "    expect:\n      launches: >= 2x\n",
            """invalid YAML: did not find expected comment or line break (while scanning a block scalar that starts on line 10); YAML reads a value that starts with '>' or '|' as a block of text: quote it, e.g. launches: ">= 2x\"""",
        ),
        (
            _suite("mykern.ops:f", "mykern.ops:g") + "    expect:\n      launches: >2\n",
            """case 'c1'.expect.launches: cannot parse expectation '': write an operator (>=, >, <=, <, ==) and a number, like '>= 2.5x' (YAML reads a value that starts with '>' or '|' as a block of the lines below it: quote it, e.g. ">= 2x")""",
        ),
        (
            _suite("mykern.ops:f", "mykern.ops:g", shape="(8192, 8192)").replace(
                "{shape: (8192, 8192)}", "\n        shape: (8192, 8192)"
            ),
            "case 'c1'.inputs.x.shape: expected a list of positive integers (or one), got string '(8192, 8192)'; YAML has no tuples: write the shape as a list in brackets, e.g. shape: [8192, 8192]",
        ),
        (
            _suite("mykern.ops:f", "mykern.ops:g", shape="(8192, 8192)"),  # inside {...} the comma splits it
            "case 'c1'.inputs.x.shape: expected a list of positive integers (or one), got string '(8192'; YAML has no tuples: write the shape as a list in brackets, e.g. shape: [8192, 8192]",
        ),
        (
            _suite("mykern.ops:f", ""),
            "case 'c1'.variants.fused: has no function: write its 'module:function' after the colon on the same line (e.g. fused: mylib.ops:f); YAML reads an empty value as null",
        ),
    ],
    ids=["unquoted >=", "unquoted >2", "shape tuple", "shape tuple in braces", "empty variant"],
)
def test_yaml_mistakes_get_the_fix(project: Path, text: str, expected: str) -> None:
    path = write(project / "suites" / "s.yaml", text)
    result = check(str(path))
    assert result.exit_code == 3
    assert any(line.endswith(expected) for line in result.stderr.splitlines()), result.stderr


def test_inputs_smaller_than_the_l2_span_get_a_warning_not_an_error(project: Path) -> None:
    from fuseci.config.check import KNOWN_L2_BYTES, L2_SPAN
    from fuseci.harness.event_timing import L2_SPAN as HARNESS_L2_SPAN

    assert L2_SPAN == HARNESS_L2_SPAN
    assert max(KNOWN_L2_BYTES.values()) == 60 << 20
    write(project / "mykern" / "ops.py", "def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    # 240 MiB exactly is enough; one float32 fewer is not
    enough = write(project / "suites" / "enough.yaml", _suite("mykern.ops:f", "mykern.ops:g", shape="[62914560]"))
    small = write(
        project / "suites" / "small.yaml", _suite("mykern.ops:f", "mykern.ops:g", suite="small", shape="[62914559]")
    )
    result = check(str(enough), str(small), "--junit", str(project / "check.xml"))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"fuseci: warning: {small}:3: case 'c1'.inputs: 240 MiB in all, under 4x the largest L2 of the cards fuseci "
        "knows (60 MiB, H200), so writes may stay in L2 and DRAM bytes undercount; make the inputs at least 240 MiB "
        "in all (shape: [67108864] of float32 is 256 MiB)"
    ]
    assert result.stdout.splitlines() == [
        f"{enough}: suite demo: 1 case, 2 variants: ok",
        f"{small}: suite small: 1 case, 2 variants: ok (1 warning)",
        "fuseci check: 2 suite files, all valid",
    ]
