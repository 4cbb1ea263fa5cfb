"""``fuseci bench``: time every variant outside ncu with CUDA events, and derive what to show.

The harness runs as ``python -m fuseci.harness SUITE --record DIR/<suite>.bench.json --time``
(an argument list, never a shell), with its output in ``DIR/<suite>.bench.log``. What it records
(:class:`fuseci.record.VariantTiming` per variant, the copy bandwidth) becomes a
:class:`BenchResult` whose rows carry the derived figures: achieved bandwidth over the minimal
bytes, its fraction of the copy bandwidth, and the speedup over ``unfused``. Figures only: no
baseline, no gate.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuseci import process
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP, BenchError, ReportError
from fuseci.record import CaseStatus, HarnessRecord, VariantTiming, read_record
from fuseci.suite import BASELINE_VARIANT, Suite

#: Default timed calls per variant.
DEFAULT_REPEATS = 30
#: Lines of the harness log quoted in an error message.
TAIL_LINES = 8


@dataclass(frozen=True, slots=True)
class BenchFiles:
    """Where one suite's timed run writes its outputs."""

    record: Path
    """The harness record with the timings (``<suite>.bench.json``)."""
    log: Path
    """The harness's stdout and stderr (``<suite>.bench.log``)."""

    @classmethod
    def in_dir(cls, directory: Path, suite: str) -> BenchFiles:
        """The standard names inside a report directory."""
        return cls(record=directory / f"{suite}.bench.json", log=directory / f"{suite}.bench.log")


def build_command(
    suite_path: Path, files: BenchFiles, repeats: int = DEFAULT_REPEATS, python: str = sys.executable
) -> list[str]:
    """The argv of one timed run of a suite. Pure: same inputs, same list."""
    return [
        python, "-m", "fuseci.harness", str(suite_path),
        "--record", str(files.record),
        "--time", "--repeats", str(repeats),
    ]  # fmt: skip


def _last_lines(path: Path) -> str:
    """The log's last lines on one line, so that the error stays one line on the console."""
    lines = [line.strip() for line in process.tail(path, TAIL_LINES).splitlines() if line.strip()]
    return " | ".join(lines) if lines else "(the log is empty)"


def run_harness(argv: list[str], files: BenchFiles, timeout_s: float) -> HarnessRecord:
    """Run the timed harness and read back its complete record.

    Raises:
        BenchError: it could not start, timed out, exited non-zero or left no complete record;
            the message names the log and quotes its last lines.
    """
    files.record.parent.mkdir(parents=True, exist_ok=True)
    files.record.unlink(missing_ok=True)
    try:
        returncode = process.run_logged(argv, files.log, timeout_s)
    except (FileNotFoundError, PermissionError) as exc:
        raise BenchError(f"cannot execute {argv[0]} for the timed run: {exc.strerror or exc}") from None
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


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One timed variant with the figures derived from its timing."""

    timing: VariantTiming
    """What the harness measured."""
    achieved_bandwidth: float
    """``min_bytes`` over the median time, bytes/s: the bandwidth the variant would need if it
    moved only the bytes it must."""
    copy_fraction: float | None
    """``achieved_bandwidth`` over the copy bandwidth (1.0: as fast as a plain copy); None
    when the copy bandwidth is unknown."""
    speedup: float | None
    """Unfused median over this variant's median; None for ``unfused`` itself or when it was not timed."""


@dataclass(frozen=True, slots=True)
class BenchCase:
    """One case of a timed run."""

    case: str
    """Case id."""
    status: str
    """One of :class:`fuseci.record.CaseStatus`."""
    message: str
    """Why the case is wrong or broken; empty when ok."""
    rows: tuple[BenchRow, ...]
    """Per variant, ``unfused`` first; empty unless the case is ok."""


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One suite's timed run, or why it could not be made."""

    suite: str
    """Suite id."""
    suite_path: str
    """The suite file, as given."""
    env: Mapping[str, Any]
    """Environment fields the harness collected (GPU, driver, CUDA, CuPy...); empty on error."""
    copy_bandwidth: float | None
    """Device-to-device copy bandwidth, bytes/s (read plus write); None on error."""
    cases: tuple[BenchCase, ...]
    """In suite order."""
    record_path: str = ""
    """The harness record the figures come from."""
    error: str = ""
    """Why the suite could not be timed at all; empty otherwise."""


def _rows(timings: tuple[VariantTiming, ...], copy_bw: float | None) -> tuple[BenchRow, ...]:
    base = next((t for t in timings if t.variant == BASELINE_VARIANT), None)
    rows = []
    for t in timings:
        achieved = t.min_bytes / (t.median_ns * 1e-9) if t.median_ns > 0 else float("nan")
        speedup = None
        if base is not None and t.variant != BASELINE_VARIANT and t.median_ns > 0:
            speedup = base.median_ns / t.median_ns
        rows.append(BenchRow(t, achieved, achieved / copy_bw if copy_bw else None, speedup))
    return tuple(rows)


def result_from_record(record: HarnessRecord, suite: Suite, record_path: Path) -> BenchResult:
    """Derive the figures of a timed run from its record. Pure.

    Raises:
        BenchError: the record belongs to another suite or was not written by a ``--time`` run.
    """
    if record.suite != suite.name:
        raise BenchError(f"{record_path}: record of suite {record.suite!r}, not {suite.name!r}")
    if record.copy_bandwidth is None or any(c.status == CaseStatus.OK and not c.timings for c in record.cases.values()):
        raise BenchError(
            f"{record_path}: the record has no timings: it was not written by `python -m fuseci.harness --time`"
        )
    # The record file keeps its keys sorted; show cases in the suite's order (unknown ones last).
    order = {c.id: i for i, c in enumerate(suite.cases)}
    in_order = sorted(record.cases.values(), key=lambda c: order.get(c.case, len(order)))
    cases = tuple(BenchCase(c.case, c.status, c.message, _rows(c.timings, record.copy_bandwidth)) for c in in_order)
    return BenchResult(
        suite=suite.name,
        suite_path=str(suite.path),
        env=dict(record.env),
        copy_bandwidth=record.copy_bandwidth,
        cases=cases,
        record_path=str(record_path),
    )


def failed(suite: Suite, message: str) -> BenchResult:
    """The result of a suite that could not be timed at all."""
    return BenchResult(
        suite=suite.name, suite_path=str(suite.path), env={}, copy_bandwidth=None, cases=(), error=message
    )


def exit_code(results: list[BenchResult]) -> int:
    """1 when a variant computed a wrong result, else 3 when anything broke, else 0."""
    statuses = {c.status for r in results for c in r.cases}
    if CaseStatus.WRONG in statuses:
        return EXIT_REGRESSION
    if CaseStatus.ERROR in statuses or any(r.error for r in results):
        return EXIT_SETUP
    return EXIT_PASS
