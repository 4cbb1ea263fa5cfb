"""The suite model: frozen dataclasses for suites, cases, variants and their policies, built
from YAML by :mod:`fuseci.config.parse`; docs/SUITES.md documents the format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fuseci.config import names
from fuseci.config.dtypes import DEFAULT_FRAMEWORK, dtype
from fuseci.config.policy import Expectation, Tolerance, parse_tolerance

#: The variant every gain is measured against (a gain is unfused ÷ variant).
UNFUSED = "unfused"

DISTRIBUTIONS = ("normal", "uniform", "randint")
#: The values a ``randint`` input may take in each integer dtype (a float dtype takes any in int64's).
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
}


def randint_range(dtype: str, low: float, high: float) -> tuple[int, int]:
    """The first value and the count of values of a ``randint`` input of ``dtype``: the whole
    numbers in [low, high), both bounds truncated to integers.

    Raises:
        ValueError: the range is empty, or holds a value ``dtype`` cannot; says which.
    """
    lo, hi = int(low), int(high)
    first, last = INT_RANGES.get(dtype, INT_RANGES["int64"])
    if not lo < hi:
        raise ValueError(f"randint draws whole numbers in [low, high): [{lo}, {hi}) holds none")
    if lo < first or hi - 1 > last:
        raise ValueError(
            f"randint range [{lo}, {hi}) leaves what {dtype} holds ({first}..{last}); narrow low/high or "
            "choose a wider dtype"
        )
    return lo, hi - lo


CLOCK_CONTROLS = ("none", "base")
CACHE_CONTROLS = ("all", "none")
REPLAY_MODES = ("kernel", "application")

#: Default allowance of a fused variant's DRAM bytes over the case's minimum.
DEFAULT_BYTES_ALLOWANCE = "10%"

#: What a planted variant's ``caught_by`` may name besides a gated quantity (see :class:`Variant`).
CHECK_NAMES = ("correctness", "inventory", "bytes", "kernels", "compile", "ledger")

_OFF = parse_tolerance("off")

#: How a ledger profiles a launch that repeats an earlier launch's configuration (``ledger.repeats``).
LEDGER_REPEATS = ("once", "every")
#: The modes ``torch.compile`` takes, for a factory's module (:class:`CompileOptions`).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input tensor, built on the GPU from a seeded generator."""

    name: str
    """Keyword the variant functions receive it as."""
    shape: tuple[int, ...]
    """Tensor shape."""
    dtype: str
    """Element type, one of :data:`fuseci.config.dtypes.DTYPE_NAMES`."""
    distribution: str
    """``normal`` (mean, std), ``uniform`` (low, high) or ``randint`` (low, high exclusive)."""
    seed: int
    """Generator seed; identical seeds give identical tensors on every run."""
    low: float = 0.0
    """Lower bound for ``uniform`` and ``randint``."""
    high: float = 1.0
    """Upper bound for ``uniform`` and ``randint``."""
    mean: float = 0.0
    """Mean for ``normal``."""
    std: float = 1.0
    """Standard deviation for ``normal``."""

    @property
    def nbytes(self) -> int:
        """Size of the tensor in bytes."""
        return math.prod(self.shape) * dtype(self.dtype).itemsize


@dataclass(frozen=True, slots=True)
class Correctness:
    """How close a variant's output must be to the unfused output and to the reference."""

    rtol: float = 1e-5
    """Relative tolerance, elementwise: ``|out - ref| <= atol + rtol * |ref|``."""
    atol: float = 1e-6
    """Absolute tolerance."""


