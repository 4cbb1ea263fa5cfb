"""The ledgers of a suite's ledger variants as a run builds, judges and records them
(fuseci.api.ledgers), from real captures and ncu rows (tests/data/ledger, an H200), and the
suite's ledgers file beside its baseline."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ledgers as L
import pytest
from helpers import in_range

from fuseci.api import ledgers
from fuseci.config.parse import load_suite
from fuseci.errors import LedgerError, ReportError
from fuseci.judge.verdict import CheckKind, Reference, Verdict
from fuseci.ledger import store
from fuseci.ledger.diff import diff
from fuseci.records.fusion import KernelRow, Provenance
from fuseci.records.harness import HarnessRecord
from fuseci.validation import validate

DATA = Path(__file__).parent / "data" / "ledger"
SUITE = """\
suite: blocks
defaults: {framework: torch, dtype: bfloat16}
cases:
  - id: block
    inputs: {x: {shape: [8, 1024, 1024]}}
    variants:
      unfused: kernels.models:prenorm_eager
      compiled:
        fn: kernels.models:prenorm_compiled
        ledger: {graphs: 1}
      split:
        fn: kernels.models:prenorm_break_add_norm
        baseline: compiled
        ledger: true
        caught_by: [ledger]
"""
REFERENCE = Reference("fuseci update-baselines blocks.yaml")


def _json(name: str) -> Any:
    return json.loads(lzma.decompress((DATA / f"{name}.xz").read_bytes()))


@pytest.fixture(scope="module")
def ncu_rows() -> list[dict[str, Any]]:
    return _json("kernels.json")


def _rows(ncu_rows: list[dict[str, Any]], probe_case: str) -> tuple[KernelRow, ...]:
    return in_range(L.kernel_rows(ncu_rows), f"{probe_case}.compiled")


def _results(ncu_rows: list[dict[str, Any]], sides: dict[str, str], measured: bool = True) -> Any:
    """A run's results as api.ledgers reads them: each variant's captured provenance in the
    record and its kernels from the report (here the probe cases' real ones)."""
    provenance = {v: validate(Provenance, _json(f"{probe}.json")) for v, probe in sides.items()}
    record = SimpleNamespace(ok=True, measured=tuple(sides) if measured else (), provenance=provenance)
    return SimpleNamespace(
        record=SimpleNamespace(cases={"block": record}),
        ledger_rows={("block", v): _rows(ncu_rows, probe) for v, probe in sides.items()},
    )


@pytest.fixture
def suite(tmp_path: Path) -> Any:
    path = tmp_path / "blocks.yaml"
    path.write_text(SUITE, encoding="utf-8")
    return load_suite(path)


def test_no_stored_ledger_is_new_and_the_ledger_is_kept(suite: Any, ncu_rows: list[dict[str, Any]]) -> None:
    results = _results(ncu_rows, {"compiled": "block-base"})
    judged = ledgers.judged(suite, ledgers.built(suite, results), {}, REFERENCE)
    got = judged[("block", "compiled")]
    assert got.ledger is not None and len(got.ledger.rows) == 9 and got.baseline is None
    (check,) = got.checks
    assert (check.check, check.verdict) == (CheckKind.LEDGER, Verdict.NEW)
    assert "no ledger of compiled to compare with yet (9 kernel calls recorded)" in check.message
    assert "fuseci update-baselines blocks.yaml" in check.message


def test_a_split_fusion_is_a_regression_naming_its_nodes(suite: Any, ncu_rows: list[dict[str, Any]]) -> None:
    base = ledgers.built(suite, _results(ncu_rows, {"compiled": "block-base"}))[("block", "compiled")]
    assert not isinstance(base, LedgerError)
    results = _results(ncu_rows, {"compiled": "block-base", "split": "block-break_add_norm"})
    judged = ledgers.judged(suite, ledgers.built(suite, results), {store.key("block", "compiled"): base}, REFERENCE)
    same = judged[("block", "compiled")].checks
    assert [c.verdict for c in same] == [Verdict.PASS]
    split = judged[("block", "split")]
    assert split.baseline == base
    regressed = [c for c in split.checks if c.verdict is Verdict.REGRESSED]
    assert any(c.quantity == "split" and "layer_norm_1" in c.message for c in regressed), regressed
    assert all(c.check is CheckKind.LEDGER and c.variant == "split" for c in split.checks)


def test_a_forward_of_more_graphs_than_demanded_is_an_error(suite: Any, ncu_rows: list[dict[str, Any]]) -> None:
    """``ledger: {graphs: 1}`` on a forward a graph break split in two: a broken case (exit 3)."""
    results = _results(ncu_rows, {"compiled": "block-break_add_norm"})
    checks = ledgers.judged(suite, ledgers.built(suite, results), {}, REFERENCE)[("block", "compiled")].checks
    errors = [c for c in checks if c.verdict is Verdict.ERROR]
    assert len(errors) == 1 and errors[0].quantity == "graphs"
    assert "is 2 graph(s), the suite demands 1 (ledger.graphs)" in errors[0].message
    assert "graph_break" in errors[0].message


def test_a_record_whose_capture_is_not_inductors_is_refused_where_it_is_read() -> None:
    """The provenance is checked once, as the record is read: one line naming the file and the place."""
    case = {"status": "ok", "message": "", "measured": ["compiled"], "checks": []}
    record = {"format": "fuseci-harness-record", "format_version": 2, "suite": "blocks", "complete": True}
    for bad, where in (
        ({"artifacts": "nope"}, "cases.block.provenance.compiled.artifacts: expected a list"),
        (
            {"artifacts": [{"name": "inductor_output_code", "metadata": {}, "payload": ""}]},
            "artifacts[0]: its metadata's frame_id is null, not a count",
        ),
    ):
        with pytest.raises(ReportError) as err:
            HarnessRecord.from_json(
                {**record, "cases": {"block": {**case, "provenance": {"compiled": bad}}}}, "run.harness.json"
            )
        message = str(err.value)
        assert message.startswith("run.harness.json: cases.block.provenance.compiled") and where in message, message
        assert "\n" not in message and err.value.exit_code == 3


def test_a_judged_ledger_carries_what_changed_since_its_baseline(suite: Any, ncu_rows: list[dict[str, Any]]) -> None:
    """The node diff is made where the ledger is judged, once, and carried to the reporters."""
    base = ledgers.built(suite, _results(ncu_rows, {"compiled": "block-base"}))[("block", "compiled")]
    assert not isinstance(base, LedgerError)
    results = _results(ncu_rows, {"compiled": "block-base", "split": "block-break_add_norm"})
    judged = ledgers.judged(suite, ledgers.built(suite, results), {store.key("block", "compiled"): base}, REFERENCE)
    assert judged[("block", "compiled")].changes == ()
    split = judged[("block", "split")]
    assert split.changes and split.changes == tuple(diff(base, split.ledger))
    assert ledgers.judged(suite, ledgers.built(suite, results), {}, REFERENCE)[("block", "split")].changes == ()


def test_an_unmeasured_variant_has_no_ledger(suite: Any, ncu_rows: list[dict[str, Any]]) -> None:
    assert (
        ledgers.judged(
            suite, ledgers.built(suite, _results(ncu_rows, {"compiled": "block-base"}, measured=False)), {}, REFERENCE
        )
        == {}
    )


def test_update_records_the_healthy_ledger_not_the_planted_one(suite: Any, ncu_rows: list[dict[str, Any]]) -> None:
    results = _results(ncu_rows, {"compiled": "block-base", "split": "block-break_add_norm"})
    built = ledgers.built(suite, results)
    kept = ledgers.recorded(suite, built, {"other/compiled": "old"}, {"block"})  # type: ignore[dict-item]
    assert set(kept) == {"other/compiled", "block/compiled"} and kept["block/compiled"] is built[("block", "compiled")]
    assert ledgers.recorded(suite, built, {}, set()) == {}


def test_the_suite_ledgers_file_round_trips_and_refuses_hostile_files(
    suite: Any, ncu_rows: list[dict[str, Any]], tmp_path: Path
) -> None:
    ledger = ledgers.built(suite, _results(ncu_rows, {"compiled": "block-base"}))[("block", "compiled")]
    assert not isinstance(ledger, LedgerError)
    baseline = tmp_path / "nvidia-h200" / "blocks.json"
    baseline.parent.mkdir()
    path = store.suite_path(baseline)
    assert path.name == "blocks.ledgers.json"
    assert ledgers.stored(baseline) == {}
    store.save_suite({"block/compiled": ledger}, path)
    assert ledgers.stored(baseline) == {"block/compiled": ledger}
    assert store.dumps_suite({"block/compiled": ledger}) == path.read_text()
    text = path.read_text()
    for bad, what in (
        (text[: len(text) // 2], "ledgers"),
        (text.replace('"fuseci-ledgers"', '"fuseci-results"'), "not a fuseci suite's ledgers"),
        (text.replace('"floor_bytes": ', '"floor_bytes": -', 1), "floor_bytes"),
    ):
        path.write_text(bad)
        with pytest.raises(LedgerError) as info:
            ledgers.stored(baseline)
        line = str(info.value)
        assert "\n" not in line and str(path) in line and what in line, line


def test_a_results_file_read_back_carries_what_changed_in_its_ledgers() -> None:
    """A results file holds each ledger and its baseline's, not their diff: its reader finds the
    changes again, so a report of it says what the run's did."""
    from fuseci.store import results as results_file
    from tests.reporters.ledger_results import ledger_comparison

    judged = ledger_comparison()
    (compiled,) = [m for m in judged.cases[0].variants if m.ledger is not None]
    assert compiled.ledger_changes
    (read,) = results_file.from_json(json.loads(results_file.dumps([judged])), "r.json")
    (again,) = [m for m in read.cases[0].variants if m.ledger is not None]
    assert again.ledger_changes == compiled.ledger_changes
