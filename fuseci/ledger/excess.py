"""What a ledger's rows asked for above their minimum, and the forward above its floor, by cause.

Figures are global bytes requested (loads and stores: no correct kernel goes below its minimum), N runs of a graph
counting N times. A row's R above its minimum M is ``layout copies`` for a copy row (:func:`is_layout`, or a copy
for a library call), else ``re-reads`` (loads above its inputs read once, at most R - M) and ``unexplained``.

The forward's T above its floor F is the rows' splits plus what no row holds alone (:func:`graph_parts`): a tensor
crossing the boundaries of k rows with a minimum counts (k - 1) times its bytes (graph input or output) or k times
(intermediate), as ``layout copies`` where a layout row moved it, else ``fusion boundaries`` less the share
``widened dtypes`` of a widening conversion; a floor tensor no row moves is ``unexplained``, negative; a copy row's
minimum is ``layout copies``; a row without a minimum and the unclaimed kernels are ``unexplained``, whole. The
parts add up to T - F exactly."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fuseci.config import names, quantities
from fuseci.ledger.boundary import Boundary, floor_tensors, total_bytes
from fuseci.ledger.graph import ITEMSIZE, PostGradGraph
from fuseci.records.fusion import Cause, Part, Row

#: ATen ops that copy their input into another layout (or the same) without computing anything.
LAYOUT_OPS = frozenset({"clone", "copy", "copy_", "contiguous", "_to_copy", "convert_element_type", "as_strided_copy"})
#: Ops that convert an element type (widening when the result's is wider than the input's).
CONVERSIONS = frozenset({"_to_copy", "convert_element_type"})
#: Rows a crossing tensor's description names, before "and N more".
_NAMED = 3


def _op(target: str) -> str:
    """``aten.clone.default`` → ``clone``."""
    parts = target.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in ("aten", "prims") else ""


def _itemsize(graph: PostGradGraph, name: str) -> int | None:
    node = graph.nodes.get(name)
    return None if node is None or node.type is None else ITEMSIZE.get(node.type.dtype)


def is_layout(graph: PostGradGraph, bound: Boundary) -> bool:
    """Whether every node the call computes only copies its input (:data:`LAYOUT_OPS`), an
    element-type conversion only to the type it already has."""
    computed = [n for n in bound.nodes if not graph.nodes[n].is_view and graph.nodes[n].target != "getitem"]
    for name in computed:
        op = _op(graph.nodes[name].target)
        if op not in LAYOUT_OPS or (op in CONVERSIONS and graph.nodes[name].args and _widening(graph, name) != 1.0):
            return False
    return bool(computed)


def _widening(graph: PostGradGraph, name: str) -> float | None:
    """A conversion's element size over its input's (2.0 for bf16 → f32); None where unknown."""
    node = graph.nodes[name]
    if not node.args:
        return None
    wide, narrow = _itemsize(graph, name), _itemsize(graph, graph.base(node.args[0]))
    return None if not wide or not narrow else wide / narrow


def _mb(value: float) -> str:
    return quantities.show(names.DRAM_BYTES, value)


def row_parts(row: Row, read_min: int | None, layout: bool) -> tuple[Part, ...]:
    """``row``'s requested bytes above its minimum (each run counted), by cause; empty where either is unknown or
    they are equal. ``read_min``: its inputs' bytes, each once per run (None: unknown)."""
    asked, least = row.requested, row.min_bytes
    if asked is None or least is None or asked == least:
        return ()
    over = asked - least
    if layout:
        return (Part(Cause.LAYOUT, over, "a copy: everything it moves above its minimum"),)
    loads = row.measured.loads if row.measured is not None else 0.0
    reread = 0.0
    if loads is not None and read_min is not None:
        reread = min(max(loads - read_min, 0.0), max(over, 0.0))
    parts = []
    if reread:
        parts.append(
            Part(Cause.REREAD, reread, f"{_mb(reread)} loaded above its inputs read once ({_mb(read_min or 0)})")
        )
    if over - reread:
        why = (
            "stores above its outputs written once, or loads the re-reads do not account for"
            if over > 0
            else "below its minimum: it read part of a view's base, or its counters missed bytes"
        )
        parts.append(Part(Cause.UNEXPLAINED, over - reread, why))
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class GraphRows:
    """One compiled graph's rows, as :func:`graph_parts` takes them."""

    graph: PostGradGraph
    rows: Sequence[Row]
    bounds: Sequence[Boundary | None]
    """Each row's boundary (None: no provenance)."""
    copies: Sequence[bool]
    """Whether each row computes no node of the graph (a copy for a library call)."""
    layout: Sequence[bool]
    """Whether each row is a layout copy (a copy for a library call included)."""
    runs: int
    """How many times the graph ran."""


