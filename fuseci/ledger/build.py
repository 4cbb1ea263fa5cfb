"""The ledger of a compiled forward, from its capture (:mod:`.artifacts`) and ncu's kernel rows (:mod:`.launches`):
a row per call of each graph's wrapper (graphs in compile order) with its post-grad nodes, minimum bytes
(:mod:`.boundary`) and what its kernels moved; unclaimed kernels make one :attr:`Kind.UNTRACED` row. What is missing
(no provenance, no post-grad graph, no kernel matched) leaves a row with what is known and a note, never a failure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from fuseci.ledger import excess
from fuseci.ledger.artifacts import Capture, CompiledGraph
from fuseci.ledger.boundary import Boundary, boundaries, floor, implemented
from fuseci.ledger.graph import PostGradGraph, parse_graph, source_line
from fuseci.ledger.launches import Attribution, KernelRow, attribute, measured
from fuseci.ledger.wrapper import Call, Wrapper, parse_wrapper
from fuseci.records.fusion import Cause, Kind, Ledger, Node, Part, Row

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in [^\n]*\n(?P<code>[^\n]*)')

SYMBOLIC = (
    "no minimum: its sizes are symbols (a graph compiled for dynamic shapes) and the capture holds no value of them "
    "in the run (record it again with this fuseci's harness)"
)
RUNS = "graph {} ran {} times in the forward: its minimum counts each run"
COPY = "computes no node of the graph (a copy for a library call): its bytes are the buffers the wrapper passes it"
REPEATS = (
    "{} of its {} kernel launches counted with the measurement of an earlier launch of the same "
    "configuration, not profiled again (ledger repeats: once)"
)
NO_MAPPINGS = (
    "no provenance for this graph: compile with provenance tracking on and without Inductor's caches "
    "(an FX-graph-cache hit writes none)"
)


def innermost(trace: str) -> str:
    """The innermost frame of a stack trace as a source line (``file:line: code``), or ""."""
    frames = list(_FRAME.finditer(trace))
    return source_line(frames[-1]["file"], frames[-1]["line"], frames[-1]["code"]) if frames else ""


def _nodes(graph: CompiledGraph, post_grad: PostGradGraph | None, call: Call) -> tuple[Node, ...]:
    mapped = graph.calls_to_nodes.get(call.handle or "", ())
    traces = graph.stack_traces.get(call.handle or "", ())
    fallback = innermost(traces[0]) if len(traces) == 1 else ""
    names = implemented(post_grad, mapped) if post_grad is not None else mapped
    out = []
    for name in names:
        node = post_grad.nodes.get(name) if post_grad is not None else None
        out.append(
            Node(
                name=name,
                op=node.target if node is not None else "",
                source=", ".join(graph.pre_grad.get(name, ())),
                line=(node.line if node is not None else "") or fallback,
            )
        )
    return tuple(out)


def _computed(graph: CompiledGraph, wrapper: Wrapper, post_grad: PostGradGraph | None) -> list[Sequence[str] | None]:
    """Each call's mapped nodes, less, for a Triton kernel, those a library call of the graph computes (Inductor
    also maps a library call's node to the kernels preparing its inputs: layout copies, a custom op's input)."""
    mapped = [
        graph.calls_to_nodes.get(c.handle) if c.handle is not None and graph.has_mappings else None
        for c in wrapper.calls
    ]
    if post_grad is None:
        return list(mapped)
    owned = {
        n
        for c, names in zip(wrapper.calls, mapped, strict=True)
        if c.kind is Kind.EXTERN and names is not None
        for n in names
        if n in post_grad.nodes and not post_grad.nodes[n].is_view
    }
    return [
        names if names is None or c.kind is Kind.EXTERN else tuple(n for n in names if n not in owned)
        for c, names in zip(wrapper.calls, mapped, strict=True)
    ]


def _from_wrapper(call: Call, wrapper: Wrapper, post_grad: PostGradGraph) -> Boundary:
    """A Triton kernel that computes no node of the graph (a layout copy): its boundary is the
    buffers the wrapper passes it, each at its allocation's size."""
    total: int | None = 0
    for name in dict.fromkeys((*call.reads, *call.writes)):
        size = wrapper.sizes.get(name, post_grad.nbytes(name) if name in post_grad.nodes else None)
        total = None if total is None or size is None else total + size
    return Boundary((), call.reads, call.writes, total)


def _note(graph: CompiledGraph, call: Call, post_grad: PostGradGraph | None, matched: bool) -> str:
    notes = []
    if not graph.has_mappings:
        notes.append(NO_MAPPINGS)
    elif call.handle is None:
        notes.append("the wrapper gives this call no provenance handle")
    elif call.handle not in graph.calls_to_nodes:
        notes.append(f"no node mapping for {call.handle}")
    elif post_grad is None:
        notes.append("no post-grad graph in the capture: shapes unknown")
    if not matched:
        notes.append("no kernel in the profiled range matched this call")
    return "; ".join(notes)


