"""Exit codes: a bug anywhere is exit 3 in one line (its traceback only with -v), never the 1 of a
regression; a regression stays 1 whatever output could not be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer.core
from helpers import CLEAN_REPORT, ELEMENTWISE, REGRESSED_REPORT, ROOT, Given, invoke, measure_with, write

from fuseci.cli import commands
from fuseci.config.parse import load_suite
from fuseci.errors import UsageError
from fuseci.frames.metrics import summarize
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.records.harness import CaseStatus, CheckRecord

SUITE = "suites/elementwise.yaml"
BUG = "internal error: RuntimeError: boom (a bug in fuseci; run again with -v for its traceback)"


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom\nsecond line")


def _assert_bug(result: Any, verbose: bool = False) -> None:
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    if verbose:
        assert "Traceback (most recent call last)" in result.stderr and "RuntimeError: boom" in result.stderr
        assert (
            lines[-1] == "fuseci: error: internal error: RuntimeError: boom (a bug in fuseci; the traceback is above)"
        )
    else:
        assert lines == [f"fuseci: error: {BUG}"], result.stderr
        assert "Traceback" not in result.output


#: Each command, what to break inside its body, and its arguments (None: it has no -v).
BODIES = [
    ("run", "fuseci.api.run", ["run", SUITE, "--from-report", CLEAN_REPORT]),
    ("compare", "fuseci.store.runs.load_run", ["compare", CLEAN_REPORT, CLEAN_REPORT]),
    ("merge", "fuseci.api.merge_results", ["merge", ROOT / "tests/data/legacy/results-elementwise-regressed.json"]),
    ("update-baselines", "fuseci.api.update_baselines", ["update-baselines", SUITE, "--from-report", CLEAN_REPORT]),
    ("bench", "fuseci.api.bench", ["bench", SUITE]),
    ("doctor", "fuseci.doctor.diagnose", ["doctor"]),
]


@pytest.mark.parametrize(("name", "target", "args"), BODIES, ids=[b[0] for b in BODIES])
def test_a_bug_in_any_command_is_one_line_and_exit_3(
    in_root, monkeypatch: pytest.MonkeyPatch, name: str, target: str, args: list[Any]
) -> None:
    monkeypatch.setattr(target, _boom)
    _assert_bug(invoke(*args))
    if name != "merge":  # merge has no -v
        _assert_bug(invoke(*args, "-v"), verbose=True)


def test_a_bug_in_an_option_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    class Unprintable:
        def __format__(self, spec: str) -> str:
            raise RuntimeError("boom")

    monkeypatch.setattr(commands, "__version__", Unprintable())
    _assert_bug(invoke("--version"))


def test_a_bug_around_the_command_body(in_root, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between parsing and the body (or after it): the group's own boundary."""
    monkeypatch.setattr(typer.core.TyperGroup, "invoke", _boom)
    _assert_bug(invoke("run", SUITE, "--from-report", CLEAN_REPORT))
    _assert_bug(invoke("run", SUITE, "--from-report", CLEAN_REPORT, "-v"), verbose=True)


def test_a_fuseci_error_around_the_command_body_keeps_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def usage(*args: Any) -> None:
        raise UsageError("no such thing")

    monkeypatch.setattr(typer.core.TyperGroup, "invoke", usage)
    result = invoke("merge", "x.json")
    assert (result.exit_code, result.stderr) == (2, "fuseci: error: no such thing\n")


# --- a regression stays 1 -----------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (a directory nothing can be created in)")
def test_an_unwritable_report_keeps_the_regression(in_root) -> None:
    regressed = invoke("run", SUITE, "--from-report", REGRESSED_REPORT, "--junit", "/proc/j.xml")
    assert regressed.exit_code == 1, regressed.output
    assert "fuseci: error: /proc/j.xml: cannot write the junit report" in regressed.stderr
    clean = invoke("run", SUITE, "--from-report", CLEAN_REPORT, "--junit", "/proc/j.xml")
    assert clean.exit_code == 3


def test_an_unwritable_results_dir_keeps_the_regression(in_root, tmp_path: Path) -> None:
    blocker = write(tmp_path / "file", "x")
    regressed = invoke("run", SUITE, "--from-report", REGRESSED_REPORT, "--results-dir", blocker / "runs")
    assert regressed.exit_code == 1, regressed.output
    assert "cannot write the run file" in regressed.stderr
    assert invoke("run", SUITE, "--from-report", CLEAN_REPORT, "--results-dir", blocker / "runs").exit_code == 3


