"""A fusion ledger for people: lines for the terminal, and an HTML fragment (a table of its rows,
the worst ratio of measured to minimum DRAM bytes first, under a bar of the graph's measured
total against its floor) for the report page.

Node names and source lines are the model's, so user data: every string passes
:func:`fuseci.reporters.text.clean` and is cut (:func:`fuseci.reporters.budget.cut`), and the
template escapes it (:mod:`fuseci.reporters.templating`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fuseci.ledger.gate import LedgerVerdict
from fuseci.ledger.match import labels
from fuseci.ledger.model import Ledger, Row
from fuseci.reporters import budget, templating
from fuseci.reporters.chartkit import mb
from fuseci.reporters.html_case import tone
from fuseci.reporters.text import clean, columns

#: Node labels shown open in a row; more are folded into a ``<details>``.
OPEN_NODES = 3
#: Rows a fragment shows (the worst first); the rest are counted.
MAX_ROWS = 2000


def _cut(text: str, limit: int = budget.NAME) -> str:
    return clean(budget.cut(text, limit))


def _ratio(row: Row) -> str:
    return "" if row.ratio is None else f"{row.ratio:.2f}x"


def _time(row: Row) -> str:
    return "" if row.measured is None else f"{row.measured.duration_ns / 1e3:,.1f} µs"


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
            _cut(r.kernel, 80),
            r.kind.value,
            _cut(", ".join(labels(r.nodes)), 80),
            str(r.measured.launches) if r.measured else "",
            mb(r.measured.dram_bytes) if r.measured else "not measured",
            mb(r.min_bytes) if r.min_bytes is not None else "",
            _ratio(r),
            _time(r),
        ]
        for r in sorted_rows(ledger)
    ]
    table = columns([head, *body], left=3)
    return [*table, totals_line(ledger)]


def totals_line(ledger: Ledger) -> str:
    """``forward: 526 MB of DRAM over 9 rows; floor 50 MB (10.5x)``."""
    measured = ledger.measured_bytes
    floor = f"; floor {mb(ledger.floor_bytes)}" if ledger.floor_bytes else "; no floor (shapes unknown)"
    times = f" ({measured / ledger.floor_bytes:.1f}x)" if ledger.floor_bytes else ""
    graphs = f" in {len(ledger.graphs)} graphs" if len(ledger.graphs) > 1 else ""
    return f"forward: {mb(measured)} of DRAM over {len(ledger.rows)} rows{graphs}{floor}{times}"


def verdict_lines(verdict: LedgerVerdict) -> list[str]:
    """The gate's verdict: one line for it, then one per finding (regressions first)."""
    counts = f"{len(verdict.regressions)} regressed, {len(verdict.notes)} notes"
    out = [f"ledger: {verdict.verdict.name}  ({counts})"]
    out += [f"  {f.verdict.name} {f.kind.value}: {_cut(f.message, budget.TEXT)}" for f in verdict.findings]
    return out


@dataclass(frozen=True, slots=True)
class RowView:
    """One row of the fragment's table, as the template prints it."""

    kernel: str
    kind: str
    launches: str
    nodes: tuple[str, ...]
    """The first :data:`OPEN_NODES` node labels."""
    more_nodes: tuple[str, ...]
    """The rest, folded."""
    dram: str
    minimum: str
    ratio: str
    ratio_value: str
    """The ratio as a number for scripts (empty: none)."""
    time: str
    note: str


@dataclass(frozen=True, slots=True)
class BarView:
    """The graph's measured DRAM total against its floor, in percent of the bar's width."""

    measured: str
    floor: str
    measured_pct: float
    floor_pct: float
    caption: str


@dataclass(frozen=True, slots=True)
class LedgerView:
    """What the fragment shows."""

    rows: tuple[RowView, ...]
    more: str
    bar: BarView | None
    totals: str
    findings: tuple[tuple[str, str, str], ...]
    """Each finding as (tone, status, message)."""


def _row_view(r: Row) -> RowView:
    names = tuple(_cut(n) for n in labels(r.nodes))
    return RowView(
        kernel=_cut(r.kernel),
        kind=r.kind.value,
        launches=str(r.measured.launches) if r.measured else "",
        nodes=names[:OPEN_NODES],
        more_nodes=names[OPEN_NODES:],
        dram=mb(r.measured.dram_bytes) if r.measured else "not measured",
        minimum=mb(r.min_bytes) if r.min_bytes is not None else "",
        ratio=_ratio(r),
        ratio_value="" if r.ratio is None else f"{r.ratio:.6g}",
        time=_time(r),
        note=_cut(r.note, budget.TEXT),
    )


def _bar(ledger: Ledger) -> BarView | None:
    measured, floor = ledger.measured_bytes, ledger.floor_bytes
    if not floor or measured <= 0:
        return None
    top = max(measured, floor)
    caption = f"measured {mb(measured)} of DRAM against a floor of {mb(floor)} ({measured / floor:.2f}x)"
    return BarView(mb(measured), mb(floor), round(100 * measured / top, 2), round(100 * floor / top, 2), caption)


def view(ledger: Ledger, verdict: LedgerVerdict | None = None) -> LedgerView:
    """What :func:`fragment` shows of ``ledger`` (and of its verdict against a baseline)."""
    rows = sorted_rows(ledger)
    findings: Sequence[tuple[str, str, str]] = ()
    if verdict is not None:
        findings = tuple(
            (tone(f.verdict).name.lower(), f"{f.verdict.name} {f.kind.value}", _cut(f.message, budget.TEXT))
            for f in verdict.findings
        )
    return LedgerView(
        rows=tuple(_row_view(r) for r in rows[:MAX_ROWS]),
        more=budget.more(len(rows) - MAX_ROWS, "rows"),
        bar=_bar(ledger),
        totals=totals_line(ledger),
        findings=tuple(findings),
    )


def fragment(ledger: Ledger, verdict: LedgerVerdict | None = None) -> str:
    """The ledger as an HTML fragment for a report page (its styles are the page's style sheet)."""
    return templating.render("ledger.html.j2", ledger=view(ledger, verdict))


def document(ledger: Ledger, verdict: LedgerVerdict | None = None, title: str = "fusion ledger") -> str:
    """The fragment in a page of its own (the reports' head, style sheet and security policy)."""
    overall = "" if verdict is None else f": {verdict.verdict.name}"
    return templating.render("ledger_page.html.j2", title=_cut(title) + overall, ledger=view(ledger, verdict))