def _graph_rows(
    graph: CompiledGraph, wrapper: Wrapper, post_grad: PostGradGraph | None, found: Attribution
) -> tuple[list[Row], list[Part] | None]:
    """The rows of one graph's calls, and what of its bytes above its floor no row holds alone
    (:func:`.excess.graph_parts`; None where unknown)."""
    computed = _computed(graph, wrapper, post_grad)
    bounds: list[Boundary | None] = boundaries(post_grad, computed) if post_grad is not None else [None] * len(computed)
    runs = max(found.runs.get(graph.id, 1), 1)
    symbolic = post_grad is not None and any(node.symbol for node in post_grad.nodes.values())  # ``Sym(s0)``
    rows, copies = [], []
    for i, call in enumerate(wrapper.calls):
        kernels = found.claimed.get((graph.id, i))
        bound, notes = bounds[i], [found.notes.get((graph.id, i), ""), _note(graph, call, post_grad, bool(kernels))]
        copied = sum(k.repeat for k in kernels or ())
        if copied:
            notes.append(REPEATS.format(copied, len(kernels or ())))
        copies.append(bound is not None and post_grad is not None and call.kind is Kind.TRITON and not computed[i])
        if copies[-1] and post_grad is not None:
            bound = bounds[i] = _from_wrapper(call, wrapper, post_grad)
            notes.append(COPY)
        if bound is not None and bound.min_bytes is None and symbolic:
            notes.append(SYMBOLIC)
        least = bound.min_bytes if bound is not None else None
        if least is not None and runs > 1:
            notes.append(RUNS.format(graph.id, runs))
        rows.append(
            Row(
                graph=graph.id,
                kernel=call.kernel,
                kind=call.kind,
                nodes=_nodes(graph, post_grad, call),
                measured=measured(kernels) if kernels else None,
                min_bytes=None if least is None else least * runs,
                note="; ".join(x for x in notes if x),
            )
        )
    if post_grad is None:
        return rows, None
    layout = [c or (b is not None and excess.is_layout(post_grad, b)) for c, b in zip(copies, bounds, strict=True)]
    for i, (row, bound) in enumerate(zip(rows, bounds, strict=True)):
        read_min = excess.read_bytes(post_grad, bound, runs) if bound is not None and not copies[i] else None
        rows[i] = replace(row, excess=excess.row_parts(row, read_min, layout[i]))
    return rows, excess.graph_parts(excess.GraphRows(post_grad, rows, bounds, copies, layout, runs))


def _untraced(found: Attribution) -> Row:
    graphs = {g for r in found.unclaimed if (g := _region(r)) is not None}
    return Row(
        graph=graphs.pop() if len(graphs) == 1 else "",
        kernel="(untraced)",
        kind=Kind.UNTRACED,
        nodes=(),
        measured=measured(found.unclaimed),
        min_bytes=None,
        note=f"{len(found.unclaimed)} kernel launch(es) that no wrapper call claims: " + "; ".join(found.why),
    )


def _region(row: KernelRow) -> str | None:
    regions = [n.split(":", 1)[1].split(",")[0].strip() for n in row.nvtx if n.startswith("Torch-Compiled Region:")]
    return regions[-1] if regions else None


def _notes(
    capture: Capture, parsed: Mapping[str, Wrapper], found: Attribution, kernels: Sequence[KernelRow]
) -> list[str]:
    notes = list(found.replays.values())
    frames: dict[str, list[str]] = {}
    for graph in capture.graphs:
        frames.setdefault(graph.id.split("/")[0], []).append(graph.id)
        if graph.id not in parsed:
            notes.append(f"graph {graph.id}: no output code in the capture, so its calls are unknown")
    for frame, ids in frames.items():
        if len(ids) > 1:
            notes.append(
                f"frame {frame} was compiled {len(ids)} times ({', '.join(ids)}): a recompilation "
                "(dynamic shapes, or a guard that failed); each compile's calls are rows"
            )
    copied = sum(k.repeat for k in kernels)
    if copied:
        notes.append(
            f"{copied} of the forward's {len(kernels)} kernel launches repeat an earlier launch's configuration and "
            "were not profiled again: each counts with that launch's measurement (ledger repeats: once)"
        )
    return notes


def build(capture: Capture, kernels: Sequence[KernelRow]) -> Ledger:
    """The ledger of one compiled forward from its ``capture`` and ncu's rows of its NVTX range only.

    Raises:
        LedgerError: a graph's output code or post-grad graph is not the Python Inductor writes.
    """
    wrappers: dict[str, Wrapper] = {}
    graphs: dict[str, PostGradGraph] = {}
    for graph in capture.graphs:
        if graph.output_code is not None:
            wrappers[graph.id] = parse_wrapper(graph.output_code, f"graph {graph.id}'s output code")
        if graph.post_grad is not None:
            where = f"graph {graph.id}'s post-grad graph"
            graphs[graph.id] = parse_graph(graph.post_grad, where, capture.sizes.get(graph.id))
    found = attribute(kernels, {gid: w.calls for gid, w in wrappers.items()})
    rows: list[Row] = []
    parts: list[Part] | None = []
    for graph in capture.graphs:
        if graph.id in wrappers:
            more, theirs = _graph_rows(graph, wrappers[graph.id], graphs.get(graph.id), found)
            rows.extend(more)
            parts = None if parts is None or theirs is None else parts + theirs
    if found.unclaimed:
        rows.append(_untraced(found))
        requested = rows[-1].requested
        if parts is not None and requested is not None:
            parts.append(Part(Cause.UNEXPLAINED, requested, "(untraced): kernels no wrapper call claims"))
    floors = [
        None if g.id not in graphs or (f := floor(graphs[g.id])) is None else f * max(found.runs.get(g.id, 1), 1)
        for g in capture.graphs
        if g.id in wrappers
    ]
    total = None if not floors or any(f is None for f in floors) else sum(f for f in floors if f is not None)
    return Ledger(
        rows=tuple(rows),
        floor_bytes=total,
        graphs=tuple(g.id for g in capture.graphs),
        break_reasons=capture.break_reasons,
        fusion_refusals=capture.fusion_refusals,
        notes=tuple(_notes(capture, wrappers, found, kernels)),
        excess=tuple(parts) if parts is not None and total is not None else (),
    )
