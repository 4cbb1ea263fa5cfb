"""The catalogue of quantities: every value fuseci measures or gates, each declared once, with
its sources, aggregation, gate, label and unit; adding a quantity is one entry in
:data:`QUANTITIES`. It is read when used, never copied at import, so a test may replace it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from fuseci.config import names
from fuseci.config.policy import Direction


class Aggregate(enum.Enum):
    """How a quantity of one variant is made from its kernels (or from elsewhere)."""

    COUNT = "count"
    """How many kernels the variant launched."""
    SUM = "sum"
    """The sum of its one source over the variant's kernels (a missing value counts 0), times
    :attr:`Quantity.scale`."""
    MAX = "max"
    """The largest value of its one source among the variant's kernels."""
    WEIGHTED = "duration-weighted mean"
    """The mean of its one source over the variant's kernels, each weighted by its duration."""
    LONGEST = "longest kernel's"
    """Its one source's value in the variant's longest kernel."""
    DERIVED = "derived"
    """Computed from other quantities of the variant (:mod:`fuseci.frames.metrics`)."""
    RECORD = "harness record"
    """Taken from the harness record (timings outside ncu, the case's minimum bytes)."""
    KERNEL = "per kernel"
    """Not aggregated: a column of the kernels frame only (launch shapes, per-kernel rates)."""


class Gate(enum.Enum):
    """How a suite may gate a quantity."""

    NONE = "none"
    """Measured and reported, never gated."""
    GAIN = "gain"
    """The fusion gain (unfused ÷ variant, higher is better) against the baseline's gain, within
    the gate's tolerance; expectations (``expect:``) apply to it too."""
    VALUE = "value"
    """The variant's own value against the baseline's value of the variant it is judged as, in
    the quantity's :attr:`Quantity.direction`: an exact count (``exact``) or within a slack."""
    RULE = "rule"
    """A check of its own (whether a fused call waits for the GPU)."""


class Counted(enum.Enum):
    """How a quantity the SMs count exactly is judged against its baseline
    (:func:`fuseci.judge.counters.counted_check`): what moved between the baseline's profiled
    passes gets a band (:attr:`Quantity.moving_floor`); what did not is judged exactly."""

    BYTES = "bytes"
    """Bytes the SMs ask of memory: judged whatever changed in the launches (they repeat on every
    kernel seen, library kernels included)."""
    TRAFFIC = "traffic"
    """L2 sectors requested: judged whatever changed in the launches, within its tolerance, where
    the baseline's profiled passes say how far it moves."""
    WORK = "work"
    """Instructions executed: judged on the same build of the same kernels, where the baseline's
    profiled passes say how far it moves; across a rebuild only where the suite states its gate."""


class Unit(enum.Enum):
    """What a quantity's number counts, for the way it is shown (:func:`show`)."""

    COUNT = "count"
    BYTES = "bytes"
    NANOSECONDS = "ns"
    PERCENT = "%"
    BYTES_PER_SECOND = "B/s"
    FRACTION = "fraction"
    RATIO = "ratio"


