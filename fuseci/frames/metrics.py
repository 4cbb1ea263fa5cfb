"""The per-kernel frame aggregated into the variants frame (a row per (case, variant): each quantity as the catalogue
says, plus the harness record's CUDA-event timings and minimum bytes) and the gains frame (unfused ÷ variant for each
quantity with a gain, so that higher is better)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from fuseci import validation as v
from fuseci.config import names, quantities
from fuseci.config.model import UNFUSED
from fuseci.config.quantities import Aggregate
from fuseci.frames.inventory import KernelLaunch
from fuseci.records.fusion import KernelRow
from fuseci.records.harness import HarnessRecord, VariantTiming

FrameRow = Mapping[str, str | float]
"""A row of the per-variant or the gains frame, by column (:func:`variant_columns`,
:func:`gain_columns`): the suite, case and variant, and each quantity's value (NaN: none)."""


def variant_columns() -> tuple[str, ...]:
    """Columns of the variants frame: suite, case, variant, then every per-variant quantity of
    the catalogue (:func:`fuseci.config.quantities.variant_quantities`)."""
    return (names.SUITE, names.CASE, names.VARIANT, *quantities.variant_quantities())


def gain_columns() -> tuple[str, ...]:
    """Columns of the gains frame: suite, case, variant, then every quantity with a gain."""
    return (names.SUITE, names.CASE, names.VARIANT, *quantities.gains())


#: Below this percentage of peak ncu's figure has too few digits to imply the peak.
_PEAK_MIN_PCT = 1.0


def _missing(key: Any) -> bool:
    """A missing key (None or NaN), cheaper than ``pd.isna`` for the ids that keys are."""
    return key is None or (isinstance(key, float) and math.isnan(key))


def _groups(*columns: pd.Series) -> dict[tuple[Any, ...], NDArray[np.intp]]:
    """The rows of each distinct key of ``columns``, keys in order of first appearance."""
    found: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        if not any(_missing(k) for k in key):  # as pandas' groupby, which leaves out missing keys
            found.setdefault(key, []).append(i)
    return {key: np.asarray(rows, dtype=np.intp) for key, rows in found.items()}


def _numbers(frame: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, NDArray[np.float64]]:
    """Each of ``columns`` as float64 (all NaN when the frame lacks it), in one pandas call."""
    matrix = np.ascontiguousarray(frame.reindex(columns=list(columns)).to_numpy(dtype=np.float64).T)
    return dict(zip(columns, matrix, strict=True))


def _bytes(row: dict[str, Any]) -> float:
    return float(row[names.DRAM_READ] + row[names.DRAM_WRITE])


def _rate(of: str) -> Callable[[dict[str, Any]], float]:
    def rate(row: dict[str, Any]) -> float:
        seconds = row[names.DURATION] * 1e-9
        return float(row[of] / seconds) if seconds > 0 else math.nan

    return rate


#: How each :attr:`~fuseci.config.quantities.Aggregate.DERIVED` quantity is computed from the
#: variant's other quantities (those made from its kernels).
DERIVED: dict[str, Callable[[dict[str, Any]], float]] = {
    names.DRAM_BYTES: _bytes,
    names.DRAM_READ_RATE: _rate(names.DRAM_READ),
    names.DRAM_WRITE_RATE: _rate(names.DRAM_WRITE),
}


#: The kernel columns the per-variant quantities are made from, the duration first.
_SOURCES = tuple(
    dict.fromkeys((names.DURATION, *(q.sources[0] for q in quantities.QUANTITIES if q.per_variant and q.sources)))
)
#: The kernel columns the card's peak DRAM bandwidth is implied from (:func:`_peak`).
_PEAK_SOURCES = (names.DURATION, names.DRAM_PCT_PEAK, names.DRAM_READ, names.DRAM_WRITE)


