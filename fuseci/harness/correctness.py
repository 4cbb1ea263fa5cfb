"""Correctness: every variant called on the case's inputs in its own framework, its outputs
compared with its own earlier call, ``unfused`` and the float64 reference. A variant's checked
calls run with new memory filled with NaN bytes (:meth:`fuseci.harness.arrays.Framework.poisoned`),
so an unwritten output element cannot pass by holding an old result."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuseci.config.model import UNFUSED, Case, Correctness
from fuseci.errors import HarnessError
from fuseci.harness import arrays
from fuseci.harness.arrays import Tensor, inductor
from fuseci.records.fusion import Provenance
from fuseci.records.harness import CheckRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BoundCall:
    """One variant (or the reference) bound to its framework: called with fuseci's tensors."""

    fn: Callable[..., Any]
    """The suite's function."""
    framework: arrays.Framework
    """The framework it takes its inputs in."""
    params: Mapping[str, Any]
    """The case's scalar parameters."""
    who: str
    """How messages name it."""
    model: bool = False
    """A float64 copy of a factory's module as a reference: integer inputs as they are, GPU only."""

    def handed(self, inputs: Mapping[str, Tensor]) -> dict[str, Any]:
        """The inputs as its framework's arrays, on the same memory."""
        return {name: self.framework.hand(t) for name, t in inputs.items()}

    def raw(self, handed: Mapping[str, Any]) -> Any:
        """Call it with already handed-over inputs; what it returned, as it returned it."""
        self.framework.before_call()
        return self.fn(**handed, **self.params)

    def __call__(self, inputs: Mapping[str, Tensor]) -> tuple[Tensor, ...]:
        """Call it; its outputs as tensors (views of what it returned).

        Raises:
            HarnessError: it returned something that is not an array.
        """
        return arrays.take(self.raw(self.handed(inputs)), self.who)


def tolerances(corr: Correctness | None, out: Tensor) -> tuple[float, float]:
    """(rtol, atol) for one output: the suite's, or its dtype's default."""
    return (corr.rtol, corr.atol) if corr is not None else out.dtype.correctness


def compare_output(
    out: Tensor, expected: Tensor, corr: Correctness | None, *, variant: str, against: str, index: int
) -> CheckRecord:
    """Elementwise ``|out - expected| <= atol + rtol * |expected|`` in float64 on the GPU.

    Raises:
        HarnessError: the shapes differ.
    """
    if out.shape != expected.shape:
        raise HarnessError(f"{variant} output {index} has shape {out.shape}, {against} has {expected.shape}")
    rtol, atol = tolerances(corr, out)
    d = arrays.compare(out, expected, rtol, atol)
    return CheckRecord(
        variant=variant,
        against=against,
        output=index,
        passed=d.mismatches == 0,
        mismatches=d.mismatches,
        elements=d.elements,
        max_abs_err=d.max_abs_err,
        rel_l2_err=d.rel_l2_err,
        worst_index=d.worst_index,
        rtol=rtol,
        atol=atol,
        nan_count=d.nan_count,
        dtype=out.dtype.name,
    )


def reference_outputs(case: Case, reference: BoundCall, inputs: Mapping[str, Tensor]) -> tuple[Tensor, ...]:
    """The reference's float64 outputs: on the GPU when it takes and returns device arrays, else on the host.

    Raises:
        HarnessError: the reference returned something other than arrays.
    """
    who = reference.who
    doubles = {
        k: v if reference.model and not v.dtype.is_float else arrays.float64_tensor(v) for k, v in inputs.items()
    }
    try:
        outs = reference(doubles)
        if all(not o.on_host for o in outs):
            log.info("case %s: %s ran on the GPU (%s)", case.id, who, reference.framework.arrays)
            return outs
        why = "it returned NumPy arrays"
    except Exception as exc:  # NumPy-only code meets a device array: TypeError, ValueError, ...
        if reference.model:
            raise
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    del doubles
    log.info(
        "case %s: %s runs on the host in NumPy (%s); write it with the array's namespace "
        "(xp = cupy.get_array_module(x)) or in PyTorch to run it on the GPU",
        case.id,
        who,
        why,
    )
    host = {k: arrays.host_float64(v) for k, v in inputs.items()}
    return arrays.take(reference.fn(**host, **reference.params), who)


@dataclass(frozen=True, slots=True)
class CaseCheck:
    """What checking a case found."""

    checks: list[CheckRecord]
    """Every comparison, in the order made."""
    min_bytes: int
    """Inputs plus the ``unfused`` outputs, each counted once."""
    first_call_ns: dict[str, float]
    """Wall time of each variant's first call (compilation, autotuning, caches), ns."""
    autotuned: dict[str, tuple[str, ...]]
    """What each variant autotuned at its first call (only variants that did)."""
    notes: list[str]
    """What the NaN-filling could not cover, per variant."""
    provenance: dict[str, Provenance] = field(default_factory=dict)
    """Inductor's provenance of each ledger variant's compile at its first call, by variant."""


