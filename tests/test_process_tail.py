"""The end of a child's log, quoted in error messages: the last lines, read from the end only."""

from pathlib import Path

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
