"""Reporters, pinned by whole expected documents. Regenerate after an intended change with
``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters`` and review the diff."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import CLEAN_REPORT, REGRESSED_REPORT, pinned, recorded_comparison

from fuseci.judge.verdict import failed
from fuseci.reporters import FORMATS, console, junit
from fuseci.reporters import json as json_reporter


@pytest.mark.parametrize(
    ("report", "name"), [(CLEAN_REPORT, "elementwise"), (REGRESSED_REPORT, "elementwise-regressed")]
)
def test_junit_document_is_pinned(report: Path, name: str, in_root) -> None:
    pinned(f"{name}.junit.xml", junit.render([recorded_comparison(report)]))


def test_junit_structure(in_root) -> None:
    root = ET.fromstring(junit.render([recorded_comparison(REGRESSED_REPORT)]).encode())
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "elementwise" and suite.get("tests") == "58" and suite.get("failures") == "8"
    failure = suite.find("testcase[@name='scale_relu_add.fused.gain[dram__bytes.sum]']/failure")
    assert failure is not None
    assert "fell from 2.32x to 1.4x (-39.6%); tolerance ±1%" in failure.get("message")


def test_suite_that_could_not_run_is_an_error_testcase(elementwise) -> None:
    root = ET.fromstring(junit.render([failed(elementwise, "ncu not found")]).encode())
    assert root.find("testsuite/testcase/error").get("message") == "ncu not found"


def test_json_holds_every_number(in_root) -> None:
    doc = json.loads(json_reporter.render([recorded_comparison(CLEAN_REPORT)]))
    assert doc["exit_code"] == 0
    (suite,) = doc["suites"]
    assert suite["env"]["gpu_name"] == "NVIDIA H200" and suite["has_baseline"]
    case = suite["cases"][0]
    fused = next(v for v in case["variants"] if v["variant"] == "fused")
    assert fused["values"]["launches"] == 1 and fused["values"]["dram__bytes.sum"] > 7e8
    assert fused["gains"]["launches"] == 3
    assert fused["kernels"] == [
        {"name": "fuseci_scale_relu_add", "grid": 1056, "block": 256, "registers": fused["kernels"][0]["registers"]}
    ]
    gain = next(k for k in case["checks"] if k["check"] == "gain" and k["quantity"] == "dram__bytes.sum")
    assert gain["verdict"] == "pass" and gain["baseline"] == pytest.approx(gain["current"], rel=0.03)


def test_console_table_and_attention_lines(in_root) -> None:
    text = console.render([recorded_comparison(REGRESSED_REPORT)])
    assert "fuseci: suite elementwise (suites/elementwise.yaml): REGRESSED" in text
    assert "GPU NVIDIA H200 (sm_90)" in text
    assert "REGRESSED    scale_relu_add/fused: launches gain (unfused ÷ fused) fell from 3x to 1.5x (-50.0%)" in text
    assert "REGRESSED    scale_relu_add/fused: fused launches 2 kernels, the baseline 1: the fusion split:" in text
    assert "note         scale_relu_add: DRAM writes undercount (bytes written to L2 and still there" in text
    assert text.rstrip().endswith("fuseci: 50 pass, 8 regressed; exit 1")


def test_every_format_is_registered() -> None:
    assert set(FORMATS) == {"console", "json", "junit", "markdown", "github", "html"}
