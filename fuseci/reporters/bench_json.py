"""``fuseci bench`` for machines: every measured and derived number, the environment."""

from __future__ import annotations

import json
import math
from typing import Any

from fuseci.measure.bench import BenchResult, BenchRow, exit_code

FORMAT_VERSION = 1


def _num(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def _row(row: BenchRow) -> dict[str, Any]:
    t = row.timing
    return {
        "variant": t.variant,
        "median_ns": _num(t.median_ns),
        "min_ns": _num(t.min_ns),
        "max_ns": _num(t.max_ns),
        "iqr_ns": _num(t.iqr_ns),
        "repeats": t.repeats,
        "input_sets": t.input_sets,
        "min_bytes": t.min_bytes,
        "achieved_bandwidth": _num(row.achieved_bandwidth),
        "copy_fraction": _num(row.copy_fraction),
        "speedup": _num(row.speedup),
    }


def _suite(r: BenchResult) -> dict[str, Any]:
    return {
        "suite": r.suite,
        "suite_path": r.suite_path,
        "record_path": r.record_path,
        "error": r.error,
        "env": dict(r.env),
        "copy_bandwidth": _num(r.copy_bandwidth),
        "cases": [
            {"case": c.case, "status": c.status.value, "message": c.message, "variants": [_row(row) for row in c.rows]}
            for c in r.cases
        ],
    }


def render(results: list[BenchResult]) -> str:
    """The JSON document (sorted keys, trailing newline). Bandwidths in bytes/s, times in ns."""
    doc = {"format_version": FORMAT_VERSION, "exit_code": exit_code(results), "suites": [_suite(r) for r in results]}
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
