"""``fuseci bench`` for people: per suite the GPU and copy bandwidth, then per case and variant the median time, its
spread, the minimal bytes, the bandwidth they imply and the speedup."""

from __future__ import annotations

from fuseci.measure.bench import BenchResult, BenchRow, exit_code
from fuseci.records.harness import CaseStatus
from fuseci.reporters.text import clean, columns, gpu_line, number

_HEAD = ("case", "variant", "median us", "IQR %", "min MB", "GB/s", "% copy", "speedup")


def _cells(row: BenchRow) -> tuple[str, ...]:
    t = row.timing
    return (
        number(t.median_ns / 1e3),
        number(100 * t.iqr_ns / t.median_ns if t.median_ns > 0 else None),
        number(t.min_bytes / 1e6),
        number(row.achieved_bandwidth / 1e9, fmt="{:.0f}"),
        number(None if row.copy_fraction is None else 100 * row.copy_fraction),
        number(row.speedup, fmt="{:.2f}x") if row.speedup is not None else "",
    )


def _table(r: BenchResult) -> list[str]:
    rows: list[tuple[str, ...]] = []
    for case in r.cases:
        for i, row in enumerate(case.rows):
            rows.append((case.case if i == 0 else "", row.timing.variant, *_cells(row)))
        if not case.rows:
            rows.append((case.case, "-", *("-" for _ in _HEAD[2:])))
    return columns([_HEAD, *rows])


def _method(r: BenchResult) -> list[str]:
    timings = [row.timing for case in r.cases for row in case.rows]
    if not timings:
        return []
    repeats = sorted({t.repeats for t in timings})
    sets = sorted({t.input_sets for t in timings})
    set_text = str(sets[0]) if len(sets) == 1 else f"{sets[0]} to {sets[-1]}"
    return [
        f"  median of {'/'.join(map(str, repeats))} calls per variant after warm-up, each between its own CUDA events;",
        f"  inputs rotated over {set_text} sets per case (at least 4x L2). min MB: inputs read once + outputs",
        "  written once; GB/s: min MB / median; % copy: of the copy bandwidth; speedup: unfused / variant median.",
        "",
    ]


def _suite(r: BenchResult) -> list[str]:
    if r.error:
        return [f"fuseci bench: suite {r.suite} ({r.suite_path}): ERROR", f"  {'ERROR':<12} {r.error}", ""]
    bad = [c for c in r.cases if c.status is not CaseStatus.OK]
    state = "WRONG" if any(c.status is CaseStatus.WRONG for c in bad) else "ERROR" if bad else "OK"
    bw = number(r.copy_bandwidth, 1e9, "{:.0f}")
    out = [
        f"fuseci bench: suite {r.suite} ({r.suite_path}): {state}",
        "  " + gpu_line(r.env),
        f"  copy bandwidth {bw} GB/s (1 GiB device-to-device copy, bytes read + written, median)",
        f"  record {r.record_path}",
        "",
        *("  " + line for line in _table(r)),
        "",
        *_method(r),
    ]
    for c in bad:
        out.append(f"  {c.status.value.upper():<12} {c.case}: {c.message}")
    if bad:
        out.append("")
    return out


def render(results: list[BenchResult], code: int | None = None) -> str:
    """The whole console report; its last line says the exit code (the results', unless the
    command ends with another ``code``: a JSON file it could not write)."""
    lines = [line for r in results for line in _suite(r)]
    variants = sum(len(c.rows) for r in results for c in r.cases)
    wrong = sum(c.status is CaseStatus.WRONG for r in results for c in r.cases)
    broken = sum(c.status is CaseStatus.ERROR for r in results for c in r.cases) + sum(bool(r.error) for r in results)
    parts = [f"{variants} variants timed"]
    if wrong:
        parts.append(f"{wrong} wrong")
    if broken:
        parts.append(f"{broken} error{'s' if broken > 1 else ''}")
    lines.append(f"fuseci bench: {', '.join(parts)}; exit {exit_code(results) if code is None else code}")
    return "\n".join(map(clean, lines)) + "\n"  # one string, one line: see clean()
