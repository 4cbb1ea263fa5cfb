"""The fusion ledger of one compiled forward (one row per kernel call of Inductor's wrapper, and
the graph's totals), what changed in it node by node, and what it is built from: a variant's
provenance as the harness record holds it, and ncu's kernel launches."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

from pydantic import AfterValidator, Field, JsonValue, Strict

from fuseci import validation as v
from fuseci.config import names, quantities
from fuseci.wording import shown


class Kind(str, Enum):
    """What a ledger row is (a ``str`` enum: ``enum.StrEnum`` is Python 3.11's, fuseci runs on 3.10)."""

    TRITON = "triton"
    """A kernel Inductor generated (one launch per call)."""
    EXTERN = "extern"
    """A library call in the compiled graph (cuBLAS GEMM, attention); it may launch several kernels."""
    UNTRACED = "untraced"
    """Kernels in the forward's range no wrapper call accounts for (CUDA-graph replay...): kept, with a note."""


#: How many of a thing a stored ledger may hold (rows, nodes of a row, graphs, notes).
MAX_ITEMS = 100_000


@dataclass(frozen=True, slots=True)
class Node(v.Document):
    """A post-grad graph node a kernel implements."""

    name: v.Name
    """The post-grad node's name (``add_2``); names change when the graph changes."""
    op: v.Name
    """Its ATen target (``aten.add.Tensor``)."""
    source: v.Text
    """The pre-grad node it came from (``layer_norm_1``), or ""."""
    line: v.Text
    """Its innermost source line, ``file:line: code``, or "": what the gate matches nodes by (with :attr:`op`)."""


#: A row's bytes or time, below 2**63, so that the ledger's sums of them stay finite.
Summed = Annotated[float, Field(ge=0, lt=v.INT_LIMIT)]


@dataclass(frozen=True, slots=True)
class Measured(v.Document):
    """What a row's kernels moved and took, summed over their launches (ncu, one pass)."""

    __always__ = frozenset({"shapes"})

    launches: v.Count
    dram_bytes: Summed
    """DRAM bytes read and written."""
    global_bytes: Summed
    """Global bytes loaded and stored through the LSU pipe (TMA loads are not counted)."""
    l2_bytes: Summed
    """L2 bytes the SMs requested (sectors read and written, 32 B each)."""
    duration_ns: Summed
    kernels: Annotated[v.Items[v.Name], Field(max_length=MAX_ITEMS)]
    """The names ncu saw, in launch order (distinct names only)."""
    shapes: Annotated[v.Items[v.Name], Field(max_length=MAX_ITEMS)] = ()
    """The distinct launch shapes ncu saw, ``GRIDxBLOCK``, in order: the autotuner's choice (older: empty)."""
    loads: v.Amount | None = None
    """Global bytes the SMs asked to load, LSU and TMA (:data:`REQUESTED`), L2 hits included; None in older
    ledgers, or where the TMA's were not counted (``ncu: {tma: false}``)."""
    stores: v.Amount | None = None
    """Global bytes the SMs asked to store, likewise."""

    @property
    def requested(self) -> float | None:
        """:attr:`loads` and :attr:`stores`; None where either is unknown."""
        return None if self.loads is None or self.stores is None else self.loads + self.stores


class Cause(str, Enum):
    """What made a row, or the forward, move more bytes than its minimum (:mod:`fuseci.ledger.excess`)."""

    REREAD = "re-reads"
    """Loads above each tensor read once: a GEMM's tiles loaded again, a looped reduction reading twice."""
    BOUNDARY = "fusion boundaries"
    """A tensor written by one row and read by another, or an input read by several: what fusing would save."""
    LAYOUT = "layout copies"
    """A row that only copies (a ``.contiguous()``...): all it moves, and the reads of what it wrote."""
    WIDENED = "widened dtypes"
    """A boundary tensor's bytes due to its widened element type (``x.float()`` written in fp32, not bf16)."""
    UNEXPLAINED = "unexplained"
    """What the ledger cannot attribute: stores above the outputs, loads below the inputs, unclaimed kernels."""


@dataclass(frozen=True, slots=True)
class Part(v.Document):
    """Bytes of one cause, in a row or the forward."""

    __always__ = frozenset({"what"})

    cause: Annotated[Cause, v.Choice(tuple(c.value for c in Cause), what="unknown cause")]
    bytes: Annotated[float, Field(allow_inf_nan=False)]
    """Negative only for what is unexplained (a kernel asked for less than its minimum)."""
    what: v.Text = ""
    """What it is, for the reader: the tensor and the rows it crosses between, by kernel and node."""


@dataclass(frozen=True, slots=True)
class Row(v.Document):
    """One wrapper call of the compiled forward (or the untraced kernels)."""

    __always__ = frozenset({"note"})

    graph: v.Key
    """The compiled graph it belongs to, as Dynamo numbers it (``0/0``; a graph break makes ``1/0``)."""
    kernel: v.Name
    """The Triton kernel's name or the extern call (``extern_kernels.addmm``)."""
    kind: Annotated[Kind, v.Choice(tuple(k.value for k in Kind), what="unknown row kind")]
    nodes: Annotated[v.Items[Node], Field(max_length=MAX_ITEMS)]
    """The post-grad nodes it implements (views included)."""
    measured: Measured | None
    """None when no kernel in the range matched this call."""
    min_bytes: v.Count | None
    """Each tensor crossing the call's boundary read or written once; None when the shapes are unknown."""
    note: v.Text = ""
    """What is known to be missing or odd about this row, for the reader."""
    excess: Annotated[v.Items[Part], Field(max_length=MAX_ITEMS)] = ()
    """Its requested bytes above :attr:`min_bytes`, by cause; empty where unknown, or none."""

    @property
    def requested(self) -> float | None:
        """The global bytes its kernels asked for; 0 for a row that launched nothing; None where unknown."""
        return 0.0 if self.measured is None else self.measured.requested

    @property
    def ratio(self) -> float | None:
        """Requested bytes over :attr:`min_bytes`: 1.0 moves each tensor once, and none asks for less."""
        if self.measured is None or not self.min_bytes or self.measured.requested is None:
            return None
        return self.measured.requested / self.min_bytes

    @property
    def dram_ratio(self) -> float | None:
        """Measured DRAM bytes over :attr:`min_bytes` (below 1 where the L2 kept its tensors)."""
        if self.measured is None or not self.min_bytes:
            return None
        return self.measured.dram_bytes / self.min_bytes


@dataclass(frozen=True, slots=True)
class Ledger(v.Document):
    """The ledger of one compiled forward."""

    __always__ = frozenset({"break_reasons", "fusion_refusals", "notes"})

    rows: Annotated[v.Items[Row], Field(max_length=MAX_ITEMS)]
    floor_bytes: v.Count | None
    """The graph's own floor: every graph input and weight read once and every output written once."""
    graphs: Annotated[v.Items[v.Key], Field(max_length=MAX_ITEMS)]
    """The compiled graphs, in call order (more than one: graph breaks)."""
    break_reasons: Annotated[v.Items[v.Text], Field(max_length=MAX_ITEMS)] = ()
    """Dynamo's graph-break reasons, as it logged them."""
    fusion_refusals: Annotated[v.Items[v.Text], Field(max_length=MAX_ITEMS)] = ()
    """Inductor's distinct reasons for not fusing two nodes, as it logged them (without node numbers)."""
    notes: Annotated[v.Items[v.Text], Field(max_length=MAX_ITEMS)] = field(default=())
    """Whole-ledger notes (CUDA graphs, dynamic shapes: several graphs for one frame)."""

    excess: Annotated[v.Items[Part], Field(max_length=MAX_ITEMS)] = ()
    """The forward's bytes above its floor that are no row's own (with :attr:`Row.excess`: the whole excess)."""

    @property
    def measured_bytes(self) -> float:
        """DRAM bytes of every row."""
        return sum(r.measured.dram_bytes for r in self.rows if r.measured is not None)

    @property
    def requested_bytes(self) -> float | None:
        """Global bytes every row asked for (:attr:`Row.requested`); None where a row's are unknown."""
        each = [r.requested for r in self.rows]
        return None if not each or any(x is None for x in each) else math.fsum(x for x in each if x is not None)

    def over_floor(self) -> dict[Cause, float] | None:
        """The requested bytes above the floor, by every cause (0 where none); None where anything is unknown."""
        total = self.requested_bytes
        if total is None or self.floor_bytes is None:
            return None
        parts = [p for r in self.rows for p in r.excess] + list(self.excess)
        if abs(math.fsum(p.bytes for p in parts) - (total - self.floor_bytes)) > 1e-9 * max(total, 1.0):
            return None  # no split recorded (or not of these figures)
        return {c: math.fsum(p.bytes for p in parts if p.cause is c) for c in Cause}


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel launch ncu profiled."""

    id: int
    kernel: str
    """The name ncu gives it (cut short for long names)."""
    nvtx: tuple[str, ...]
    """Its NVTX range stack, outermost first."""
    dram_bytes: float
    global_bytes: float
    l2_bytes: float
    duration_ns: float
    grid: int = 0
    """Blocks launched (0: not recorded)."""
    block: int = 0
    """Threads per block (0: not recorded)."""
    repeat: bool = False
    """Not profiled: it repeats an earlier launch's configuration, whose measurement it holds."""
    loads: float | None = None
    """Global bytes it asked to load, LSU and TMA (None: the TMA's were not counted)."""
    stores: float | None = None
    """Global bytes it asked to store, LSU and TMA (None: likewise)."""


#: The metrics of a kernel row, by what the ledger sums: each is the sum of these ncu metrics.
METRICS: dict[str, tuple[str, ...]] = {
    "dram_bytes": ("dram__bytes_read.sum", "dram__bytes_write.sum"),
    "global_bytes": ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"),
    "l2_sectors": ("lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"),
    "duration_ns": ("gpu__time_duration.sum",),
}
#: The global bytes a kernel asked for, loads and stores, each the LSU's and the TMA's (optional).
REQUESTED: dict[str, tuple[str, str]] = {
    "loads": ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum"),
    "stores": (
        "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
        "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum",
    ),
}
#: The launch shape of a kernel, (grid, block), as ncu names them (optional).
SHAPE = ("launch__grid_size", "launch__block_size")
#: Bytes of an L2 sector.
SECTOR_BYTES = 32


def _figure(value: object, metric: str, what: str = "a finite, non-negative number") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{metric} is {shown(value)}, not {what}")
    return float(value)


def _unknown(value: object) -> bool:
    """Absent, or NaN: ncu was not asked for it."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def kernel_row(
    ident: int, kernel: str, nvtx: tuple[str, ...], metrics: Mapping[str, object], repeat: bool = False
) -> KernelRow:
    """A kernel launch from ncu's metrics of it (:data:`METRICS`; :data:`REQUESTED`, :data:`SHAPE`: NaN unknown).

    Raises:
        ValueError: a metric that is not a finite, non-negative number, naming it.
    """
    sums = {what: sum(_figure(metrics.get(m), m) for m in sources) for what, sources in METRICS.items()}
    asked = {
        what: None if _unknown(metrics.get(tma)) else _figure(metrics.get(lsu), lsu) + _figure(metrics.get(tma), tma)
        for what, (lsu, tma) in REQUESTED.items()
    }
    grid, block = (0 if _unknown(metrics.get(m)) else int(_figure(metrics.get(m), m, "a launch size")) for m in SHAPE)
    return KernelRow(
        ident, kernel, nvtx, sums["dram_bytes"], sums["global_bytes"], sums["l2_sectors"] * SECTOR_BYTES,
        sums["duration_ns"], grid, block, repeat, asked["loads"], asked["stores"],
    )  # fmt: skip


OUTPUT_CODE = "inductor_output_code"
POST_GRAD = "inductor_post_grad_graph"
NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"
STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"
BREAK_REASON = "dynamo_graph_break_reason"
#: The structured-trace artifacts the ledger reads.
ARTIFACTS = frozenset({OUTPUT_CODE, POST_GRAD, NODE_MAPPINGS, STACK_TRACES, BREAK_REASON})

Names = Annotated[v.Items[str], Field(max_length=MAX_ITEMS)]
NamesBy = Annotated[Mapping[str, Names], Field(max_length=MAX_ITEMS)]
"""Lists of names by a name: a call's debug handle → its post-grad nodes, and the like."""


@dataclass(frozen=True, slots=True)
class NodeMappings(v.OpenDocument):
    """The payload of :data:`NODE_MAPPINGS` (Inductor's names for its members)."""

    cppCodeToPost: NamesBy
    """A call's debug handle (``extern_kernels.addmm:2``) → the post-grad nodes it implements."""
    postToPre: NamesBy = field(default_factory=dict)
    """A post-grad node → the pre-grad nodes it came from."""


def _check_payload(payload: str, what: Any) -> None:
    """An artifact's JSON payload checked as ``what``."""
    try:
        data = json.loads(payload)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"the payload is not JSON ({exc})") from None
    try:
        v.validate(what, data)
    except v.Invalid as exc:
        raise ValueError(f"the payload's {exc}" if exc.where else f"the payload: {exc}") from None


