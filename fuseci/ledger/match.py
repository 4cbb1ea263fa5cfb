"""Which rows of two ledgers are the same work, across runs whose graphs differ.

A node is known by ``(line, op)`` (:func:`identity`): its source line without the number and its ATen target, views
left out (:data:`VIEW_OPS`); a row by its compute nodes' identities (:func:`row_identity`). Rows pair by equal sets
(same kernel name first, then call order), then narrowly by the same ops on an edited line (:func:`_edited`: never
hiding a split, a merge or a new kernel); the rest are :class:`Regroup` components, rows linked by a shared identity,
which tell how the work was regrouped (:class:`Change`)."""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from fuseci.records.fusion import Ledger, Node, Row

#: ATen ops that only re-describe memory (no bytes of their own); ``getitem`` picks an output of
#: a multi-output node. ``clone`` is not one: it copies.
VIEW_OPS = frozenset(
    {
        *("view", "reshape", "permute", "select", "transpose", "expand", "slice", "squeeze", "unsqueeze"),
        *("alias", "_unsafe_view", "as_strided", "t", "getitem"),
    }
)

Ident = tuple[str, str]
"""A node's identity across runs: its source line and its op (``aten.add.Tensor``)."""

_LOCATION = re.compile(r"^(.*?:\d+)(?::|$)")
_LINE = re.compile(r"^(.*?):(\d+):\s?(.*)$", re.DOTALL)


def op_name(op: str) -> str:
    """An op's target as fuseci writes it: ``aten.add.Tensor`` (``torch.ops.`` left out)."""
    return op.strip().removeprefix("torch.ops.")


def op_base(op: str) -> str:
    """An op's name without namespace or overload: ``add`` for ``aten.add.Tensor``,
    ``getitem`` for ``operator.getitem``."""
    parts = op_name(op).split(".")
    if len(parts) >= 3:  # namespace.name.overload
        return parts[1]
    return parts[-1] if parts[0] in ("aten", "prims", "operator", "_operator") else parts[0]


def is_view(node: Node) -> bool:
    """True for a node that moves no bytes of its own (:data:`VIEW_OPS`)."""
    return op_base(node.op) in VIEW_OPS


def source_key(node: Node) -> str:
    """``block.py: x = x + y`` of ``block.py:17: x = x + y``; the line as written where it has no code, the pre-grad
    node's name where Inductor recorded no line."""
    m = _LINE.match(node.line)
    if m and m.group(3):
        return f"{m.group(1)}: {m.group(3)}"
    return node.line or f"<{node.source}>"


def identity(node: Node) -> Ident:
    """``(line, op)``: what stays of a node when the graph around it changes (:func:`source_key`)."""
    return (source_key(node), op_name(node.op))


def row_identity(row: Row) -> frozenset[Ident]:
    """The identities of a row's compute nodes (views left out)."""
    return frozenset(identity(n) for n in row.nodes if not is_view(n))


def location(line: str) -> str:
    """``block.py:17`` of ``block.py:17: x = x + y`` (the whole text when it has no ``:N``)."""
    m = _LOCATION.match(line)
    return m.group(1) if m else line


#: Characters of a name or place kept in a label (they are user data: any length).
_LABEL = 200


def label(node: Node) -> str:
    """A node as messages name it: its pre-grad name (else its op) and where it came from,
    ``layer_norm_1 (block.py:19)``."""
    name = (node.source or op_base(node.op))[:_LABEL]
    return f"{name} ({location(node.line)[:_LABEL]})" if node.line else name


def labels(nodes: Iterable[Node]) -> tuple[str, ...]:
    """The distinct :func:`label` of ``nodes``' compute nodes, in order."""
    return tuple(dict.fromkeys(label(n) for n in nodes if not is_view(n)))


class Change(enum.Enum):
    """How a component of rows without an equal counterpart was regrouped."""

    SPLIT = "split"
    """Fewer rows in the baseline than now: work that ran together now runs apart."""
    MERGED = "merged"
    """More rows in the baseline than now: work that ran apart now runs together."""
    CHANGED = "changed"
    """As many rows on each side, with other nodes (a node added, removed or moved)."""
    NEW = "new"
    """Rows with no counterpart in the baseline."""
    GONE = "gone"
    """Baseline rows with no counterpart now."""


def quoted(line: str, width: int = 48) -> str:
    """A source line as a one-line message quotes it: ``block.py:17 "x = x + self.proj(a..."``
    (its code cut at ``width`` characters)."""
    m = _LINE.match(line)
    if not m:
        return line[:_LABEL]
    code = " ".join(m.group(3).split())
    code = code if len(code) <= width else f"{code[: width - 3]}..."
    return f'{m.group(1)[:_LABEL]}:{m.group(2)} "{code}"'


