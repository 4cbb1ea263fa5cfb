"""A fusion ledger as an HTML fragment (one per variant with a ledger in a case's section): what changed against the
baseline's ledger node by node, then its rows, worst ratio first, under a bar of the graph's bytes (its floor, then
each cause above it). Strings are cut to one line (:func:`fuseci.reporters.ledger.cut`) and escaped by the template;
rows past the bytes given are counted, a row's nodes past :data:`OPEN_NODES` folded, past :data:`FOLDED_NODES` counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fuseci.judge.verdict import CaseResult
from fuseci.ledger.gate import LedgerVerdict
from fuseci.ledger.match import labels
from fuseci.records.fusion import Cause, Ledger, NodeChange, Row
from fuseci.reporters import budget
from fuseci.reporters.chartkit import tone
from fuseci.reporters.ledger import (
    DRAM_BASIS,
    NOTES,
    change_lines,
    cut,
    duration,
    megabytes,
    parts_text,
    ratio,
    requested,
    row_excess,
    row_ratio,
    signed_megabytes,
    sorted_rows,
    totals_line,
)

#: Node labels shown open in a row; more are folded into a ``<details>``.
OPEN_NODES = 3
#: Node labels a row's fold holds; the rest are counted.
FOLDED_NODES = 40
#: Rows a fragment shows at most (the worst first); the rest are counted.
MAX_ROWS = 2000
#: Bytes the ledgers of one case's section may take in the report.
CASE_BYTES = 500_000
#: Ledgers shown in one case's section (one per variant that has one).
LEDGERS = 4
#: Bytes left below which a case's section shows no further ledger (counts it instead).
_SMALLEST = 20_000
#: Markup around one row (its cells and attributes), counted generously.
_ROW_MARKUP = 300
#: Markup of a fragment around its rows (the bar, the headings, the table's head).
_FIXED_MARKUP = 2500


@dataclass(frozen=True, slots=True)
class RowView:
    """One row of the fragment's table, as the template prints it."""

    kernel: str
    kind: str
    launches: str
    nodes: tuple[str, ...]
    """The first :data:`OPEN_NODES` node labels."""
    more_nodes: tuple[str, ...]
    """The next ones, folded (at most :data:`FOLDED_NODES`)."""
    nodes_more: str
    """How many more nodes there are than labels (``and 460 more nodes``), or empty."""
    dram: str
    minimum: str
    ratio: str
    """Requested ÷ minimum bytes (DRAM ÷ minimum in a ledger without requested bytes)."""
    ratio_value: str
    """The ratio as a number for scripts (empty: none)."""
    time: str
    note: str
    requested: str = ""
    dram_ratio: str = ""
    excess: str = ""
    """Its bytes above its minimum by cause (``re-reads 18.6 MB``), or empty."""


@dataclass(frozen=True, slots=True)
class BarSegment:
    """One cause's share of the forward's bytes above its floor, in the bar."""

    cause: str
    """The cause's name (``re-reads``)."""
    css: str
    """Its class suffix (``re-reads`` → ``rereads``)."""
    bytes: str
    pct: float
    """Its width, in percent of the bar's."""


@dataclass(frozen=True, slots=True)
class BarView:
    """The graph's measured total (requested bytes, else DRAM) against its floor, in percent of the bar's width; with
    requested bytes, the floor's and each cause's share of what lies above it."""

    floor: str
    measured_pct: float
    floor_pct: float
    caption: str
    segments: tuple[BarSegment, ...] = ()
    """The floor, then each cause with bytes above zero (empty: a DRAM bar)."""


@dataclass(frozen=True, slots=True)
class LedgerView:
    """What the fragment shows."""

    rows: tuple[RowView, ...]
    more: str
    """The rows left out (``and 120 more rows``), or empty."""
    bar: BarView | None
    totals: str
    findings: tuple[tuple[str, str, str], ...]
    """Each finding of the gate as (tone, status, message) (a report shows them among the case's checks)."""
    changes: tuple[str, ...]
    """What changed against the baseline's ledger, node by node; empty without one."""
    changes_more: str
    """How many more changes there are (``and 12 more changes``), or empty."""
    notes: tuple[str, ...]
    """The ledger's own notes (CUDA graphs, a frame compiled again, launches counted from an
    earlier one's measurement)."""
    weight: int
    """About the bytes it takes in a page (more, never less)."""


@dataclass(frozen=True, slots=True)
class LedgerSection:
    """One variant's ledger in a case's section."""

    variant: str
    view: LedgerView


def _row_view(r: Row, basis: bool) -> RowView:
    names = labels(r.nodes)
    value = row_ratio(r, basis)
    return RowView(
        kernel=cut(r.kernel),
        kind=r.kind.value,
        launches=str(r.measured.launches) if r.measured else "",
        nodes=tuple(cut(n) for n in names[:OPEN_NODES]),
        more_nodes=tuple(cut(n) for n in names[OPEN_NODES : OPEN_NODES + FOLDED_NODES]),
        nodes_more=budget.more(len(names) - OPEN_NODES - FOLDED_NODES, "nodes"),
        dram=megabytes(r.measured.dram_bytes) if r.measured else "not measured",
        minimum=megabytes(r.min_bytes) if r.min_bytes is not None else "",
        ratio=ratio(r, basis),
        ratio_value="" if value is None else f"{value:.6g}",
        time=duration(r),
        note=cut(r.note, budget.TEXT),
        requested=requested(r),
        dram_ratio=ratio(r, False),
        excess=cut(row_excess(r), budget.TEXT),
    )