@dataclass(frozen=True, slots=True)
class Quantity:
    """One measured or gated quantity."""

    name: str
    """Its name everywhere: the ncu metric's, verbatim, where it is one, else fuseci's own."""
    label: str
    """What people read (``DRAM bytes read``)."""
    unit: Unit
    """What its number counts."""
    aggregate: Aggregate
    """How a variant's value is made from its kernels."""
    sources: tuple[str, ...] = ()
    """The ncu metrics it is read from (empty: not from ncu); one-source aggregates read the first."""
    scale: float = 1.0
    """A factor on the aggregated source (32 bytes per L2 sector)."""
    gate: Gate = Gate.NONE
    """Whether and how a suite may gate it."""
    direction: Direction = Direction.HIGHER_IS_BETTER
    """Which way is better for a :attr:`Gate.VALUE` gate (a gain is always higher-is-better)."""
    default: str | None = None
    """Its gate's tolerance where a suite says nothing (``exact``, ``10%``); None: gated only
    where a suite lists it."""
    unfused: bool = False
    """A :attr:`Gate.VALUE` gate judges the ``unfused`` variant too (an exact counter); else
    fused variants only (occupancy)."""
    short: str = ""
    """A table column's heading for its gain (``bytes``, ``real time``), where tables show it."""
    counted: Counted | None = None
    """A count the SMs keep exactly (bytes, instructions), and how it is judged against its
    baseline; None for everything else."""
    moving_floor: float = 0.0
    """The least relative band of a :attr:`counted` quantity that moved between the baseline's
    profiled passes: a few passes see only part of how far it moves between runs."""
    kernel_floor: float = 0.0
    """The least band of one kernel whose :attr:`counted` quantity moved between the baseline's
    profiled passes, relative to its own count (a warp-specialised kernel's instructions move
    with its timing)."""

    def __post_init__(self) -> None:
        if self.aggregate in (Aggregate.SUM, Aggregate.MAX, Aggregate.WEIGHTED, Aggregate.LONGEST) and not self.sources:
            raise ValueError(f"quantity {self.name!r}: a {self.aggregate.value} needs a source metric")
        if self.aggregate is Aggregate.KERNEL and self.gate is not Gate.NONE:
            raise ValueError(f"quantity {self.name!r}: a per-kernel column cannot be gated")
        if self.default is not None and self.gate is Gate.NONE:
            raise ValueError(f"quantity {self.name!r}: a default tolerance needs a gate")
        if self.counted is not None and (self.gate is not Gate.VALUE or self.aggregate is not Aggregate.SUM):
            raise ValueError(f"quantity {self.name!r}: a counted quantity is a summed value gate")

    @property
    def per_variant(self) -> bool:
        """True when the variants frame has a column of it."""
        return self.aggregate is not Aggregate.KERNEL


def _metric(name: str, label: str, unit: Unit, aggregate: Aggregate, **more: Any) -> Quantity:
    """A quantity read from the ncu metric of its own name."""
    return Quantity(name, label, unit, aggregate, sources=(name,), **more)


def _counted(name: str, label: str, unit: Unit, counted: Counted, source: str | None = None, **more: Any) -> Quantity:
    """A count the SMs keep of what they ask or execute: summed over the variant's kernels, gated
    on its own value (lower is better) as ``counted`` says (``exact`` unless ``default`` says)."""
    return Quantity(
        name,
        label,
        unit,
        Aggregate.SUM,
        sources=(source or name,),
        gate=Gate.VALUE,
        direction=Direction.LOWER_IS_BETTER,
        counted=counted,
        **{"default": "exact", **more},
    )


