"""The harness record: timing fields of ``--time`` runs round-trip, and old records still load."""

import json
from pathlib import Path

import pytest
from helpers import REPORTS

from fuseci.errors import ReportError
from fuseci.measure.command import DEFAULT_REPEATS as TIMING_REPEATS
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord, VariantTiming, read_record, write_record

COMMITTED = sorted(REPORTS.glob("*.harness.json"))


def _timed_record() -> HarnessRecord:
    timings = (
        VariantTiming("unfused", 1200.5, 1190.0, 1300.0, 12.25, 30, 2, 805_306_368),
        VariantTiming("fused", 210.0, 208.5, 230.0, 1.5, 30, 2, 805_306_368),
    )
    return HarnessRecord(
        suite="elementwise",
        env={"gpu_name": "NVIDIA H200", "l2_bytes": 62_914_560},
        cases={"scale_relu_add": CaseRecord("scale_relu_add", CaseStatus.OK, timings=timings)},
        complete=True,
        copy_bandwidth=4.1e12,
    )


def test_timings_and_copy_bandwidth_round_trip(tmp_path: Path) -> None:
    record = _timed_record()
    write_record(record, tmp_path / "r.json")
    assert read_record(tmp_path / "r.json") == record


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_records_carry_the_timed_pass_and_minimum_bytes(path: Path) -> None:
    record = read_record(path)
    assert record.profiler.timed is True
    for c in record.cases.values():
        if c.status != CaseStatus.OK:
            continue
        assert {t.variant for t in c.timings} == set(c.measured), c.case
        assert all(t.repeats == TIMING_REPEATS and t.median_ns > 0 for t in c.timings)
        assert c.min_bytes and c.min_bytes >= min(t.min_bytes for t in c.timings) > 0


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_records_round_trip(path: Path) -> None:
    data = json.loads(path.read_text())
    assert read_record(path).to_json() == data  # nothing lost, nothing added


def test_malformed_timing_is_a_report_error(tmp_path: Path) -> None:
    doc = _timed_record().to_json()
    doc["cases"]["scale_relu_add"]["timings"][0]["median"] = 1.0
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(
        ReportError,
        match=r"cases.scale_relu_add.timings\[0\].median: unknown key 'median'; did you mean 'median_ns'\? allowed keys: variant, ",
    ):
        read_record(tmp_path / "r.json")


def test_non_numeric_copy_bandwidth_is_a_report_error(tmp_path: Path) -> None:
    doc = _timed_record().to_json()
    doc["copy_bandwidth"] = "fast"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(ReportError, match='copy_bandwidth: expected a number, got a string "fast"'):
        read_record(tmp_path / "r.json")


def test_a_record_is_written_back_as_it_was_read(tmp_path: Path) -> None:
    """``fuseci run`` rewrites the harness's record: a number the harness wrote as an integer stays
    one (``3``, not ``3.0``), so the file changes only where fuseci added something."""
    timings = (VariantTiming("fused", 210, 208, 230.0, 2, 30, 2, 805_306_368, q1_ns=209, samples_ns=(208.0, 210.5)),)
    record = HarnessRecord("elementwise", {}, {"c": CaseRecord("c", CaseStatus.OK, timings=timings)}, complete=True)
    write_record(record, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert '"median_ns": 210,' in text and '"q1_ns": 209,' in text
    write_record(read_record(tmp_path / "r.json"), tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == text
