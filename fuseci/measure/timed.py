"""The timed run: a harness process outside ncu that times every variant with CUDA events
(``fuseci run``'s timed pass, ``fuseci bench``), and its record read back."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from fuseci.errors import BenchError, ReportError
from fuseci.measure import process
from fuseci.measure.command import HarnessFiles
from fuseci.records.harness import HarnessRecord, read_record

#: Lines of the harness log quoted in an error message.
TAIL_LINES = 8


def _last_lines(path: Path) -> str:
    """The log's last lines on one line, so that the error stays one line on the console."""
    return process.one_line(process.tail(path, TAIL_LINES)) or "(the log is empty)"


def start_timed(
    argv: list[str], files: HarnessFiles, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the timed harness (its stale record removed first), in ``cwd`` (default: here).

    Raises:
        BenchError: it could not be started.
    """
    files.record.parent.mkdir(parents=True, exist_ok=True)
    files.record.unlink(missing_ok=True)
    try:
        return process.start_logged(argv, files.log, cwd=cwd, env=env)
    except (FileNotFoundError, PermissionError) as exc:
        raise BenchError(f"cannot execute {argv[0]} for the timed run: {exc.strerror or exc}") from None


def finish_timed(proc: subprocess.Popen[bytes], files: HarnessFiles, timeout_s: float) -> HarnessRecord:
    """Wait for a timed harness started by :func:`start_timed` and read back its complete record.

    Raises:
        BenchError: it timed out, exited non-zero or left no complete record (quoting its log).
    """
    try:
        returncode = process.finish(proc, timeout_s)
    except subprocess.TimeoutExpired:
        raise BenchError(
            f"the timed run did not finish within {timeout_s:g} s (suite key ncu.timeout); see {files.log}; "
            f"last lines: {_last_lines(files.log)}"
        ) from None
    if returncode != 0:
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"
        raise BenchError(f"the timed run {how}; see {files.log}; last lines: {_last_lines(files.log)}")
    try:
        record = read_record(files.record)
    except ReportError as exc:
        raise BenchError(f"the timed run left no usable record ({exc}); see {files.log}") from None
    if not record.complete:
        raise BenchError(
            f"{files.record}: the timed run stopped before its last case; see {files.log}; "
            f"last lines: {_last_lines(files.log)}"
        )
    return record


def run_timed(
    argv: list[str],
    files: HarnessFiles,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> HarnessRecord:
    """Run the timed harness (in ``cwd``) and read back its complete record.

    Raises:
        BenchError: it could not start, timed out, exited non-zero or left no complete record.
    """
    return finish_timed(start_timed(argv, files, env, cwd), files, timeout_s)