#: Every quantity, in the order reports, gates and checks list them: the gains first, then the
#: gated values, the rules, and what is only measured. Occupancy, a cause rather than an outcome,
#: is gated only where a suite lists it (docs/BENCHMARKS.md has the defaults' reasons).
QUANTITIES: tuple[Quantity, ...] = (
    Quantity(
        names.LAUNCHES, "launches", Unit.COUNT, Aggregate.COUNT, gate=Gate.GAIN, default="exact", short="launches"
    ),
    Quantity(
        names.DRAM_BYTES, "DRAM bytes", Unit.BYTES, Aggregate.DERIVED, gate=Gate.GAIN, default="1%", short="bytes"
    ),
    _metric(
        names.DURATION, "duration", Unit.NANOSECONDS, Aggregate.SUM, gate=Gate.GAIN, default="10%", short="ncu time"
    ),
    _metric(names.DRAM_READ, "DRAM bytes read", Unit.BYTES, Aggregate.SUM, gate=Gate.GAIN),
    _metric(names.DRAM_WRITE, "DRAM bytes written", Unit.BYTES, Aggregate.SUM, gate=Gate.GAIN),
    Quantity(
        names.EVENT_TIME,
        "CUDA-event time",
        Unit.NANOSECONDS,
        Aggregate.RECORD,
        gate=Gate.GAIN,
        default="10%",
        short="real time",
    ),
    _metric(names.OCC_THEORETICAL, "theoretical occupancy", Unit.PERCENT, Aggregate.WEIGHTED, gate=Gate.VALUE),
    _metric(names.OCC_ACHIEVED, "achieved occupancy", Unit.PERCENT, Aggregate.WEIGHTED, gate=Gate.VALUE),
    # Counted, not sampled (docs/BENCHMARKS.md, "Which counters repeat").
    _counted(names.GLOBAL_LOAD_BYTES, "global bytes loaded", Unit.BYTES, Counted.BYTES),
    _counted(names.GLOBAL_STORE_BYTES, "global bytes stored", Unit.BYTES, Counted.BYTES),
    _counted(names.TMA_LOAD_BYTES, "TMA bytes loaded", Unit.BYTES, Counted.BYTES),
    _counted(names.TMA_STORE_BYTES, "TMA bytes stored", Unit.BYTES, Counted.BYTES),
    _counted(
        names.INSTRUCTIONS,
        "instructions executed",
        Unit.COUNT,
        Counted.WORK,
        moving_floor=0.001,
        kernel_floor=0.02,
    ),
    _counted(
        names.L2_READ_BYTES,
        "L2 bytes requested",
        Unit.BYTES,
        Counted.TRAFFIC,
        source=names.L2_READ_SECTORS,
        scale=32.0,
        default="0.5%",
        moving_floor=0.25,
    ),
    Quantity(names.HOST_BLOCKING, "host blocking", Unit.FRACTION, Aggregate.RECORD, gate=Gate.RULE, default="exact"),
    _metric(names.DRAM_READ_RATE, "DRAM read throughput", Unit.BYTES_PER_SECOND, Aggregate.DERIVED),
    _metric(names.DRAM_WRITE_RATE, "DRAM write throughput", Unit.BYTES_PER_SECOND, Aggregate.DERIVED),
    _metric(names.DRAM_PCT_PEAK, "DRAM throughput % of peak", Unit.PERCENT, Aggregate.KERNEL),
    Quantity(
        names.L2_WRITE_BYTES,
        "L2 bytes written",
        Unit.BYTES,
        Aggregate.SUM,
        sources=(names.L2_WRITE_SECTORS,),
        scale=32.0,  # bytes per L2 sector
    ),
    _metric(names.GRID_SIZE, "grid size", Unit.COUNT, Aggregate.KERNEL),
    _metric(names.BLOCK_SIZE, "block size", Unit.COUNT, Aggregate.KERNEL),
    _metric(names.REGISTERS, "registers per thread", Unit.COUNT, Aggregate.KERNEL),
    _metric(names.REPLAY_PASSES, "replay passes", Unit.COUNT, Aggregate.MAX),
    _metric(names.SHARED_MEM_STATIC, "static shared memory per block", Unit.BYTES, Aggregate.KERNEL),
    _metric(names.SHARED_MEM_DYNAMIC, "dynamic shared memory per block", Unit.BYTES, Aggregate.KERNEL),
    # Blocks per SM each resource allows the longest kernel (the smallest limits occupancy).
    _metric(names.LIMIT_REGISTERS, "blocks per SM its registers allow", Unit.COUNT, Aggregate.LONGEST),
    _metric(names.LIMIT_SHARED_MEM, "blocks per SM its shared memory allows", Unit.COUNT, Aggregate.LONGEST),
    _metric(names.LIMIT_WARPS, "blocks per SM its block size allows", Unit.COUNT, Aggregate.LONGEST),
    _metric(names.LIMIT_BLOCKS, "blocks per SM the hardware allows", Unit.COUNT, Aggregate.LONGEST),
    Quantity(names.EVENT_TIME_IQR, "CUDA-event time IQR", Unit.NANOSECONDS, Aggregate.RECORD),
    Quantity(names.EVENT_TIME_REPEATS, "timed calls", Unit.COUNT, Aggregate.RECORD),
    Quantity(names.EVENT_TIME_Q1, "CUDA-event time 25th percentile", Unit.NANOSECONDS, Aggregate.RECORD),
    Quantity(names.EVENT_TIME_Q3, "CUDA-event time 75th percentile", Unit.NANOSECONDS, Aggregate.RECORD),
    Quantity(names.EVENT_TIME_MIN, "fastest timed call", Unit.NANOSECONDS, Aggregate.RECORD),
    Quantity(names.EVENT_TIME_MAX, "slowest timed call", Unit.NANOSECONDS, Aggregate.RECORD),
    Quantity(names.HOST_TIME, "host time per call", Unit.NANOSECONDS, Aggregate.RECORD),
    Quantity(names.MIN_BYTES, "minimum DRAM bytes", Unit.BYTES, Aggregate.RECORD),
    Quantity(names.BYTES_RATIO, "DRAM bytes ÷ minimum", Unit.RATIO, Aggregate.RECORD),
)


