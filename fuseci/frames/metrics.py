"""The frames' schema, per-variant aggregation and fusion gains.

Three tidy frames, each built with ``from_records`` and selected by column name:

* **kernels** (:data:`fuseci.frames.report.KERNEL_COLUMNS`): one row per profiled kernel.
* **variants** (:data:`VARIANT_COLUMNS`): one row per (case, variant): launch count, DRAM bytes
  read, written and in total, summed duration, DRAM throughput over that duration, achieved
  and theoretical occupancy weighted by each kernel's duration, L2 bytes written, replay passes;
  then, from the harness record, the CUDA-event time outside ncu (median, IQR and count of the
  timed calls; pooled over the passes when the case was re-measured), the case's minimum DRAM
  bytes and the variant's DRAM bytes over that minimum.
* **gains** (:data:`GAIN_COLUMNS`): one row per (case, fused variant): for each quantity of
  :data:`fuseci.config.names.GAIN_GATEABLE`, unfused ÷ variant, so that higher is better for every
  gain (the CUDA-event time's gain is the real-time speedup).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from fuseci.config import names
from fuseci.config.model import UNFUSED
from fuseci.frames.inventory import KernelLaunch
from fuseci.measure.record import HarnessRecord, VariantTiming

#: The quantities :func:`summarize` takes from the harness record rather than the report.
RECORD_QUANTITIES: tuple[str, ...] = (
    names.EVENT_TIME,
    names.EVENT_TIME_IQR,
    names.EVENT_TIME_REPEATS,
    names.EVENT_TIME_Q1,
    names.EVENT_TIME_Q3,
    names.EVENT_TIME_MIN,
    names.EVENT_TIME_MAX,
    names.HOST_TIME,
    names.HOST_BLOCKING,
    names.MIN_BYTES,
    names.BYTES_RATIO,
)
#: The occupancy limits (blocks per SM each resource allows) of a variant's longest kernel.
LIMIT_QUANTITIES: tuple[str, ...] = tuple(names.OCCUPANCY_LIMITERS)
#: Quantities of the variants frame (besides suite, case, variant), by name.
VARIANT_QUANTITIES: tuple[str, ...] = (
    names.LAUNCHES,
    names.DRAM_BYTES,
    names.DRAM_READ,
    names.DRAM_WRITE,
    names.DURATION,
    names.DRAM_READ_RATE,
    names.DRAM_WRITE_RATE,
    names.OCC_ACHIEVED,
    names.OCC_THEORETICAL,
    names.L2_WRITE_BYTES,
    names.REPLAY_PASSES,
    *LIMIT_QUANTITIES,
    *RECORD_QUANTITIES,
)
VARIANT_COLUMNS: tuple[str, ...] = (names.SUITE, names.CASE, names.VARIANT, *VARIANT_QUANTITIES)
GAIN_COLUMNS: tuple[str, ...] = (names.SUITE, names.CASE, names.VARIANT, *names.GAIN_GATEABLE)

_L2_SECTOR_BYTES = 32
# Below 1% of peak (a kernel of a few microseconds) ncu's percentage has too few digits to
# imply the peak; the busy kernels of every suite are far above it.
_PEAK_MIN_PCT = 1.0


# The frames are small (tens of kernels per suite) and a run of every shipped suite holds
# dozens of groups, so the aggregation works on NumPy columns with one index per group: pandas'
# per-group selection costs a fraction of a millisecond each, which made reading thousands of
# run files (fuseci history) take minutes. Sums are NumPy's over the group's values with NaN as
# 0, in kernel order: the same additions pandas makes, so the figures are the same to the bit.


def _sum(values: NDArray[np.float64]) -> float:
    """pandas' ``Series.sum()``: NaN skipped, 0 when all are NaN (and, as pandas, silent when a
    sum of huge values overflows to infinity)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.where(np.isnan(values), 0.0, values).sum())


def _mean(values: NDArray[np.float64]) -> float:
    """pandas' ``Series.mean()``: NaN skipped, NaN when all are."""
    known = int((~np.isnan(values)).sum())
    return _sum(values) / known if known else math.nan


def _max(values: NDArray[np.float64]) -> float:
    """pandas' ``Series.max()``: NaN skipped, NaN when all are."""
    known = values[~np.isnan(values)]
    return float(known.max()) if known.size else math.nan


