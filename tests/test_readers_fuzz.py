"""Mutation fuzzing of every reader, and round trips through every writer.

Every reader (baselines, harness records, results files, run files) is fed mutations of the real
committed documents (:mod:`fuzzing`). Whatever it is fed, it returns its typed value or raises its
format's one-line error naming the file; nothing else (no other exception, no hang). A document a
reader accepts is then written back by the format's writer and read again: the writer must
produce a document its reader takes, with the same content. The report/record pairing is checked
as a property of its own.

Each test run draws its examples from a seed of its own (``tests/fuzzing.py``), so the examples of
one run are a sample, and the runs add up: a few hundred per reader keep the test run short, and
``FUSECI_FUZZ_SCALE=20`` multiplies them for a long local search.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import CLEAN_REPORT, ELEMENTWISE, H200_BASELINES, REPORTS, ROOT, fuzz_settings, mutated
from hypothesis import event, given
from hypothesis import strategies as st

from fuseci.config import names
from fuseci.config.parse import load_suite
from fuseci.errors import FuseciError
from fuseci.frames.report import mismatch
from fuseci.judge.baseline import Baseline
from fuseci.measure.run import MeasureOptions, measure
from fuseci.records import harness as rec
from fuseci.store import baselines as bl
from fuseci.store import results, runs

LEGACY = ROOT / "tests" / "data" / "legacy"
BASELINES = [  # a suite's ledgers and autotuning files beside its baseline are not one (their own tests read them)
    *sorted(p for p in H200_BASELINES.glob("*/*.json") if not p.name.endswith((".ledgers.json", ".autotune.json"))),
    LEGACY / "baseline-elementwise-h200.json",
]
RECORDS = [*sorted(REPORTS.glob("*.harness.json")), LEGACY / "elementwise-regressed.harness.json"]
RESULTS = [LEGACY / "results-elementwise-regressed.json"]
RUNS = [LEGACY / "run-elementwise-regressed.json"]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # One file rewritten per example (hypothesis runs many examples per test call).
    yield tmp_path_factory.mktemp("fuzz") / "doc.json"


def _texts(paths: list[Path]) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in paths]


def outcome(read: Callable[[Path], Any], path: Path, raw: bytes) -> Any:
    """Read ``raw`` from ``path``: the reader's value, or its well-formed one-line error."""
    path.write_bytes(raw)
    try:
        got = read(path)
    except FuseciError as exc:
        event("refused")
        message = str(exc)
        assert message.startswith(f"{path}"), message
        assert "\n" not in message and "\r" not in message, message
        assert len(message) < 2000, message
        return exc
    event("accepted")
    return got


# --- baselines ------------------------------------------------------------------------------------

BASELINE_TEXTS = _texts(BASELINES)


@fuzz_settings(500)
@given(st.data())
def test_baselines(target: Path, data: st.DataObject) -> None:
    raw = mutated(data, BASELINE_TEXTS[data.draw(st.integers(0, len(BASELINE_TEXTS) - 1), label="seed")])
    got = outcome(bl.load_baseline, target, raw)
    if isinstance(got, Baseline):  # the writer writes what the reader takes, the same again
        text = bl.dumps(got)
        target.write_text(text)
        again = bl.load_baseline(target)
        assert again is not None and bl.dumps(again) == text


# --- harness records ------------------------------------------------------------------------------

RECORD_TEXTS = _texts(RECORDS)


@fuzz_settings(500)
@given(st.data())
def test_harness_records(target: Path, data: st.DataObject) -> None:
    raw = mutated(data, RECORD_TEXTS[data.draw(st.integers(0, len(RECORD_TEXTS) - 1), label="seed")])
    got = outcome(rec.read_record, target, raw)
    if isinstance(got, rec.HarnessRecord):
        rec.write_record(got, target)
        again = rec.read_record(target)
        assert rec.FORMAT.dumps(again.to_json()) == rec.FORMAT.dumps(got.to_json())
        assert _same(again.to_json(), got.to_json())


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a record keeps the NaN error of an output)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


# --- results files --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def result_texts(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The 0.1.0 results file, and the results of a clean and a regressed re-analysis now."""
    from fuseci import api
    from fuseci.reporters import json as json_reporter

    suite = load_suite(ELEMENTWISE)
    fresh = [api.check(suite, api.RunOptions(baselines=H200_BASELINES, from_report=r)) for r in (CLEAN_REPORT,)]
    return [*_texts(RESULTS), json_reporter.render(fresh)]


