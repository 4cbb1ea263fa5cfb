"""A fusion ledger in words: its rows as a terminal table (the worst ratio of measured to minimum
DRAM bytes first), its totals in one line, its gate's findings, and what changed against its
baseline's ledger, node by node (:func:`fuseci.ledger.diff.diff`). The console, JUnit and the
HTML fragment (:mod:`fuseci.reporters.ledger_html`) say it with these.

Node names and source lines are the model's, so user data: every string passes
:func:`fuseci.reporters.text.clean` and is cut (:func:`fuseci.reporters.budget.cut`). This
module draws nothing (no matplotlib), so the console pays nothing for it."""

from __future__ import annotations

from fuseci.config import names, quantities
from fuseci.ledger.diff import diff, diff_lines
from fuseci.ledger.gate import LedgerVerdict
from fuseci.ledger.match import labels
from fuseci.ledger.model import Ledger, Row
from fuseci.reporters import budget
from fuseci.reporters.text import clean, columns, count

#: Lines of what changed against the baseline's ledger a report shows; the rest are counted.
CHANGES = 40
#: Characters kept of one of those lines (its node lists grow with the model).
CHANGE_CHARS = budget.TEXT


#: A ledger's own notes shown at most (CUDA graphs, recompiles, repeats: a few at most).
NOTES = 8


def cut(text: str, limit: int = budget.NAME) -> str:
    """``text`` cut to ``limit`` characters, and one line (:func:`~fuseci.reporters.text.clean`)."""
    return clean(budget.cut(text, limit))


def megabytes(value: float) -> str:
    """``526.3 MB`` (bytes as the gate's messages write them)."""
    return quantities.show(names.DRAM_BYTES, value)


def ratio(row: Row) -> str:
    """``1.05x``; empty for a row without a minimum or a measurement."""
    return "" if row.ratio is None else f"{row.ratio:.2f}x"


def duration(row: Row) -> str:
    """``14.7 µs``; empty for a row not measured."""
    return "" if row.measured is None else quantities.show(names.DURATION, row.measured.duration_ns)


def sorted_rows(ledger: Ledger) -> list[Row]:
    """The rows by measured ÷ minimum DRAM bytes, the largest first; rows without a ratio last,
    each group in call order."""
    known = [r for r in ledger.rows if r.ratio is not None]
    return sorted(known, key=lambda r: -(r.ratio or 0.0)) + [r for r in ledger.rows if r.ratio is None]


def ledger_lines(ledger: Ledger) -> list[str]:
    """The ledger as a table for the terminal, the worst ratio first, and its totals."""
    head = ["kernel", "kind", "nodes", "launches", "DRAM", "minimum", "ratio", "time"]
    body = [
        [
            cut(r.kernel, 80),
            r.kind.value,
            cut(", ".join(labels(r.nodes)), 80),
            str(r.measured.launches) if r.measured else "",
            megabytes(r.measured.dram_bytes) if r.measured else "not measured",
            megabytes(r.min_bytes) if r.min_bytes is not None else "",
            ratio(r),
            duration(r),
        ]
        for r in sorted_rows(ledger)
    ]
    table = columns([head, *body], left=3)
    return [*table, totals_line(ledger), *(f"note: {cut(n, budget.TEXT)}" for n in ledger.notes[:NOTES])]


def totals_line(ledger: Ledger) -> str:
    """``forward: 526.3 MB of DRAM over 9 rows; floor 58.7 MB (9.0x)``."""
    measured = ledger.measured_bytes
    floor = f"; floor {megabytes(ledger.floor_bytes)}" if ledger.floor_bytes else "; no floor (shapes unknown)"
    times = f" ({measured / ledger.floor_bytes:.1f}x)" if ledger.floor_bytes else ""
    graphs = f" in {len(ledger.graphs)} graphs" if len(ledger.graphs) > 1 else ""
    return f"forward: {megabytes(measured)} of DRAM over {len(ledger.rows)} rows{graphs}{floor}{times}"


def totals_brief(ledger: Ledger) -> str:
    """``545.2 MB of DRAM, floor 58.7 MB (9.3x), 9 kernel calls, 1 graph``: what two recordings
    of one model are compared by first."""
    floor = (
        f"floor {megabytes(ledger.floor_bytes)} ({ledger.measured_bytes / ledger.floor_bytes:.1f}x)"
        if ledger.floor_bytes
        else "no floor (shapes unknown)"
    )
    calls, graphs = count(len(ledger.rows), "kernel call"), count(len(ledger.graphs), "graph")
    return f"{megabytes(ledger.measured_bytes)} of DRAM, {floor}, {calls}, {graphs}"


def summary_line(ledger: Ledger) -> str:
    """The ledger in one line: ``9 kernels, 526.3 MB measured against a 58.7 MB floor; worst
    triton_poi_fused_add_view_3 at 1.05x its minimum``."""
    kernels = count(len(ledger.rows), "kernel")
    graphs = f" in {len(ledger.graphs)} graphs" if len(ledger.graphs) > 1 else ""
    unmeasured = sum(1 for r in ledger.rows if r.measured is None)
    missing = f" ({unmeasured} not measured)" if unmeasured else ""
    measured = megabytes(ledger.measured_bytes)
    floor = (
        f"against a {megabytes(ledger.floor_bytes)} floor" if ledger.floor_bytes else "with no floor (shapes unknown)"
    )
    worst = next((r for r in sorted_rows(ledger) if r.ratio is not None), None)
    at = f"; worst {cut(worst.kernel)} at {ratio(worst)} its minimum" if worst is not None else ""
    return f"{kernels}{graphs}{missing}, {measured} measured {floor}{at}"


def verdict_lines(verdict: LedgerVerdict) -> list[str]:
    """The gate's verdict: one line for it, then one per finding (regressions first)."""
    counts = f"{len(verdict.regressions)} regressed, {len(verdict.notes)} notes"
    out = [f"ledger: {verdict.verdict.name}  ({counts})"]
    out += [f"  {f.verdict.name} {f.kind.value}: {cut(f.message, budget.TEXT)}" for f in verdict.findings]
    return out


def change_lines(baseline: Ledger, current: Ledger, limit: int = CHANGES) -> tuple[list[str], int]:
    """What changed from ``baseline`` to ``current``, node by node (``add (block.py:17): was fused
    with layer_norm_1 (block.py:19) in ...; now alone in ...``), at most ``limit`` lines, each cut
    to :data:`CHANGE_CHARS`; and how many more changes there are. One line when nothing changed."""
    changes = diff(baseline, current)
    return [cut(line, CHANGE_CHARS) for line in diff_lines(changes[:limit])], max(len(changes) - limit, 0)
