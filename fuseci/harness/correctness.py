"""Correctness: every variant called on the case's inputs in its own framework, its outputs
compared with its own earlier call, ``unfused`` and the float64 reference.

Each variant is called three times. The first call compiles, autotunes and fills caches (its
wall time is the variant's first-call cost, recorded); the next two run with new memory filled
with NaN bytes (:meth:`fuseci.harness.arrays.Framework.poisoned`: CuPy's pool, and for PyTorch
the caching allocator's free memory and a reserve the size of the first call's peak), so an
output element a kernel forgot to write cannot pass by holding an old result; a result that
changes from the second call to the third is wrong. Outputs are copied into memory fuseci owns
as soon as a call is done (a framework may reuse or overwrite its output buffers).

The reference runs on the GPU: it is called with float64 copies of the inputs in the case's
framework (CuPy arrays, or torch tensors), so NumPy code runs there through CuPy's
implementation of NumPy's functions (``np.tanh(x)`` on a CuPy array is ``cupy.tanh``), code
written with the array's namespace does too, and PyTorch code computes in float64 on the GPU.
All compute in IEEE double precision, as NumPy on the CPU does, so a reference checks exactly
as strictly on either. A reference that cannot take device arrays (it converts them to NumPy,
or fills a NumPy array) runs again on the host, in NumPy: slower, never weaker; the harness log
says which ran where.

Tolerances: the case's ``correctness`` when the suite states one, else each output's dtype's
(:attr:`fuseci.config.dtypes.DType.correctness`).
"""

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
    """A float64 copy of a factory's module (:mod:`fuseci.harness.factory`), as a reference: it
    takes its integer inputs as they are, and runs on the GPU only (a module takes no NumPy)."""

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
    """The reference's float64 outputs: computed on the GPU when the reference takes device
    arrays and returns device arrays, else on the host in NumPy (see the module docstring).

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
    """Inductor's provenance of each ledger variant's compile at its first call, by variant
    (:func:`fuseci.harness.arrays.inductor.capturing`)."""


def _first_call(
    call: BoundCall, inputs: Mapping[str, Tensor], provenance: tuple[dict[str, Provenance], str] | None = None
) -> tuple[float, int, tuple[str, ...]]:
    """Call once, outside any check: its wall time (ns), the most device memory it held at once,
    and what it autotuned (an autotuner benchmarking its configurations: the compile cache had no
    choice for it yet). With ``provenance`` (a map and a variant), what Inductor compiles meanwhile
    is captured into it (a ledger variant)."""
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
    """Each variant's first call, as :func:`check_case` times it, without the checks: its wall
    time (ns) and what it autotuned (only variants that did)."""
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
    """Check every variant (see the module docstring).

    Raises:
        HarnessError: a function returned something other than arrays, or outputs of another
            number or shape than ``unfused`` or the reference.
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
        checks += [
            compare_output(o, e, case.correctness, variant=variant.id, against="its first call", index=i)
            for i, (o, e) in enumerate(zip(again, outs, strict=True))
        ]
        del again
        if expected_ref is not None:
            if len(outs) != len(expected_ref):
                raise HarnessError(
                    f"variant {variant.id!r} returned {len(outs)} outputs, the reference {len(expected_ref)}"
                )
            checks += [
                compare_output(o, e, case.correctness, variant=variant.id, against="reference", index=i)
                for i, (o, e) in enumerate(zip(outs, expected_ref, strict=True))
            ]
        if unfused is None:
            unfused = outs
            min_bytes = sum(t.nbytes for t in inputs.values()) + sum(o.nbytes for o in outs)
        else:
            if len(outs) != len(unfused):
                raise HarnessError(f"variant {variant.id!r} returned {len(outs)} outputs, {UNFUSED!r} {len(unfused)}")
            checks += [
                compare_output(o, e, case.correctness, variant=variant.id, against=UNFUSED, index=i)
                for i, (o, e) in enumerate(zip(outs, unfused, strict=True))
            ]
        call.framework.free()
    return CaseCheck(checks, min_bytes, first, autotuned, notes, provenance)
