"""CUDA-event timing outside ncu: every variant of a case interleaved, over rotating input
sets, and the device-to-device copy bandwidth."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fuseci.config.model import Case
from fuseci.errors import HarnessError
from fuseci.harness.checks import as_outputs, make_input
from fuseci.measure.command import DEFAULT_REPEATS
from fuseci.measure.record import VariantTiming

log = logging.getLogger(__name__)

#: The rotation of input sets must span this many times the L2, so no timed call hits the cache.
L2_SPAN = 4
#: Upper bound on input sets, for inputs so small that spanning the L2 would need absurdly many.
MAX_INPUT_SETS = 1024
#: Size of each buffer of the copy bandwidth measurement (float32; bytes counted twice).
COPY_BYTES = 1 << 30
#: Timed copies of the copy bandwidth measurement, after warm-up.
COPY_REPEATS = 20


@dataclass(frozen=True, slots=True)
class TimingOptions:
    """How a timed run times each variant with CUDA events."""

    repeats: int = DEFAULT_REPEATS
    """Timed calls per variant; the median is reported."""
    warmup: int = 3
    """Untimed calls per variant first (compilation, library caches, clocks)."""
    l2_bytes: int = 0
    """The device's L2 size; the input rotation spans at least :data:`L2_SPAN` times it."""


def rotation_seed(seed: int, index: int) -> int:
    """Seed of input set ``index`` of a tensor whose suite seed is ``seed`` (set 0 keeps it)."""
    return (seed + index * 0x9E3779B97F4A7C15) % 2**63


def input_set_count(set_bytes: int, l2_bytes: int) -> int:
    """How many input sets the timing rotates over: at least two, spanning ``L2_SPAN`` x L2."""
    needed = math.ceil(L2_SPAN * l2_bytes / set_bytes) if set_bytes > 0 else MAX_INPUT_SETS
    return max(2, min(needed, MAX_INPUT_SETS))


def input_sets(case: Case, first: Mapping[str, Any], l2_bytes: int) -> list[Mapping[str, Any]]:
    set_bytes = sum(int(a.nbytes) for a in first.values())
    count = input_set_count(set_bytes, l2_bytes)
    if count * set_bytes < L2_SPAN * l2_bytes:
        log.warning(
            "case %s: %d input sets of %d bytes span less than %dx the L2 (%d bytes); its timings may be flattered by the cache",
            case.id,
            count,
            set_bytes,
            L2_SPAN,
            l2_bytes,
        )
    more = [
        {spec.name: make_input(replace(spec, seed=rotation_seed(spec.seed, k))) for spec in case.inputs}
        for k in range(1, count)
    ]
    return [first, *more]


def quantile_ns(times_ms: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(times_ms, dtype=np.float64), q)) * 1e6


def time_case(
    case: Case, funcs: Mapping[str, Callable[..., Any]], inputs: Mapping[str, Any], options: TimingOptions
) -> tuple[VariantTiming, ...]:
    """Time every variant of a case with CUDA events, interleaved, over a rotation of input sets.

    Each variant is warmed up; then ``options.repeats`` rounds each time one call of every
    variant in turn, so a drift of clocks or temperature during the case touches every variant
    alike and cancels in the speedups. Every call is bracketed by its own pair of events on the
    current stream and takes the next input set of the rotation, which continues across
    variants: consecutive calls never share inputs, and no call finds them in the L2.

    Raises:
        HarnessError: a variant returned something other than arrays.
    """
    import cupy as cp

    sets = input_sets(case, inputs, options.l2_bytes)
    stream = cp.cuda.get_current_stream()
    in_bytes = sum(int(a.nbytes) for a in sets[0].values())
    out_bytes: dict[str, int] = {}
    turn = 0
    for v in case.variants:
        for _ in range(options.warmup):
            outs = as_outputs(funcs[v.id](**sets[turn % len(sets)], **case.params), f"variant {v.id!r}")
            out_bytes[v.id] = sum(int(o.nbytes) for o in outs)
            del outs
            turn += 1
    stream.synchronize()
    events = {v.id: [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(options.repeats)] for v in case.variants}
    for i in range(options.repeats):
        for v in case.variants:
            start, end = events[v.id][i]
            args = sets[turn % len(sets)]
            turn += 1
            start.record(stream)
            funcs[v.id](**args, **case.params)
            end.record(stream)
    stream.synchronize()
    timings = []
    for v in case.variants:
        times = [cp.cuda.get_elapsed_time(start, end) for start, end in events[v.id]]
        timings.append(
            VariantTiming(
                variant=v.id,
                median_ns=quantile_ns(times, 50),
                min_ns=min(times) * 1e6,
                max_ns=max(times) * 1e6,
                iqr_ns=quantile_ns(times, 75) - quantile_ns(times, 25),
                repeats=options.repeats,
                input_sets=len(sets),
                min_bytes=in_bytes + out_bytes.get(v.id, 0),
            )
        )
    return tuple(timings)


def copy_bandwidth(nbytes: int = COPY_BYTES, repeats: int = COPY_REPEATS, warmup: int = 3) -> float:
    """Device-to-device copy bandwidth in bytes/s: ``2 * nbytes`` (read + write) over the median copy.

    Raises:
        HarnessError: the two buffers do not fit in device memory.
    """
    import cupy as cp

    try:
        src = cp.random.default_rng(0).random(nbytes // 4, dtype=cp.float32)  # never time zeros
        dst = cp.empty_like(src)
    except cp.cuda.memory.OutOfMemoryError as exc:
        raise HarnessError(
            f"cannot allocate two {nbytes / 2**30:g} GiB buffers for the copy bandwidth measurement ({exc}); "
            "free device memory or run on a larger card"
        ) from None
    try:
        stream = cp.cuda.get_current_stream()
        for _ in range(warmup):
            cp.copyto(dst, src)
        stream.synchronize()
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
        for start, end in events:
            start.record(stream)
            cp.copyto(dst, src)
            end.record(stream)
        stream.synchronize()
        median_ms = quantile_ns([cp.cuda.get_elapsed_time(s, e) for s, e in events], 50) / 1e6
        return 2 * src.nbytes / (median_ms * 1e-3)
    finally:
        del src, dst
        cp.get_default_memory_pool().free_all_blocks()
