"""A CUDA-graph replay's kernels put to its wrapper's calls by launch order.

Under ``mode="reduce-overhead"`` no wrapper code runs, so no call has a range (:mod:`.launches`), but kernels launch
in the wrapper's order after the inputs' copies (ranges of :data:`COPY_OPS`). A Triton call takes the next kernel of
its name; the gap between two Triton calls' kernels goes to the library calls between them: none, an empty gap; one,
the whole gap; several, one kernel each only where as many kernels each say their call's kind of work
(:func:`family`), else left untraced, never split on a guess. A replay that does not follow the wrapper (a Triton
kernel missing or out of order, kernels no library call can take) attributes nothing of the graph (:func:`replay`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fuseci.ledger.wrapper import Call
from fuseci.records.fusion import KernelRow, Kind

#: The ops the CUDA-graph tree copies a replay's inputs with (the profiler's ``aten::`` ranges).
COPY_OPS = ("aten::_foreach_copy_", "aten::copy_")
#: What a row attributed by launch order says.
BY_ORDER = "attributed by launch order: a CUDA-graph replay has no per-call ranges"
#: What a library call sharing a gap with others says.
AMONG = (
    "a CUDA-graph replay has no per-call ranges, and launch order cannot tell which of the {n} library calls "
    "{where} launched which kernels: theirs are in the untraced row"
)
#: Why a shared gap's kernels are untraced.
SHARED = "graph {graph}'s replay ran them {where} for {n} library calls ({calls}), which launch order cannot tell apart"
#: The ledger's note on a replayed graph.
REPLAYED = (
    "graph {} ran as a CUDA-graph replay (torch.compile's reduce-overhead mode): no wrapper code ran, so its "
    "calls' kernels are attributed by launch order"
)
TOGETHER = "the kernels of library calls with no Triton kernel between them stay untraced"
#: The ledger's note on a replayed graph whose kernels do not follow its wrapper.
UNFIT = (
    "graph {graph} ran as a CUDA-graph replay whose kernels do not follow its wrapper's calls ({why}): they are "
    "left untraced"
)


#: The kinds of work a library call does, by what its call and its kernels are named: the first
#: that matches names it (a convolution's kernel may be an "implicit gemm": conv before GEMM).
_FAMILIES = (
    (
        "attention",
        re.compile(r"scaled_dot_product|attention|flash|efficient_attention"),
        re.compile(r"(?i)sdpa|flash|fmha|attention|attn"),
    ),
    (
        "convolution",
        re.compile(r"convolution|conv\d?d"),
        re.compile(r"(?i)fprop|dgrad|wgrad|conv|implicit_gemm|winograd"),
    ),
    (
        "GEMM",
        re.compile(r"(?:^|[._])(?:add|b|baddb|_int_|_scaled_)?mm(?:$|[._])|matmul|linear"),
        re.compile(r"(?i)gemm|nvjet|cutlass|gemv|cublas"),
    ),
)


def family(name: str, *, kernel: bool) -> str | None:
    """The kind of work a library call (``extern_kernels.addmm``) or a kernel
    (``nvjet_sm90_tst_128x128_...``; ``kernel=True``) does, or None where its name does not say."""
    for kind, call, launched in _FAMILIES:
        if (launched if kernel else call).search(name):
            return kind
    return None


def _one_each(gap: Sequence[KernelRow], calls: Sequence[Call], externs: Sequence[int]) -> bool:
    """Whether each of a gap's library calls launched one of its kernels, in order: as many
    kernels as calls, each named for its call's kind of work (:func:`family`)."""
    if len(gap) != len(externs):
        return False
    kinds = [
        (family(calls[i].kernel, kernel=False), family(k.kernel, kernel=True))
        for i, k in zip(externs, gap, strict=True)
    ]
    return all(want is not None and want == got for want, got in kinds)


@dataclass(frozen=True, slots=True)
class Order:
    """One replay's kernels put to its wrapper's calls (:func:`by_order`)."""

    claimed: dict[int, list[KernelRow]] = field(default_factory=dict)
    """Index of a call in its wrapper → its kernels (a library call that launched none: absent)."""
    shared: list[tuple[str, tuple[int, ...], list[KernelRow]]] = field(default_factory=list)
    """(where, the library calls, their kernels) of each gap several library calls share."""


