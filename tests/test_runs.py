"""Runs over time: run files written by `fuseci run --results-dir`, judged with `fuseci compare`."""

from __future__ import annotations

import json
import lzma
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from helpers import CLEAN_REPORT, ELEMENTWISE, REGRESSED_REPORT, REPORTS, Given, invoke, measure_with, write
from typer.testing import CliRunner

from fuseci import api
from fuseci.config import names
from fuseci.config.parse import load_suite
from fuseci.errors import ReportError
from fuseci.frames.metrics import SuiteResults, summarize
from fuseci.judge import between_runs as judge_runs
from fuseci.judge.verdict import CheckKind
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.records.harness import CaseStatus
from fuseci.store import runs

runner = CliRunner()
SUITE = "suites/elementwise.yaml"
H100_REPORT = REPORTS / "elementwise-h100.ncu-rep.xz"
PATHS = {"elementwise": SUITE, "reduction": "suites/reduction.yaml"}
REAL_GIT_COMMIT = runs.git_commit


def _results(report: Path, suite: Path = ELEMENTWISE) -> SuiteResults:
    return measure_run.measure(load_suite(suite), MeasureOptions(from_report=report))


@pytest.fixture(scope="module")
def clean() -> SuiteResults:
    return _results(CLEAN_REPORT)


@pytest.fixture(scope="module")
def regressed() -> SuiteResults:
    return _results(REGRESSED_REPORT)


@pytest.fixture(scope="module")
def reduction() -> SuiteResults:
    return _results(REPORTS / "reduction.ncu-rep.xz", ELEMENTWISE.with_name("reduction.yaml"))


@pytest.fixture(autouse=True)
def _no_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names do not depend on where the tests run (CI sets GITHUB_SHA; a checkout has a HEAD)."""
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    monkeypatch.setattr(runs, "git_commit", lambda: None)


def _saved(tmp_path: Path, *results: SuiteResults, name: str = "runs") -> Path:
    return runs.save_run(list(results), PATHS, tmp_path / name)


def _checks(json_path: Path) -> list[dict]:
    data = json.loads(json_path.read_text())
    return [k | {"case": c["case"]} for s in data["suites"] for c in s["cases"] for k in c["checks"]]


# --- the file --------------------------------------------------------------------------------


def test_save_then_load_gives_the_same_measurements(tmp_path: Path, clean: SuiteResults) -> None:
    path = _saved(tmp_path, clean)
    assert runs.NAME_PATTERN.match(path.name) and path.name.endswith("-nvidia-h200.json")
    run = runs.load_run(path)
    again = run.suites["elementwise"]
    pd.testing.assert_frame_equal(again.kernels, clean.kernels)
    pd.testing.assert_frame_equal(again.variants, clean.variants)
    pd.testing.assert_frame_equal(again.gains, clean.gains)
    assert again.record == clean.record and again.env == clean.env
    assert run.suite_paths == {"elementwise": SUITE}
    assert (run.gpu_name, run.git_commit, run.path) == ("NVIDIA H200", None, path)
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["format_version"]) == ("fuseci-run", 1)
    assert datetime.strptime(doc["created"], "%Y-%m-%dT%H:%M:%SZ").strftime("%Y%m%dT%H%M%SZ") == path.name[:16]
    assert doc["suites"]["elementwise"]["record"]["profiler"]["ncu_version"] == "2025.3.1.0"
    assert len(doc["suites"]["elementwise"]["kernels"]) == len(clean.kernels) > 0


def test_a_run_file_too_big_to_read_back_is_not_written(
    tmp_path: Path, clean: SuiteResults, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare and history read at most the format's bytes: a bigger run file would be lost to them."""
    size = _saved(tmp_path, clean, name="first").stat().st_size
    monkeypatch.setattr(runs, "FORMAT", replace(runs.FORMAT, max_bytes=size - 1))
    with pytest.raises(ReportError) as info:
        _saved(tmp_path, clean)
    assert str(info.value).startswith(
        f"{tmp_path / 'runs'}: cannot write the run file: a run file of {size:,} bytes is more than the "
        f"{size - 1:,} bytes fuseci reads back, so it is not written"
    )
    assert not [p for p in (tmp_path / "runs").glob("*") if not p.name.startswith(".")]