def counted() -> tuple[Quantity, ...]:
    """The quantities the SMs count exactly (:attr:`Quantity.counted`), in catalogue order."""
    return tuple(q for q in QUANTITIES if q.counted is not None)


def get(name: str) -> Quantity | None:
    """The entry named ``name``, or None."""
    return next((q for q in QUANTITIES if q.name == name), None)


#: The metrics of the TMA's bytes, which cost two more replay passes per kernel (``ncu: {tma: false}``).
TMA_METRICS = (names.TMA_LOAD_BYTES, names.TMA_STORE_BYTES)


def ncu_metrics(tma: bool = True) -> tuple[str, ...]:
    """Every metric ncu is asked for, in catalogue order (each once); without ``tma``, all but
    :data:`TMA_METRICS`."""
    return tuple(dict.fromkeys(s for q in QUANTITIES for s in q.sources if tma or s not in TMA_METRICS))


def variant_quantities() -> tuple[str, ...]:
    """The quantities of the variants frame, in catalogue order."""
    return tuple(q.name for q in QUANTITIES if q.per_variant)


def gateable(gate: Gate | None = None) -> tuple[str, ...]:
    """The quantities a suite may gate with ``gate`` (default: any kind): gains, then gated values,
    then rules, each in catalogue order."""
    kinds = (Gate.GAIN, Gate.VALUE, Gate.RULE) if gate is None else (gate,)
    return tuple(q.name for kind in kinds for q in QUANTITIES if q.gate is kind)


def gains() -> tuple[str, ...]:
    """The quantities with a fusion gain (unfused ÷ variant): the gains frame's columns, what
    ``expect:`` may bound."""
    return gateable(Gate.GAIN)


def default_gates() -> dict[str, str]:
    """The tolerance of every quantity gated where a suite says nothing."""
    return {q.name: q.default for q in QUANTITIES if q.default is not None}


def label(name: str) -> str:
    """A quantity's name for people (the name itself when the catalogue has no such entry)."""
    q = get(name)
    return name if q is None else q.label


def show(name: str, value: float, *, exact: bool = False) -> str:
    """A value of the quantity ``name`` for messages, in its unit: ``48.5%``, ``1,024``,
    ``322.9 µs``, ``1,301.1 MB``; ``exact``: bytes to the byte (``536,870,944 bytes``), for the
    exact counters, whose changes may be one sector."""
    q = get(name)
    unit = Unit.RATIO if q is None else q.unit
    if not math.isfinite(value):
        return "n/a"
    match unit:
        case Unit.PERCENT:
            return f"{value:.1f}%"
        case Unit.COUNT:
            return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"
        case Unit.BYTES:
            return f"{value:,.0f} bytes" if exact or abs(value) < 1e6 else f"{value / 1e6:,.1f} MB"
        case Unit.NANOSECONDS:
            return f"{value / 1e3:,.1f} µs"
        case Unit.BYTES_PER_SECOND:
            return f"{value / 1e9:,.1f} GB/s"
        case Unit.FRACTION:
            return f"{value:.0%}"
        case Unit.RATIO:
            return f"{value:.4g}"