@dataclass(frozen=True, slots=True)
class Replay:
    """A graph's replays put to its wrapper's calls (:func:`replay`)."""

    claimed: dict[int, list[KernelRow]]
    """Index of a call in its wrapper → its kernels, over every replay; empty when the order did not fit."""
    notes: dict[int, str]
    """Index of a call → what its row says about how its kernels were found."""
    left: list[tuple[KernelRow, str]]
    """Kernels left untraced, each with why."""
    note: str
    """The ledger's note on the graph's replay."""
    fits: bool = True
    """False when a replay's kernels do not follow the wrapper's calls: nothing is attributed."""


def _where(before: str | None, after: str | None) -> str:
    if before and after:
        return f"between {before} and {after}"
    if after:
        return f"before {after} (the replay's first Triton kernel)"
    if before:
        return f"after {before} (the replay's last Triton kernel)"
    return "in a replay of no Triton kernel"


def _gap(
    gap: Sequence[KernelRow], calls: Sequence[Call], externs: Sequence[int], where: str, triton: set[str], order: Order
) -> str | None:
    """Give a gap's kernels to its library calls (see the module docstring); why not, or None."""
    stray = next((k for k in gap if k.kernel in triton), None)
    if stray is not None:
        return f"{stray.kernel} ran {where}, out of its wrapper's order"
    if not externs:
        kernels = ", ".join(dict.fromkeys(k.kernel for k in gap))
        return f"{len(gap)} kernel(s) ({kernels}) ran {where}, where the wrapper calls no library" if gap else None
    if len(externs) == 1:
        if gap:
            order.claimed.setdefault(externs[0], []).extend(gap)
        return None
    if _one_each(gap, calls, externs):
        for index, kernel in zip(externs, gap, strict=True):
            order.claimed.setdefault(index, []).append(kernel)
    elif gap:
        order.shared.append((where, tuple(externs), list(gap)))
    return None


def by_order(calls: Sequence[Call], kernels: Sequence[KernelRow]) -> Order | str:
    """One replay's kernels (launch order) put to its wrapper's calls, or why they do not follow the calls."""
    triton = {c.kernel for c in calls if c.kind is Kind.TRITON}
    order = Order()
    at, before = 0, None
    externs: list[int] = []
    for index, call in enumerate(calls):
        if call.kind is not Kind.TRITON:
            externs.append(index)
            continue
        hit = next((j for j in range(at, len(kernels)) if kernels[j].kernel == call.kernel), None)
        if hit is None:
            return f"no launch of {call.kernel} (call {index + 1} of the wrapper) after the replay's kernel {at}"
        why = _gap(kernels[at:hit], calls, externs, _where(before, call.kernel), triton, order)
        if why is not None:
            return why
        order.claimed[index] = [kernels[hit]]
        at, externs, before = hit + 1, [], call.kernel
    why = _gap(kernels[at:], calls, externs, _where(before, None), triton, order)
    return why if why is not None else order


def replay(graph: str, calls: Sequence[Call], runs: Mapping[str, Sequence[KernelRow]], untraced: str) -> Replay:
    """A graph's replays (``runs``: each run's kernels, in launch order) put to its wrapper's calls: every run by
    :func:`by_order`, or none when one does not fit (each kernel then left ``untraced``)."""
    orders = []
    for kernels in runs.values():
        found = by_order(calls, kernels)
        if isinstance(found, str):
            kept = [(k, untraced) for run in runs.values() for k in run]
            return Replay({}, {}, kept, UNFIT.format(graph=graph, why=found), fits=False)
        orders.append(found)
    claimed: dict[int, list[KernelRow]] = {}
    notes = {i: BY_ORDER for i in range(len(calls))}
    left: list[tuple[KernelRow, str]] = []
    for found in orders:
        for index, kernels in found.claimed.items():
            claimed.setdefault(index, []).extend(kernels)
        for where, externs, kernels in found.shared:
            named = ", ".join(calls[i].kernel for i in externs)
            left.extend((k, SHARED.format(graph=graph, where=where, n=len(externs), calls=named)) for k in kernels)
            notes.update({i: AMONG.format(where=where, n=len(externs)) for i in externs})
    note = REPLAYED.format(graph) + (f"; {TOGETHER}" if left else "")
    return Replay(claimed, notes, left, note)
