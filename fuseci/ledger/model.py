"""The ledger of one compiled forward: one row per kernel call of Inductor's wrapper, what it
implements and what it moved, and the graph's totals. Frozen data, built by
:mod:`fuseci.ledger.build`, stored with a run and compared by :mod:`fuseci.ledger.gate`."""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Row(v.Document):
    """One wrapper call of the compiled forward (or the untraced kernels)."""

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

    @property
    def ratio(self) -> float | None:
        """Measured DRAM bytes over :attr:`min_bytes`."""
        if self.measured is None or not self.min_bytes:
            return None
        return self.measured.dram_bytes / self.min_bytes


@dataclass(frozen=True, slots=True)
class Ledger(v.Document):
    """The ledger of one compiled forward."""

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

    @property
    def measured_bytes(self) -> float:
        """DRAM bytes of every row."""
        return sum(r.measured.dram_bytes for r in self.rows if r.measured is not None)


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