def test_nan_is_written_as_null_and_read_back_as_nan(tmp_path: Path, clean: SuiteResults) -> None:
    kernels = clean.kernels.copy()
    kernels.loc[0, names.DRAM_PCT_PEAK] = math.nan
    path = _saved(tmp_path, summarize(kernels, clean.record))
    first = json.loads(path.read_text())["suites"]["elementwise"]["kernels"][0]
    assert first[names.DRAM_PCT_PEAK] is None and first[names.DURATION] == kernels.loc[0, names.DURATION]
    again = runs.load_run(path).suites["elementwise"].kernels
    assert math.isnan(again.loc[0, names.DRAM_PCT_PEAK])
    pd.testing.assert_frame_equal(again, kernels)


def test_names_carry_the_commit(tmp_path: Path, clean: SuiteResults, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "git_commit", REAL_GIT_COMMIT)
    sha = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("GITHUB_SHA", sha)
    path = _saved(tmp_path, clean)
    assert path.name.endswith("-nvidia-h200-0123456.json")
    assert runs.load_run(path).git_commit == sha


def test_no_git_is_no_commit_not_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "git_commit", REAL_GIT_COMMIT)
    monkeypatch.setenv("PATH", str(tmp_path))  # no git executable at all
    assert runs.git_commit() is None
    monkeypatch.setenv("PATH", os.defpath)
    monkeypatch.chdir(tmp_path)  # git, perhaps, but not a checkout
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert runs.git_commit() is None


def test_a_taken_name_gets_a_suffix_and_nothing_is_overwritten(
    tmp_path: Path, clean: SuiteResults, regressed: SuiteResults, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "_now", lambda: datetime(2026, 11, 26, 12, 0, 0, tzinfo=timezone.utc))
    first = _saved(tmp_path, clean)
    before = first.read_bytes()
    second = _saved(tmp_path, regressed)
    third = _saved(tmp_path, clean)
    assert [p.name for p in (first, second, third)] == [
        "20261126T120000Z-nvidia-h200.json",
        "20261126T120000Z-nvidia-h200_2.json",
        "20261126T120000Z-nvidia-h200_3.json",
    ]
    assert first.read_bytes() == before
    assert set(first.parent.iterdir()) == {first, second, third}  # no staged file left behind
    assert runs.resolve_run(first.parent) == third  # same second: the last written


def test_unwritable_directory_is_a_report_error(tmp_path: Path, clean: SuiteResults) -> None:
    blocker = write(tmp_path / "file", "x")
    with pytest.raises(ReportError, match=f"{blocker / 'runs'}: cannot write the run file"):
        runs.save_run([clean], PATHS, blocker / "runs")


def test_directory_means_its_newest_run_by_name_then_mtime(tmp_path: Path) -> None:
    newer = write(tmp_path / "20261126T120000Z-nvidia-h200.json", "{}")
    older = write(tmp_path / "20251231T235959Z-nvidia-h200-abcdef0.json", "{}")
    write(tmp_path / "main.json", "{}")  # not a name fuseci writes: never picked from a directory
    write(tmp_path / ".20991231T000000Z-x.json.1.staged", "{}")
    os.utime(newer, (1, 1))  # the timestamp in the name wins over the mtime
    assert runs.resolve_run(tmp_path) == newer
    assert runs.resolve_run(older) == older  # a file is itself


# --- fuseci run --results-dir ----------------------------------------------------------------