@dataclass(frozen=True, slots=True)
class KernelRule:
    """Kernels a variant declares it must launch: how many of its kernels a name pattern matches
    (``triton_.*fused.*: 1``: exactly one)."""

    pattern: str
    """A regular expression, matched against the whole kernel name as ncu reports it."""
    low: int
    """Fewest matching launches allowed."""
    high: int | None
    """Most matching launches allowed (None: no upper bound)."""
    text: str = ""
    """The count as the suite wrote it, for messages (``1``, ``">= 2"``)."""

    def holds(self, count: int) -> bool:
        """True when ``count`` matching launches satisfy the rule."""
        return self.low <= count and (self.high is None or count <= self.high)

    def describe(self) -> str:
        """The rule for people: ``exactly 1``, ``at least 2``, ``1 to 3``."""
        if self.high == self.low:
            return f"exactly {self.low}"
        if self.high is None:
            return f"at least {self.low}"
        return f"at most {self.high}" if self.low == 0 else f"{self.low} to {self.high}"


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """A variant whose compiled forward is audited kernel by kernel against the baseline's (the
    fusion ledger, :mod:`fuseci.ledger`)."""

    allow_new: tuple[str, ...] = ()
    """Regular expressions (whole kernel names) of kernels that may appear with no counterpart
    in the baseline without failing the build."""
    graphs: int | None = None
    """How many graphs the compiled forward must be (1: no graph break); None: any."""
    repeats: str = "once"
    """``once``: a launch repeating an earlier one's configuration in the same forward is not
    profiled again, but counted with the first one's measurement; ``every``: each is profiled."""


@dataclass(frozen=True, slots=True)
class CompileOptions:
    """How a factory's module is compiled: ``torch.compile(module, **options.arguments())``."""

    mode: str = "default"
    """One of :data:`COMPILE_MODES`."""
    fullgraph: bool = False
    """True: a graph break is an error at the first call, not a second graph."""
    dynamic: bool | None = None
    """True: compile for any shape; False: for these shapes only; None: torch decides."""

    def arguments(self) -> dict[str, str | bool | None]:
        """``torch.compile``'s keyword arguments (what the harness record holds)."""
        return {"mode": self.mode, "fullgraph": self.fullgraph, "dynamic": self.dynamic}


@dataclass(frozen=True, slots=True)
class Factory:
    """A variant whose ``fn`` is a factory: called once per case and process with the case's
    params (under ``torch.manual_seed(seed)``), it returns a ``torch.nn.Module`` whose forward the
    variant calls on the case's inputs, positionally (:mod:`fuseci.harness.factory`)."""

    seed: int
    """The seed its weights are drawn from: the same for every variant of the case that names
    the factory, and in every process."""
    compile: CompileOptions | None = None
    """How the module is compiled; None: it runs eagerly."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One implementation of a case."""

    id: str
    """Variant id, used in the NVTX range name."""
    fn: str
    """``module:function`` reference; called with the inputs and params as keyword arguments,
    or, with :attr:`factory`, the factory that builds the variant's module."""
    expect: Mapping[str, Expectation]
    """Absolute bounds on this variant's fusion gains, by quantity."""
    candidate_for: str | None = None
    """Judge this variant against the baseline recorded for that variant of the case (a
    candidate rewrite, or a planted regression, against the kernel it would replace)."""
    caught_by: tuple[str, ...] = ()
    """A planted regression: the checks that must catch it (gated quantities, ``correctness``,
    ``inventory``, ``bytes``). Its failures are expected; its verdict is whether they all came."""
    line: int = 0
    """Line of its ``module:function`` in the suite file (0 when unknown)."""
    framework: str = DEFAULT_FRAMEWORK
    """The array framework its function takes its inputs in (:data:`fuseci.config.dtypes.FRAMEWORKS`):
    ``cupy`` arrays, or ``torch`` tensors on the same memory."""
    kernels: tuple[KernelRule, ...] = ()
    """Kernels it must launch (empty: none declared)."""
    ledger: LedgerSpec | None = None
    """Audit its compiled forward kernel by kernel (a ``torch.compile``'d model); None: not."""
    factory: Factory | None = None
    """Set when :attr:`fn` names a factory of a ``torch.nn.Module`` (``factory:`` in the suite)."""

    @property
    def judged_as(self) -> str:
        """The variant whose baseline this one is compared with."""
        return self.candidate_for or self.id


