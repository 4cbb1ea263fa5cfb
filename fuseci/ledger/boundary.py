"""The tensors that cross each call's boundary, and the least bytes the call must move for them.

Tensors are named by their base (:meth:`PostGradGraph.base`: views move no bytes). A call reads what its computing
nodes take and it does not compute, and writes what it computes that another call, a node outside every call or the
graph's output takes; its minimum is each once (a node in two calls is computed by each). The graph's floor is each
input it uses read once and each output written once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fuseci.ledger.graph import PostGradGraph


@dataclass(frozen=True, slots=True)
class Boundary:
    """What crosses one call's boundary."""

    nodes: tuple[str, ...]
    """The nodes it implements, in graph order, with the ``getitem`` nodes of its tuples."""
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    min_bytes: int | None
    """The bytes of :attr:`reads` and :attr:`writes`, each once; None when a shape is unknown."""


def implemented(graph: PostGradGraph, mapped: Sequence[str]) -> tuple[str, ...]:
    """The nodes of ``mapped`` that the graph has, with the ``getitem`` nodes of those of them
    that return tuples, in graph order."""
    inside = {n for n in mapped if n in graph.nodes}
    for name, node in graph.nodes.items():
        if node.target == "getitem" and node.args and node.args[0] in inside:
            inside.add(name)
    return tuple(n for n in graph.nodes if n in inside)


def _reads(graph: PostGradGraph, computes: frozenset[str]) -> set[str]:
    out: set[str] = set()
    for name in computes:
        for arg in graph.nodes[name].args:
            base = graph.base(arg)
            if base not in computes and not _is_symbol(graph, base):
                out.add(base)
    return out


def _is_symbol(graph: PostGradGraph, name: str) -> bool:
    node = graph.nodes.get(name)
    return node is not None and node.symbol


def total_bytes(graph: PostGradGraph, names: set[str]) -> int | None:
    """The bytes of the tensors ``names``, each once; None when a shape is unknown."""
    total = 0
    for name in names:
        size = graph.nbytes(name)
        if size is None:
            return None
        total += size
    return total


def boundaries(graph: PostGradGraph, calls: Sequence[Sequence[str] | None]) -> list[Boundary | None]:
    """Each call's boundary, given its mapped post-grad nodes in wrapper order (None: no provenance, no boundary)."""
    nodes = [None if mapped is None else implemented(graph, mapped) for mapped in calls]
    computes = [frozenset(x for x in n or () if not graph.nodes[x].is_view) for n in nodes]
    reads = [_reads(graph, c) for c in computes]
    covered = frozenset().union(*computes)
    outside = {
        n for n, node in graph.nodes.items() if n not in covered and node.target != "placeholder" and not node.is_view
    }
    needed_outside = _reads(graph, frozenset(outside)) | {graph.base(o) for o in graph.outputs}
    out: list[Boundary | None] = []
    for i, names in enumerate(nodes):
        if names is None:
            out.append(None)
            continue
        others = set().union(*(r for j, r in enumerate(reads) if j != i))
        writes = {n for n in computes[i] if n in others or n in needed_outside}
        crossing = reads[i] | writes
        out.append(Boundary(names, _ordered(graph, reads[i]), _ordered(graph, writes), total_bytes(graph, crossing)))
    return out


def _ordered(graph: PostGradGraph, names: set[str]) -> tuple[str, ...]:
    return tuple(n for n in graph.nodes if n in names) + tuple(sorted(names - graph.nodes.keys()))


def floor_tensors(graph: PostGradGraph) -> tuple[str, ...]:
    """The tensors of the floor, in graph order: every input the graph uses and every output it
    computes (by base)."""
    used = {graph.base(a) for node in graph.nodes.values() for a in node.args}
    inputs = {p for p in graph.placeholders if p in used and not _is_symbol(graph, p)}
    outputs = {graph.base(o) for o in graph.outputs} - set(graph.placeholders)
    outputs = {o for o in outputs if not _is_symbol(graph, o)}
    return _ordered(graph, inputs | outputs)


def floor(graph: PostGradGraph) -> int | None:
    """Every input the graph uses read once and every output it computes written once; None when
    a shape is unknown."""
    return total_bytes(graph, set(floor_tensors(graph)))