@dataclass(frozen=True, slots=True)
class Artifact(v.Document):
    """One of Inductor's structured-trace artifacts, as a handler on its trace log receives it."""

    name: Annotated[str, Field(max_length=200)]
    """Which artifact (:data:`ARTIFACTS`)."""
    metadata: Annotated[Mapping[v.Key, JsonValue], Field(max_length=1000)]
    """Inductor's own, kept as it wrote it (its ``frame_id`` and ``frame_compile_id``: :attr:`graph`)."""
    payload: str
    """The artifact's text (the wrapper's code, the graph's, a JSON document)."""

    @property
    def graph(self) -> str:
        """Dynamo's ``frame_id/frame_compile_id`` (``0/0``) of the graph it belongs to."""
        return f"{self.metadata['frame_id']}/{self.metadata['frame_compile_id']}"


def _readable(artifact: Artifact) -> Artifact:
    """The graph an artifact the ledger reads names, and a JSON payload of the shape it reads."""
    if artifact.name not in ARTIFACTS:
        return artifact
    for key in ("frame_id", "frame_compile_id"):
        value = artifact.metadata.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**9:
            raise ValueError(f"its metadata's {key} is {shown(value)}, not a count")
    if artifact.name == NODE_MAPPINGS:
        _check_payload(artifact.payload, NodeMappings)
    elif artifact.name == STACK_TRACES:
        _check_payload(artifact.payload, NamesBy)
    return artifact


