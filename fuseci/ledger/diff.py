"""What an upgrade (another PyTorch, another Triton) did to a model's fusion: per node of the
model, which nodes it ran with before and which now, with the bytes and time of the rows it ran
in on each side (:class:`~fuseci.records.fusion.NodeChange`).

Nodes are known as :mod:`fuseci.ledger.match` knows them and shown by its
:func:`~fuseci.ledger.match.label`. A node a graph break renumbered (:func:`_renumbered`) or whose
source line was edited (:func:`_relined`) is named as the baseline names it, not one node gone
and another new."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import chain

from fuseci.ledger.match import Ident, identity, is_view, label, location, match, op_base
from fuseci.records.fusion import Ledger, Node, NodeChange, Row, RowFigures

#: Dynamo's number on a pre-grad node's name (``layer_norm_1``).
_NUMBER = re.compile(r"_\d+$")


def _figures_of(row: Row) -> RowFigures:
    m = row.measured
    return RowFigures(row.kernel, m.dram_bytes if m else None, m.duration_ns if m else None)


@dataclass(frozen=True, slots=True)
class _Side:
    """Where each node of one ledger ran: its rows (by index), the labels it ran with and its
    identities."""

    rows: dict[str, tuple[int, ...]]
    company: dict[str, tuple[str, ...]]
    idents: dict[str, frozenset[Ident]]


def _side(ledger: Ledger) -> _Side:
    """One pass over the ledger's nodes, each row's labels computed once."""
    row_labels: list[tuple[str, ...]] = []
    rows: dict[str, dict[int, None]] = {}
    idents: dict[str, set[Ident]] = {}
    for i, row in enumerate(ledger.rows):
        names = []
        for node in row.nodes:
            if is_view(node):
                continue
            name = label(node)
            names.append(name)
            rows.setdefault(name, {})[i] = None
            idents.setdefault(name, set()).add(identity(node))
        row_labels.append(tuple(dict.fromkeys(names)))
    company = {}
    for name, where in rows.items():
        others = dict.fromkeys(chain.from_iterable(row_labels[i] for i in where))
        del others[name]
        company[name] = tuple(others)
    return _Side({k: tuple(x) for k, x in rows.items()}, company, {k: frozenset(x) for k, x in idents.items()})


def _renumbered(old: Ledger, new: Ledger) -> Ledger:
    """``new`` with each node that a graph break renumbered named as in ``old``: a node on one side
    only whose line and name without Dynamo's number match those of as many on the other side only."""
    old_labels = {label(n): n for r in old.rows for n in r.nodes if not is_view(n)}
    new_labels = {label(n): n for r in new.rows for n in r.nodes if not is_view(n)}
    stems: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for labels_, other, side in ((old_labels, new_labels, 0), (new_labels, old_labels, 1)):
        for name, node in labels_.items():
            if node.line and name not in other:  # known by its line and its name without the number
                stem = (location(node.line), _NUMBER.sub("", node.source or op_base(node.op)))
                stems.setdefault(stem, ([], []))[side].append(name)
    renamed = {
        now: old_labels[was]
        for olds, news in stems.values()
        if len(olds) == len(news)  # in the order they run: renumbering keeps it
        for was, now in zip(olds, news, strict=True)
    }

    def moved(node: Node) -> Node:
        target = renamed.get(label(node)) if not is_view(node) else None
        return replace(node, source=target.source) if target is not None else node

    return _with_nodes(new, moved) if renamed else new


def _relined(old: Ledger, new: Ledger) -> Ledger:
    """``new`` with each node whose row was paired across an edit of its line (the matching's
    :attr:`fuseci.ledger.match.Pair.edited`) given the line and name it has in ``old``."""
    was = {now: before for p in match(old, new).pairs for before, now in p.edited}

    def moved(node: Node) -> Node:
        before = was.get(node)
        return replace(node, line=before.line, source=before.source) if before is not None else node

    return _with_nodes(new, moved) if was else new


def _with_nodes(ledger: Ledger, moved: Callable[[Node], Node]) -> Ledger:
    return replace(ledger, rows=tuple(replace(r, nodes=tuple(map(moved, r.nodes))) for r in ledger.rows))


def diff(old: Ledger, new: Ledger) -> list[NodeChange]:
    """Every node whose company (the other nodes of its rows) changed from ``old`` to ``new``, or that came or went,
    in ``new``'s row order, then ``old``'s; renamed kernels, nodes a graph break renumbered and edited lines are no
    change."""
    new = _renumbered(old, _relined(old, new))
    a, b = _side(old), _side(new)
    order = list(dict.fromkeys([*b.rows, *a.rows]))
    out = []
    for name in order:
        was, now = set(a.company.get(name, ())), set(b.company.get(name, ()))
        if name in a.rows and name in b.rows and was == now and a.idents.get(name) == b.idents.get(name):
            continue
        out.append(
            NodeChange(
                node=name,
                was_with=a.company.get(name, ()),
                now_with=b.company.get(name, ()),
                before=tuple(_figures_of(old.rows[i]) for i in a.rows.get(name, ())),
                after=tuple(_figures_of(new.rows[i]) for i in b.rows.get(name, ())),
            )
        )
    return out