def _weighted(values: NDArray[np.float64], weights: NDArray[np.float64]) -> float:
    total = _sum(weights)
    if total <= 0 or np.isnan(values).all():
        return _mean(values)
    with np.errstate(over="ignore", invalid="ignore"):
        return _sum(values * weights) / total


def _missing(key: Any) -> bool:
    """A missing key (None or NaN), cheaper than ``pd.isna`` for the ids that keys are."""
    return key is None or (isinstance(key, float) and math.isnan(key))


def _groups(*columns: pd.Series) -> dict[tuple[Any, ...], NDArray[np.intp]]:
    """The rows of each distinct key of ``columns``, keys in order of first appearance."""
    found: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(zip(*columns, strict=True)):
        if not any(_missing(k) for k in key):  # as pandas' groupby, which leaves out missing keys
            found.setdefault(key, []).append(i)
    return {key: np.asarray(rows, dtype=np.intp) for key, rows in found.items()}


def _numbers(frame: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, NDArray[np.float64]]:
    """Each of ``columns`` as float64 (all NaN when the frame lacks it)."""
    return {c: frame[c].to_numpy(dtype=np.float64) if c in frame else np.full(len(frame), math.nan) for c in columns}


def _variant_records(kernels: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of the per-variant frame (:func:`aggregate`)."""
    col = _numbers(
        kernels,
        (
            names.DRAM_READ,
            names.DRAM_WRITE,
            names.DURATION,
            names.OCC_ACHIEVED,
            names.OCC_THEORETICAL,
            names.L2_WRITE_SECTORS,
            names.REPLAY_PASSES,
            *LIMIT_QUANTITIES,
        ),
    )
    records: list[dict[str, Any]] = []
    for (suite, case, variant), rows in _groups(
        kernels[names.SUITE], kernels[names.CASE], kernels[names.VARIANT]
    ).items():
        read = _sum(col[names.DRAM_READ][rows])
        write = _sum(col[names.DRAM_WRITE][rows])
        durations = col[names.DURATION][rows]
        duration_ns = _sum(durations)
        seconds = duration_ns * 1e-9
        longest = rows[int(np.where(np.isnan(durations), -1.0, durations).argmax())]  # its occupancy limits
        records.append(
            {
                names.SUITE: suite,
                names.CASE: case,
                names.VARIANT: variant,
                names.LAUNCHES: len(rows),
                names.DRAM_BYTES: read + write,
                names.DRAM_READ: read,
                names.DRAM_WRITE: write,
                names.DURATION: duration_ns,
                names.DRAM_READ_RATE: read / seconds if seconds > 0 else math.nan,
                names.DRAM_WRITE_RATE: write / seconds if seconds > 0 else math.nan,
                names.OCC_ACHIEVED: _weighted(col[names.OCC_ACHIEVED][rows], durations),
                names.OCC_THEORETICAL: _weighted(col[names.OCC_THEORETICAL][rows], durations),
                names.L2_WRITE_BYTES: _sum(col[names.L2_WRITE_SECTORS][rows]) * _L2_SECTOR_BYTES,
                names.REPLAY_PASSES: _max(col[names.REPLAY_PASSES][rows]),
                **{q: float(col[q][longest]) for q in LIMIT_QUANTITIES},
                **dict.fromkeys(RECORD_QUANTITIES, math.nan),
            }
        )
    return records


def aggregate(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per-kernel frame → per-variant frame (see the module docstring)."""
    return pd.DataFrame.from_records(_variant_records(kernels), columns=list(VARIANT_COLUMNS))


def timing_values(passes: list[VariantTiming]) -> dict[str, float]:
    """One variant's CUDA-event figures from its timed passes (:class:`~fuseci.measure.record.VariantTiming`,
    at least one).

    One pass gives its median, IQR, quartiles and count of calls. Several (a re-measured case)
    give the median of the medians (and of the IQRs and quartiles), the total count, so the
    standard error the gate derives from them (:func:`fuseci.judge.checks.time_noise`) shrinks
    as passes are added, the fastest and the slowest call of all, the median host time, and
    the fraction of all blocking probes that blocked. What older records lack stays out.
    """

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
    """Fill :data:`RECORD_QUANTITIES` of per-variant rows in from the harness record."""
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


def with_record(variants: pd.DataFrame, record: HarnessRecord) -> pd.DataFrame:
    """The variants frame with :data:`RECORD_QUANTITIES` filled in from the harness record."""
    records = [{str(c): v for c, v in row.items()} for row in variants.to_dict("records")]
    _fill(records, record)
    return pd.DataFrame.from_records(records, columns=list(variants.columns), index=variants.index)


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
    for (suite, case), rows in groups.items():
        base = next((r for r in rows if r[names.VARIANT] == UNFUSED), None)
        if base is None:
            continue
        for row in (r for r in rows if r[names.VARIANT] != UNFUSED):
            rec: dict[str, Any] = {names.SUITE: suite, names.CASE: case, names.VARIANT: row[names.VARIANT]}
            rec.update({q: ratio(float(base[q]), float(row[q])) for q in names.GAIN_GATEABLE})
            records.append(rec)
    return records


def gains(variants: pd.DataFrame) -> pd.DataFrame:
    """Per-variant frame → fusion gains (unfused ÷ variant) for every non-unfused variant."""
    rows = [{str(c): v for c, v in row.items()} for row in variants.to_dict("records")]
    return pd.DataFrame.from_records(_gain_records(rows), columns=list(GAIN_COLUMNS))


def inventory(kernels: pd.DataFrame, case: str, variant: str) -> tuple[KernelLaunch, ...]:
    """The ordered kernels one variant launched."""
    rows = kernels[(kernels[names.CASE] == case) & (kernels[names.VARIANT] == variant)].sort_values(names.KERNEL_INDEX)
    return tuple(
        KernelLaunch(
            name=str(r[names.KERNEL]),
            grid=_int(r[names.GRID_SIZE]),
            block=_int(r[names.BLOCK_SIZE]),
            registers=_int(r[names.REGISTERS]),
            shared_mem=_int(r.get(names.SHARED_MEM_STATIC, math.nan)) + _int(r.get(names.SHARED_MEM_DYNAMIC, math.nan)),
        )
        for _, r in rows.iterrows()
    )


def _int(value: Any) -> int:
    v = float(value)
    return 0 if math.isnan(v) else int(v)


@dataclass(frozen=True)
class SuiteResults:
    """Everything measured for one suite: the three frames, the harness record, the env."""

    suite: str
    """Suite id."""
    env: dict[str, Any]
    """Fingerprint (:data:`ENV_FIELDS`) plus informational fields."""
    record: HarnessRecord
    """What the harness (and ``fuseci run``) recorded besides the counters."""
    kernels: pd.DataFrame
    """Per-kernel frame."""
    variants: pd.DataFrame
    """Per-variant frame."""
    gains: pd.DataFrame
    """Gains frame."""

    def _row(self, frame: pd.DataFrame, case: str, variant: str, columns: tuple[str, ...]) -> dict[str, float] | None:
        rows = frame[(frame[names.CASE] == case) & (frame[names.VARIANT] == variant)]
        if rows.empty:
            return None
        r = rows.iloc[0]
        return {c: float(r[c]) for c in columns}

    def variant_values(self, case: str, variant: str) -> dict[str, float] | None:
        """Aggregated quantities of one variant, or None if it has no kernels."""
        return self._row(self.variants, case, variant, VARIANT_QUANTITIES)

    def gain_values(self, case: str, variant: str) -> dict[str, float] | None:
        """Fusion gains of one variant, or None if either side has no kernels."""
        return self._row(self.gains, case, variant, names.GAIN_GATEABLE)


def dram_peak(kernels: pd.DataFrame) -> float | None:
    """The card's peak DRAM bandwidth in bytes/s that ncu's percentage of peak implies: the
    median over the kernels of (DRAM bytes ÷ duration) ÷ percentage; None when no kernel moved
    enough for it (or the report lacks the metric)."""
    col = _numbers(kernels, (names.DURATION, names.DRAM_PCT_PEAK, names.DRAM_READ, names.DRAM_WRITE))
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
    rows = _variant_records(kernels)
    _fill(rows, record)
    variants = pd.DataFrame.from_records(rows, columns=list(VARIANT_COLUMNS))
    env: dict[str, Any] = {**record.env, **(record.profiler.to_json() if record.profiler else {})}
    peak = dram_peak(kernels)
    if peak is not None:
        env[names.DRAM_PEAK] = peak
    gain_rows = pd.DataFrame.from_records(_gain_records(rows), columns=list(GAIN_COLUMNS))
    return SuiteResults(suite=record.suite, env=env, record=record, kernels=kernels, variants=variants, gains=gain_rows)