GraphId = Annotated[str, Field(pattern=r"^\d{1,9}/\d{1,9}$"), v.Expect("a graph's id (frame/compile, like 0/0)")]
Symbol = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"), v.Expect("a symbol's name (s27)")]
Size = Annotated[int, Field(ge=0, lt=1 << 62)]
#: Repeats one variant's pass may record (a forward of a million launches is far past any model).
MAX_REPEATS = 1_000_000
Launch = Annotated[int, Field(ge=0, lt=1 << 31)]
Repeat = Annotated[tuple[Launch, Launch, Launch], Strict(False)]
"""``[N, M, R]``: launch N, in graph run R, repeats launch M (an earlier one)."""
PassNumber = Annotated[str, Field(pattern=r"^[0-9]{1,9}$"), v.Expect("a pass's number")]
Repeats = Mapping[int, tuple[int, int]]
"""launch → (the earlier launch it repeats, its graph run)."""


def _each_after_the_one_it_repeats(items: tuple[Repeat, ...]) -> tuple[Repeat, ...]:
    seen: set[int] = set()
    for i, (launch, earlier, _) in enumerate(items):
        if earlier >= launch or launch in seen:
            raise ValueError(
                f"[{i}] is {list(items[i])}, not [launch, earlier launch, graph run] of a new launch "
                "after the one it repeats"
            )
        seen.add(launch)
    if any(earlier in seen for _, earlier, _ in items):
        raise ValueError("it names a launch that repeats another as the one repeated")
    return items


