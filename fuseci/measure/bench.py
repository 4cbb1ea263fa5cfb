"""``fuseci bench``'s figures: a timed run's record (:func:`result_from_record`) and what follows
from it (bandwidth over the minimal bytes, its fraction of a copy's, speedup over ``unfused``).
Figures only: no baseline, no gate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fuseci import validation as v
from fuseci.config.model import UNFUSED, Suite
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP, BenchError
from fuseci.records.harness import CaseStatus, HarnessRecord, VariantTiming


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One timed variant with the figures derived from its timing."""

    timing: VariantTiming
    """What the harness measured."""
    achieved_bandwidth: float
    """``min_bytes`` over the median time, bytes/s: the bandwidth if it moved only the bytes it must."""
    copy_fraction: float | None
    """``achieved_bandwidth`` over the copy bandwidth (1.0: as fast as a plain copy); None when unknown."""
    speedup: float | None
    """Unfused median over this variant's median; None for ``unfused`` itself or when it was not timed."""


@dataclass(frozen=True, slots=True)
class BenchCase:
    """One case of a timed run."""

    case: str
    """Case id."""
    status: CaseStatus
    """How the case ended in the harness."""
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
    env: Mapping[str, v.Scalar]
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
    base = next((t for t in timings if t.variant == UNFUSED), None)
    rows = []
    for t in timings:
        achieved = t.min_bytes / (t.median_ns * 1e-9) if t.median_ns > 0 else float("nan")
        speedup = None
        if base is not None and t.variant != UNFUSED and t.median_ns > 0:
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
    if record.copy_bandwidth is None or any(c.ok and not c.timings for c in record.cases.values()):
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