def test_run_keeps_one_file_per_run(in_root, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    first = invoke("run", SUITE, "--from-report", CLEAN_REPORT, "--results-dir", out)
    assert first.exit_code == 0, first.output
    (path,) = out.iterdir()
    assert f"fuseci: results saved to {path}" in first.stderr
    before = path.read_bytes()
    second = invoke("run", SUITE, "--from-report", REGRESSED_REPORT, "--results-dir", out)
    assert second.exit_code == 1  # saving does not change the verdict
    assert len(list(out.iterdir())) == 2 and path.read_bytes() == before
    assert runs.load_run(runs.resolve_run(out)).suites["elementwise"].kernels.shape == (
        _results(REGRESSED_REPORT).kernels.shape
    )


def test_a_suite_that_failed_is_not_kept(in_root, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    result = invoke("run", SUITE, "--from-report", tmp_path / "none.ncu-rep.xz", "--results-dir", out)
    assert result.exit_code == 3
    assert f"no suite was measured; no run file written to {out}" in result.stderr
    assert not out.exists()


def test_a_profiled_run_keeps_what_check_judged(
    tmp_path: Path, clean: SuiteResults, monkeypatch: pytest.MonkeyPatch, in_root
) -> None:
    """The run file holds the results the verdicts were made on."""
    measure_with(monkeypatch, Given(clean))  # profiling needs a GPU and ncu
    out = tmp_path / "runs"
    result = invoke("run", SUITE, "--report-dir", tmp_path / "o", "--results-dir", out)
    assert result.exit_code == 0, result.output
    (saved,) = out.iterdir()
    run = runs.load_run(saved)
    pd.testing.assert_frame_equal(run.suites["elementwise"].kernels, clean.kernels)


# --- fuseci compare --------------------------------------------------------------------------


@pytest.fixture
def clean_run(tmp_path: Path, clean: SuiteResults) -> Path:
    return _saved(tmp_path, clean, name="a")


@pytest.fixture
def regressed_run(tmp_path: Path, regressed: SuiteResults) -> Path:
    return _saved(tmp_path, regressed, name="b")


def test_a_run_against_itself_passes(in_root, tmp_path: Path, clean_run: Path, elementwise) -> None:
    out = tmp_path / "c.json"
    result = invoke("compare", clean_run.parent, clean_run, "--json", out)
    assert result.exit_code == 0, result.output
    gains = [k for k in _checks(out) if k["check"] == "gain"]
    assert {k["verdict"] for k in gains} == {"pass"}
    assert {(k["case"], k["quantity"]) for k in gains} >= {(c.id, names.DRAM_BYTES) for c in elementwise.cases}
    assert all(k["change"] in (0, None) or abs(k["change"]) < 1e-5 for k in gains)  # only the baseline's rounding
    assert f"baseline {clean_run}" in result.stdout
    assert f"judging B {clean_run} against A {clean_run}" in result.stderr


def test_regression_against_the_clean_run_exits_1_like_fuseci_run(
    in_root, tmp_path: Path, clean_run: Path, regressed_run: Path
) -> None:
    junit, out, md = tmp_path / "j.xml", tmp_path / "c.json", tmp_path / "s.md"
    result = invoke("compare", clean_run, regressed_run, "--junit", junit, "--json", out, "--markdown", md)
    assert result.exit_code == 1, result.output
    regressed = {(k["case"], k["variant"], k["quantity"]) for k in _checks(out) if k["verdict"] == "regressed"}
    assert {(c, q) for c, _, q in regressed if _ == "fused"} >= {
        ("scale_relu_add", names.LAUNCHES),
        ("scale_relu_add", names.DRAM_BYTES),
        ("scale_relu_add", names.DURATION),
    }
    assert {c for c, _, _ in regressed} == {"scale_relu_add"}
    messages = [f.get("message") for f in ET.parse(junit).getroot().iter("failure")]
    # the run's own values, not a baseline file's rounded ones: -39.6% (the stored baseline reads -39.5%)
    assert "DRAM bytes gain (unfused ÷ fused) fell from 2.32x to 1.4x (-39.6%); tolerance ±1%" in messages
    summary = md.read_text()
    (row,) = [line for line in summary.splitlines() if line.startswith("| scale_relu_add | fused |")]
    assert row.endswith("| ❌ REGRESSED |") and "| 1.40x |" in row
    # a run profiled once: its L2 sectors and instructions are shown, not gated (one check fewer)
    assert f"Baseline `{clean_run}`" in summary and "**fuseci: 1 variant regressed: 10 checks; " in summary
    suite = json.loads(out.read_text())["suites"][0]
    assert (suite["baseline_path"], suite["has_baseline"]) == (str(clean_run), True)
    # The clean run stands in for a baseline recorded from the same report (profiled once, as the run).
    recorded = tmp_path / "baselines"
    assert invoke("update-baselines", SUITE, "--from-report", CLEAN_REPORT, "--baselines", recorded).exit_code == 0
    via_run = tmp_path / "r.json"
    assert (
        invoke("run", SUITE, "--from-report", REGRESSED_REPORT, "--baselines", recorded, "--json", via_run).exit_code
        == 1
    )
    # The same verdicts and words, but for the advice: run A is no baseline file that
    # update-baselines records, so compare suggests it nowhere.
    advice = (
        f" (if intended, record it with `fuseci update-baselines {SUITE} --from-report {REGRESSED_REPORT} "
        f"--baselines {recorded}`)"
    )
    remedy = f"; re-record it (`fuseci update-baselines {SUITE} --from-report {REGRESSED_REPORT} --baselines {recorded}`) to gate them"

    def as_against_a_run(message: str) -> str:  # what compare says of run A where run says the baseline
        return (
            message.replace(advice, "").replace(remedy, "").replace("the baseline was profiled", "run A was profiled")
        )

    assert [(c["case"], c["check"], c["verdict"], c["message"]) for c in _checks(out)] == [
        (c["case"], c["check"], c["verdict"], as_against_a_run(c["message"])) for c in _checks(via_run)
    ]
    assert any(advice in c["message"] for c in _checks(via_run))
    assert "update-baselines" not in out.read_text() + result.output + junit.read_text() + summary


def test_compare_quiet_prints_only_the_report(in_root, clean_run: Path, regressed_run: Path) -> None:
    loud = invoke("compare", clean_run, regressed_run)
    assert f"fuseci: judging B {regressed_run} against A {clean_run}" in loud.stderr
    for flag in ("-q", "--quiet"):
        quiet = invoke("compare", flag, clean_run, regressed_run)
        assert quiet.exit_code == loud.exit_code == 1
        assert "judging" not in quiet.stderr and quiet.stdout == loud.stdout


def test_runs_on_other_cards_are_incomparable_until_accepted(
    in_root, tmp_path: Path, clean_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h100 = _saved(tmp_path, _results(H100_REPORT), name="h100")
    out = tmp_path / "c.json"
    result = invoke("compare", h100, clean_run, "--json", out)
    assert result.exit_code == 3, result.output
    suite = json.loads(out.read_text())["suites"][0]
    assert suite["env_differences"] == [
        {"field": "gpu_name", "baseline": "NVIDIA H100 80GB HBM3", "current": "NVIDIA H200", "accepted": False}
    ]  # the only fingerprint field the two recorded sessions differ in
    compared = [k for k in _checks(out) if k["check"] == "gain" and k["baseline"] is not None]
    assert {k["quantity"] for k in compared} >= {names.LAUNCHES, names.DRAM_BYTES, names.DURATION}
    assert {k["verdict"] for k in compared} == {"incomparable"}  # every gain that has a baseline value
    assert "environment differs: gpu_name baseline 'NVIDIA H100 80GB HBM3', now 'NVIDIA H200'" in result.stdout
    # Run A is no baseline file: the advice is another run A, or --accept-env, never update-baselines.
    advice = "; if this is intended, compare with a run A measured in the same environment, or compare anyway with --accept-env gpu_name"
    notes = json.loads(out.read_text())["suites"][0]["notes"]
    assert [n for n in notes if n.endswith(advice)] == [
        "not compared with run A: recorded under gpu_name 'NVIDIA H100 80GB HBM3' (now 'NVIDIA H200')" + advice
    ]  # said once for the suite, not per check
    assert all("not compared" in k["message"] and advice not in k["message"] for k in compared)
    assert result.stdout.count(advice) == 1
    assert "update-baselines" not in result.output
    accepted = invoke("compare", h100, clean_run, "--accept-env", "gpu_name", "--json", out)
    assert accepted.exit_code == 0, accepted.output
    verdicts: dict[str, set[str]] = {}
    for k in _checks(out):
        verdicts.setdefault(k["quantity"], set()).add(k["verdict"])
    # Counters match across the cards; the H200 is faster, so every duration gain grew.
    assert verdicts[names.LAUNCHES] == verdicts[names.DRAM_BYTES] == {"pass"}
    assert verdicts[names.DURATION] == {"improved"}
    assert not any("incomparable" in v for v in verdicts.values())


def test_unknown_accept_env_field_is_a_usage_error(in_root, clean_run: Path) -> None:
    result = invoke("compare", clean_run, clean_run, "--accept-env", "gpu")
    assert result.exit_code == 2 and "unknown field(s) ['gpu']" in result.stderr


def test_a_suite_in_only_one_run_is_an_error(
    in_root,
    tmp_path: Path,
    clean: SuiteResults,
    reduction: SuiteResults,
    clean_run: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    both = _saved(tmp_path, clean, reduction, name="both")
    out = tmp_path / "c.json"
    result = invoke("compare", both, clean_run, "--json", out)  # B lacks reduction
    assert result.exit_code == 3, result.output
    suites = {s["suite"]: s for s in json.loads(out.read_text())["suites"]}
    assert suites["elementwise"]["verdict"] == "pass"
    (check,) = [k for c in suites["reduction"]["cases"] for k in c["checks"]]
    assert check["verdict"] == "error"
    assert check["message"].startswith(f"suite 'reduction' is in run A ({both}) but not in run B ({clean_run})")
    backwards = invoke("compare", clean_run, both, "--json", out)  # A lacks reduction
    assert backwards.exit_code == 3
    assert "suite 'reduction' is in run B" in backwards.stdout and "nothing to judge it against" in backwards.stdout
    only = invoke("compare", both, clean_run, SUITE)  # the suite files given choose what is compared
    assert only.exit_code == 0, only.output
    assert "not compared (no suite file given for them): reduction" in caplog.text


def test_cases_the_reference_run_got_wrong_are_not_its_baseline(
    tmp_path: Path, clean: SuiteResults, elementwise
) -> None:
    record = clean.record
    wrong = replace(
        record, cases={**record.cases, "bias_gelu": replace(record.cases["bias_gelu"], status=CaseStatus.WRONG)}
    )
    a = runs.load_run(_saved(tmp_path, summarize(clean.kernels, wrong), name="a"))
    b = runs.load_run(_saved(tmp_path, clean, name="b"))
    assert "bias_gelu" not in judge_runs.baseline_of(a.suites["elementwise"]).cases
    (comparison,) = api.compare_runs(a, b, [elementwise])
    verdicts = {
        (c.case, k.check.value): k.verdict.value
        for c in comparison.cases
        for k in c.checks
        if k.check is CheckKind.GAIN
    }
    assert verdicts[("bias_gelu", "gain")] == "new" and verdicts[("scale_relu_add", "gain")] == "pass"


def test_suite_files_come_from_the_runs_or_the_command_line(
    in_root, tmp_path: Path, clean: SuiteResults, clean_run: Path
) -> None:
    moved = runs.save_run([clean], {"elementwise": "gone/elementwise.yaml"}, tmp_path / "moved")
    result = invoke("compare", moved, clean_run)  # B's recorded path is fine, A's is not needed
    assert result.exit_code == 0, result.output
    result = invoke("compare", clean_run, moved)
    assert result.exit_code == 3
    assert f"{moved}: suite 'elementwise' was run from gone/elementwise.yaml, which is not in" in result.stderr
    assert "pass the suite files after A and B" in result.stderr
    assert invoke("compare", clean_run, moved, SUITE).exit_code == 0


def _newer(tmp_path: Path, clean: SuiteResults) -> Path:
    path = _saved(tmp_path, clean, name="new")
    doc = json.loads(path.read_text())
    doc["format_version"] = 2
    path.write_text(json.dumps(doc))
    return path


def _malformed(tmp_path: Path, clean: SuiteResults) -> Path:
    path = _saved(tmp_path, clean, name="bad")
    doc = json.loads(path.read_text())
    doc["suites"]["elementwise"]["kernels"][0]["case"] = 7
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp, _: tmp / "missing.json", "no such run file or results directory"),
        (lambda tmp, _: (tmp / "empty").mkdir() or tmp / "empty", "holds no run file"),
        (lambda tmp, _: write(tmp / "x.json", "{not json"), ":1:2: not JSON"),
        (lambda tmp, _: write(tmp / "x.json", "[]"), "not a fuseci run file"),
        (lambda tmp, _: write(tmp / "x.json", '{"format_version": 1, "suites": []}'), "`fuseci run --json`"),
        (lambda tmp, _: write(tmp / "x.json", '{"format": "fuseci-harness-record"}'), "not a fuseci run file"),
        (_newer, "run file format 2 was written by a newer fuseci (0.1.0); this is fuseci"),
        (
            _malformed,
            "suites.elementwise.kernels[0].case: expected an id (letters, digits, '_' and '-'), got a number 7",
        ),
    ],
    ids=["missing", "empty-dir", "not-json", "json-list", "verdicts-json", "other-format", "newer", "malformed"],
)
def test_bad_inputs_exit_3_with_one_line_naming_the_file(
    in_root, tmp_path: Path, clean: SuiteResults, clean_run: Path, make, fragment: str
) -> None:
    bad = make(tmp_path, clean)
    for args in ((bad, clean_run), (clean_run, bad)):
        result = invoke("compare", *args)
        assert result.exit_code == 3, result.output
        lines = result.stderr.strip().splitlines()
        assert lines[-1].startswith(f"fuseci: error: {bad}") and fragment in lines[-1]
        assert len(lines) <= 2 and result.stdout == ""  # the judging line at most, then the error
        assert "Traceback" not in result.output


def test_a_record_that_is_not_one_names_the_suite(tmp_path: Path, clean: SuiteResults) -> None:
    path = _saved(tmp_path, clean)
    doc = json.loads(path.read_text())
    doc["suites"]["elementwise"]["record"]["format_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ReportError, match=r"newer fuseci .* \(the record of suite 'elementwise'\)"):
        runs.load_run(path)


def test_help_says_what_a_and_b_are() -> None:
    result = invoke("compare", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "Run A, the reference" in text and "Run B, judged against A" in text
    assert "fuseci run --results-dir DIR" in text and "Exit codes: 0" in text
    assert "--results-dir" in " ".join(invoke("run", "--help").stdout.split())


def test_a_recorded_reports_time_is_read_from_its_header(tmp_path: Path) -> None:
    from fuseci.frames.report import session_started

    assert session_started(CLEAN_REPORT) == datetime(2026, 11, 27, 4, 34, 13, tzinfo=timezone.utc)
    assert session_started(REGRESSED_REPORT) == datetime(2026, 11, 27, 4, 35, 17, tzinfo=timezone.utc)
    plain = tmp_path / "r.ncu-rep"
    plain.write_bytes(lzma.decompress(CLEAN_REPORT.read_bytes())[:4096])  # the headers survive truncation
    assert session_started(plain) == datetime(2026, 11, 27, 4, 34, 13, tzinfo=timezone.utc)
    for junk in (b"", b"NVR\x00", b"NVR\x00\xff\xff\xff\xff", b"NVR\x00\x02\x00\x00\x00\x08", b"not a report" * 100):
        plain.write_bytes(junk)
        assert session_started(plain) is None
    fifo = tmp_path / "fifo.ncu-rep"
    os.mkfifo(fifo)
    assert session_started(fifo) is None  # and does not wait for a writer


def test_a_re_analysed_run_is_stamped_with_its_recording_not_the_checkout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_SHA", "a" * 40)
    stamp = runs.recording_stamp(CLEAN_REPORT)
    assert stamp == runs.Stamp(datetime(2026, 11, 27, 4, 34, 13, tzinfo=timezone.utc), None)
    headless = tmp_path / "copy.ncu-rep"
    headless.write_bytes(b"no header")
    os.utime(headless, (1_800_000_000, 1_800_000_000))
    assert runs.recording_stamp(headless) == runs.Stamp(datetime.fromtimestamp(1_800_000_000, tz=timezone.utc), None)
