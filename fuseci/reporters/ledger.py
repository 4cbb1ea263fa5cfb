"""A fusion ledger in words: its rows as a terminal table, its totals, its bytes above the floor, its gate's findings,
and what changed against its baseline's ledger node by node; every string cleaned and cut (:func:`cut`). Draws
nothing, so the console pays nothing for matplotlib."""

from __future__ import annotations

from collections.abc import Sequence

from fuseci.config import names, quantities
from fuseci.ledger.gate import LedgerVerdict
from fuseci.ledger.match import labels
from fuseci.records.fusion import Cause, Ledger, NodeChange, Row, diff_lines
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


#: What a ledger without the bytes the SMs asked for says of its ratios.
DRAM_BASIS = (
    "ratios are of DRAM bytes (this ledger holds no bytes requested by the SMs: recorded before fuseci kept them, "
    "or without the TMA's counters); a tensor the L2 kept reads below 1x, so record it again"
)


def row_ratio(row: Row, requested: bool = True) -> float | None:
    """Requested bytes over the minimum, or, for a ledger without them, DRAM bytes over it."""
    return row.ratio if requested else row.dram_ratio


def ratio(row: Row, requested: bool = True) -> str:
    """``1.05x``; empty for a row without a minimum or a measurement (:func:`row_ratio`)."""
    value = row_ratio(row, requested)
    return "" if value is None else f"{value:.2f}x"


def requested(row: Row) -> str:
    """``25.9 MB``: the bytes the SMs asked for; empty where unknown."""
    return "" if row.requested is None or row.measured is None else megabytes(row.requested)


def parts_text(parts: dict[Cause, float], separator: str = ", ") -> str:
    """``re-reads 224.3 MB, fusion boundaries 19.4 MB``: each cause with bytes, in order."""
    return separator.join(f"{c.value} {signed_megabytes(x)}" for c, x in parts.items() if x) or "nothing"


def signed_megabytes(value: float) -> str:
    """:func:`megabytes`, with a minus sign for a negative value."""
    return megabytes(value) if value >= 0 else f"-{megabytes(-value)}"


def row_excess(row: Row) -> str:
    """A row's bytes above its minimum by cause (``re-reads 18.6 MB``), or empty."""
    by: dict[Cause, float] = {}
    for p in row.excess:
        by[p.cause] = by.get(p.cause, 0.0) + p.bytes
    return parts_text(by) if by else ""


def excess_line(ledger: Ledger) -> str | None:
    """``over the floor: 244.1 MB = re-reads 224.3 MB + fusion boundaries 19.4 MB + ...``: the forward's requested
    bytes above its floor, by cause (they sum to it); None where unknown."""
    parts = ledger.over_floor()
    if parts is None or ledger.requested_bytes is None or ledger.floor_bytes is None:
        return None
    total = ledger.requested_bytes - ledger.floor_bytes
    return f"over the floor: {signed_megabytes(total)} = {parts_text(parts, ' + ')}"


def duration(row: Row) -> str:
    """``14.7 µs``; empty for a row not measured."""
    return "" if row.measured is None else quantities.show(names.DURATION, row.measured.duration_ns)


def sorted_rows(ledger: Ledger) -> list[Row]:
    """The rows by their ratio (requested ÷ minimum bytes; DRAM ÷ minimum in a ledger without
    requested bytes), the largest first; rows without a ratio last, each group in call order."""
    basis = ledger.requested_bytes is not None
    known = [r for r in ledger.rows if row_ratio(r, basis) is not None]
    rest = [r for r in ledger.rows if row_ratio(r, basis) is None]
    return sorted(known, key=lambda r: -(row_ratio(r, basis) or 0.0)) + rest


#: Characters of a kernel's name the terminal table keeps (its start and its end, which tells
#: Inductor's numbered kernels apart), and of the line under it that names its nodes.
KERNEL_CHARS = 44
DETAIL_CHARS = 88


def kernel_name(name: str, limit: int = KERNEL_CHARS) -> str:
    """``name`` whole, or its start and its end around ``…`` (the HTML report has it whole)."""
    name = clean(name)
    if len(name) <= limit:
        return name
    tail = limit // 3
    return f"{name[: limit - tail - 1]}…{name[-tail:]}"


def row_detail(row: Row) -> str:
    """The line under a row: its nodes and model lines, and its bytes above its minimum."""
    parts = [", ".join(labels(row.nodes)) or "no node"]
    excess = row_excess(row)
    if excess:
        parts.append(f"above its minimum: {excess}")
    return cut("; ".join(parts), DETAIL_CHARS)


