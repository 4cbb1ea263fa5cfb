"""Mutation fuzzing through the real command line (in process, typer's CliRunner).

Each test mutates the committed documents (:mod:`fuzzing`) that one command reads, runs the
command on them, and asserts what a user and CI may rely on: the exit code is 0, 1 or 3, never a
traceback or an internal error; 1 only when the document is a valid one (the run regressed);
for a document its reader refuses, exit 3 with a one-line ``fuseci: error:`` naming the file;
and no stored file is lost or replaced by what a bad input made (a baseline ``update-baselines``
refused is left byte for byte). Reading the ``.ncu-rep`` reports (NVIDIA's reader, the slow
part) is cached; everything after it runs for real. Each test run draws its examples from a seed
of its own (``tests/fuzzing.py``), so the runs add up: tens per command keep the run short, and
``FUSECI_FUZZ_SCALE=20`` multiplies them for a long local search.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLEAN_REPORT,
    H200_BASELINES,
    REGRESSED_REPORT,
    REPORTS,
    ROOT,
    fuzz_settings,
    invoke,
    mutated,
    reports_read_once,
)
from hypothesis import given
from hypothesis import strategies as st

from fuseci.config.parse import load_suite
from fuseci.errors import FuseciError, MismatchError
from fuseci.judge.verdict import exit_code
from fuseci.measure.run import MeasureOptions, measure
from fuseci.records import harness as rec
from fuseci.store import baselines as bl
from fuseci.store import results, runs

SUITE = ROOT / "suites" / "elementwise.yaml"
REPORTS_BY_NAME = {"clean": CLEAN_REPORT, "regressed": REGRESSED_REPORT}


@pytest.fixture(scope="module", autouse=True)
def cached_reports() -> Iterator[None]:
    """Each report read once; a copy of its frame handed out each time."""
    with reports_read_once(), pytest.MonkeyPatch.context() as patch:
        patch.delenv("GITHUB_ACTIONS", raising=False)
        patch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        yield


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-fuzz")


def _valid(read: Any, path: Path) -> bool:
    try:
        read(path)
    except FuseciError:
        return False
    return True


def check_outcome(result: Any, path: Path, valid: bool) -> None:
    """What every command owes its user, whatever ``path`` held."""
    output = result.output
    assert result.exit_code in (0, 1, 3), (result.exit_code, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    if result.exit_code == 1:
        assert valid, f"exit 1 for a document its reader refuses: {output[-1000:]}"
    if not valid:
        assert result.exit_code == 3, output[-1000:]
        assert any(line.startswith(f"fuseci: error: {path}") for line in errors), result.stderr[-2000:]
    for line in errors:
        assert len(line) < 3000, line


# --- baselines: fuseci run and update-baselines ---------------------------------------------------

BASELINE = H200_BASELINES / "nvidia-h200" / "elementwise.json"


@fuzz_settings(60)
@given(data=st.data())
def test_run_with_a_mutated_baseline(work: Path, data: st.DataObject) -> None:
    path = work / "b" / "nvidia-h200" / "elementwise.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mutated(data, BASELINE.read_text()))
    report = REPORTS_BY_NAME[data.draw(st.sampled_from(sorted(REPORTS_BY_NAME)), label="report")]
    result = invoke("run", SUITE, "--from-report", report, "--baselines", work / "b", "--json", work / "out.json")
    check_outcome(result, path, _valid(bl.load_baseline, path))


@fuzz_settings(40)
@given(data=st.data())
def test_update_baselines_with_a_mutated_baseline(work: Path, data: st.DataObject) -> None:
    path = work / "u" / "nvidia-h200" / "elementwise.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    before = mutated(data, BASELINE.read_text())
    path.write_bytes(before)
    valid = _valid(bl.load_baseline, path)
    report = REPORTS_BY_NAME[data.draw(st.sampled_from(sorted(REPORTS_BY_NAME)), label="report")]
    result = invoke("update-baselines", SUITE, "--from-report", report, "--baselines", work / "u")
    check_outcome(result, path, valid)
    if not valid:
        assert path.read_bytes() == before  # a file it cannot read is never replaced
    else:
        assert bl.load_baseline(path) is not None  # what it wrote (or kept) reads back
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no lock or temporary file


# --- harness records beside a report: fuseci run --from-report --------------------------------------

RECORDS = {
    "clean": (CLEAN_REPORT, CLEAN_REPORT.with_name("elementwise.harness.json")),
    "regressed": (REGRESSED_REPORT, REGRESSED_REPORT.with_name("elementwise-regressed.harness.json")),
    "h100": (REPORTS / "elementwise-h100.ncu-rep.xz", REPORTS / "elementwise-h100.harness.json"),
}


def _paired(work: Path, data: st.DataObject, raw: bytes | None = None) -> tuple[Path, Path, str]:
    name = data.draw(st.sampled_from(sorted(RECORDS)), label="pair")
    report, record = RECORDS[name]
    directory = work / "r"
    directory.mkdir(exist_ok=True)
    link = directory / "elementwise.ncu-rep.xz"
    link.unlink(missing_ok=True)
    link.symlink_to(report)
    path = directory / "elementwise.harness.json"
    path.write_bytes(mutated(data, record.read_text()) if raw is None else raw)
    return link, path, record.read_text()


@fuzz_settings(60)
@given(data=st.data())
def test_run_with_a_mutated_record(work: Path, data: st.DataObject) -> None:
    report, path, _ = _paired(work, data)
    out = work / "rec-out.json"
    out.unlink(missing_ok=True)
    result = invoke("run", SUITE, "--from-report", report, "--baselines", H200_BASELINES, "--json", out)
    check_outcome(result, path, _valid(rec.read_record, path))
    if "are not one run's" in result.stderr or "record of suite" in result.stderr:
        assert result.exit_code == 3 and not out.exists()  # mismatched inputs: nothing written


#: Edits that change whether a report and its record are one run's.
PAIRING_EDITS = {
    "gpu": lambda d, v: d["env"].update(gpu_name=v),
    "drop variant": lambda d, v: d["cases"][sorted(d["cases"])[0]]["measured"].pop(),
    "extra variant": lambda d, v: d["cases"][sorted(d["cases"])[-1]]["measured"].append("fused_v9"),
    "drop case": lambda d, v: d["cases"].pop(sorted(d["cases"])[1]),
    "rename case": lambda d, v: d["cases"].update(renamed=d["cases"].pop(sorted(d["cases"])[2])),
    "status": lambda d, v: d["cases"][sorted(d["cases"])[0]].update(status=v),
    "interrupted": lambda d, v: d.update(interrupted="the profiled run was stopped"),
    "suite": lambda d, v: d.update(suite="reduction"),
}


@fuzz_settings(40)
@given(data=st.data())
def test_run_with_a_record_of_another_run(work: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(RECORDS)), label="record")
    doc = json.loads(RECORDS[name][1].read_text())
    for edit in data.draw(
        st.lists(st.sampled_from(sorted(PAIRING_EDITS)), min_size=1, max_size=3, unique=True), label="edits"
    ):
        value = data.draw(st.sampled_from(["NVIDIA H200", "NVIDIA H100 80GB HBM3", "ok", "wrong", "error"]))
        PAIRING_EDITS[edit](doc, value)
    report, path, _ = _paired(work, data, json.dumps(doc).encode())
    out = work / "pair-out.json"
    out.unlink(missing_ok=True)
    runs_dir = work / "runs-pair"
    shutil.rmtree(runs_dir, ignore_errors=True)
    result = invoke(
        "run", SUITE, "--from-report", report, "--baselines", H200_BASELINES, "--json", out, "--results-dir", runs_dir
    )
    check_outcome(result, path, _valid(rec.read_record, path))
    try:
        measure(load_suite(SUITE), MeasureOptions(from_report=report))
    except MismatchError:  # not one run's: stopped, nothing written
        assert result.exit_code == 3 and "fuseci: error: " in result.stderr
        assert not out.exists() and not runs_dir.exists()
    except FuseciError:  # a record its reader refuses: the suite is one ERROR in the reports
        assert result.exit_code == 3 and out.exists()
    else:
        assert out.exists() and runs_dir.exists()


# --- results files: fuseci merge ------------------------------------------------------------------


@pytest.fixture(scope="module")
def result_seeds(work: Path) -> list[str]:
    seeds = [(ROOT / "tests" / "data" / "legacy" / "results-elementwise-regressed.json").read_text()]
    for name, report in sorted(REPORTS_BY_NAME.items()):
        out = work / f"seed-{name}.json"
        assert invoke(
            "run", SUITE, "--from-report", report, "--baselines", H200_BASELINES, "--json", out
        ).exit_code in (0, 1)
        seeds.append(out.read_text())
    return seeds


@fuzz_settings(100)
@given(data=st.data())
def test_merge_of_a_mutated_results_file(work: Path, result_seeds: list[str], data: st.DataObject) -> None:
    path = work / "results.json"
    path.write_bytes(mutated(data, result_seeds[data.draw(st.integers(0, len(result_seeds) - 1), label="seed")]))
    out = work / "merged.json"
    result = invoke("merge", path, "--json", out, "--junit", work / "merged.xml", "--markdown", work / "merged.md")
    try:
        comparisons = results.read_results(path)
    except FuseciError:
        comparisons = None
    check_outcome(result, path, comparisons is not None)
    if comparisons is not None and "also earlier in the same file" not in result.stderr:
        assert result.exit_code == exit_code(comparisons)  # exit 1 exactly when it holds a regression


# --- run files: fuseci compare ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_seeds(work: Path) -> tuple[Path, list[str]]:
    clean = measure(load_suite(SUITE), MeasureOptions(from_report=CLEAN_REPORT))
    regressed = measure(load_suite(SUITE), MeasureOptions(from_report=REGRESSED_REPORT))
    a = runs.save_run([clean], {"elementwise": "suites/elementwise.yaml"}, work / "run-a")
    b = runs.save_run([regressed], {"elementwise": "suites/elementwise.yaml"}, work / "run-b")
    legacy = ROOT / "tests" / "data" / "legacy" / "run-elementwise-regressed.json"
    return a, [a.read_text(), b.read_text(), legacy.read_text()]


@fuzz_settings(50)
@given(data=st.data())
def test_compare_with_a_mutated_run_file(work: Path, run_seeds: tuple[Path, list[str]], data: st.DataObject) -> None:
    good, seeds = run_seeds
    path = work / "mutated-run.json"
    path.write_bytes(mutated(data, seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]))
    pair = (good, path) if data.draw(st.booleans(), label="mutated is B") else (path, good)
    result = invoke("compare", *pair, SUITE, "--json", work / "compared.json")
    check_outcome(result, path, _valid(runs.load_run, path))


def test_the_work_tree_is_left_clean(work: Path) -> None:
    """No temporary file from any command is left in the fuzzed directories."""
    assert not [p for p in work.rglob("*.tmp")]
    shutil.rmtree(work, ignore_errors=True)
