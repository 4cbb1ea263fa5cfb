"""ncu's per-kernel rows of a compiled forward, and which wrapper call each belongs to.

A row is one launch with its NVTX range stack under ``emit_nvtx()``, outermost first: ``["case.compiled",
"Torch-Compiled Region: 0/0, op_id = 2", "## Call CompiledFxGraph None ##, op_id = 5",
"triton_per_fused_native_layer_norm_0, op_id = 6"]``. The innermost ``Torch-Compiled Region`` names the graph; each
``## Call CompiledFxGraph`` range in it is one run of its wrapper, and the range just below is one call (a Triton
kernel by its name, a library call by its ``aten::`` op). Within a run the calls take the call ranges in order
(:func:`attribute`); the rest is unclaimed. A graph whose kernels lie in no range below its own while none of its
calls claimed one is a CUDA-graph replay, attributed by launch order (:mod:`.replay`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fuseci.config import names
from fuseci.ledger import replay
from fuseci.ledger.wrapper import Call
from fuseci.records.fusion import KernelRow, Kind, Measured

_RANGE = re.compile(r"^(?P<name>.*), op_id = (?P<id>\d+)$")
_REGION = re.compile(r"^Torch-Compiled Region: (?P<graph>\d+/\d+)")
_CALL = "## Call CompiledFxGraph"
OUTSIDE = "outside any Torch-Compiled Region (eager code between graphs)"
COPIES = (
    "graph {}'s input copies (before each replay the CUDA-graph tree copies the inputs into the graph's own buffers)"
)


def _range(text: str) -> tuple[str, int]:
    m = _RANGE.match(text)
    return (m["name"], int(m["id"])) if m else (text, -1)


def measured(rows: Sequence[KernelRow]) -> Measured:
    """What ``rows`` moved and took, summed."""
    return Measured(
        launches=len(rows),
        dram_bytes=sum(r.dram_bytes for r in rows),
        global_bytes=sum(r.global_bytes for r in rows),
        l2_bytes=sum(r.l2_bytes for r in rows),
        duration_ns=sum(r.duration_ns for r in rows),
        kernels=tuple(dict.fromkeys(r.kernel for r in rows)),
        shapes=tuple(dict.fromkeys(f"{r.grid}x{r.block}" for r in rows if r.grid and r.block)),
        loads=_sum([r.loads for r in rows]),
        stores=_sum([r.stores for r in rows]),
    )


def _sum(values: list[float | None]) -> float | None:
    """The sum, or None where any is unknown."""
    return None if None in values else sum((x for x in values if x is not None), 0.0)


@dataclass(frozen=True, slots=True)
class Attribution:
    """Which rows each call claimed."""

    claimed: dict[tuple[str, int], list[KernelRow]] = field(default_factory=dict)
    """(graph, index of the call in its wrapper) → its rows, over every run of the wrapper."""
    unclaimed: list[KernelRow] = field(default_factory=list)
    why: dict[str, None] = field(default_factory=dict)
    """Why rows were left unclaimed, each reason once."""
    notes: dict[tuple[str, int], str] = field(default_factory=dict)
    """(graph, index of the call) → how its rows were found, where not by its range (a replay's launch order)."""
    replays: dict[str, str] = field(default_factory=dict)
    """Graph → how its CUDA-graph replay was read (:mod:`.replay`), for the ledger's notes."""
    runs: dict[str, int] = field(default_factory=dict)
    """Graph → how many times its wrapper ran in the range: a graph run N times has N times its floor."""


def _launch(nvtx: Sequence[str]) -> tuple[tuple[str, ...], tuple[int, int] | None]:
    """A row's stack without the harness's ``fuseci-launch:R:N`` range, and (R, N) from it."""
    found = names.find_launch_range(nvtx)
    if found is None:
        return tuple(nvtx), None
    at, run, launch = found
    return (*nvtx[:at], *nvtx[at + 1 :]), (run, launch)


_Runs = dict[tuple[str, str], dict[tuple[str, str], list[KernelRow]]]


def _runs(rows: Sequence[KernelRow], attribution: Attribution) -> tuple[_Runs, dict[tuple[str, str], list[KernelRow]]]:
    """Rows by (graph, run of its wrapper: its ``## Call CompiledFxGraph`` range or the harness's run number) and
    then by call range or launch number, in launch order; and each (graph, run)'s rows in no range below the graph's
    (a CUDA-graph replay's)."""
    placed: list[tuple[KernelRow, str, tuple[str, int], tuple[str, int], tuple[int, int] | None]] = []
    bare: dict[tuple[str, str], list[KernelRow]] = {}
    run_of: dict[tuple[str, int], int] = {}
    for row in sorted(rows, key=lambda r: r.id):
        stack, launch = _launch(row.nvtx)
        region = max((i for i, n in enumerate(stack) if _REGION.match(n)), default=None)
        if region is None:
            attribution.unclaimed.append(row)
            attribution.why[OUTSIDE] = None
            continue
        graph = _REGION.match(stack[region])["graph"]  # type: ignore[index]
        call = next((i for i in range(region + 1, len(stack)) if stack[i].startswith(_CALL)), None)
        if launch is None and (region if call is None else call) + 1 == len(stack):
            run = f"op {_range(stack[call])[1]}" if call is not None else f"region {_range(stack[region])[1]}"
            bare.setdefault((graph, run), []).append(row)
            continue
        if call is None or call + 1 >= len(stack):
            attribution.unclaimed.append(row)
            attribution.why[_no_range(graph)] = None
            continue
        run_range, call_range = _range(stack[call]), _range(stack[call + 1])
        if launch is not None and not row.repeat:
            run_of.setdefault((graph, run_range[1]), launch[0])
        placed.append((row, graph, run_range, call_range, launch))
    runs: _Runs = {}
    for row, graph, run_range, call_range, launch in placed:
        number = launch[0] if launch is not None else run_of.get((graph, run_range[1]))
        run = f"run {number}" if number is not None else f"op {run_range[1]}"
        key = (call_range[0], f"launch {launch[1]}" if launch is not None else f"op {call_range[1]}")
        runs.setdefault((graph, run), {}).setdefault(key, []).append(row)
    return runs, bare


def _no_range(graph: str) -> str:
    return f"in graph {graph}'s region but in no call's range (CUDA-graph replay, say)"


def _unmatched(graph: str, range_name: str) -> str:
    return f"range {range_name!r} of graph {graph} matches no call of its wrapper"


def _matches(call: Call, range_name: str) -> bool:
    if call.kind is Kind.TRITON:
        return range_name == call.kernel
    return range_name.split("::")[-1] == call.op


def _claim(
    graph: str, calls: Sequence[Call], runs: Mapping[str, dict[tuple[str, str], list[KernelRow]]], out: Attribution
) -> list[tuple[KernelRow, str]]:
    """Each run's call ranges claimed by the graph's calls, in order; the rows left, with why."""
    left: list[tuple[KernelRow, str]] = []
    for ranges in runs.values():
        order = list(ranges.items())
        taken = [False] * len(order)
        at = 0
        for index, call in enumerate(calls):
            hit = next((j for j in range(at, len(order)) if _matches(call, order[j][0][0])), None)
            if hit is not None:
                out.claimed.setdefault((graph, index), []).extend(order[hit][1])
                taken[hit], at = True, hit + 1
        left.extend(
            (row, _unmatched(graph, key[0])) for j, (key, kept) in enumerate(order) if not taken[j] for row in kept
        )
    return left


def _replayed(
    graph: str,
    calls: Sequence[Call],
    ranged: Mapping[str, dict[tuple[str, str], list[KernelRow]]],
    bare: Mapping[str, list[KernelRow]],
    out: Attribution,
) -> list[tuple[KernelRow, str]]:
    """A replayed graph's rows (:mod:`.replay`) claimed by launch order; the rows left (``ranged``,
    its rows in call ranges, its input copies among them), with why."""
    found = replay.replay(graph, calls, bare, _no_range(graph))
    out.replays[graph] = found.note
    copies: set[int] = set()
    if found.fits:
        out.claimed.update({(graph, index): kernels for index, kernels in found.claimed.items()})
        out.notes.update({(graph, index): note for index, note in found.notes.items()})
        for run, kernels in bare.items():  # a kernel in a copy op's range launched before the replay
            first = min(k.id for k in kernels)
            ranges = ranged.get(run, {}).items()
            copies.update(row.id for key, kept in ranges if key[0] in replay.COPY_OPS for row in kept if row.id < first)
    return found.left + [
        (row, COPIES.format(graph) if row.id in copies else _unmatched(graph, key[0]))
        for ranges in ranged.values()
        for key, kept in ranges.items()
        for row in kept
    ]


def attribute(rows: Sequence[KernelRow], calls: Mapping[str, Sequence[Call]]) -> Attribution:
    """Which of the forward's ``rows`` (in its NVTX range) each call of each graph's wrapper (``calls`` by graph id)
    accounts for."""
    out = Attribution()
    runs, bare = _runs(rows, out)
    left: list[tuple[KernelRow, str]] = []
    for graph in dict.fromkeys(g for g, _ in (*runs, *bare)):
        ranged = {run: ranges for (g, run), ranges in runs.items() if g == graph}
        replays = {run: kept for (g, run), kept in bare.items() if g == graph}
        lost = [(row, _no_range(graph)) for kept in replays.values() for row in kept]
        if graph not in calls:
            why = f"graph {graph} has no wrapper in the capture"
            left += lost + [(row, why) for ranges in ranged.values() for kept in ranges.values() for row in kept]
            continue
        ranges_claim = Attribution()
        unmatched = _claim(graph, calls[graph], ranged, ranges_claim)
        if replays and not ranges_claim.claimed:
            out.runs[graph] = len(replays)
            left += _replayed(graph, calls[graph], ranged, replays, out)
        else:
            out.runs[graph] = len(ranged)
            out.claimed.update(ranges_claim.claimed)
            left += lost + unmatched
    for row, why in sorted(left, key=lambda item: item[0].id):
        out.unclaimed.append(row)
        out.why[why] = None
    out.unclaimed.sort(key=lambda r: r.id)
    return out
