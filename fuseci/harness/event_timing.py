"""CUDA-event timing outside ncu: every variant of a case interleaved over rotating input sets,
each call behind a queue fill; whether a call waits for the GPU before it returns (a host sync,
which neither ncu nor events see: :func:`block_probes`); the device-to-device copy bandwidth."""

from __future__ import annotations

import functools
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fuseci.config.model import Case, InputSpec
from fuseci.errors import HarnessError
from fuseci.harness import arrays
from fuseci.harness.arrays import Tensor
from fuseci.harness.correctness import BoundCall
from fuseci.harness.inputs import make_input
from fuseci.measure.command import DEFAULT_REPEATS
from fuseci.records.harness import VariantTiming

log = logging.getLogger(__name__)

#: The rotation of input sets must span this many times the L2, so no timed call hits the cache.
L2_SPAN = 4
#: Upper bound on input sets, for inputs so small that spanning the L2 would need absurdly many.
MAX_INPUT_SETS = 1024
#: Size of each buffer of the copy bandwidth measurement (float32; bytes counted twice).
COPY_BYTES = 1 << 30
#: Timed copies of the copy bandwidth measurement, after warm-up.
COPY_REPEATS = 20
#: Calls per variant, each with a spin kernel queued first, that tell whether the call waits.
BLOCK_TRIALS = 3
#: Calls per variant with an idle GPU, whose median return time is :attr:`VariantTiming.host_ns`.
QUIET_TRIALS = 5
#: The probes' spin kernel runs at least this long, and :data:`SPIN_OVER_CALL` times a quiet call's return.
MIN_SPIN_NS = 2_000_000
SPIN_OVER_CALL = 20
#: A call that returned after this fraction of the spin waited for the GPU.
BLOCKED_AFTER = 0.8
#: The spin queued before each timed call: :data:`FILL_OVER_CALL` times the variant's return time,
#: within :data:`MIN_FILL_NS` and :data:`MAX_FILL_NS` (a call slower than that is host-bound).
MIN_FILL_NS = 50_000
FILL_OVER_CALL = 2
MAX_FILL_NS = 5_000_000


@dataclass(frozen=True, slots=True)
class TimingOptions:
    """How a timed run times each variant with CUDA events."""

    repeats: int = DEFAULT_REPEATS
    """Timed calls per variant; the median is reported."""
    warmup: int = 3
    """Untimed calls per variant first (compilation, library caches, clocks)."""
    l2_bytes: int = 0
    """The device's L2 size; the input rotation spans at least :data:`L2_SPAN` times it."""
    queue_fill: bool = True
    """Queue a spin kernel before each timed call (:func:`fill_ns`), so that no call starts on an idle GPU."""


def fill_ns(return_ns: float) -> int:
    """How long the spin before a timed call runs, for calls that take ``return_ns`` to return."""
    return int(min(max(FILL_OVER_CALL * return_ns, MIN_FILL_NS), MAX_FILL_NS))


def rotation_seed(seed: int, index: int) -> int:
    """Seed of input set ``index`` of a tensor whose suite seed is ``seed`` (set 0 keeps it)."""
    return (seed + index * 0x9E3779B97F4A7C15) % 2**63


def input_set_count(set_bytes: int, l2_bytes: int) -> int:
    """How many input sets the timing rotates over: at least two, spanning ``L2_SPAN`` x L2."""
    needed = math.ceil(L2_SPAN * l2_bytes / set_bytes) if set_bytes > 0 else MAX_INPUT_SETS
    return max(2, min(needed, MAX_INPUT_SETS))