def _row_weight(r: RowView) -> int:
    cells = [r.kernel, r.kind, r.launches, r.nodes_more, r.dram, r.minimum, r.ratio, r.ratio_value, r.time, r.note]
    cells += [r.requested, r.dram_ratio, r.excess]
    return budget.weight(*cells, *r.nodes, *r.more_nodes, markup=_ROW_MARKUP)


def _requested_bar(ledger: Ledger) -> BarView | None:
    """The requested bytes: the floor, then each cause of what lies above it (they sum to it)."""
    asked, floor, parts = ledger.requested_bytes, ledger.floor_bytes, ledger.over_floor()
    if asked is None or not floor or parts is None or asked <= 0:
        return None
    shown = [(c, x) for c, x in parts.items() if x > 0]
    top = max(asked, floor + sum(x for _, x in shown))
    segments = [BarSegment("floor", "floor", megabytes(floor), round(100 * floor / top, 2))]
    segments += [BarSegment(c.value, _CSS[c], megabytes(x), round(100 * x / top, 2)) for c, x in shown]
    caption = (
        f"requested {megabytes(asked)} against a floor of {megabytes(floor)} ({asked / floor:.2f}x; "
        f"DRAM {megabytes(ledger.measured_bytes)}); above the floor, {signed_megabytes(asked - floor)}: "
        f"{parts_text(parts)}"
    )
    return BarView(megabytes(floor), round(100 * asked / top, 2), round(100 * floor / top, 2), caption, tuple(segments))


#: Each cause's class suffix in the page's style sheet.
_CSS = {
    Cause.REREAD: "reread",
    Cause.BOUNDARY: "boundary",
    Cause.LAYOUT: "layout",
    Cause.WIDENED: "widened",
    Cause.UNEXPLAINED: "unexplained",
}


def _bar(ledger: Ledger) -> BarView | None:
    if ledger.requested_bytes is not None:
        return _requested_bar(ledger)
    measured, floor = ledger.measured_bytes, ledger.floor_bytes
    if not floor or measured <= 0:
        return None
    top = max(measured, floor)
    caption = f"measured {megabytes(measured)} of DRAM against a floor of {megabytes(floor)} ({measured / floor:.2f}x)"
    return BarView(megabytes(floor), round(100 * measured / top, 2), round(100 * floor / top, 2), caption)


def view(
    ledger: Ledger,
    verdict: LedgerVerdict | None = None,
    changes: Sequence[NodeChange] | None = None,
    size: int = CASE_BYTES,
) -> LedgerView:
    """What the fragment shows of ``ledger``: ``verdict``'s findings, ``changes`` (None: no baseline), and its rows
    worst first while they fit in ``size`` bytes (at most :data:`MAX_ROWS`)."""
    findings: tuple[tuple[str, str, str], ...] = ()
    if verdict is not None:
        findings = tuple(
            (tone(f.verdict).name.lower(), f"{f.verdict.name} {f.kind.value}", cut(f.message, budget.TEXT))
            for f in verdict.findings
        )
    lines: list[str] = []
    left = 0
    if changes is not None:
        lines, left = change_lines(changes)
    bar = _bar(ledger)
    totals = totals_line(ledger)
    basis = ledger.requested_bytes is not None
    notes = tuple(cut(n, budget.TEXT) for n in ([] if basis else [DRAM_BASIS]) + list(ledger.notes[:NOTES]))
    fixed = budget.weight(
        totals, bar.caption if bar else "", *notes, *(m for f in findings for m in f), markup=_FIXED_MARKUP
    ) + (200 * len(bar.segments) if bar else 0)
    room = budget.Budget(max(size - fixed, 0))
    start = room.left
    # What changed comes first (it is what a reviewer of an upgrade reads), then the rows.
    kept = room.fit(((line, budget.weight(line)) for line in lines), len(lines))
    rows = sorted_rows(ledger)
    shown = room.fit(((v, _row_weight(v)) for v in (_row_view(r, basis) for r in rows)), MAX_ROWS)
    return LedgerView(
        rows=tuple(shown),
        more=budget.more(len(rows) - len(shown), "rows"),
        bar=bar,
        totals=totals,
        findings=findings,
        changes=tuple(kept),
        changes_more=budget.more(left + len(lines) - len(kept), "changes"),
        notes=notes,
        weight=fixed + start - room.left,
    )


def sections(case: CaseResult) -> tuple[LedgerSection, ...]:
    """The ledgers of a case's variants with their changes, within :data:`CASE_BYTES` together (the first
    :data:`LEDGERS`, while the bytes left are worth a ledger)."""
    room = budget.Budget(CASE_BYTES)
    out: list[LedgerSection] = []
    for v in case.variants:
        if v.ledger is None:
            continue
        if len(out) == LEDGERS or room.left < _SMALLEST:
            break
        changes = v.ledger_changes if v.baseline_ledger is not None else None
        shown = view(v.ledger, changes=changes, size=room.left)
        room.take(min(shown.weight, room.left))
        out.append(LedgerSection(cut(v.variant), shown))
    return tuple(out)


def ledgers_more(case: CaseResult, shown: int) -> str:
    """The variants' ledgers a case's section leaves out (``and 2 more ledgers``), or empty."""
    return budget.more(sum(1 for v in case.variants if v.ledger is not None) - shown, "ledgers")
