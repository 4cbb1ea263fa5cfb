"""Wording shared by the human-readable reporters (console and Markdown)."""

from __future__ import annotations

from collections import Counter

from fuseci.config import names
from fuseci.judge.verdict import Comparison, Verdict, exit_code

#: The gains shown in tables, with their column names.
GAIN_COLUMNS: tuple[tuple[str, str], ...] = (
    (names.DRAM_BYTES, "bytes"),
    (names.DURATION, "ncu time"),
    (names.EVENT_TIME, "real time"),
    (names.LAUNCHES, "launches"),
)


def env_line(c: Comparison) -> str:
    """One line naming the GPU, driver, CUDA, CuPy, ncu and its clock and cache control."""
    e = c.env
    return (
        f"GPU {e.get('gpu_name', '?')} (sm_{str(e.get('compute_capability', '?')).replace('.', '')}), "
        f"driver {e.get('driver_version', '?')}, CUDA {e.get('cuda_runtime', '?')}, CuPy {e.get('cupy_version', '?')}, "
        f"ncu {e.get('ncu_version', '?')}, clock-control {e.get('clock_control', '?')}, cache-control {e.get('cache_control', '?')}"
    )


def totals(comparisons: list[Comparison]) -> str:
    """``fuseci: 28 pass, 5 regressed; exit 1``: every verdict counted, and the exit code."""
    counts = Counter(k.verdict for c in comparisons for case in c.cases for k in case.checks)
    summary = ", ".join(f"{counts[v]} {v.value}" for v in reversed(Verdict) if counts[v])
    return f"fuseci: {summary or 'no checks'}; exit {exit_code(comparisons)}"