def _first_call(
    call: BoundCall, inputs: Mapping[str, Tensor], provenance: tuple[dict[str, Provenance], str] | None = None
) -> tuple[float, int, tuple[str, ...]]:
    """Call once, outside any check: its wall time (ns), the most device memory it held at once,
    and what it autotuned; with ``provenance`` (a map and a variant), Inductor's compile is captured into it."""
    peak = call.framework.track_peak()
    start = time.perf_counter_ns()
    capture = inductor.capturing(*provenance) if provenance is not None else contextlib.nullcontext()
    with capture, arrays.watch_compiles() as seen:
        outs = call(inputs)
        arrays.synchronize()
    elapsed = time.perf_counter_ns() - start
    held = sum(o.nbytes for o in outs)
    del outs
    return float(elapsed), max(peak(), held), tuple(dict.fromkeys(s for s in seen if "autotuned" in s))


def first_calls_of(
    case: Case, calls: Mapping[str, BoundCall], inputs: Mapping[str, Tensor]
) -> tuple[dict[str, float], dict[str, tuple[str, ...]]]:
    """Each variant's first call as :func:`check_case` times it: wall time (ns), and what it autotuned."""
    first: dict[str, float] = {}
    autotuned: dict[str, tuple[str, ...]] = {}
    for variant in case.variants:
        first[variant.id], _, tuned = _first_call(calls[variant.id], inputs)
        if tuned:
            autotuned[variant.id] = tuned
        calls[variant.id].framework.free()
    return first, autotuned


def check_case(
    case: Case, calls: Mapping[str, BoundCall], reference: BoundCall | None, inputs: Mapping[str, Tensor]
) -> CaseCheck:
    """Check every variant: a first call (timed), then two NaN-filled calls compared with each other, the reference
    and ``unfused``.

    Raises:
        HarnessError: a call returned no arrays, or not as many outputs or shapes as ``unfused`` or the reference.
    """
    expected_ref = reference_outputs(case, reference, inputs) if reference is not None else None
    checks: list[CheckRecord] = []
    unfused: tuple[Tensor, ...] | None = None
    min_bytes = 0
    first: dict[str, float] = {}
    autotuned: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    provenance: dict[str, Provenance] = {}
    if any(v.ledger is not None for v in case.variants):
        inductor.fresh()  # once per case: every ledger variant below compiles, and is captured, anew
    for variant in case.variants:
        call = calls[variant.id]
        captured = (provenance, variant.id) if variant.ledger is not None else None
        first[variant.id], peak, tuned = _first_call(call, inputs, captured)
        if tuned:
            autotuned[variant.id] = tuned
        log.debug("case %s: %s first call %.3f s, peak %d bytes", case.id, variant.id, first[variant.id] / 1e9, peak)
        with call.framework.poisoned(peak) as missed:
            outs = tuple(arrays.own_copy(o) for o in call(inputs))
            arrays.synchronize()
        notes += [f"{variant.id}: {m}; an unwritten output element there may read as a number" for m in missed]
        with call.framework.poisoned(peak) as missed:
            # The same inputs again: a result that changes from call to call (a race, a read of
            # memory nothing wrote) fails here rather than passing by luck once.
            again = tuple(arrays.own_copy(o) for o in call(inputs))
            arrays.synchronize()
        checks += _compared(case, variant.id, again, outs, "its first call")
        del again
        if expected_ref is not None:
            checks += _compared(case, variant.id, outs, expected_ref, "reference", "the reference")
        if unfused is None:
            unfused = outs
            min_bytes = sum(t.nbytes for t in inputs.values()) + sum(o.nbytes for o in outs)
        else:
            checks += _compared(case, variant.id, outs, unfused, UNFUSED, repr(UNFUSED))
        call.framework.free()
    return CaseCheck(checks, min_bytes, first, autotuned, notes, provenance)


def _compared(
    case: Case, variant: str, outs: tuple[Tensor, ...], expected: tuple[Tensor, ...], against: str, named: str = ""
) -> list[CheckRecord]:
    """Each output against ``expected``'s; with ``named``, outputs of another number are an error."""
    if named and len(outs) != len(expected):
        raise HarnessError(f"variant {variant!r} returned {len(outs)} outputs, {named} {len(expected)}")
    return [
        compare_output(o, e, case.correctness, variant=variant, against=against, index=i)
        for i, (o, e) in enumerate(zip(outs, expected, strict=True))
    ]
