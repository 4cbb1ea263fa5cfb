"""Every file fuseci reads may be a device, a FIFO nobody writes, a directory or a huge file:
each reader says so in one line (exit 3) and none of them hangs."""

from __future__ import annotations

import lzma
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import MINIMAL_SUITE, REGRESSED_REPORT, ROOT
from helpers import invoke as _invoke
from helpers import within as _within

from fuseci.config.parse import load_suite
from fuseci.errors import SuiteError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="devices and FIFOs are POSIX")

RECORD = REGRESSED_REPORT.with_name("elementwise-regressed.harness.json")
SUITE = "suites/elementwise.yaml"


def _special(kind: str, path: Path) -> Path:
    """``path`` made into a ``kind``: a link to /dev/zero, a FIFO nobody writes, a directory."""
    if kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


KINDS = ["zero", "fifo", "dir"]


def _one_error_line(result: Any, path: Path) -> str:
    assert result.exit_code == 3, result.output
    # Progress lines may come before and after it; the error is said once.
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    assert line.startswith(f"fuseci: error: {path}"), result.stderr
    assert "Traceback" not in result.output and "internal error" not in result.output
    return line


@pytest.mark.parametrize("kind", KINDS)
def test_a_suite_file(tmp_path: Path, kind: str) -> None:
    path = _special(kind, tmp_path / "s.yaml")
    with pytest.raises(SuiteError) as info:
        _within(20, load_suite, path)
    assert str(info.value).startswith(f"{path}: ")


def test_a_suite_from_a_pipe_someone_writes_still_reads(tmp_path: Path) -> None:
    fifo = _special("fifo", tmp_path / "s.yaml")

    def feed() -> None:
        time.sleep(0.5)  # a writer still starting up when the reader opens the pipe
        with open(fifo, "w") as fh:  # waits for the reader, as a shell's <(...) does
            fh.write(MINIMAL_SUITE)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    assert _within(20, load_suite, fifo).name == "demo"
    writer.join(5)


@pytest.fixture
def report_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(ROOT)
    return tmp_path


@pytest.mark.parametrize("kind", ["zero", "fifo"])  # a directory is a usage error (exit 2) of --from-report
def test_a_report(report_dir: Path, kind: str) -> None:
    report = _special(kind, report_dir / "elementwise.ncu-rep")
    shutil.copy(RECORD, report_dir / "elementwise.harness.json")
    message = _one_error_line(_within(60, _invoke, "run", SUITE, "--from-report", report), report)
    assert "is not a regular file" in message


@pytest.mark.parametrize("kind", KINDS)
def test_a_record(report_dir: Path, kind: str) -> None:
    shutil.copy(REGRESSED_REPORT, report_dir / "elementwise.ncu-rep.xz")
    record = _special(kind, report_dir / "elementwise.harness.json")
    result = _within(60, _invoke, "run", SUITE, "--from-report", report_dir / "elementwise.ncu-rep.xz")
    assert "cannot read the harness record" in _one_error_line(result, record)


def test_an_xz_bomb_stops_at_the_limit(report_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fuseci.frames.report.MAX_REPORT_BYTES", 1 << 20)
    (report_dir / "elementwise.ncu-rep.xz").write_bytes(lzma.compress(bytes(4 << 20)))
    shutil.copy(RECORD, report_dir / "elementwise.harness.json")
    result = _invoke("run", SUITE, "--from-report", report_dir / "elementwise.ncu-rep.xz")
    assert "decompresses to over" in _one_error_line(result, report_dir / "elementwise.ncu-rep.xz")


@pytest.mark.parametrize("kind", KINDS)
def test_a_baseline(report_dir: Path, kind: str) -> None:
    (report_dir / "b" / "nvidia-h200").mkdir(parents=True)
    baseline = _special(kind, report_dir / "b" / "nvidia-h200" / "elementwise.json")
    result = _within(60, _invoke, "run", SUITE, "--from-report", REGRESSED_REPORT, "--baselines", report_dir / "b")
    assert result.exit_code == 3 and f"{baseline}: cannot read the baseline" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_a_results_file(tmp_path: Path, kind: str) -> None:
    path = _special(kind, tmp_path / "r.json")
    assert "cannot read the results file" in _one_error_line(_within(20, _invoke, "merge", path), path)


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_a_run_file(tmp_path: Path, kind: str) -> None:
    path = _special(kind, tmp_path / "run.json")
    assert "cannot read the run file" in _one_error_line(_within(20, _invoke, "compare", path, path), path)


def test_dev_zero_itself(tmp_path: Path) -> None:
    for args in (("merge", "/dev/zero"), ("compare", "/dev/zero", "/dev/zero")):
        _one_error_line(_within(20, _invoke, *args), Path("/dev/zero"))
    result = _within(20, _invoke, "run", "/dev/zero")
    assert result.exit_code == 3 and result.stderr.startswith("fuseci: error: /dev/zero: ")


# --- a key written twice ----------------------------------------------------------------------------


def _second_key(text: str, before: str, key: str, value: str) -> str:
    """``text`` with ``"key": value`` added again right after the first ``before`` (an object's
    opening), so that the object names ``key`` twice and a lenient reader keeps the second."""
    at = text.index(before) + len(before)
    return f'{text[:at]}"{key}": {value}, {text[at:]}'


def test_every_reader_refuses_a_key_written_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tampered second ``"cases"`` would otherwise win silently; each reader names the file, the
    object's JSON path and the key."""
    from fuseci.errors import FuseciError
    from fuseci.records import harness as record_format
    from fuseci.store import baselines as bl
    from fuseci.store import results, runs

    monkeypatch.chdir(ROOT)
    baseline = ROOT / "baselines" / "nvidia-h200" / "elementwise.json"
    text = baseline.read_text(encoding="utf-8")
    doubled = tmp_path / "baseline.json"
    doubled.write_text(text.rstrip()[:-1] + ', "cases": {}}\n', encoding="utf-8")  # last one would win
    with pytest.raises(FuseciError) as info:
        bl.load_baseline(doubled)
    assert str(info.value).startswith(f"{doubled}: not a valid baseline: ")
    assert 'the key "cases" appears twice in the top-level object' in str(info.value)

    record = tmp_path / "record.json"
    record.write_text(_second_key(RECORD.read_text(), '"bias_gelu": {', "status", '"ok"'), encoding="utf-8")
    with pytest.raises(FuseciError, match=r'cases\.bias_gelu: the key "status" appears twice'):
        record_format.read_record(record)

    assert _invoke("run", SUITE, "--from-report", REGRESSED_REPORT, "--json", tmp_path / "r.json").exit_code == 1
    assert _invoke("run", SUITE, "--from-report", REGRESSED_REPORT, "--results-dir", tmp_path / "runs").exit_code == 1
    (run,) = (tmp_path / "runs").iterdir()
    readers = ((tmp_path / "r.json", results.read_results, "results file"), (run, runs.load_run, "run file"))
    for path, reader, kind in readers:
        path.write_text(_second_key(path.read_text(), "{", "format_version", "1"), encoding="utf-8")
        with pytest.raises(FuseciError) as info:
            reader(path)
        assert str(info.value).startswith(f"{path}: not a valid {kind}: ")
        assert 'the key "format_version" appears twice in the top-level object' in str(info.value)
    line = _one_line_of(_invoke("merge", tmp_path / "r.json"))
    assert line.startswith(f"fuseci: error: {tmp_path / 'r.json'}: ") and "appears twice" in line


def _one_line_of(result: Any) -> str:
    assert result.exit_code == 3, result.output
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    assert "Traceback" not in result.output
    return line
