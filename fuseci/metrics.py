"""The frames' schema, per-variant aggregation and fusion gains.

Three tidy frames, each built with ``from_records`` and selected by column name:

* **kernels** (:data:`fuseci.report.KERNEL_COLUMNS`): one row per profiled kernel.
* **variants** (:data:`VARIANT_COLUMNS`): one row per (case, variant): launch count, DRAM bytes
  read, written and in total, summed duration, DRAM throughput over that duration, achieved
  and theoretical occupancy weighted by each kernel's duration, L2 bytes written, replay passes;
  then, from the harness record, the CUDA-event time outside ncu (median, IQR and count of the
  timed calls; pooled over the passes when the case was re-measured), the case's minimum DRAM
  bytes and the variant's DRAM bytes over that minimum.
* **gains** (:data:`GAIN_COLUMNS`): one row per (case, fused variant): for each quantity of
  :data:`fuseci.schema.GAIN_GATEABLE`, unfused ÷ variant, so that higher is better for every
  gain (the CUDA-event time's gain is the real-time speedup).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fuseci import schema
from fuseci.suite import BASELINE_VARIANT

#: The quantities :func:`summarize` takes from the harness record rather than the report.
RECORD_QUANTITIES: tuple[str, ...] = (
    schema.EVENT_TIME,
    schema.EVENT_TIME_IQR,
    schema.EVENT_TIME_REPEATS,
    schema.MIN_BYTES,
    schema.BYTES_RATIO,
)
#: Quantities of the variants frame (besides suite, case, variant), by name.
VARIANT_QUANTITIES: tuple[str, ...] = (
    schema.LAUNCHES,
    schema.DRAM_BYTES,
    schema.DRAM_READ,
    schema.DRAM_WRITE,
    schema.DURATION,
    schema.DRAM_READ_RATE,
    schema.DRAM_WRITE_RATE,
    schema.OCC_ACHIEVED,
    schema.OCC_THEORETICAL,
    schema.L2_WRITE_BYTES,
    schema.REPLAY_PASSES,
    *RECORD_QUANTITIES,
)
VARIANT_COLUMNS: tuple[str, ...] = (schema.SUITE, schema.CASE, schema.VARIANT, *VARIANT_QUANTITIES)
GAIN_COLUMNS: tuple[str, ...] = (schema.SUITE, schema.CASE, schema.VARIANT, *schema.GAIN_GATEABLE)

_L2_SECTOR_BYTES = 32


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """One entry of a variant's kernel inventory."""

    name: str
    """Kernel function name as ncu reports it."""
    grid: int
    """Blocks in the grid."""
    block: int
    """Threads per block."""
    registers: int
    """Registers per thread."""


def _weighted(values: pd.Series, weights: pd.Series) -> float:
    total = float(weights.sum())
    if total <= 0 or values.isna().all():
        return float(values.mean())
    return float((values * weights).sum() / total)


def aggregate(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per-kernel frame → per-variant frame (see the module docstring)."""
    records: list[dict[str, Any]] = []
    for (suite, case, variant), g in kernels.groupby([schema.SUITE, schema.CASE, schema.VARIANT], sort=False):
        read = float(g[schema.DRAM_READ].sum())
        write = float(g[schema.DRAM_WRITE].sum())
        duration_ns = float(g[schema.DURATION].sum())
        seconds = duration_ns * 1e-9
        records.append(
            {
                schema.SUITE: suite,
                schema.CASE: case,
                schema.VARIANT: variant,
                schema.LAUNCHES: len(g),
                schema.DRAM_BYTES: read + write,
                schema.DRAM_READ: read,
                schema.DRAM_WRITE: write,
                schema.DURATION: duration_ns,
                schema.DRAM_READ_RATE: read / seconds if seconds > 0 else math.nan,
                schema.DRAM_WRITE_RATE: write / seconds if seconds > 0 else math.nan,
                schema.OCC_ACHIEVED: _weighted(g[schema.OCC_ACHIEVED], g[schema.DURATION]),
                schema.OCC_THEORETICAL: _weighted(g[schema.OCC_THEORETICAL], g[schema.DURATION]),
                schema.L2_WRITE_BYTES: float(g[schema.L2_WRITE_SECTORS].sum()) * _L2_SECTOR_BYTES,
                schema.REPLAY_PASSES: float(g[schema.REPLAY_PASSES].max()),
                **dict.fromkeys(RECORD_QUANTITIES, math.nan),
            }
        )
    return pd.DataFrame.from_records(records, columns=list(VARIANT_COLUMNS))


def timing_values(passes: list[Any]) -> dict[str, float]:
    """One variant's CUDA-event figures from its timed passes (:class:`fuseci.record.VariantTiming`,
    at least one).

    One pass gives its median, IQR and count of calls. Several (a re-measured case) give the
    median of the medians, the median IQR and the total count, so the standard error the gate
    derives from them (:func:`fuseci.compare.time_noise`) shrinks as passes are added.
    """
    return {
        schema.EVENT_TIME: float(statistics.median(t.median_ns for t in passes)),
        schema.EVENT_TIME_IQR: float(statistics.median(t.iqr_ns for t in passes)),
        schema.EVENT_TIME_REPEATS: float(sum(t.repeats for t in passes)),
    }


def with_record(variants: pd.DataFrame, record: Any) -> pd.DataFrame:
    """The variants frame with :data:`RECORD_QUANTITIES` filled in from the harness record."""
    out = variants.copy()
    for i, row in out.iterrows():
        case = record.cases.get(row[schema.CASE])
        if case is None:
            continue
        vid = row[schema.VARIANT]
        passes = [t for run in (case.timings, *case.retimings) for t in run if t.variant == vid]
        for q, value in (timing_values(passes) if passes else {}).items():
            out.at[i, q] = value
        if case.min_bytes:
            out.at[i, schema.MIN_BYTES] = float(case.min_bytes)
            out.at[i, schema.BYTES_RATIO] = float(row[schema.DRAM_BYTES]) / case.min_bytes
    return out


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when undefined (zero or missing denominator)."""
    if denominator is None or numerator is None or not denominator or math.isnan(denominator) or math.isnan(numerator):
        return math.nan
    return numerator / denominator


