"""Inputs and correctness: build each input from its seed, run every variant twice with
NaN-poisoned allocations, and compare each output with the variant's first call, ``unfused`` and
the float64 reference.

The reference runs on the GPU: it is called with float64 CuPy copies of the inputs, so NumPy
code runs there through CuPy's implementation of NumPy's functions (``np.tanh(x)`` on a CuPy
array is ``cupy.tanh``) and code written with the array's namespace
(``xp = cupy.get_array_module(x)``) does too. Both compute in IEEE double precision, as NumPy
on the CPU does, so a reference checks exactly as strictly on either (the tolerances, 1e-5 and
up, are ten orders of magnitude above float64 rounding). A reference that cannot take CuPy
arrays (it converts them to NumPy, or fills a NumPy array) or returns NumPy arrays runs again on
the host, in NumPy, as before: slower, never weaker; the harness log says which ran where.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from fuseci.config.model import UNFUSED, Case, Correctness
from fuseci.errors import HarnessError
from fuseci.measure.record import CheckRecord

_POISON_BYTE = 0xFF  # NaN in every float format, -1 in signed integers

log = logging.getLogger(__name__)


@contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Fill every new allocation with NaN bytes while the block runs."""
    import cupy as cp

    pool = cp.get_default_memory_pool()

    def alloc(size: int) -> Any:
        mem = pool.malloc(size)
        if size:
            mem.memset_async(_POISON_BYTE, size)
        return mem

    pool.free_all_blocks()
    cp.cuda.set_allocator(alloc)
    try:
        yield
    finally:
        cp.cuda.set_allocator(pool.malloc)


def as_outputs(value: Any, who: str) -> tuple[Any, ...]:
    import cupy as cp
    import numpy as np

    outs = value if isinstance(value, tuple) else (value,)
    for i, o in enumerate(outs):
        if not isinstance(o, (cp.ndarray, np.ndarray)):
            raise HarnessError(f"{who} returned {type(o).__name__} as output {i}; return an array or a tuple of arrays")
    return outs


def compare_output(
    out: Any, expected: Any, corr: Correctness, *, variant: str, against: str, index: int
) -> CheckRecord:
    """Elementwise ``|out - expected| <= atol + rtol * |expected|`` in float64 on the GPU."""
    import cupy as cp

    if tuple(out.shape) != tuple(expected.shape):
        raise HarnessError(
            f"{variant} output {index} has shape {tuple(out.shape)}, {against} has {tuple(expected.shape)}"
        )
    o = cp.asarray(out).astype(cp.float64, copy=False).ravel()
    e = cp.asarray(expected).astype(cp.float64, copy=False).ravel()
    diff = cp.abs(o - e)
    diff = cp.where(cp.isfinite(diff), diff, cp.inf)  # NaN compares as the worst possible error
    bad = ~(diff <= corr.atol + corr.rtol * cp.abs(e))
    worst = int(cp.argmax(diff))
    ref_norm = float(cp.linalg.norm(e))
    err_norm = float(cp.linalg.norm(cp.where(cp.isinf(diff), cp.inf, o - e)))
    mismatches = int(bad.sum())
    return CheckRecord(
        variant=variant,
        against=against,
        output=index,
        passed=mismatches == 0,
        mismatches=mismatches,
        elements=int(o.size),
        max_abs_err=float(diff[worst]),
        rel_l2_err=err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf),
        worst_index=worst,
        rtol=corr.rtol,
        atol=corr.atol,
    )


def reference_outputs(case: Case, reference: Callable[..., Any], inputs: Mapping[str, Any]) -> tuple[Any, ...]:
    """The reference's float64 outputs: computed on the GPU when the reference takes CuPy arrays
    and returns them, else on the host in NumPy (see the module docstring).

    Raises:
        HarnessError: the reference returned something other than arrays.
    """
    import cupy as cp
    import numpy as np

    who = f"reference {case.reference}"
    device = {k: cp.asarray(v).astype(cp.float64) for k, v in inputs.items()}
    try:
        value = reference(**device, **case.params)
        outs = value if isinstance(value, tuple) else (value,)
        if outs and all(isinstance(o, cp.ndarray) for o in outs):
            log.info("case %s: %s ran on the GPU", case.id, who)
            return outs
        why = "it returned " + ", ".join(sorted({type(o).__name__ for o in outs})) if outs else "it returned nothing"
    except Exception as exc:  # NumPy-only code meets a CuPy array: TypeError, ValueError, ...
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    del device
    log.info(
        "case %s: %s runs on the host in NumPy (%s); write it with the array's namespace "
        "(xp = cupy.get_array_module(x)) to run it on the GPU",
        case.id,
        who,
        why,
    )
    host = {k: cp.asnumpy(v).astype(np.float64) for k, v in inputs.items()}
    return as_outputs(reference(**host, **case.params), who)


def check_case(
    case: Case, funcs: Mapping[str, Callable[..., Any]], reference: Callable[..., Any] | None, inputs: Mapping[str, Any]
) -> tuple[list[CheckRecord], int]:
    """Check every variant; also returns the case's minimum DRAM bytes (inputs plus the
    ``unfused`` outputs, each counted once)."""
    import cupy as cp

    expected_ref = reference_outputs(case, reference, inputs) if reference is not None else None
    checks: list[CheckRecord] = []
    unfused: tuple[Any, ...] | None = None
    min_bytes = 0
    for variant in case.variants:
        who = f"variant {variant.id!r} ({variant.fn})"
        with poisoned_allocations():
            outs = as_outputs(funcs[variant.id](**inputs, **case.params), who)
            cp.cuda.get_current_stream().synchronize()
            # The same inputs again: a result that changes from call to call (a race, a read of
            # memory nothing wrote) fails here rather than passing by luck once.
            again = as_outputs(funcs[variant.id](**inputs, **case.params), who)
            cp.cuda.get_current_stream().synchronize()
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
            min_bytes = sum(int(a.nbytes) for a in inputs.values()) + sum(int(o.nbytes) for o in outs)
        else:
            if len(outs) != len(unfused):
                raise HarnessError(f"variant {variant.id!r} returned {len(outs)} outputs, {UNFUSED!r} {len(unfused)}")
            checks += [
                compare_output(o, e, case.correctness, variant=variant.id, against=UNFUSED, index=i)
                for i, (o, e) in enumerate(zip(outs, unfused, strict=True))
            ]
    return checks, min_bytes
