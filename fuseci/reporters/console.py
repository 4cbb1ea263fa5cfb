"""A readable table for people: per case and variant the measurements and gains, then the
checks that need attention, then a one-line summary."""

from __future__ import annotations

import math

from fuseci.config import names
from fuseci.judge.verdict import CaseResult, Comparison, Verdict
from fuseci.reporters.text import GAIN_COLUMNS, clean, env_line, totals


def _f(value: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    if value is None or math.isnan(value):
        return "-"
    return fmt.format(value / scale)


def _table(cases: tuple[CaseResult, ...]) -> list[str]:
    head = (
        "case",
        "variant",
        "launches",
        "DRAM MB",
        "x min",
        "time us",
        "DRAM GB/s",
        "occ %",
        *(f"gain {n}" for _, n in GAIN_COLUMNS),
    )
    rows: list[tuple[str, ...]] = []
    for case in cases:
        for i, v in enumerate(case.variants):
            vals = v.values
            rate = (
                (vals.get(names.DRAM_READ_RATE, math.nan) + vals.get(names.DRAM_WRITE_RATE, math.nan)) if vals else None
            )
            rows.append((
                case.case if i == 0 else "",
                v.variant,
                _f(vals.get(names.LAUNCHES), fmt="{:.0f}"),
                _f(vals.get(names.DRAM_BYTES), 1e6),
                _f(vals.get(names.BYTES_RATIO), fmt="{:.2f}"),
                _f(vals.get(names.DURATION), 1e3),
                _f(rate, 1e9, "{:.0f}"),
                _f(vals.get(names.OCC_ACHIEVED)),
                *(_f(v.gains.get(q), fmt="{:.2f}x") if v.gains else "" for q, _ in GAIN_COLUMNS),
            ))  # fmt: skip
        if not case.variants:
            rows.append((case.case, "-", *("-" for _ in head[2:])))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(head), *(line(r) for r in rows)]


def _suite(c: Comparison) -> list[str]:
    out = [f"fuseci: suite {c.suite} ({c.suite_path}): {c.verdict.value.upper()}"]
    if not c.env:  # the suite could not be profiled or read: its error check says why
        return [*out, *(f"  {k.verdict.value.upper():<12} {k.message}" for case in c.cases for k in case.checks), ""]
    out.append("  " + env_line(c))
    if not c.has_baseline:
        out.append(f"  no baseline at {c.baseline_path}: record one with `fuseci update-baselines {c.suite_path}`")
    else:
        out.append(f"  baseline {c.baseline_path}")
    for d in c.env_differences:
        state = "accepted" if d.accepted else "NOT COMPARED"
        out.append(f"  environment differs: {d.field} baseline {d.baseline_value!r}, now {d.current!r} ({state})")
    out += ["", *("  " + r for r in _table(c.cases)), ""]
    attention = [k for case in c.cases for k in case.checks if k.verdict not in (Verdict.PASS,)]
    for k in attention:
        where = f"{k.case}/{k.variant}" if k.variant else k.case
        out.append(f"  {k.verdict.value.upper():<12} {where}: {k.message}")
    notes = [f"  {'note':<12} {case.case}: {n}" for case in c.cases for n in case.notes]
    if attention or notes:
        out += [*notes, ""]
    return out


def render(comparisons: list[Comparison]) -> str:
    """The whole console report."""
    lines: list[str] = []
    for c in comparisons:
        lines += _suite(c)
    lines.append(totals(comparisons))
    return "\n".join(map(clean, lines)) + "\n"  # one string, one line: see clean()


def render_suite(comparison: Comparison) -> str:
    """One suite's part of the console report, printed as soon as the suite is judged."""
    return "\n".join(map(clean, _suite(comparison))) + "\n"
