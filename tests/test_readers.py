"""Readers trust nothing: a report and a record that are not one run's stop everything; every
versioned document (baseline, harness record, results file, run file) is checked value by value
at the edge, with one line naming the file, the value's JSON path and the fix; ``compare`` opens
no path a run file names outside the current directory."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import CLEAN_REPORT, ELEMENTWISE, REGRESSED_REPORT, REPORTS, ROOT, invoke
from helpers import snapshot as _snapshot

from fuseci import validation as v
from fuseci.config.parse import load_suite
from fuseci.errors import FuseciError
from fuseci.measure.run import MeasureOptions, measure
from fuseci.records import harness as record_format
from fuseci.store import baselines as bl
from fuseci.store import results, runs

SUITE = "suites/elementwise.yaml"
H100_REPORT = REPORTS / "elementwise-h100.ncu-rep.xz"
RECORD = REPORTS / "elementwise.harness.json"
BASELINE = ROOT / "baselines" / "nvidia-h200" / "elementwise.json"
LEGACY_RESULTS = ROOT / "tests" / "data" / "legacy" / "results-elementwise-regressed.json"
LEGACY_RUN = ROOT / "tests" / "data" / "legacy" / "run-elementwise-regressed.json"


def _one_line(result: Any, *fragments: str) -> str:
    assert result.exit_code == 3, result.output
    # Progress lines may come before and after it; the error is said once.
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    assert "Traceback" not in result.output and "internal error" not in result.output
    for fragment in fragments:
        assert fragment in line, line
    return line


# --- a report and a record that are not one run's ----------------------------------------------


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(ROOT / "suites", tmp_path / "suites")
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    (tmp_path / "r").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    return tmp_path


def _pair(
    tree: Path, report: Path, edit: Callable[[dict[str, Any]], None] | None = None, record: Path = RECORD
) -> Path:
    """``r/elementwise.ncu-rep.xz`` (a copy of ``report``) beside a copy of ``record``, edited."""
    shutil.copy(report, tree / "r" / "elementwise.ncu-rep.xz")
    doc = json.loads(record.read_text())
    if edit:
        edit(doc)
    (tree / "r" / "elementwise.harness.json").write_text(json.dumps(doc))
    return tree / "r" / "elementwise.ncu-rep.xz"


MISMATCHES: dict[str, tuple[Callable[[dict[str, Any]], None] | None, Path, str]] = {
    "other gpu": (None, H100_REPORT, "the report was recorded on 'NVIDIA H100 80GB HBM3', the record on 'NVIDIA H200'"),
    "a variant the record did not run": (
        lambda d: d["cases"]["bias_gelu"].update(measured=["unfused"]),
        CLEAN_REPORT,
        "the report has kernels of bias_gelu/fused, which the record did not run in their NVTX ranges",
    ),
    "a case the record does not have": (
        lambda d: d["cases"].pop("add_mul"),
        CLEAN_REPORT,
        "the report has kernels of add_mul/fused, add_mul/unfused, which the record did not run",
    ),
    "a variant the report lacks": (
        lambda d: d["cases"]["bias_gelu"].update(measured=["unfused", "fused", "fused_v9"]),
        CLEAN_REPORT,
        "the record ran bias_gelu/fused_v9, of which the report has no kernels",
    ),
}


@pytest.mark.parametrize("name", list(MISMATCHES))
def test_a_mismatched_pair_stops_with_nothing_written(tree: Path, name: str) -> None:
    edit, report, problem = MISMATCHES[name]
    path = _pair(tree, report, edit)
    before = _snapshot(tree)
    result = invoke(
        "run", SUITE, "--from-report", path, "--junit", "j.xml", "--json", "r.json", "--results-dir", "runs"
    )
    line = _one_line(result, f"{path} and {path.with_name('elementwise.harness.json')} are not one run's", problem)
    assert "copy the two together" in line and result.stdout == ""
    assert _snapshot(tree) == before  # no report, results, run file or anything else
    updated = invoke("update-baselines", SUITE, "--from-report", path)
    _one_line(updated, problem)
    assert _snapshot(tree) == before  # and the baselines are as they were


def test_the_h100_record_with_an_h200_report_does_not_touch_the_h100_baseline(tree: Path) -> None:
    """The issue's example: before, the H100 baseline was rewritten with H200 timings."""
    path = _pair(tree, CLEAN_REPORT, record=REPORTS / "elementwise-h100.harness.json")
    before = _snapshot(tree)
    _one_line(invoke("update-baselines", SUITE, "--from-report", path), "the report was recorded on 'NVIDIA H200'")
    assert _snapshot(tree) == before


