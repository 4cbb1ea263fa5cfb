"""Files written by fuseci 0.1.0 (tests/data/legacy) stay readable, upgraded on read, with the
same content: baselines, harness records beside their reports, run files, results files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA, ROOT
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.records.harness import FORMAT as RECORD_FORMAT
from fuseci.records.harness import read_record
from fuseci.store import baselines as bl
from fuseci.store import runs
from fuseci.store.results import read_results

LEGACY = DATA / "legacy"
#: Fields 0.1.0 wrote that carry nothing the current formats keep (documented in their history).
OBSOLETE = ("timing_repeats",)


def _without_obsolete(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_obsolete(v) for k, v in value.items() if k not in OBSOLETE}
    if isinstance(value, list):
        return [_without_obsolete(v) for v in value]
    return value


def _holds(old: Any, new: Any) -> bool:
    """Every value of ``old`` is in ``new`` (which may hold more: fields added since 0.1.0)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _holds(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(_holds, old, new))
    return bool(old == new)


def _same_measurements(old: dict, new: dict) -> None:
    """Two results documents of the same run hold the same measurements: every variant's values,
    gains and kernels, and every gain check's current and baseline values. (Verdicts, messages
    and tolerances follow the suite's policies of the day, which have moved since 0.1.0.)"""
    (a,), (b,) = old["suites"], new["suites"]
    cases_a = {c["case"]: c for c in a["cases"]}
    cases_b = {c["case"]: c for c in b["cases"]}
    assert set(cases_a) == set(cases_b)
    for cid, ca in cases_a.items():
        cb = cases_b[cid]
        assert _holds(ca["variants"], cb["variants"]), cid
        gains_b = {(k["variant"], k["quantity"]): k for k in cb["checks"] if k["check"] == "gain"}
        for k in ca["checks"]:
            if k["check"] == "gain":
                kb = gains_b[(k["variant"], k["quantity"])]
                assert (kb["current"], kb["baseline"]) == (k["current"], k["baseline"]), (cid, k["quantity"])


def _invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_a_version_1_record_is_upgraded_with_nothing_lost() -> None:
    path = LEGACY / "elementwise-regressed.harness.json"
    old = json.loads(path.read_text())
    assert old["format_version"] == 1 and "timing_repeats" in old["profiler"]
    record = read_record(path)
    new = record.to_json()
    assert new["format_version"] == RECORD_FORMAT.version
    assert {k: v for k, v in new.items() if k != "format_version"} == {
        k: v for k, v in _without_obsolete(old).items() if k != "format_version"
    }
    assert record.timed and record.profiler is not None and record.profiler.ncu_version == "2025.3.1.0"


def test_a_version_1_record_judges_its_report_as_it_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The regressed report with its 0.1.0 record, against 0.1.0's baseline, measures what it did then."""
    shutil.copy(LEGACY / "regressed.ncu-rep.xz", tmp_path / "elementwise.ncu-rep.xz")
    (tmp_path / "baselines" / "nvidia-h200").mkdir(parents=True)
    shutil.copy(LEGACY / "baseline-elementwise-h200.json", tmp_path / "baselines" / "nvidia-h200" / "elementwise.json")
    shutil.copy(LEGACY / "elementwise-regressed.harness.json", tmp_path / "elementwise.harness.json")
    monkeypatch.chdir(ROOT)
    out = tmp_path / "results.json"
    result = _invoke(
        "run", "suites/elementwise.yaml", "--from-report", tmp_path / "elementwise.ncu-rep.xz", "--json", out,
        "--baselines", tmp_path / "baselines",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    expected = json.loads((LEGACY / "results-elementwise-regressed.json").read_text())
    _same_measurements(_without_obsolete(expected), json.loads(out.read_text()))


def test_a_version_1_baseline_reads_and_writes_back_as_version_2() -> None:
    """Format 2 only added a member that version 1's kernels never have: a version-1 file writes
    back byte for byte but for its version."""
    path = LEGACY / "baseline-elementwise-h200.json"
    baseline = bl.load_baseline(path)
    assert baseline is not None and set(baseline.cases) >= {"scale_relu_add", "bias_gelu"}
    assert all(not k.counts and not k.spread for c in baseline.cases.values() for e in c.values() for k in e.kernels)
    text = path.read_text()
    assert '"format_version": 1,' in text
    assert bl.dumps(baseline) == text.replace('"format_version": 1,', '"format_version": 2,')


def test_a_version_1_run_file_is_judged_as_before(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = LEGACY / "run-elementwise-regressed.json"
    run = runs.load_run(path)
    assert set(run.suites) == {"elementwise"} and run.gpu_name == "NVIDIA H200"
    monkeypatch.chdir(ROOT)
    out = tmp_path / "compared.json"
    result = _invoke("compare", path, path, "suites/elementwise.yaml", "--json", out)
    assert result.exit_code == 1, result.output  # the regressed run misses its expectations, as it did
    expected = json.loads((LEGACY / "expected" / "compare-run-with-itself.json").read_text())
    got = json.loads(out.read_text())
    assert got["suites"][0]["baseline_path"] == str(path)  # run A's path as given
    _same_measurements(_without_obsolete(expected), got)


def test_a_version_1_results_file_merges_unchanged(tmp_path: Path) -> None:
    path = LEGACY / "results-elementwise-regressed.json"
    assert len(read_results(path)) == 1
    out = tmp_path / "merged.json"
    result = _invoke("merge", path, "--json", out)
    assert result.exit_code == 1, result.output
    assert json.loads(out.read_text()) == json.loads(path.read_text())