PassRepeats = Annotated[v.Items[Repeat], Field(max_length=MAX_REPEATS), AfterValidator(_each_after_the_one_it_repeats)]
"""One pass's launches left out, in the order run."""


@dataclass(frozen=True, slots=True)
class Provenance(v.Document):
    """A ledger variant's provenance: its compile's Inductor artifacts and fusion log, the launches left out."""

    __always__ = frozenset({"artifacts", "fusion_log"})

    artifacts: Annotated[v.Items[Annotated[Artifact, AfterValidator(_readable)]], Field(max_length=MAX_ITEMS)] = ()
    """In the order Inductor emitted them."""
    fusion_log: Annotated[v.Items[str], Field(max_length=MAX_ITEMS)] = ()
    """The fusion log's lines (its ``cannot fuse A with B: reason`` lines are the refusals)."""
    repeats: Annotated[Mapping[PassNumber, PassRepeats], Field(max_length=1000)] = field(default_factory=dict)
    """By pass (``"0"``), the launches ncu left out as repeats of an earlier one (``repeats: once``), in order."""
    sizes: Annotated[
        Mapping[GraphId, Annotated[Mapping[Symbol, Size], Field(max_length=10_000)]], Field(max_length=10_000)
    ] = field(default_factory=dict)
    """Graph → the value of each of its symbolic sizes in the run (``{"0/0": {"s27": 256}}``)."""

    def left_out(self) -> dict[int, Repeats]:
        """:attr:`repeats` by pass number: launch → (the launch it repeats, its graph run)."""
        return {int(k): {n: (m, r) for n, m, r in items} for k, items in self.repeats.items()}