def gains(variants: pd.DataFrame) -> pd.DataFrame:
    """Per-variant frame → fusion gains (unfused ÷ variant) for every non-unfused variant."""
    records: list[dict[str, Any]] = []
    for (suite, case), g in variants.groupby([schema.SUITE, schema.CASE], sort=False):
        base = g[g[schema.VARIANT] == BASELINE_VARIANT]
        if base.empty:
            continue
        b = base.iloc[0]
        for _, row in g[g[schema.VARIANT] != BASELINE_VARIANT].iterrows():
            rec: dict[str, Any] = {schema.SUITE: suite, schema.CASE: case, schema.VARIANT: row[schema.VARIANT]}
            rec.update({q: ratio(float(b[q]), float(row[q])) for q in schema.GAIN_GATEABLE})
            records.append(rec)
    return pd.DataFrame.from_records(records, columns=list(GAIN_COLUMNS))


def inventory(kernels: pd.DataFrame, case: str, variant: str) -> tuple[KernelLaunch, ...]:
    """The ordered kernels one variant launched."""
    rows = kernels[(kernels[schema.CASE] == case) & (kernels[schema.VARIANT] == variant)].sort_values(
        schema.KERNEL_INDEX
    )
    return tuple(
        KernelLaunch(
            name=str(r[schema.KERNEL]),
            grid=_int(r[schema.GRID_SIZE]),
            block=_int(r[schema.BLOCK_SIZE]),
            registers=_int(r[schema.REGISTERS]),
        )
        for _, r in rows.iterrows()
    )


def _int(value: Any) -> int:
    v = float(value)
    return 0 if math.isnan(v) else int(v)


ENV_FIELDS: tuple[str, ...] = (
    "gpu_name",
    "compute_capability",
    "driver_version",
    "cuda_runtime",
    "cupy_version",
    "ncu_version",
    "clock_control",
    "cache_control",
    "replay_mode",
)
"""Environment fingerprint: a baseline recorded under different values is not compared silently."""


@dataclass(frozen=True)
class SuiteResults:
    """Everything measured for one suite: the three frames, the harness record, the env."""

    suite: str
    """Suite id."""
    env: dict[str, Any]
    """Fingerprint (:data:`ENV_FIELDS`) plus informational fields."""
    record: Any
    """The :class:`fuseci.record.HarnessRecord`."""
    kernels: pd.DataFrame
    """Per-kernel frame."""
    variants: pd.DataFrame
    """Per-variant frame."""
    gains: pd.DataFrame
    """Gains frame."""

    def _row(self, frame: pd.DataFrame, case: str, variant: str, columns: tuple[str, ...]) -> dict[str, float] | None:
        rows = frame[(frame[schema.CASE] == case) & (frame[schema.VARIANT] == variant)]
        if rows.empty:
            return None
        r = rows.iloc[0]
        return {c: float(r[c]) for c in columns}

    def variant_values(self, case: str, variant: str) -> dict[str, float] | None:
        """Aggregated quantities of one variant, or None if it has no kernels."""
        return self._row(self.variants, case, variant, VARIANT_QUANTITIES)

    def gain_values(self, case: str, variant: str) -> dict[str, float] | None:
        """Fusion gains of one variant, or None if either side has no kernels."""
        return self._row(self.gains, case, variant, schema.GAIN_GATEABLE)


def summarize(kernels: pd.DataFrame, record: Any) -> SuiteResults:
    """Aggregate the per-kernel frame and combine it with the harness record."""
    variants = with_record(aggregate(kernels), record)
    env: dict[str, Any] = {**record.env, **record.profiler}
    return SuiteResults(
        suite=record.suite, env=env, record=record, kernels=kernels, variants=variants, gains=gains(variants)
    )