@dataclass(frozen=True, slots=True)
class Pair:
    """A baseline row and the current row that does the same work."""

    baseline: Row
    current: Row
    edited: tuple[tuple[Node, Node], ...] = ()
    """Each compute node whose source line changed, as ``(baseline's, current's)``: empty for rows
    with equal identity sets."""


@dataclass(frozen=True, slots=True)
class LineEdit:
    """A model source line rewritten between the ledgers, with the nodes of paired rows on it."""

    was: str
    """The baseline's line, as its nodes hold it (``file:line: code``)."""
    now: str
    """The current ledger's."""
    nodes: tuple[Node, ...]
    """The current ledger's nodes that came from :attr:`was`, in the order of the forward."""
    kernels: tuple[str, ...]
    """The current kernels they run in, distinct."""


@dataclass(frozen=True, slots=True)
class Regroup:
    """Rows of both ledgers linked by shared node identities, none with an equal counterpart."""

    baseline: tuple[Row, ...]
    current: tuple[Row, ...]

    @property
    def change(self) -> Change:
        """How the work was regrouped."""
        if not self.baseline:
            return Change.NEW
        if not self.current:
            return Change.GONE
        if len(self.current) > len(self.baseline):
            return Change.SPLIT
        if len(self.current) < len(self.baseline):
            return Change.MERGED
        return Change.CHANGED


@dataclass(frozen=True, slots=True)
class Matching:
    """How the rows of a baseline ledger and a current one correspond."""

    pairs: tuple[Pair, ...]
    """Rows doing the same work, in the current ledger's order."""
    regroups: tuple[Regroup, ...]
    """The rest, in the order of their first current row (then of their first baseline row)."""

    @property
    def line_edits(self) -> tuple[LineEdit, ...]:
        """The source lines the paired rows' nodes moved from and to, one per ``(was, now)``."""
        nodes: dict[tuple[str, str], dict[Node, None]] = {}
        kernels: dict[tuple[str, str], dict[str, None]] = {}
        for p in self.pairs:
            for was, now in p.edited:
                nodes.setdefault((was.line, now.line), {})[now] = None
                kernels.setdefault((was.line, now.line), {})[p.current.kernel] = None
        return tuple(LineEdit(a, b, tuple(nodes[a, b]), tuple(kernels[a, b])) for a, b in nodes)


Edited = tuple[int, int, tuple[tuple[Node, Node], ...]]
"""A pair of the second stage: baseline row, current row, the nodes whose line changed."""


def _pair(old: list[int], new: list[int], rows_old: Sequence[Row], rows_new: Sequence[Row]) -> list[tuple[int, int]]:
    """Indices of rows with one identity paired: same kernel name first, then in call order."""
    out: list[tuple[int, int]] = []
    free_new = list(new)
    rest_old = []
    for i in old:
        j = next((j for j in free_new if rows_new[j].kernel == rows_old[i].kernel), None)
        if j is None:
            rest_old.append(i)
            continue
        free_new.remove(j)
        out.append((i, j))
    out += zip(rest_old, free_new, strict=False)
    return out


def _key(row: Row) -> tuple[object, ...]:
    """What rows pair by: their identity set, or for rows with no compute node their kind and kernel."""
    ids = row_identity(row)
    return (ids,) if ids else ("", row.kind, row.kernel)


def match(baseline: Ledger, current: Ledger) -> Matching:
    """Pair the rows of ``baseline`` with those of ``current`` and group what is left (see the
    module docstring; a row that shares no identity is a component of its own: new or gone)."""
    old, new = baseline.rows, current.rows
    buckets: dict[tuple[object, ...], tuple[list[int], list[int]]] = {}
    for side, rows in enumerate((old, new)):
        for i, row in enumerate(rows):
            buckets.setdefault(_key(row), ([], []))[side].append(i)
    paired: list[Edited] = [(i, j, ()) for a, b in buckets.values() for i, j in _pair(a, b, old, new)]
    used_old = {i for i, _, _ in paired}
    used_new = {j for _, j, _ in paired}
    left = [("b", i) for i in range(len(old)) if i not in used_old] + [
        ("c", j) for j in range(len(new)) if j not in used_new
    ]
    edited = _edited(left, old, new)
    paired += edited
    done = {("b", i) for i, _, _ in edited} | {("c", j) for _, j, _ in edited}
    pairs = tuple(Pair(old[i], new[j], e) for i, j, e in sorted(paired, key=lambda p: p[1]))
    return Matching(pairs, _components([x for x in left if x not in done], old, new))