@fuzz_settings(500)
@given(data=st.data())
def test_results_files(target: Path, result_texts: list[str], data: st.DataObject) -> None:
    raw = mutated(data, result_texts[data.draw(st.integers(0, len(result_texts) - 1), label="seed")])
    got = outcome(results.read_results, target, raw)
    if isinstance(got, list):
        text = results.dumps(got)
        target.write_text(text)
        assert results.dumps(results.read_results(target)) == text


# --- run files ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_texts(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The 0.1.0 run file, and one of the mutants suite (a wrong case, nothing measured for it)."""
    mutants = measure(
        load_suite(ROOT / "suites" / "mutants.yaml"), MeasureOptions(from_report=REPORTS / "mutants.ncu-rep.xz")
    )
    path = runs.save_run([mutants], {"mutants": "suites/mutants.yaml"}, tmp_path_factory.mktemp("runs"))
    return [*_texts(RUNS), path.read_text()]


@fuzz_settings(300)
@given(data=st.data())
def test_run_files(
    target: Path, run_texts: list[str], data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    raw = mutated(data, run_texts[data.draw(st.integers(0, len(run_texts) - 1), label="seed")])
    got = outcome(runs.load_run, target, raw)
    if isinstance(got, runs.Run) and got.suites:
        again_path = runs.save_run(list(got.suites.values()), got.suite_paths, target.parent / "again")
        try:
            again = runs.load_run(again_path)
            for sid, suite in got.suites.items():
                pd.testing.assert_frame_equal(again.suites[sid].kernels, suite.kernels)
                assert _same(again.suites[sid].record.to_json(), suite.record.to_json())
        finally:
            again_path.unlink()


# --- the report/record pairing --------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_pair() -> tuple[pd.DataFrame, rec.HarnessRecord]:
    results_ = measure(load_suite(ELEMENTWISE), MeasureOptions(from_report=CLEAN_REPORT))
    return results_.kernels, results_.record


@fuzz_settings(200)
@given(data=st.data())
def test_pairing_holds_exactly_when_report_and_record_agree(
    clean_pair: tuple[pd.DataFrame, rec.HarnessRecord], data: st.DataObject
) -> None:
    """Drop kernels of some variants, or variants from the record, or change the record's GPU:
    the pair is accepted exactly when the two still describe one run."""
    kernels, record = clean_pair
    pairs = sorted({(c, v) for c, v in zip(kernels[names.CASE], kernels[names.VARIANT], strict=True)})
    dropped_kernels = set(data.draw(st.lists(st.sampled_from(pairs), max_size=3), label="drop from report"))
    dropped_measured = set(data.draw(st.lists(st.sampled_from(pairs), max_size=3), label="drop from record"))
    gpu = data.draw(st.sampled_from(["NVIDIA H200", "NVIDIA H100 80GB HBM3", ""]), label="record gpu")
    interrupted = data.draw(st.sampled_from(["", "stopped"]), label="interrupted")
    keep = [(c, v) not in dropped_kernels for c, v in zip(kernels[names.CASE], kernels[names.VARIANT], strict=True)]
    frame = kernels[keep].reset_index(drop=True)
    cases = {
        cid: replace(case, measured=tuple(v for v in case.measured if (cid, v) not in dropped_measured))
        for cid, case in record.cases.items()
    }
    changed = replace(record, cases=cases, env={**record.env, "gpu_name": gpu}, interrupted=interrupted)
    problem = mismatch(frame, changed)
    stray = dropped_measured - dropped_kernels  # kernels of a variant the record no longer ran
    lacking = dropped_kernels - dropped_measured  # a variant the record ran, without kernels
    agree = (gpu == "NVIDIA H200" or frame.empty) and not stray and (bool(interrupted) or not lacking)
    assert (problem == "") == agree, (problem, dropped_kernels, dropped_measured, gpu, interrupted)


def test_every_committed_pair_agrees() -> None:
    for report in sorted(REPORTS.glob("*.ncu-rep.xz")):
        suite = report.name.split(".")[0].removesuffix("-h100").removesuffix("-regressed").removesuffix("-passes")
        path = ROOT / "suites" / f"{suite}.yaml"
        if not path.exists():  # a suite of the tests' own (tests/data/suites)
            path = ROOT / "tests" / "data" / "suites" / f"{suite}.yaml"
        measure(load_suite(path), MeasureOptions(from_report=report))  # raises if not


def test_the_seeds_are_valid() -> None:
    """The mutations start from documents the readers take (else they would test nothing)."""
    for path in BASELINES:
        assert bl.load_baseline(path) is not None
    for path in RECORDS:
        rec.read_record(path)
    for path in RESULTS:
        results.read_results(path)
    for path in RUNS:
        runs.load_run(path)
    assert json.loads(RESULTS[0].read_text())["suites"]
