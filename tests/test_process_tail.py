"""A child's log: its end, quoted in error messages (the last lines, read from the end only), and
what a child writes into it."""

import sys
from pathlib import Path

import pytest

from fuseci.measure import process
from fuseci.measure.process import TAIL_BYTES, tail


def test_tail_is_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3) == "line 97\nline 98\nline 99"
    assert tail(tmp_path / "missing.log") == ""


def test_a_huge_log_is_read_from_its_end_only(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    with log.open("wb") as fh:
        fh.write(b"x" * (50 * TAIL_BYTES))  # one endless line a kernel printed
        fh.write(b"\nTraceback (most recent call last):\nRuntimeError: boom\n")
    assert tail(log, 2) == "Traceback (most recent call last):\nRuntimeError: boom"
    assert len(tail(log, 15)) <= TAIL_BYTES


def test_a_child_writes_any_character_into_its_log_whatever_encoding_fuseci_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is UTF-8, as fuseci reads it: a harness (or a kernel module) that prints a µ under
    ``PYTHONIOENCODING=ascii`` must not die of it."""
    monkeypatch.setenv("PYTHONIOENCODING", "ascii")
    log = tmp_path / "child.log"
    script = "import sys; print('322.9 µs'); print('µ', file=sys.stderr)"
    assert process.run_logged([sys.executable, "-c", script], log, timeout_s=60) == 0, log.read_text()
    assert log.read_text(encoding="utf-8") == "322.9 µs\nµ\n"