def test_a_stopped_run_may_lack_kernels(tree: Path) -> None:
    def stopped(doc: dict[str, Any]) -> None:
        doc["cases"]["bias_gelu"]["measured"] += ["fused_v9"]
        doc["interrupted"] = "the profiled run exited with code -9"

    assert invoke("run", SUITE, "--from-report", _pair(tree, CLEAN_REPORT, stopped)).exit_code == 0


def test_a_record_of_another_suite_stops_everything(tree: Path) -> None:
    path = _pair(tree, CLEAN_REPORT)
    before = _snapshot(tree)
    result = invoke("run", "suites/reduction.yaml", "--from-report", path, "--junit", "j.xml")
    _one_line(result, "record of suite 'elementwise', not 'reduction'")
    path = _pair(tree, CLEAN_REPORT, lambda d: d.update(suite="reduction"))
    before = _snapshot(tree)
    result = invoke("run", "suites/reduction.yaml", "--from-report", path, "--junit", "j.xml")
    _one_line(result, "the report holds suite(s) elementwise, the record suite 'reduction'")
    assert _snapshot(tree) == before


def test_a_run_file_whose_kernels_and_record_disagree(tree: Path) -> None:
    results = measure(load_suite(ELEMENTWISE), MeasureOptions(from_report=CLEAN_REPORT))
    path = runs.save_run([results], {"elementwise": SUITE}, tree / "runs")
    doc = json.loads(path.read_text())
    doc["suites"]["elementwise"]["record"]["env"]["gpu_name"] = "NVIDIA H100 80GB HBM3"
    path.write_text(json.dumps(doc))
    _one_line(
        invoke("compare", path, path),
        f"{path}: suites.elementwise: its kernels and its record are not one run's: the report was recorded on",
    )


# --- every reader checks every value ---------------------------------------------------------


def _record_doc() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def _baseline_doc() -> dict[str, Any]:
    return json.loads(BASELINE.read_text())


def _results_doc() -> dict[str, Any]:
    return json.loads(LEGACY_RESULTS.read_text())


def _run_doc() -> dict[str, Any]:
    return json.loads(LEGACY_RUN.read_text())


def _read(kind: str, path: Path) -> Any:
    return {
        "record": record_format.read_record,
        "baseline": bl.load_baseline,
        "results": results.read_results,
        "run": runs.load_run,
    }[kind](path)


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