@dataclass(frozen=True, slots=True)
class RowFigures:
    """A row a node ran in, as a :class:`NodeChange` shows it."""

    kernel: str
    dram_bytes: float | None
    """None when nothing was measured for it."""
    duration_ns: float | None


@dataclass(frozen=True, slots=True)
class NodeChange:
    """A node of the model whose company changed between two ledgers (:func:`fuseci.ledger.diff.diff`)."""

    node: str
    """The node, as :func:`fuseci.ledger.match.label` names it."""
    was_with: tuple[str, ...]
    """The other nodes it ran with in the old ledger (empty: alone, or absent)."""
    now_with: tuple[str, ...]
    """Those it runs with now."""
    before: tuple[RowFigures, ...]
    """The rows it ran in (empty: the node was not in the old ledger)."""
    after: tuple[RowFigures, ...]
    """The rows it runs in now (empty: gone)."""

    def line(self) -> str:
        """One line for the terminal: ``add (block.py:17): was fused with layer_norm_1
        (block.py:19) in k1 (34.5 MB, 14.7 µs); now alone in k2 (34.4 MB, 13.8 µs)``."""
        if not self.before:
            return f"{self.node}: new, in {_rows(self.after)}"
        if not self.after:
            return f"{self.node}: gone, was in {_rows(self.before)}"
        was = f"was fused with {_names(self.was_with)}" if self.was_with else "ran alone"
        now = f"now fused with {_names(self.now_with)}" if self.now_with else "now alone"
        return f"{self.node}: {was} in {_rows(self.before)}; {now} in {_rows(self.after)}"


def _names(items: Sequence[str], limit: int = 6) -> str:
    listed = ", ".join(items[:limit])
    return f"{listed} and {len(items) - limit} more" if len(items) > limit else listed


def _rows(rows: Sequence[RowFigures]) -> str:
    return " + ".join(f"{r.kernel} ({_figures(r)})" for r in rows)


def _figures(r: RowFigures) -> str:
    if r.dram_bytes is None or r.duration_ns is None:
        return "not measured"
    return f"{quantities.show(names.DRAM_BYTES, r.dram_bytes)}, {quantities.show(names.DURATION, r.duration_ns)}"


def diff_lines(changes: Sequence[NodeChange]) -> list[str]:
    """The changes as lines for the terminal (one when nothing changed)."""
    return [c.line() for c in changes] or ["no node of the model changed company"]