def _who(g: GraphRows, tensor: str, writers: list[int], readers: list[int]) -> str:
    """``add_2 (bf16, 16.8 MB): written by triton_per_fused_add_1 (add_2), read by extern_kernels.addmm
    (addmm_1)``: a tensor and the rows it crosses, by kernel and the nodes that take it."""
    node = g.graph.nodes[tensor]
    dtype = node.type.dtype if node.type is not None else "?"
    size = g.graph.nbytes(tensor) or 0

    def taking(i: int) -> str:
        bound = g.bounds[i]
        assert bound is not None
        nodes = [n for n in bound.nodes if any(g.graph.base(a) == tensor for a in g.graph.nodes[n].args)]
        return f"{g.rows[i].kernel} ({', '.join(nodes[:_NAMED]) or tensor})"

    parts = []
    if writers:
        parts.append(f"written by {g.rows[writers[0]].kernel} ({tensor})")
    elif node.target == "placeholder":
        parts.append("a graph input")
    listed = [taking(i) for i in readers[:_NAMED]]
    more = f" and {len(readers) - _NAMED} more" if len(readers) > _NAMED else ""
    if listed:
        parts.append(f"read by {', '.join(listed)}{more}")
    runs = f", {g.runs} runs" if g.runs > 1 else ""
    return f"{tensor} ({dtype}, {_mb(size)}{runs}): {'; '.join(parts)}"


def graph_parts(g: GraphRows) -> list[Part] | None:
    """What no row of one graph holds alone (see the module docstring); None where a row's
    requested bytes, or a tensor's size, is unknown."""
    if any(r.requested is None for r in g.rows):
        return None
    out: list[Part] = []
    for i, row in enumerate(g.rows):
        if g.copies[i] and row.min_bytes is not None:
            out.append(
                Part(Cause.LAYOUT, float(row.min_bytes), f"{row.kernel}: the buffers of a copy for a library call")
            )
        elif row.min_bytes is None:
            out.append(Part(Cause.UNEXPLAINED, row.requested or 0.0, f"{row.kernel}: no minimum to split its bytes by"))
    counted: dict[str, tuple[list[int], list[int]]] = {}
    for i, (row, bound) in enumerate(zip(g.rows, g.bounds, strict=True)):
        if bound is None or row.min_bytes is None or g.copies[i]:  # its minimum is not of graph tensors
            continue
        for t in bound.reads:
            counted.setdefault(t, ([], []))[1].append(i)
        for t in bound.writes:
            counted.setdefault(t, ([], []))[0].append(i)
    in_floor = floor_tensors(g.graph)
    for t in dict.fromkeys((*counted, *in_floor)):
        size = g.graph.nbytes(t)
        if size is None:
            return None
        writers, readers = counted.get(t, ([], []))
        k = len(set(writers) | set(readers))
        extra = float((k - (t in in_floor)) * size * g.runs)
        if not extra:
            continue
        what = _who(g, t, writers, readers)
        if k == 0:
            out.append(Part(Cause.UNEXPLAINED, extra, f"{what}: in the floor, but no row with a minimum moves it"))
        elif any(g.layout[i] for i in (*writers, *readers)):
            out.append(Part(Cause.LAYOUT, extra, what))
        else:
            out += _boundary(g, t, extra, what)
    return out


def _boundary(g: GraphRows, tensor: str, extra: float, what: str) -> list[Part]:
    """A boundary tensor's bytes: the share its widened element type adds, and the rest."""
    node = g.graph.nodes[tensor]
    ratio = _widening(g.graph, tensor) if _op(node.target) in CONVERSIONS else None
    if ratio is None or ratio <= 1.0:
        return [Part(Cause.BOUNDARY, extra, what)]
    widened = float(math.floor(extra * (1.0 - 1.0 / ratio)))
    narrow = g.graph.nodes[g.graph.base(node.args[0])].type
    source = narrow.dtype if narrow is not None else "?"
    return [
        Part(Cause.BOUNDARY, extra - widened, what),
        Part(Cause.WIDENED, widened, f"{what}: widened from {source}"),
    ]


def read_bytes(graph: PostGradGraph, bound: Boundary, runs: int) -> int | None:
    """The bytes of the tensors a call reads, each once per run; None where a size is unknown."""
    total = total_bytes(graph, set(bound.reads))
    return None if total is None else total * runs