def _variant_records(kernels: pd.DataFrame, col: Mapping[str, NDArray[np.float64]]) -> list[dict[str, Any]]:
    """The rows of the per-variant frame (:func:`aggregate`), each quantity as the catalogue's
    :class:`~fuseci.config.quantities.Aggregate` says; ``col``: the kernels' :data:`_SOURCES`."""
    entries = [q for q in quantities.QUANTITIES if q.per_variant]
    at = {c: i for i, c in enumerate(_SOURCES)}
    plan = [
        (q.name, q.aggregate, at[q.sources[0]] if q.sources else -1, q.scale, q.counted is not None) for q in entries
    ]
    derived = [q.name for q in entries if q.aggregate is Aggregate.DERIVED]
    # One matrix of every source (a row each), a group's columns copied C-contiguous: each row
    # sums in kernel order with NaN as 0, the same additions pandas' ``Series.sum()`` makes.
    matrix = np.stack([col[c] for c in _SOURCES])
    unknown = np.isnan(matrix)
    zeroed = np.where(unknown, 0.0, matrix)
    weighted = [i for _, aggregate, i, _, _ in plan if aggregate is Aggregate.WEIGHTED]
    duration = at[names.DURATION]
    records: list[dict[str, Any]] = []
    with np.errstate(over="ignore", invalid="ignore"):
        for (suite, case, variant), rows in _groups(
            kernels[names.SUITE], kernels[names.CASE], kernels[names.VARIANT]
        ).items():
            values = np.ascontiguousarray(matrix[:, rows])
            missing = np.ascontiguousarray(unknown[:, rows])
            sums = np.ascontiguousarray(zeroed[:, rows]).sum(axis=1).tolist()
            products = values[weighted] * values[duration]
            weighted_sums = dict(
                zip(weighted, np.where(np.isnan(products), 0.0, products).sum(axis=1).tolist(), strict=True)
            )
            known = (len(rows) - missing.sum(axis=1)).tolist()
            longest = int(np.where(missing[duration], -1.0, values[duration]).argmax())  # its occupancy limits
            total = sums[duration]
            rec: dict[str, Any] = {names.SUITE: suite, names.CASE: case, names.VARIANT: variant}
            for name, aggregate, i, scale, counted in plan:
                match aggregate:
                    case Aggregate.COUNT:
                        rec[name] = len(rows)
                    case Aggregate.SUM:
                        if counted and known[i] < len(rows):
                            rec[name] = math.nan  # an exact count of some of the kernels is no count
                        else:
                            rec[name] = sums[i] * scale if scale != 1.0 else sums[i]
                    case Aggregate.MAX:
                        rec[name] = float(np.fmax.reduce(values[i])) if known[i] else math.nan
                    case Aggregate.WEIGHTED:
                        if total <= 0 or not known[i]:
                            rec[name] = sums[i] / known[i] if known[i] else math.nan
                        else:
                            rec[name] = weighted_sums[i] / total
                    case Aggregate.LONGEST:
                        rec[name] = float(values[i, longest])
                    case Aggregate.DERIVED | Aggregate.RECORD | Aggregate.KERNEL:
                        rec[name] = math.nan  # derived below, filled from the record, or not a column
            for name in derived:
                rec[name] = derive(name, rec)
            records.append(rec)
    return records


def derive(name: str, row: dict[str, Any]) -> float:
    """The derived quantity ``name`` of one variant's row (:data:`DERIVED`).

    Raises:
        KeyError: the catalogue declares a derived quantity that :data:`DERIVED` does not compute.
    """
    try:
        compute = DERIVED[name]
    except KeyError:
        raise KeyError(
            f"quantity {name!r} is declared derived but fuseci.frames.metrics.DERIVED has no function for it"
        ) from None
    return compute(row)


