"""``fuseci check``, the CPU gate: what it calls valid, what it refuses, what it runs (nothing),
what it says about every file and which report files it writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write
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