@dataclass(frozen=True, slots=True)
class Case:
    """One fusion pattern: inputs, variants and the policies that judge them."""

    id: str
    """Case id, used in the NVTX range name."""
    description: str
    """One line for reports."""
    inputs: tuple[InputSpec, ...]
    """Tensors passed to every variant (and the reference)."""
    params: Mapping[str, int | float | str | bool]
    """Scalars passed to every variant as keyword arguments."""
    variants: tuple[Variant, ...]
    """``unfused`` first, then the fused variants in file order."""
    reference: str | None
    """Optional ``module:function`` float64 reference (NumPy in, NumPy out); without one, a factory's
    case is checked against a float64 copy of its module."""
    correctness: Correctness | None
    """Output tolerances the suite states; None: each output's dtype sets them
    (:attr:`fuseci.config.dtypes.DType.correctness`)."""
    gates: Mapping[str, Tolerance]
    """Tolerance of each gated fusion gain against its baseline, by quantity."""
    line: int
    """Line of the case in the suite file (1-based), for messages and annotations."""
    bytes_allowance: Tolerance = field(default_factory=lambda: parse_tolerance(DEFAULT_BYTES_ALLOWANCE))
    """How far above :attr:`min_bytes` a fused variant's DRAM bytes may be (``off``: not checked)."""
    min_bytes: int | None = None
    """The case's minimum DRAM traffic in bytes when the suite states it; None: the harness
    derives it (every input read once, every ``unfused`` output written once)."""
    reference_line: int = 0
    """Line of its ``reference:`` in the suite file (0 when it has none or it is unknown)."""
    framework: str = DEFAULT_FRAMEWORK
    """The array framework the reference takes its float64 inputs in (the case's, or the
    suite's default); each variant may name its own."""
    stated_gates: frozenset[str] = frozenset()
    """The quantities whose gate the suite states (in its defaults or the case), as opposed to
    fuseci's defaults (:class:`fuseci.config.quantities.Counted` tells why it matters)."""

    @property
    def functions(self) -> tuple[str, ...]:
        """The ``module:function`` references it runs, variants then reference, each once."""
        return tuple(dict.fromkeys([*(v.fn for v in self.variants), *([self.reference] if self.reference else [])]))

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The array frameworks its variants and reference take inputs in, in first use order."""
        used = ([self.framework] if self.reference else []) + [v.framework for v in self.variants]
        return tuple(dict.fromkeys(used))


@dataclass(frozen=True, slots=True)
class NcuSettings:
    """How ncu profiles the suite; recorded in the environment fingerprint."""

    clock_control: str = "none"
    """``none``: clocks as the card runs them; ``base``: ncu locks base clocks while profiling."""
    cache_control: str = "all"
    """``all``: flush caches before every kernel (reproducible bytes); ``none``: keep them."""
    replay_mode: str = "kernel"
    """``kernel`` or ``application`` replay."""
    timeout_s: float = 1800.0
    """Wall-clock limit for the whole profiled run."""
    tma: bool = True
    """Count the bytes the TMA loads and stores, at two more replay passes per kernel; not part of
    the environment fingerprint (where off, those counts are not judged)."""


@dataclass(frozen=True, slots=True)
class Suite:
    """A parsed, validated suite file."""

    name: str
    """Suite id, used in range names and baseline file names."""
    path: Path
    """The file it was loaded from."""
    description: str
    """One line for reports."""
    cases: tuple[Case, ...]
    """Cases in file order."""
    ncu: NcuSettings = field(default_factory=NcuSettings)
    """Profiler settings."""
    line: int = 0
    """Line of its ``suite:`` key in the file (0 when unknown)."""
    planted: bool = False
    """A suite of planted regressions (variants with ``caught_by``) that proves the gates catch
    them; ``fuseci run`` without suite arguments skips it."""

    @property
    def frameworks(self) -> tuple[str, ...]:
        """Every array framework its cases take inputs in, in first use order."""
        return tuple(dict.fromkeys(f for c in self.cases for f in c.frameworks))

    @property
    def timed(self) -> bool:
        """True when any case gates the CUDA-event speedup, so ``fuseci run`` times the suite."""
        return any(c.gates.get(names.EVENT_TIME, _OFF).enabled for c in self.cases)
