"""``fuseci bench`` for real (marker ``gpu``): the timed harness on the GPU, without ncu."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.records.harness import read_record

pytestmark = pytest.mark.gpu


def test_fuseci_bench_times_every_variant(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    suite = root / "tests" / "data" / "suites" / "tiny.yaml"
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", str(suite), "--report-dir", str(tmp_path / "out"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    (doc,) = json.loads(out.read_text())["suites"]
    assert doc["copy_bandwidth"] > 1e11
    (case,) = doc["cases"]
    assert case["status"] == "ok"
    variants = {v["variant"]: v for v in case["variants"]}
    assert set(variants) == {"unfused", "fused", "defused"}
    for v in variants.values():
        assert v["median_ns"] > 0 and v["min_ns"] <= v["median_ns"] <= v["max_ns"] and v["iqr_ns"] >= 0
        assert v["repeats"] >= 30 and v["input_sets"] >= 2
        assert v["min_bytes"] == 3 * 1000003 * 4  # x and y read once, out written once
    record = read_record(tmp_path / "out" / "tiny.bench.json")
    l2 = int(record.env["l2_bytes"])
    sets = variants["fused"]["input_sets"]
    assert sets * 2 * 1000003 * 4 >= 4 * l2  # the rotation spans 4x L2
    assert record.cases["scale_relu_add"].measured == ()  # nothing ran in an NVTX range