def _ops(row: Row) -> tuple[object, ...]:
    """The work a row does with its lines ignored: its kind and the multiset of its compute ops."""
    return (row.kind, frozenset(Counter(op_name(n.op) for n in row.nodes if not is_view(n)).items()))


def _lines(rows: Iterable[Row]) -> frozenset[str]:
    """Every compute node's line text (:func:`source_key`) in ``rows``."""
    return frozenset(source_key(n) for r in rows for n in r.nodes if not is_view(n))


def _file(node: Node) -> str | None:
    m = _LINE.match(node.line)
    return m.group(1) if m else None


def _on_edited_line(row: Row, other: frozenset[str]) -> bool:
    """True where some compute node of ``row`` came from a line the other ledger has no node of."""
    return any(n.line and source_key(n) not in other for n in row.nodes if not is_view(n))


def _edited(left: list[tuple[str, int]], old: Sequence[Row], new: Sequence[Row]) -> list[Edited]:
    """Rows left by the first stage doing the same ops (:func:`_ops`) on an edited line, paired only where every row
    of their component takes part, both sides have as many, and each changed node moved within its file."""
    lines_old, lines_new = _lines(old), _lines(new)

    def edited(item: tuple[str, int]) -> bool:
        side, i = item
        return _on_edited_line(old[i], lines_new) if side == "b" else _on_edited_line(new[i], lines_old)

    taking = [x for group in _groups(left, old, new) if all(map(edited, group)) for x in group]
    buckets: dict[tuple[object, ...], tuple[list[int], list[int]]] = {}
    for side, i in sorted(taking, key=lambda x: x[1]):
        buckets.setdefault(_ops(old[i] if side == "b" else new[i]), ([], []))[1 if side == "c" else 0].append(i)
    out: list[Edited] = []
    for a, b in buckets.values():
        if len(a) != len(b):  # a row of this work came or went: which one is not known
            continue
        found = [(i, j, _moved(old[i], new[j], lines_old, lines_new)) for i, j in _pair(a, b, old, new)]
        if all(moved for _, _, moved in found):
            out += found
    return out


def _moved(was: Row, now: Row, lines_old: frozenset[str], lines_new: frozenset[str]) -> tuple[tuple[Node, Node], ...]:
    """Two rows' compute nodes whose line changed, paired (equal identities first, then each op in row order), or
    ``()`` where one is no edit: a line either ledger still has, a node without a line, another file."""
    rest: dict[Ident, tuple[list[tuple[int, Node]], list[tuple[int, Node]]]] = {}
    for side, row in enumerate((was, now)):
        for at, n in enumerate(row.nodes):
            if not is_view(n):
                rest.setdefault(identity(n), ([], []))[side].append((at, n))
    by_op: dict[str, tuple[list[tuple[int, Node]], list[tuple[int, Node]]]] = {}
    for (_, op), (a, b) in rest.items():
        k = min(len(a), len(b))
        by_op.setdefault(op, ([], []))[0].extend(a[k:])
        by_op[op][1].extend(b[k:])
    out = []
    for a, b in by_op.values():
        for (_, x), (_, y) in zip(sorted(a, key=itemgetter(0)), sorted(b, key=itemgetter(0)), strict=True):
            if _file(x) is None or _file(x) != _file(y) or source_key(x) in lines_new or source_key(y) in lines_old:
                return ()
            out.append((x, y))
    return tuple(out)


def _groups(left: list[tuple[str, int]], old: Sequence[Row], new: Sequence[Row]) -> list[list[tuple[str, int]]]:
    """The rows ``left`` grouped by shared identities (union-find over rows), each in its order."""
    parent = list(range(len(left)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[Ident, int] = {}
    for k, (side, i) in enumerate(left):
        for ident in row_identity(old[i] if side == "b" else new[i]):
            if ident in owner:
                parent[find(k)] = find(owner[ident])
            else:
                owner[ident] = k
    groups: dict[int, list[tuple[str, int]]] = {}
    for k, item in enumerate(left):
        groups.setdefault(find(k), []).append(item)
    return list(groups.values())


def _components(left: list[tuple[str, int]], old: Sequence[Row], new: Sequence[Row]) -> tuple[Regroup, ...]:
    """The unpaired rows as :class:`Regroup` components (:func:`_groups`)."""

    def order(items: list[tuple[str, int]]) -> tuple[int, int]:
        firsts = [i for side, i in items if side == "c"]
        return (min(firsts), 0) if firsts else (len(new), min(i for _, i in items))

    return tuple(
        Regroup(
            tuple(old[i] for side, i in sorted(items) if side == "b"),
            tuple(new[i] for side, i in sorted(items) if side == "c"),
        )
        for items in sorted(_groups(left, old, new), key=order)
    )