def test_an_unwritable_baseline_keeps_a_wrong_result(in_root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """update-baselines finds a wrong result (exit 1) and cannot write the cases it may record."""
    clean = measure_run.measure(load_suite(ELEMENTWISE), MeasureOptions(from_report=CLEAN_REPORT))
    case = clean.record.cases["bias_gelu"]
    bad = CheckRecord("fused", "unfused", 0, False, 3, 100, 1.0, 0.5, 7, 1e-5, 1e-6)
    wrong = replace(case, status=CaseStatus.WRONG, message="fused is wrong", measured=(), checks=(bad,))
    kernels = clean.kernels[clean.kernels["case"] != "bias_gelu"].reset_index(drop=True)
    results = summarize(kernels, replace(clean.record, cases={**clean.record.cases, "bias_gelu": wrong}))
    measure_with(monkeypatch, Given(results))
    root = tmp_path / "b"
    (root / "nvidia-h200").mkdir(parents=True)  # no baseline yet: every right case would be recorded

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("fuseci.files.atomic._temporary", denied)
    result = invoke("update-baselines", SUITE, "--baselines", root)
    assert result.exit_code == 1, result.output
    assert "cannot write baseline" in result.stderr and not (root / "nvidia-h200" / "elementwise.json").exists()


def _closed_stdout(report: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``fuseci run`` whose stdout reader has gone before it printed anything; its JSON to ``out``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fuseci", "run", SUITE, "--from-report", str(report), "--json", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")
def test_a_closed_stdout_keeps_the_regression_and_the_files(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    try:
        regressed = _closed_stdout(REGRESSED_REPORT, out)
        assert regressed.returncode == 1, regressed.stderr
        assert json.loads(out.read_text())["exit_code"] == 1  # the file was still written
        clean = _closed_stdout(CLEAN_REPORT, out)
        assert clean.returncode == 3, clean.stderr
        assert "Traceback" not in regressed.stderr + clean.stderr
        assert "Exception ignored" not in regressed.stderr + clean.stderr
    finally:
        out.unlink(missing_ok=True)


# --- broken streams: a regression stays 1, nothing else passes for one, no traceback -------------


def _fuseci(*args: object, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The real command line in a process of its own, from the repository's root."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **(env or {})}
    full.pop("GITHUB_ACTIONS", None)
    full.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "fuseci", *map(str, args)], cwd=ROOT, env=full, text=True, timeout=180, **kwargs
    )


def _no_bug(stderr: str | None) -> None:
    text = stderr or ""
    assert "internal error" not in text and "Traceback" not in text and "Exception ignored" not in text, text


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(("report", "code"), [(REGRESSED_REPORT, 1), (CLEAN_REPORT, 3)])
def test_stdout_on_a_full_disk(report: Path, code: int) -> None:
    with open("/dev/full", "w") as full:
        done = _fuseci("run", SUITE, "--from-report", report, stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == code, done.stderr
    _no_bug(done.stderr)
    assert done.stderr.splitlines()[-1] == (
        f"fuseci: error: stdout: cannot write what fuseci prints there (No space left on device); exit {code}"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(("report", "code"), [(REGRESSED_REPORT, 1), (CLEAN_REPORT, 0)])
def test_stderr_on_a_full_disk_or_closed_changes_no_verdict(report: Path, code: int, tmp_path: Path) -> None:
    """Only the progress and the messages are lost: the report on stdout and the exit code stand."""
    out = tmp_path / "r.json"
    with open("/dev/full", "w") as full:
        on_full = _fuseci("run", SUITE, "--from-report", report, "--json", out, stdout=subprocess.PIPE, stderr=full)
    closed = _fuseci(
        "run", SUITE, "--from-report", report, stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2)
    )  # as `2>&-` leaves it: sys.stderr is None
    for done in (on_full, closed):
        assert done.returncode == code, done.stdout
        assert done.stdout.splitlines()[-1].endswith(f"; exit {code}")
    assert json.loads(out.read_text())["exit_code"] == code


@pytest.mark.parametrize(("report", "code"), [(REGRESSED_REPORT, 1), (CLEAN_REPORT, 0)])
def test_an_ascii_only_encoding(report: Path, code: int) -> None:
    done = _fuseci("run", SUITE, "--from-report", report, env={"PYTHONIOENCODING": "ascii"}, capture_output=True)
    assert done.returncode == code, done.stderr
    _no_bug(done.stderr)
    assert "time \\xb5s" in done.stdout  # what the encoding cannot hold is shown escaped
    assert done.stdout.splitlines()[-1].endswith(f"; exit {code}")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_commands_that_print_lines_on_a_full_disk(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        checked = _fuseci("check", SUITE, stdout=full, stderr=subprocess.PIPE)
        history = _fuseci("history", tmp_path, stdout=full, stderr=subprocess.PIPE)
    assert checked.returncode == 3, checked.stderr
    _no_bug(checked.stderr)
    assert history.returncode == 3 and "holds no run file" in history.stderr  # the directory's own error
    _no_bug(history.stderr)
    with open("/dev/full", "w") as full:
        quiet = _fuseci("check", SUITE, stdout=subprocess.PIPE, stderr=full)
    assert quiet.returncode == 0 and quiet.stdout.endswith("all valid\n")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (a directory nothing can be created in)")
def test_the_last_line_says_the_exit_code_the_process_ends_with(tmp_path: Path) -> None:
    blocker = write(tmp_path / "file", "x")
    for extra in (["--junit", "/proc/j.xml"], ["--results-dir", blocker / "runs"]):
        done = _fuseci("run", SUITE, "--from-report", CLEAN_REPORT, *extra, capture_output=True)
        assert done.returncode == 3, done.stderr
        assert done.stdout.splitlines()[-1] == "fuseci: 10 variants pass: 88 checks; exit 3"


def test_doctor_says_the_exit_code_it_ends_with(monkeypatch: pytest.MonkeyPatch) -> None:
    from fuseci.doctor.diagnosis import Check, CheckStatus, Diagnosis

    diagnosis = Diagnosis(checks=(Check("fuseci", CheckStatus.OK, "fuseci 0.1.0"),))
    monkeypatch.setattr("fuseci.doctor.diagnose", lambda options: diagnosis)
    result = invoke("doctor", "--json", "/proc/d.json")
    assert result.exit_code == 3, result.output
    assert result.stdout.splitlines()[-1] == "fuseci doctor: 1 ok; exit 3"
