"""Faulty kernels on a real GPU under real ncu: each fault becomes that case's error or wrong
result, and the other cases still come out where the fault allows. gpu-marked."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import DATA
from typer.testing import CliRunner

from fuseci.cli import app

pytestmark = pytest.mark.gpu


def _run(suite: str, tmp_path: Path) -> tuple[object, dict, ET.Element]:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["run", str(DATA / "suites" / suite), "--baselines", str(tmp_path / "b"), "--report-dir", str(out),
         "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "j.xml")],
    )  # fmt: skip
    doc = json.loads((tmp_path / "r.json").read_text())
    return result, {c["case"]: c for c in doc["suites"][0]["cases"]}, ET.parse(tmp_path / "j.xml").getroot()


def test_raise_race_and_illegal_address(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    result, cases, junit = _run("faults.yaml", tmp_path)
    assert result.exit_code == 1, result.output  # a wrong result wins over the errors
    assert cases["raises"]["verdict"] == "error"
    assert "ValueError: shapes (4096,) and (4096,) do not match the tile size" in result.output
    assert cases["nondeterministic"]["verdict"] == "wrong"
    assert "vs its first call" in result.output
    assert cases["fine"]["verdict"] == "new"  # measured: its gains are there, no baseline yet
    fused = next(v for v in cases["fine"]["variants"] if v["variant"] == "fused")
    assert fused["values"]["launches"] == 1
    assert cases["illegal_address"]["verdict"] == "error"
    assert "the CUDA context is lost" in result.output
    assert cases["after"]["verdict"] == "error"
    assert "left the CUDA context unusable" in result.output
    assert int(junit.get("errors")) >= 3 and int(junit.get("failures")) >= 1
    assert "harness.log" in result.output or (tmp_path / "out" / "faults.harness.log").exists()


def test_hang_is_stopped_and_named(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    result, cases, _ = _run("hang.yaml", tmp_path)
    assert result.exit_code == 3, result.output
    assert "this case was running when the run stopped" in json.dumps(cases["hangs"])
    assert "did not finish within 45 s" in result.output
    assert "not reached" in json.dumps(cases["never_reached"])
    # ncu, stopped by SIGTERM, still writes the report of what it profiled: the case before the
    # hang keeps its measurements.
    assert cases["fine"]["verdict"] == "new"
    assert "hang.harness.log" in result.output


def test_a_harness_that_sees_no_gpu_says_so_in_one_line(tmp_path: Path, root: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # CuPy is there, no device is
    done = subprocess.run(
        [sys.executable, "-m", "fuseci.harness", str(root / "suites" / "elementwise.yaml"),
         "--record", str(tmp_path / "r.json"), "--time"],
        env=env, capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("fuseci-harness: error:"))
    assert "CUDA" in line and "fuseci doctor" in line