#: (format, how to break its document as text, the message's expected fragment)
BROKEN: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    (
        "record",
        lambda d: d["cases"]["bias_gelu"].update(status="wrong-ish"),
        "cases.bias_gelu.status: a string \"wrong-ish\" is not one of 'ok', 'wrong', 'error'",
    ),
    (
        "record",
        lambda d: d["cases"]["bias_gelu"]["timings"][0].update(median_ns="fast"),
        'cases.bias_gelu.timings[0].median_ns: expected a number, got a string "fast"',
    ),
    (
        "record",
        lambda d: d["cases"]["bias_gelu"]["timings"][0].update(median_ns=float("inf")),
        "cases.bias_gelu.timings[0].median_ns: expected a finite number, got inf",
    ),
    (
        "record",
        lambda d: d["cases"]["bias_gelu"]["timings"][0].update(repeats=-1),
        "cases.bias_gelu.timings[0].repeats: -1 is below the smallest value allowed, 0",
    ),
    (
        "record",
        lambda d: d["cases"]["bias_gelu"].update(measured=["fused\n"]),
        "cases.bias_gelu.measured[0]: expected an id",
    ),
    ("record", lambda d: d.update(env=_deep(40)), "nested more than 32 levels deep"),
    ("record", lambda d: d["cases"]["bias_gelu"].update(min_bytes=10**39), "cases.bias_gelu.min_bytes: 10000"),
    ("record", lambda d: d["cases"]["bias_gelu"].update(min_bytes=10**50), "an integer of 51 digits"),
    ("record", lambda d: d.update(suite="elementwise\n"), "suite: expected an id"),
    ("record", lambda d: d["cases"]["bias_gelu"].update(checks={}), "cases.bias_gelu.checks: expected a list"),
    (
        "baseline",
        lambda d: d["cases"]["bias_gelu"]["fused"]["values"].update(launches=float("nan")),
        "NaN is not a number this document may hold",
    ),
    (
        "baseline",
        lambda d: d["cases"]["bias_gelu"]["fused"]["kernels"][0].__delitem__(slice(3, None)),
        "cases.bias_gelu.fused.kernels[0]: expected a list of 4 to 6",
    ),
    (
        "baseline",
        lambda d: d["cases"]["bias_gelu"]["fused"]["values"].update({"launches": True}),
        "cases.bias_gelu.fused.values.launches: expected a number, got a boolean true",
    ),
    (
        "baseline",
        lambda d: d["cases"]["bias_gelu"]["fused"]["values"].update({"dram__bytes.sum": -1}),
        'cases.bias_gelu.fused.values["dram__bytes.sum"]: -1 is below the smallest value allowed, 0',
    ),
    ("baseline", lambda d: d.update(suite="../../etc/x"), "suite: expected an id"),
    ("baseline", lambda d: d["cases"].update({"a b": {}}), "expected an id"),
    ("baseline", lambda d: d.update(env=[]), "env: expected an object, got a list of 0"),
    (
        "results",
        lambda d: d["suites"][0]["cases"][0]["checks"][0].update(verdict="meh"),
        'suites[0].cases[0].checks[0].verdict: a string "meh" is not one of',
    ),
    (
        "results",
        lambda d: d["suites"][0]["cases"][0]["checks"][0].update(current="1.5"),
        'suites[0].cases[0].checks[0].current: expected a number, got a string "1.5"',
    ),
    (
        "results",
        lambda d: d["suites"][0]["cases"][0].update(line=-3),
        "suites[0].cases[0].line: -3 is below the smallest value allowed, 0",
    ),
    ("results", lambda d: d["suites"][0].update(suite="x\ny"), "suites[0].suite: expected a suite id"),
    (
        "results",
        lambda d: d["suites"][0]["cases"][0]["variants"][0]["kernels"][0].update(grid=1.5),
        "suites[0].cases[0].variants[0].kernels[0].grid: expected an integer, got a number 1.5",
    ),
    ("results", lambda d: d.update(format="fuseci-run"), "not a fuseci results file (it is a 'fuseci-run' document)"),
    (
        "run",
        lambda d: d["suites"]["elementwise"]["kernels"][0].update(kernel_index=-1),
        "suites.elementwise.kernels[0].kernel_index: -1 is below the smallest value allowed, 0",
    ),
    (
        "run",
        lambda d: d["suites"]["elementwise"]["kernels"][0].update({"gpu__time_duration.sum": "x"}),
        'suites.elementwise.kernels[0]["gpu__time_duration.sum"]: expected a number',
    ),
    (
        "run",
        lambda d: d["suites"]["elementwise"]["record"]["cases"]["bias_gelu"].update(status=3),
        "suites.elementwise.record.cases.bias_gelu.status: a number 3 is not one of 'ok', 'wrong', 'error'",
    ),
    ("run", lambda d: d.update(created="yesterday"), "created: expected a UTC time"),
    ("run", lambda d: d.update(suites=[]), "suites: expected an object, got a list of 0"),
]

_DOCS = {"record": _record_doc, "baseline": _baseline_doc, "results": _results_doc, "run": _run_doc}