def ledger_lines(ledger: Ledger) -> list[str]:
    """The ledger as a table for the terminal, the worst ratio first, each row's nodes on the line
    under it, then its totals and what its bytes above the floor are."""
    basis = ledger.requested_bytes is not None
    rows = sorted_rows(ledger)
    numbers = columns(
        [
            ["ratio", "requested", "DRAM", "minimum", "launches", "time"],
            *(
                [
                    ratio(r, basis),
                    requested(r),
                    megabytes(r.measured.dram_bytes) if r.measured else "not measured",
                    megabytes(r.min_bytes) if r.min_bytes is not None else "",
                    str(r.measured.launches) if r.measured else "",
                    duration(r),
                ]
                for r in rows
            ),
        ],
        left=0,
    )
    width = max(len(line) for line in numbers)
    kinds = max([len("kind"), *(len(r.kind.value) for r in rows)])
    table = [f"{numbers[0]:<{width}}  {'kind':<{kinds}}  kernel"]
    for line, r in zip(numbers[1:], rows, strict=True):
        table.append(f"{line:<{width}}  {r.kind.value:<{kinds}}  {kernel_name(r.kernel)}")
        table.append(f"    {row_detail(r)}")
    over = excess_line(ledger)
    notes = [*([] if basis else [DRAM_BASIS]), *ledger.notes[:NOTES]]
    return [*table, totals_line(ledger), *([over] if over else []), *(f"note: {cut(n, budget.TEXT)}" for n in notes)]


def totals_line(ledger: Ledger) -> str:
    """``forward: 295.0 MB requested (61.9 MB of DRAM) over 17 rows; floor 50.9 MB (5.8x, DRAM
    1.2x)``; in a ledger without requested bytes, ``forward: 526.3 MB of DRAM over 9 rows; floor
    58.7 MB (9.0x)``."""
    measured, asked, floor_bytes = ledger.measured_bytes, ledger.requested_bytes, ledger.floor_bytes
    graphs = f" in {len(ledger.graphs)} graphs" if len(ledger.graphs) > 1 else ""
    floor = f"; floor {megabytes(floor_bytes)}" if floor_bytes else "; no floor (shapes unknown)"
    rows = f" over {len(ledger.rows)} rows{graphs}{floor}"
    if asked is None:
        times = f" ({measured / floor_bytes:.1f}x)" if floor_bytes else ""
        return f"forward: {megabytes(measured)} of DRAM{rows}{times}"
    times = f" ({asked / floor_bytes:.1f}x, DRAM {measured / floor_bytes:.1f}x)" if floor_bytes else ""
    return f"forward: {megabytes(asked)} requested ({megabytes(measured)} of DRAM){rows}{times}"


def totals_brief(ledger: Ledger) -> str:
    """``545.2 MB of DRAM, floor 58.7 MB (9.3x), 9 kernel calls, 1 graph``: what two recordings
    of one model are compared by first."""
    asked, floor_bytes = ledger.requested_bytes, ledger.floor_bytes
    dram = f"{megabytes(ledger.measured_bytes)} of DRAM"
    total = dram if asked is None else f"{megabytes(asked)} requested, {dram}"
    times = (ledger.measured_bytes if asked is None else asked) / floor_bytes if floor_bytes else 0.0
    floor = f"floor {megabytes(floor_bytes)} ({times:.1f}x)" if floor_bytes else "no floor (shapes unknown)"
    calls, graphs = count(len(ledger.rows), "kernel call"), count(len(ledger.graphs), "graph")
    return f"{total}, {floor}, {calls}, {graphs}"


def summary_line(ledger: Ledger) -> str:
    """The ledger in one line: ``9 kernels, 526.3 MB measured against a 58.7 MB floor; worst
    triton_poi_fused_add_view_3 at 1.05x its minimum``."""
    kernels = count(len(ledger.rows), "kernel")
    graphs = f" in {len(ledger.graphs)} graphs" if len(ledger.graphs) > 1 else ""
    unmeasured = sum(1 for r in ledger.rows if r.measured is None)
    missing = f" ({unmeasured} not measured)" if unmeasured else ""
    floor = (
        f"against a {megabytes(ledger.floor_bytes)} floor" if ledger.floor_bytes else "with no floor (shapes unknown)"
    )
    asked = ledger.requested_bytes
    worst = next((r for r in sorted_rows(ledger) if row_ratio(r, asked is not None) is not None), None)
    at = f"; worst {cut(worst.kernel)} at {ratio(worst, asked is not None)} its minimum" if worst is not None else ""
    total = f"{megabytes(ledger.measured_bytes)} measured" if asked is None else f"{megabytes(asked)} requested"
    return f"{kernels}{graphs}{missing}, {total} {floor}{at}"


def verdict_lines(verdict: LedgerVerdict) -> list[str]:
    """The gate's verdict: one line for it, then one per finding (regressions first)."""
    counts = f"{len(verdict.regressions)} regressed, {len(verdict.notes)} notes"
    out = [f"ledger: {verdict.verdict.name}  ({counts})"]
    out += [f"  {f.verdict.name} {f.kind.value}: {cut(f.message, budget.TEXT)}" for f in verdict.findings]
    return out


def change_lines(changes: Sequence[NodeChange], limit: int = CHANGES) -> tuple[list[str], int]:
    """What changed since the baseline's ledger, node by node (``add (block.py:17): was fused with layer_norm_1
    (block.py:19) in ...; now alone in ...``), at most ``limit`` lines cut to :data:`CHANGE_CHARS`, and how many
    more; one line when nothing changed."""
    return [cut(line, CHANGE_CHARS) for line in diff_lines(changes[:limit])], max(len(changes) - limit, 0)