def input_sets(case: Case, first: Mapping[str, Tensor], l2_bytes: int) -> list[Mapping[str, Tensor]]:
    set_bytes = sum(t.nbytes for t in first.values())
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
    case: Case, calls: Mapping[str, BoundCall], inputs: Mapping[str, Tensor], options: TimingOptions
) -> tuple[VariantTiming, ...]:
    """Time every variant of a case with CUDA events, then probe whether each call waits for the
    GPU (:func:`block_probes`). After warm-up, ``options.repeats`` rounds each time one call of
    every variant in turn, each on the next input set of the rotation, behind a spin (:func:`fill_ns`).

    Raises:
        HarnessError: a variant returned something other than arrays.
    """
    import numpy as np

    sets = input_sets(case, inputs, options.l2_bytes)
    handed = {v.id: [calls[v.id].handed(s) for s in sets] for v in case.variants}
    in_bytes = sum(t.nbytes for t in sets[0].values())
    out_bytes: dict[str, int] = {}
    returns: dict[str, list[int]] = {}
    turn = 0
    for v in case.variants:
        call = calls[v.id]
        for _ in range(options.warmup):
            t0 = time.perf_counter_ns()
            outs = arrays.take(call.raw(handed[v.id][turn % len(sets)]), call.who)
            returns.setdefault(v.id, []).append(time.perf_counter_ns() - t0)
            out_bytes[v.id] = sum(o.nbytes for o in outs)
            del outs
            turn += 1
    arrays.synchronize()
    fills = {v.id: np.uint64(fill_ns(statistics.median(returns.get(v.id, [0])))) for v in case.variants}
    spin = arrays.spinner() if options.queue_fill else None
    events = {v.id: [(arrays.Event(), arrays.Event()) for _ in range(options.repeats)] for v in case.variants}
    for i in range(options.repeats):
        for v in case.variants:
            start, end = events[v.id][i]
            args = handed[v.id][turn % len(sets)]
            turn += 1
            if spin is not None:
                spin(fills[v.id])
            start.record()
            calls[v.id].raw(args)
            end.record()
    arrays.synchronize()
    timings = []
    for v in case.variants:
        times = [end.ms_since(start) for start, end in events[v.id]]
        host_ns, blocked = block_probes(functools.partial(calls[v.id].raw, handed[v.id][0]))
        q1, q3 = quantile_ns(times, 25), quantile_ns(times, 75)
        timings.append(
            VariantTiming(
                variant=v.id,
                median_ns=quantile_ns(times, 50),
                min_ns=min(times) * 1e6,
                max_ns=max(times) * 1e6,
                iqr_ns=q3 - q1,
                repeats=options.repeats,
                input_sets=len(sets),
                min_bytes=in_bytes + out_bytes.get(v.id, 0),
                q1_ns=q1,
                q3_ns=q3,
                samples_ns=tuple(round(ms * 1e6, 1) for ms in times),
                host_ns=host_ns,
                blocked_calls=blocked,
                block_trials=BLOCK_TRIALS,
            )
        )
    return tuple(timings)


def block_probes(call: Callable[[], Any]) -> tuple[float, int]:
    """How long one call takes to return with the GPU idle (median of :data:`QUIET_TRIALS` calls, ns), and in how
    many of :data:`BLOCK_TRIALS` calls queued behind a spin it returned only after most of it (waited for the GPU)."""
    import numpy as np

    quiet = []
    for _ in range(QUIET_TRIALS):
        arrays.synchronize()
        t0 = time.perf_counter_ns()
        call()
        quiet.append(time.perf_counter_ns() - t0)
    arrays.synchronize()
    host_ns = float(np.median(quiet))
    spin_ns = max(MIN_SPIN_NS, SPIN_OVER_CALL * int(host_ns))
    spin = arrays.spinner()
    blocked = 0
    for _ in range(BLOCK_TRIALS):
        arrays.synchronize()
        spin(spin_ns)
        t0 = time.perf_counter_ns()
        call()
        waited = time.perf_counter_ns() - t0
        arrays.synchronize()
        blocked += waited >= BLOCKED_AFTER * spin_ns
    return host_ns, blocked


def copy_bandwidth(nbytes: int = COPY_BYTES, repeats: int = COPY_REPEATS, warmup: int = 3) -> float:
    """Device-to-device copy bandwidth in bytes/s: ``2 * nbytes`` (read + write) over the median copy.

    Raises:
        HarnessError: the two buffers do not fit in device memory.
    """
    try:
        src = make_input(InputSpec("copy", (nbytes // 4,), "float32", "uniform", seed=0)).data  # never time zeros
        dst = arrays.empty(src.shape, "float32")
    except arrays.DeviceMemoryError as exc:
        raise HarnessError(
            f"cannot allocate two {nbytes / 2**30:g} GiB buffers for the copy bandwidth measurement ({exc}); "
            "free device memory or run on a larger card"
        ) from None
    try:
        for _ in range(warmup):
            arrays.copy(dst, src)
        arrays.synchronize()
        events = [(arrays.Event(), arrays.Event()) for _ in range(repeats)]
        for start, end in events:
            start.record()
            arrays.copy(dst, src)
            end.record()
        arrays.synchronize()
        median_ms = quantile_ns([end.ms_since(start) for start, end in events], 50) / 1e6
        return 2 * src.nbytes / (median_ms * 1e-3)
    finally:
        del src, dst
        arrays.free_pool()