@pytest.mark.parametrize(("kind", "edit", "fragment"), BROKEN, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BROKEN)])
def test_a_bad_value_is_one_line_naming_file_place_and_fix(
    tmp_path: Path, kind: str, edit: Callable[[dict[str, Any]], Any], fragment: str
) -> None:
    doc = _DOCS[kind]()
    edit(doc)
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(doc))  # Python writes NaN and Infinity as JSON's extensions do
    with pytest.raises(FuseciError) as info:
        _read(kind, path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and fragment in message, message
    assert "\n" not in message and len(message) < 1200
    assert any(fix in message for fix in ("fuseci run", "update-baselines"))  # and how to get a good one


def test_a_lone_surrogate_is_refused_everywhere(tmp_path: Path) -> None:
    for kind, make in _DOCS.items():
        text = json.dumps(make()).replace('"elementwise"', '"\\udc80"', 1)
        path = tmp_path / f"{kind}.json"
        path.write_text(text)
        with pytest.raises(FuseciError, match="lone surrogate"):
            _read(kind, path)


def test_infinity_is_taken_exactly_where_a_record_keeps_it(tmp_path: Path) -> None:
    doc = _record_doc()
    check = doc["cases"]["bias_gelu"]["checks"][0]
    check.update(max_abs_err=float("inf"), rel_l2_err=float("nan"), passed=False)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    read = record_format.read_record(path).cases["bias_gelu"].checks[0]
    assert read.max_abs_err == float("inf")
    check.update(rtol=float("inf"))
    path.write_text(json.dumps(doc))
    with pytest.raises(FuseciError, match=r"cases.bias_gelu.checks\[0\].rtol: expected a finite number"):
        record_format.read_record(path)


def test_an_unknown_status_is_refused_by_the_cli(tree: Path) -> None:
    path = _pair(tree, CLEAN_REPORT, lambda d: d["cases"]["bias_gelu"].update(status="wrong-ish"))
    _one_line(invoke("run", SUITE, "--from-report", path), 'cases.bias_gelu.status: a string "wrong-ish" is not one of')


# --- compare opens only suite files inside the current directory -------------------------------


@pytest.fixture
def recorded(tree: Path) -> Callable[[str], Path]:
    results = measure(load_suite(ELEMENTWISE), MeasureOptions(from_report=REGRESSED_REPORT))

    def save(suite_path: str) -> Path:
        return runs.save_run([results], {"elementwise": suite_path}, tree / "runs" / str(abs(hash(suite_path))))

    return save


@pytest.mark.parametrize(
    "suite_path",
    ["../../../../etc/passwd", "/etc/passwd", "suites/../../x.yaml", "suites/elementwise.txt", "/dev/zero", "a\n.yaml"],
)
def test_compare_never_opens_a_path_a_run_file_names_outside(recorded: Callable[[str], Path], suite_path: str) -> None:
    run = recorded(suite_path)
    result = invoke("compare", run, run)
    line = _one_line(result, "which fuseci does not open", "pass the suite files after A and B")
    assert "root:" not in result.output and line.count("\n") == 0
    assert invoke("compare", run, run, SUITE).exit_code == 1  # the suite given: judged as before


def test_compare_does_not_follow_a_link_out_of_the_directory(tree: Path, recorded: Callable[[str], Path]) -> None:
    (tree / "suites" / "evil.yaml").symlink_to("/etc/passwd")
    run = recorded("suites/evil.yaml")
    result = invoke("compare", run, run)
    _one_line(result, "which fuseci does not open")
    assert "root:" not in result.output


def test_compare_still_opens_suites_in_the_directory(tree: Path, recorded: Callable[[str], Path]) -> None:
    run = recorded(SUITE)
    assert invoke("compare", run, run).exit_code == 1
    assert invoke("compare", recorded("./suites/elementwise.yaml"), run).exit_code == 1


# --- the dataclass is the declaration ------------------------------------------------------------


def test_a_new_optional_timing_field_is_checked_without_a_line_of_schema() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class Timing(v.Document):
        variant: v.Id
        median_ns: v.Amount
        spread_ns: v.Amount | None = None
        calls: v.Items[v.Amount] = ()

    assert v.validate(Timing, {"variant": "fused", "median_ns": 1.0}) == Timing("fused", 1.0)
    read = v.validate(Timing, {"variant": "fused", "median_ns": 1, "spread_ns": None, "calls": [1, 2.5]})
    assert read == Timing("fused", 1.0, None, (1.0, 2.5))
    for bad, where, problem in (
        ({"variant": "f", "median_ns": 1, "spread_ns": "x"}, "t.spread_ns", 'expected a number, got a string "x"'),
        ({"variant": "f"}, "t", "missing required key 'median_ns'"),
        (
            {"variant": "f", "median_ns": 1, "spred_ns": 2},
            "t.spred_ns",
            "unknown key 'spred_ns'; did you mean 'spread_ns'?",
        ),
    ):
        with pytest.raises(v.Invalid) as info:
            v.validate(Timing, bad, ("t",))
        assert info.value.where == where and info.value.problem.startswith(problem), info.value
    assert Timing("f", 1.0, calls=(1.0,)).calls == (1.0,)  # code builds it as a plain dataclass


def test_a_place_in_a_message_stays_short() -> None:
    assert v.json_path(("cases", "a" * 70_000)) == 'cases["' + "a" * 60 + '"...]'
    assert v.json_path(("cases", "bias_gelu")) == "cases.bias_gelu"
    assert v.json_path(("x\ny",)) == '["x\\ny"]'


def test_a_nul_in_a_path_a_results_file_names(tmp_path: Path) -> None:
    """Paths inside documents are labels: one that no file system takes is still just shown
    (found by the CLI fuzz run: a NUL made the output check crash)."""
    doc = _results_doc()
    doc["suites"][0]["baseline_path"] = "baselines/\x00.json"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    result = invoke("merge", path, "--json", tmp_path / "m.json", "--junit", tmp_path / "m.xml")
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output and "\x00" not in result.output


def test_a_results_file_of_thousands_of_cases_is_not_refused_for_its_size(tmp_path: Path) -> None:
    """A results file holds every check of every case: 5,000 cases write 73 MB, which a merge
    must read; past :data:`fuseci.store.results.MAX_BYTES` a file is refused, saying so."""
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: no disk used
        f.truncate(80 << 20)
    with pytest.raises(FuseciError) as caught:
        results.read_results(big)
    assert "MiB" not in str(caught.value)  # refused for what it holds (not JSON), not for its size
    with big.open("r+b") as f:
        f.truncate(results.MAX_BYTES + 1)
    with pytest.raises(FuseciError, match=r"over 256 MiB, more than any results file"):
        results.read_results(big)