def aggregate(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per-kernel frame → per-variant frame (see the module docstring)."""
    return pd.DataFrame.from_records(
        _variant_records(kernels, _numbers(kernels, _SOURCES)), columns=list(variant_columns())
    )


def timing_values(passes: list[VariantTiming]) -> dict[str, float]:
    """One variant's CUDA-event figures from its timed passes (at least one): the median of their medians, IQRs and
    quartiles, the total calls, the fastest and slowest call, the median host time and the fraction of blocking
    probes that blocked. What older records lack stays out."""
    out = {
        names.EVENT_TIME: float(statistics.median(t.median_ns for t in passes)),
        names.EVENT_TIME_IQR: float(statistics.median(t.iqr_ns for t in passes)),
        names.EVENT_TIME_REPEATS: float(sum(t.repeats for t in passes)),
        names.EVENT_TIME_MIN: float(min(t.min_ns for t in passes)),
        names.EVENT_TIME_MAX: float(max(t.max_ns for t in passes)),
    }
    for q, values in (
        (names.EVENT_TIME_Q1, [t.q1_ns for t in passes]),
        (names.EVENT_TIME_Q3, [t.q3_ns for t in passes]),
        (names.HOST_TIME, [t.host_ns for t in passes]),
    ):
        known = [v for v in values if v is not None]
        if known:
            out[q] = float(statistics.median(known))
    trials = sum(t.block_trials or 0 for t in passes)
    if trials:
        out[names.HOST_BLOCKING] = sum(t.blocked_calls or 0 for t in passes) / trials
    return out


def _fill(records: list[dict[str, Any]], record: HarnessRecord) -> None:
    """Fill the quantities taken from the harness record (``Aggregate.RECORD``) of per-variant rows in."""
    for row in records:
        case = record.cases.get(row[names.CASE])
        if case is None:
            continue
        vid = row[names.VARIANT]
        passes = [t for run in (case.timings, *case.retimings) for t in run if t.variant == vid]
        row.update(timing_values(passes) if passes else {})
        if case.min_bytes:
            row[names.MIN_BYTES] = float(case.min_bytes)
            row[names.BYTES_RATIO] = float(row[names.DRAM_BYTES]) / case.min_bytes


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when undefined (zero or missing denominator)."""
    if denominator is None or numerator is None or not denominator or math.isnan(denominator) or math.isnan(numerator):
        return math.nan
    return numerator / denominator


def _gain_records(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the gains frame (:func:`gains`) from per-variant rows."""
    records: list[dict[str, Any]] = []
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in variants:
        key = (row[names.SUITE], row[names.CASE])
        if not any(_missing(k) for k in key):  # as pandas' groupby, which leaves out missing keys
            groups.setdefault(key, []).append(row)
    gained = quantities.gains()
    for (suite, case), rows in groups.items():
        base = next((r for r in rows if r[names.VARIANT] == UNFUSED), None)
        if base is None:
            continue
        for row in (r for r in rows if r[names.VARIANT] != UNFUSED):
            rec: dict[str, Any] = {names.SUITE: suite, names.CASE: case, names.VARIANT: row[names.VARIANT]}
            rec.update({q: ratio(float(base[q]), float(row[q])) for q in gained})
            records.append(rec)
    return records


def gains(variants: pd.DataFrame) -> pd.DataFrame:
    """Per-variant frame → fusion gains (unfused ÷ variant) for every non-unfused variant."""
    rows = [{str(c): v for c, v in row.items()} for row in variants.to_dict("records")]
    return pd.DataFrame.from_records(_gain_records(rows), columns=list(gain_columns()))


def inventory(kernels: pd.DataFrame, case: str, variant: str) -> tuple[KernelLaunch, ...]:
    """The ordered kernels one variant launched, each with its counted quantities and how far
    they moved over its profiled passes (where it had more than one)."""
    rows = kernels[(kernels[names.CASE] == case) & (kernels[names.VARIANT] == variant)].sort_values(names.KERNEL_INDEX)
    return tuple(
        KernelLaunch(
            name=str(r[names.KERNEL]),
            grid=_int(r[names.GRID_SIZE]),
            block=_int(r[names.BLOCK_SIZE]),
            registers=_int(r[names.REGISTERS]),
            shared_mem=_int(r.get(names.SHARED_MEM_STATIC, math.nan)) + _int(r.get(names.SHARED_MEM_DYNAMIC, math.nan)),
            counts=_counted(r, lambda source: source),
            spread=_counted(r, names.spread_column),
        )
        for _, r in rows.iterrows()
    )


def _counted(row: pd.Series, column: Callable[[str], str]) -> dict[str, float]:
    """A kernel's counted quantities (:func:`fuseci.config.quantities.counted`), each from its
    source metric's ``column`` in the per-kernel frame, scaled; those it lacks are left out."""
    out = {}
    for q in quantities.counted():
        value = float(row.get(column(q.sources[0]), math.nan))
        if math.isfinite(value) and value >= 0:
            out[q.name] = value * q.scale
    return out


def _int(value: Any) -> int:
    v = float(value)
    return 0 if math.isnan(v) else int(v)


@dataclass(frozen=True)
class SuiteResults:
    """Everything measured for one suite: the three frames (the per-variant and gains frames built
    from their rows when first used), the harness record, the env."""

    suite: str
    """Suite id."""
    env: dict[str, v.Scalar]
    """Fingerprint (:data:`ENV_FIELDS`) plus informational fields."""
    record: HarnessRecord
    """What the harness (and ``fuseci run``) recorded besides the counters."""
    kernels: pd.DataFrame
    """Per-kernel frame."""
    variant_rows: tuple[FrameRow, ...]
    """The per-variant frame's rows (:func:`aggregate`'s), in its order."""
    gain_rows: tuple[FrameRow, ...]
    """The gains frame's rows (:func:`gains`'), in its order."""
    ledger_rows: Mapping[tuple[str, str], tuple[KernelRow, ...]] = field(default_factory=dict)
    """Each ledger variant's kernels as a ledger reads them (:func:`~fuseci.frames.report.read_report`), or empty."""

    @cached_property
    def variants(self) -> pd.DataFrame:
        """Per-variant frame."""
        return pd.DataFrame.from_records(list(self.variant_rows), columns=list(variant_columns()))

    @cached_property
    def gains(self) -> pd.DataFrame:
        """Gains frame."""
        return pd.DataFrame.from_records(list(self.gain_rows), columns=list(gain_columns()))

    @staticmethod
    def _row(rows: tuple[FrameRow, ...], case: str, variant: str, columns: tuple[str, ...]) -> dict[str, float] | None:
        found = next((r for r in rows if r[names.CASE] == case and r[names.VARIANT] == variant), None)
        if found is None:
            return None
        return {c: float(found.get(c, math.nan)) for c in columns}

    def variant_values(self, case: str, variant: str) -> dict[str, float] | None:
        """Aggregated quantities of one variant, or None if it has no kernels."""
        return self._row(self.variant_rows, case, variant, quantities.variant_quantities())

    def gain_values(self, case: str, variant: str) -> dict[str, float] | None:
        """Fusion gains of one variant, or None if either side has no kernels."""
        return self._row(self.gain_rows, case, variant, quantities.gains())


def _peak(col: Mapping[str, NDArray[np.float64]]) -> float | None:
    """The card's peak DRAM bandwidth (bytes/s) ncu's percentage of peak implies: the kernels' median of (DRAM bytes
    ÷ duration) ÷ percentage; None when no kernel moved enough for it (or the report lacks the metric)."""
    seconds = col[names.DURATION] * 1e-9
    pct = col[names.DRAM_PCT_PEAK]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # NaN and 0 are left out below
        usable = (pct >= _PEAK_MIN_PCT) & (seconds > 0)
        if not usable.any():
            return None
        implied = ((col[names.DRAM_READ] + col[names.DRAM_WRITE]) / seconds / (pct / 100.0))[usable]
    implied = implied[~np.isnan(implied)]
    return float(np.median(implied)) if implied.size else math.nan


def summarize(kernels: pd.DataFrame, record: HarnessRecord) -> SuiteResults:
    """Aggregate the per-kernel frame and combine it with the harness record; the environment
    gains the card's implied peak DRAM bandwidth (:data:`fuseci.config.names.DRAM_PEAK`)."""
    col = _numbers(kernels, tuple(dict.fromkeys((*_SOURCES, *_PEAK_SOURCES))))  # one pandas call for both
    rows = _variant_records(kernels, col)
    _fill(rows, record)
    env: dict[str, Any] = {**record.env, **(record.profiler.to_json() if record.profiler else {})}
    peak = _peak(col)
    if peak is not None:
        env[names.DRAM_PEAK] = peak
    return SuiteResults(
        suite=record.suite,
        env=env,
        record=record,
        kernels=kernels,
        variant_rows=tuple(rows),
        gain_rows=tuple(_gain_records(rows)),
    )
