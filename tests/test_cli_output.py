"""What a person reads from the command line: help texts, colour, notes under -v."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import REGRESSED_REPORT
from typer.main import get_command
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.reporters import FILE_FORMATS

SUITE = "suites/elementwise.yaml"
COMMANDS = ["run", "ab", "check", "compare", "merge", "history", "update-baselines", "bench", "doctor"]
#: How typer shows a Python type in help: <list[Path]>, <int range>, <float>...
PYTHON_TYPE = re.compile(r"<(list\[|tuple\[|int|float|str|bool|path|Path|file|choice)[^>]*>")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_examples_and_no_python_types(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert not PYTHON_TYPE.search(result.output), PYTHON_TYPE.search(result.output)
    examples = result.output.split("Examples:", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples and all(line.strip().startswith("fuseci ") for line in examples if line.strip())
    assert "Exit codes:" in result.output


def _run(env: dict[str, str], *extra: str):
    return CliRunner().invoke(app, ["run", SUITE, "--from-report", str(REGRESSED_REPORT), "-q", *extra], env=env)


@pytest.mark.parametrize(
    ("env", "coloured"),
    [
        ({}, False),  # not a terminal (the test runner's pipe)
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ({"GITHUB_ACTIONS": "true"}, True),  # Actions' log shows colour
        ({"GITHUB_ACTIONS": "true", "NO_COLOR": "1"}, False),
    ],
)
def test_colour_only_where_it_is_shown(in_root, monkeypatch: pytest.MonkeyPatch, env, coloured: bool) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "TERM"):
        monkeypatch.delenv(name, raising=False)
    result = _run(env)
    assert result.exit_code == 1, result.output
    assert bool(ANSI.search(result.stdout)) is coloured
    assert "REGRESSED  scale_relu_add/fused" in ANSI.sub("", result.stdout)


def test_undercount_notes_are_one_line_and_each_case_under_verbose(in_root, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    plain = _run({}).stdout
    assert sum("DRAM writes" in line for line in plain.splitlines()) == 1
    verbose = _run({}, "-v").stdout
    assert sum("DRAM writes undercount" in line for line in verbose.splitlines()) == 5


@pytest.mark.parametrize("command", ["run", "ab", "check", "compare", "merge"])
def test_every_report_file_format_is_an_option_of_every_reporting_command(command: str) -> None:
    params = {opt: p for p in get_command(app).commands[command].params for opt in p.opts}
    for f in FILE_FORMATS:
        assert f.option in params, f"fuseci {command} has no {f.option}"
        assert (params[f.option].help, params[f.option].metavar) == (f.help, "PATH")


def test_each_report_file_gets_its_own_format(in_root, tmp_path: Path) -> None:
    paths = {f.name: tmp_path / f"report-{f.name}" for f in FILE_FORMATS}
    options = [arg for f in FILE_FORMATS for arg in (f.option, str(paths[f.name]))]
    assert _run({}, *options).exit_code == 1
    assert ET.parse(paths["junit"]).getroot().tag == "testsuites"
    assert json.loads(paths["json"].read_text())["exit_code"] == 1
    assert "\n## ❌ elementwise: **REGRESSED**\n" in paths["markdown"].read_text()
    assert paths["html"].read_text().startswith("<!DOCTYPE html>")
    assert len(paths) == 4  # a new format: say here what its file holds
