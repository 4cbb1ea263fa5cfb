"""CI output injection: text from files (harness messages, kernel names, paths, notes) never starts a
line of its own or drives a terminal, in any console line, annotation, Markdown or JUnit string."""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import REGRESSED_REPORT, ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.config import names
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, VariantMeasurement, Verdict
from fuseci.reporters import FORMATS, github, markdown
from fuseci.reporters.text import clean

#: Every character clean() must neutralise, one of each kind.
HOSTILE = "\n\r\x1b\x07\x00\x0b\x0c\x1c\x7f\x85\x9b\u2028\u2029\u202e\u2066\ufeff\t"
#: A message that, printed raw, would mask a secret and stop GitHub reading fuseci's commands.
PAYLOAD = "fell\n::add-mask::hunter2\r\n::stop-commands::tok\x1b[2J\x07\x00\u2028::error::fake\u0085::warning::x"
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
COMMAND = re.compile(r"^\s*::(add-mask|stop-commands|error|warning|notice|set-output|debug)", re.MULTILINE)


#: What no cleaned string may hold: controls (C0, DEL, C1), format characters (bidi controls such as
#: U+061C and U+202E, zero-width characters, the byte-order mark, tags), line and paragraph
#: separators, and lone surrogates.
HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _hidden(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in HIDDEN]


@settings(max_examples=500, deadline=None, database=None)
@given(st.text())
def test_clean_leaves_one_line_of_printable_text(text: str) -> None:
    out = clean(text)
    assert not CONTROLS.search(out) and "\n" not in out and "\t" not in out
    assert clean(out) == out  # the escapes themselves are plain text
    if not _hidden(text):
        assert out == text  # nothing else changes


