"""``fuseci bench`` reporters, pinned by whole expected documents from a hand-built result.
Regenerate after an intended change with ``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters``
and review the diff."""

import json
from dataclasses import replace
from pathlib import Path

from helpers import ELEMENTWISE, pinned

from fuseci.config.parse import load_suite
from fuseci.measure.bench import BenchCase, BenchResult, exit_code, failed, result_from_record
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord, VariantTiming
from fuseci.reporters import BENCH_FORMATS, bench_console, bench_json

ENV = {
    "gpu_name": "NVIDIA H200",
    "compute_capability": "9.0",
    "driver_version": "580.159.04",
    "cuda_runtime": "13.2",
    "cupy_version": "14.2.0",
    "l2_bytes": 62_914_560,
}


def _results() -> list[BenchResult]:
    """One suite with an ok case, a wrong case and a broken case; one suite that could not run."""
    mb = 268_435_456
    record = HarnessRecord(
        suite="elementwise",
        env=ENV,
        cases={
            "scale_relu_add": CaseRecord(
                "scale_relu_add",
                CaseStatus.OK,
                timings=(
                    VariantTiming("unfused", 960_512.0, 955_000.0, 990_100.0, 3_100.0, 30, 2, 3 * mb),
                    VariantTiming("fused", 201_344.0, 200_100.5, 215_000.0, 820.0, 30, 2, 3 * mb),
                ),
            ),
            "bias_gelu": CaseRecord(
                "bias_gelu", CaseStatus.WRONG, "wrong result: fused output 0 vs unfused: 12 of 67108864 elements ..."
            ),
            "relu_bn_add_relu": CaseRecord(
                "relu_bn_add_relu", CaseStatus.ERROR, "cannot import module 'kernels.missing'"
            ),
        },
        complete=True,
        copy_bandwidth=4.0212e12,
    )
    suite = load_suite(ELEMENTWISE)
    ok = result_from_record(record, suite, Path("out/elementwise.bench.json"))
    broken = failed(suite, "the timed run exited with code 3; see out/elementwise.bench.log; last lines: boom")
    # The suite path as a user would type it, so the documents do not depend on the checkout's place.
    return [replace(r, suite_path="suites/elementwise.yaml") for r in (ok, broken)]


def test_console_document_is_pinned() -> None:
    pinned("bench.console.txt", bench_console.render(_results()))


def test_json_document_is_pinned() -> None:
    pinned("bench.json", bench_json.render(_results()))


def test_json_holds_every_number() -> None:
    doc = json.loads(bench_json.render(_results()))
    assert doc["exit_code"] == exit_code(_results()) == 1
    ok, broken = doc["suites"]
    assert ok["copy_bandwidth"] == 4.0212e12 and ok["env"]["gpu_name"] == "NVIDIA H200"
    unfused, fused = ok["cases"][0]["variants"]
    assert fused["median_ns"] == 201_344.0 and fused["iqr_ns"] == 820.0 and fused["min_bytes"] == 3 * 268_435_456
    assert fused["speedup"] == 960_512.0 / 201_344.0 and unfused["speedup"] is None
    assert fused["achieved_bandwidth"] == 3 * 268_435_456 / (201_344.0 * 1e-9)
    assert [c["status"] for c in ok["cases"]] == ["ok", "wrong", "error"]
    assert broken["error"].startswith("the timed run exited") and broken["cases"] == []


def test_console_shows_header_table_and_attention_lines() -> None:
    text = bench_console.render(_results())
    assert "copy bandwidth 4021 GB/s" in text and "GPU NVIDIA H200 (sm_90)" in text
    fused = next(line for line in text.splitlines() if line.strip().startswith("fused"))
    # 201.3 us, IQR 0.4 %, 805.3 MB, 4000 GB/s (99.5 % of the copy), 4.77x
    assert fused.split() == ["fused", "201.3", "0.4", "805.3", "4000", "99.5", "4.77x"]
    assert "WRONG        bias_gelu: wrong result" in text
    assert "ERROR        relu_bn_add_relu: cannot import module" in text
    assert text.endswith("fuseci bench: 2 variants timed, 1 wrong, 2 errors; exit 1\n")


def test_case_without_rows_shows_dashes() -> None:
    r = BenchResult("s", "s.yaml", ENV, 1e12, (BenchCase("c", CaseStatus.ERROR, "boom", ()),))
    assert "  c     -" in bench_console.render([r])


def test_every_bench_format_is_registered() -> None:
    assert set(BENCH_FORMATS) == {"console", "json"}
