import json
import shutil
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, ELEMENTWISE, REGRESSED_REPORT

from fuseci import api
from fuseci.config.parse import load_suite
from fuseci.errors import ReportError
from fuseci.judge.verdict import CheckKind, update_exit_code
from fuseci.records.harness import CaseStatus, read_record
from fuseci.store import baselines as bl


def _opts(tmp_path: Path, report: Path) -> api.RunOptions:
    return api.RunOptions(baselines=tmp_path / "baselines", from_report=report)


def test_first_update_writes_every_case(tmp_path: Path, elementwise) -> None:
    update = api.update_baselines(elementwise, _opts(tmp_path, CLEAN_REPORT))
    assert update.written and update.path == tmp_path / "baselines" / "nvidia-h200" / "elementwise.json"
    assert update.changes == tuple(f"+ {c}: new" for c in sorted(c.id for c in elementwise.cases))
    assert bl.load_baseline(update.path) is not None


def test_update_without_real_change_rewrites_nothing(tmp_path: Path, elementwise, committed_copy: Path) -> None:
    """A baseline recorded before fuseci kept source fingerprints gets them, and nothing else;
    then an update without a real change rewrites nothing."""
    legacy = json.loads(committed_copy.read_text())
    first = api.update_baselines(elementwise, _opts(tmp_path, CLEAN_REPORT))
    assert first.written and first.changes == ()
    recorded = json.loads(committed_copy.read_text())
    assert {k: v for k, v in recorded.items() if k != "sources"} == legacy
    assert set(recorded["sources"]) == {c.id for c in elementwise.cases}
    before = committed_copy.read_bytes()
    mtime = committed_copy.stat().st_mtime_ns
    update = api.update_baselines(elementwise, _opts(tmp_path, CLEAN_REPORT))
    assert not update.written and update.changes == ()
    assert committed_copy.read_bytes() == before and committed_copy.stat().st_mtime_ns == mtime


def test_a_case_that_breaks_its_promises_is_refused(tmp_path: Path, elementwise, committed_copy: Path) -> None:
    """The split kernel misses its expectations and its bytes allowance: recording it would
    make the very next run fail, so it is refused, the file stays, and the update says why."""
    before = committed_copy.read_bytes()
    update = api.update_baselines(elementwise, _opts(tmp_path, REGRESSED_REPORT))
    assert not update.written and committed_copy.read_bytes() == before
    (refusal,) = update.refused
    assert refusal.case == "scale_relu_add"
    assert {(k.variant, k.check.value, k.quantity) for k in refusal.checks} == {
        ("fused", "bytes", "dram_bytes_over_min"),
        ("fused", "expect", "dram__bytes.sum"),
        ("fused", "expect", "launches"),
    }
    assert update_exit_code(update.comparison, update.kept, bool(update.refused)) == 1


def test_force_records_what_it_was_refused_and_says_so(tmp_path: Path, elementwise, committed_copy: Path) -> None:
    update = api.update_baselines(elementwise, _opts(tmp_path, REGRESSED_REPORT), force=True)
    assert update.written and update.refused == ()
    assert [r.case for r in update.overridden] == ["scale_relu_add"]
    assert bl.load_baseline(committed_copy).cases["scale_relu_add"]["fused"].values["launches"] == 2


def test_update_after_regression_changes_only_that_case(tmp_path: Path, relaxed, committed_copy: Path) -> None:
    old = bl.load_baseline(committed_copy)
    update = api.update_baselines(relaxed, _opts(tmp_path, REGRESSED_REPORT))
    assert update.written and update.refused == () and update.overridden == ()
    assert len(update.changes) == 1 and update.changes[0].startswith("~ scale_relu_add: ")
    assert "fell from 3x to 1.5x" in update.changes[0]
    new = bl.load_baseline(committed_copy)
    assert new.cases["bias_gelu"] == old.cases["bias_gelu"]
    assert new.cases["relu_bn_add_relu"] == old.cases["relu_bn_add_relu"]
    assert new.cases["scale_relu_add"]["fused"].values["launches"] == 2


def test_force_rerecords_everything(tmp_path: Path, elementwise, committed_copy: Path) -> None:
    # The committed baseline was recorded from its own profiled passes: forced, the clean report's
    # values replace it; forced again from the same report, the file is the same, byte for byte.
    assert api.update_baselines(elementwise, _opts(tmp_path, CLEAN_REPORT), force=True).written
    update = api.update_baselines(elementwise, _opts(tmp_path, CLEAN_REPORT), force=True)
    assert not update.written


def test_other_suites_and_gpus_are_untouched(tmp_path: Path, relaxed, committed_copy: Path) -> None:
    other_gpu = tmp_path / "baselines" / "nvidia-h100-80gb-hbm3" / "elementwise.json"
    other_suite = tmp_path / "baselines" / "nvidia-h200" / "reduction.json"
    for p in (other_gpu, other_suite):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("precious\n")
    api.update_baselines(relaxed, _opts(tmp_path, REGRESSED_REPORT))
    assert other_gpu.read_text() == "precious\n" and other_suite.read_text() == "precious\n"


def test_report_of_another_suite_is_refused(tmp_path: Path) -> None:
    suite_file = tmp_path / "other.yaml"
    suite_file.write_text(ELEMENTWISE.read_text().replace("suite: elementwise", "suite: other"))
    with pytest.raises(ReportError, match="record of suite 'elementwise', not 'other'"):
        api.check(load_suite(suite_file), _opts(tmp_path, CLEAN_REPORT))


def test_report_without_its_record(tmp_path: Path, elementwise) -> None:
    lonely = tmp_path / "elementwise.ncu-rep.xz"
    shutil.copy(CLEAN_REPORT, lonely)
    with pytest.raises(ReportError, match="harness record not found.*keep the two files together"):
        api.check(elementwise, _opts(tmp_path, lonely))


def test_recorded_record_describes_the_run() -> None:
    record = read_record(CLEAN_REPORT.with_name("elementwise.harness.json"))
    assert record.complete
    assert record.env["gpu_name"] == "NVIDIA H200"
    assert record.profiler.ncu_version.startswith("2025.3.1")
    assert {c.status for c in record.cases.values()} == {CaseStatus.OK}


def test_unreadable_report_names_writer_and_reader_versions(tmp_path: Path, elementwise) -> None:
    bad = tmp_path / "elementwise.ncu-rep"
    bad.write_bytes(b"\x00" * 4096)
    shutil.copy(CLEAN_REPORT.with_name("elementwise.harness.json"), tmp_path)
    with pytest.raises(
        ReportError, match=r"written by ncu 2025\.3\.1\.0 and the reader is ncu_report \S+: .*pip install -U ncu-report"
    ):
        api.check(elementwise, _opts(tmp_path, bad))


def test_half_a_report_after_a_stopped_run_counts_as_not_measured(tmp_path: Path, elementwise) -> None:
    from dataclasses import replace

    from fuseci.records.harness import write_record

    bad = tmp_path / "elementwise.ncu-rep"
    bad.write_bytes(b"\x00" * 4096)
    record = read_record(CLEAN_REPORT.with_name("elementwise.harness.json"))
    write_record(
        replace(record, interrupted="the profiled run did not finish within 45 s"),
        tmp_path / "elementwise.harness.json",
    )
    comp = api.check(elementwise, _opts(tmp_path, bad))
    messages = [k.message for c in comp.cases for k in c.checks if k.check is CheckKind.CASE]
    assert messages and all(m.startswith("checked, not measured: the profiled run did not finish") for m in messages)