@settings(max_examples=1000, deadline=None, database=None)
@given(st.text(st.characters(codec=None, categories=("Cc", "Cf", "Zl", "Zp", "Cs", "L", "N", "P", "S", "Zs"))))
def test_clean_leaves_no_invisible_or_format_character(text: str) -> None:
    out = clean(text)
    assert _hidden(out) == []
    assert clean(out) == out
    if not _hidden(text):
        assert out == text  # printable text passes unchanged
    assert len(re.findall(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[nrt])", out)) >= len(_hidden(text))


def test_clean_covers_every_code_point_of_those_categories() -> None:
    """Not a list of known characters: every code point this Python's Unicode database puts in
    those categories, the bidi and zero-width ones among them."""
    every = "".join(chr(i) for i in range(0x110000) if unicodedata.category(chr(i)) in HIDDEN)
    assert {r"\u061c", r"\u200b", r"\u200d", r"\u2060", r"\xad", r"\U000e0041"} <= set(
        re.findall(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", clean(every))
    )
    assert _hidden(clean(every)) == []
    assert clean("a\u061cb\u200bc\u200dd\u2066e") == "a\\u061cb\\u200bc\\u200dd\\u2066e"


def test_clean_names_what_it_replaced() -> None:
    assert clean("a\nb\r\x1b[1m\x00\u2028\x85") == "a\\nb\\r\\x1b[1m\\x00\\u2028\\x85"
    assert clean("a\r\nb\x1b", keep="\r\n") == "a\r\nb\\x1b"


def _hostile_comparison() -> Comparison:
    kernels = (KernelLaunch(f"k\n::add-mask::{HOSTILE}", 1, 1, 1),)
    checks = (
        MetricDelta("c1", "fused", CheckKind.INVENTORY, "", Verdict.REGRESSED, PAYLOAD),
        MetricDelta("c1", "fused", CheckKind.GAIN, names.DRAM_BYTES, Verdict.IMPROVED, PAYLOAD, tolerance=PAYLOAD),
        MetricDelta("c1", "", CheckKind.CASE, "", Verdict.ERROR, HOSTILE + PAYLOAD),
    )
    variants = (VariantMeasurement("fused", {names.LAUNCHES: 1.0}, {names.LAUNCHES: 2.0}, kernels),)
    case = CaseResult("c1", 7, PAYLOAD, checks, variants, notes=(PAYLOAD,))
    env = {"gpu_name": "GPU\n::add-mask::x", "driver_version": HOSTILE}
    return Comparison("s", f"suites/{HOSTILE}::error::s.yaml", env, f"b/{PAYLOAD}.json", True, (), (case,))


def test_console_lines_stay_lines() -> None:
    text = FORMATS["console"]([_hostile_comparison()])
    assert not CONTROLS.search(text) and not COMMAND.search(text)
    assert "fell\\n::add-mask::hunter2\\r\\n::stop-commands::tok\\x1b[2J\\x07\\x00\\u2028::error::fake" in text


def test_annotations_are_one_command_a_line() -> None:
    text = github.render([_hostile_comparison()])
    lines = text.splitlines()
    assert not CONTROLS.search(text)
    # One annotation per variant (fused: regressed and improved) and one for the case's own checks.
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::error"]
    # GitHub reads a command only at the start of a line; the rest of each line is its message.
    assert all("%0A::add-mask::hunter2%0D%0A::stop-commands::tok\\x1b[2J" in line for line in lines)
    # Its checks counted by verdict, the worst first, then each.
    assert "::REGRESSED: 1 check; IMPROVED: 1 check%0AREGRESSED: " in lines[0] and "%0AIMPROVED: " in lines[0]


def test_markdown_has_no_control_characters() -> None:
    text = markdown.render([_hostile_comparison()])
    assert not CONTROLS.search(text) and not COMMAND.search(text)
    assert "fell\\\\n::add-mask::hunter2\\\\r\\\\n::stop-commands::tok\\\\x1b\\[2J" in text  # one line


def test_junit_strings_are_clean_and_the_document_parses() -> None:
    text = FORMATS["junit"]([_hostile_comparison()])
    root = ET.fromstring(text.encode("utf-8"))
    strings = [v for el in root.iter() for v in (*el.attrib.values(), el.text or "")]
    assert strings and not any(CONTROLS.search(s) for s in strings)
    assert not any("\n" in v for el in root.iter() for v in el.attrib.values())


def test_json_keeps_the_text_exactly() -> None:
    """The JSON results are data, not a display: they keep every character (JSON escapes them)."""
    doc = json.loads(FORMATS["json"]([_hostile_comparison()]))
    assert doc["suites"][0]["cases"][0]["checks"][0]["message"] == PAYLOAD


# --- end to end: a hostile harness record under GitHub Actions ---------------------------------


@pytest.fixture
def hostile_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(REGRESSED_REPORT, tmp_path / "elementwise.ncu-rep.xz")
    doc = json.loads(REGRESSED_REPORT.with_name("elementwise-regressed.harness.json").read_text())
    doc["cases"]["bias_gelu"]["status"] = "error"
    doc["cases"]["bias_gelu"]["message"] = PAYLOAD
    (tmp_path / "elementwise.harness.json").write_text(json.dumps(doc))
    monkeypatch.chdir(ROOT)
    return tmp_path / "elementwise.ncu-rep.xz"


def test_a_harness_message_cannot_inject_workflow_commands(hostile_record: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    junit = tmp_path / "j.xml"
    result = CliRunner().invoke(
        app, ["run", "suites/elementwise.yaml", "--from-report", str(hostile_record), "--junit", str(junit)], env=env
    )
    assert result.exit_code == 1, result.output
    # Under Actions the log is coloured: fuseci's own SGR codes are the only escapes in it.
    stdout = re.sub(r"\x1b\[(?:[0-9]+(?:;[0-9]+)*)?m", "", result.stdout)
    for text in (stdout, result.stderr, summary.read_text(), junit.read_text()):
        assert not CONTROLS.search(text)
        assert not re.search(r"^\s*::(add-mask|stop-commands)", text, re.MULTILINE), text
    assert "hunter2" in result.stdout  # shown, escaped, on the line it belongs to


def test_error_lines_and_log_lines_stay_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    odd = tmp_path / "r\n::add-mask::x\x1b.json"
    result = CliRunner().invoke(app, ["merge", str(odd)])
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1 and "r\\n::add-mask::x\\x1b.json" in result.stderr
