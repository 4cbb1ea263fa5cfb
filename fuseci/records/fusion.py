"""The ledger of one compiled forward: one row per kernel call of Inductor's wrapper, what it
implements and what it moved, and the graph's totals. Frozen data, built by
:mod:`fuseci.ledger.build`, stored with a run and compared by :mod:`fuseci.ledger.gate`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated

from pydantic import Field

from fuseci import validation as v


class Kind(str, Enum):
    """What a ledger row is (a ``str`` enum: ``enum.StrEnum`` is Python 3.11's, fuseci runs on 3.10)."""

    TRITON = "triton"
    """A kernel Inductor generated (one launch per call)."""
    EXTERN = "extern"
    """A library call in the compiled graph (cuBLAS GEMM, attention, convolution): an island
    named by its node; it may launch several kernels."""
    UNTRACED = "untraced"
    """Kernels inside the forward's range that no wrapper call accounts for (CUDA-graph replay,
    a kernel launched outside Inductor's wrapper, provenance missing): kept, with a note."""


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
    """The model source line it came from, as ``file:line: code`` (the innermost frame of its
    stack trace), or "" when Inductor recorded none. Stable across edits elsewhere in the model:
    the identity the gate matches nodes by (with :attr:`op`)."""


#: A row's bytes or time, below 2**63: any real one, and the ledger's sums of them stay finite
#: (``1.797e308`` is hostile input, refused where the file is read, never summed to an overflow).
Summed = Annotated[float, Field(ge=0, lt=v.INT_LIMIT)]


@dataclass(frozen=True, slots=True)
class Measured(v.Document):
    """What a row's kernels moved and took, summed over their launches (ncu, one pass)."""

    __always__ = frozenset({"shapes"})

    launches: v.Count
    dram_bytes: Summed
    """DRAM bytes read and written."""
    global_bytes: Summed
    """Global bytes loaded and stored through the LSU pipe (exact for a kernel that repeats its
    work; TMA loads are not counted)."""
    l2_bytes: Summed
    """L2 bytes the SMs requested (sectors read and written, 32 B each)."""
    duration_ns: Summed
    kernels: Annotated[v.Items[v.Name], Field(max_length=MAX_ITEMS)]
    """The names ncu saw, in launch order (distinct names only)."""
    shapes: Annotated[v.Items[v.Name], Field(max_length=MAX_ITEMS)] = ()
    """The launch shapes ncu saw, ``GRIDxBLOCK`` (threads), in launch order (distinct only): the
    choice Triton's autotuner (or a library's heuristic) made, recorded so that a verdict can
    say when it changed. Empty in ledgers recorded before it was kept."""
    loads: v.Amount | None = None
    """Global bytes the SMs asked to load: through the LSU and through the TMA
    (``l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum`` + ``l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum``).
    Unlike DRAM bytes, a tensor the L2 kept is still counted, so a correct kernel cannot ask for
    less than it must read. None in ledgers recorded before it was kept, or where the TMA's bytes
    were not counted (``ncu: {tma: false}``)."""
    stores: v.Amount | None = None
    """Global bytes the SMs asked to store, likewise (``..._lsu_mem_global_op_st.sum`` +
    ``l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum``)."""

    @property
    def requested(self) -> float | None:
        """:attr:`loads` and :attr:`stores`; None where either is unknown."""
        return None if self.loads is None or self.stores is None else self.loads + self.stores


class Cause(str, Enum):
    """What made a row, or the forward, move more bytes than its minimum (:mod:`fuseci.ledger.excess`)."""

    REREAD = "re-reads"
    """Loads above each tensor the row reads read once: tiles of a GEMM loaded again, a looped
    reduction reading its row twice (whether L1 or L2 served them)."""
    BOUNDARY = "fusion boundaries"
    """A tensor written by one row and read by another (a materialised fusion boundary), or an
    input read by more than one row: what fusing the rows would not move."""
    LAYOUT = "layout copies"
    """A row that only copies (a ``.contiguous()``, a copy for a library call's layout): all it
    moves, and the reads of what it wrote."""
    WIDENED = "widened dtypes"
    """The part of a boundary tensor's bytes due to its element type having been widened
    (``x.float()`` written and read back in fp32, not bf16)."""
    UNEXPLAINED = "unexplained"
    """What the ledger's data cannot attribute: stores above the outputs written once, loads
    below the inputs read once, rows without a minimum, kernels no call claims."""


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
    """The Triton kernel's name (``triton_per_fused_add_native_layer_norm_view_1``) or the extern
    call (``extern_kernels.addmm``)."""
    kind: Annotated[Kind, v.Choice(tuple(k.value for k in Kind), what="unknown row kind")]
    nodes: Annotated[v.Items[Node], Field(max_length=MAX_ITEMS)]
    """The post-grad nodes it implements (views included)."""
    measured: Measured | None
    """None when no kernel in the range matched this call."""
    min_bytes: v.Count | None
    """Each tensor crossing the call's boundary read or written once: inputs it reads from outside
    (graph inputs, weights, other calls' outputs) and outputs read outside it or returned. None
    when the shapes are unknown."""
    note: v.Text = ""
    """What is known to be missing or odd about this row, for the reader."""
    excess: Annotated[v.Items[Part], Field(max_length=MAX_ITEMS)] = ()
    """Its requested bytes above :attr:`min_bytes`, by cause (:mod:`fuseci.ledger.excess`); empty
    where either is unknown, or nothing is above it."""

    @property
    def requested(self) -> float | None:
        """The global bytes its kernels asked for (:attr:`Measured.requested`); 0 for a row that
        launched nothing; None where unknown."""
        return 0.0 if self.measured is None else self.measured.requested

    @property
    def ratio(self) -> float | None:
        """Requested bytes over :attr:`min_bytes`: 1.0 moves each tensor once; a correct kernel
        cannot ask for less (the L2 keeping a tensor does not lower it, as it lowers DRAM bytes)."""
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
    """Inductor's reasons for not fusing two nodes, as it logged them (normalised: no node
    numbers), one per distinct reason."""
    notes: Annotated[v.Items[v.Text], Field(max_length=MAX_ITEMS)] = field(default=())
    """Whole-ledger notes (CUDA graphs, dynamic shapes: several graphs for one frame)."""

    excess: Annotated[v.Items[Part], Field(max_length=MAX_ITEMS)] = ()
    """The forward's bytes above its floor that are no row's own: tensors crossing between rows,
    a copy's buffers, rows without a minimum. With the rows' :attr:`Row.excess`, they sum to
    :attr:`requested_bytes` less :attr:`floor_bytes` (:meth:`over_floor`). Empty where either is
    unknown."""

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
        """The requested bytes above the floor, by cause, every cause present (0 where none);
        None where the requested bytes, the floor or the split is unknown."""
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
    """Not profiled: it repeats an earlier launch's configuration, whose measurement it holds
    (a ledger's ``repeats: once``)."""
    loads: float | None = None
    """Global bytes it asked to load, LSU and TMA (None: the TMA's were not counted)."""
    stores: float | None = None
    """Global bytes it asked to store, LSU and TMA (None: likewise)."""
