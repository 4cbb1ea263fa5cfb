"""The process ncu launches: build inputs, check every variant, run each once in its NVTX range.

Run as ``python -m fuseci.harness SUITE --record PATH``. For each case it

1. builds the inputs on the GPU from their seeds (the same tensors on every run);
2. runs every variant twice with an allocator that fills new memory with NaN bytes, so an output
   element a kernel forgot to write cannot pass by holding an old result, and checks each output
   against the variant's first call (a result that changes from call to call is wrong), the
   unfused one, and the float64 reference when the case names one;
3. skips measuring a case with a wrong result (its numbers would mean nothing);
4. warms every variant up once more outside any range (compilation, caches of the library);
5. runs each variant once between ``RangePush``/``RangePop`` of :func:`fuseci.schema.range_name`,
   which is all ncu profiles.

With ``--time`` (``fuseci bench``, and the timed pass of ``fuseci run``; no ncu) steps 4 and
5 are replaced by CUDA-event timing: each variant is warmed up, then the variants of a case are
timed interleaved, one call of each per round, every call bracketed by its own pair of events
on the current stream and taking the next of a rotation of input sets generated like the first
one from derived seeds, as many as make the rotation span at least 4x the L2 (at least two), so
no call finds its inputs in the cache. ``--no-checks`` skips step 2 (the timed pass of ``fuseci
run``, whose profiled pass checked). The device-to-device copy bandwidth is measured once, in
the same process.

The record (see :mod:`fuseci.record`) is rewritten before and after each case, so a crash or a
hang leaves what was done and names the case it happened in. After a fault that loses the CUDA
context (an illegal address), the remaining cases are recorded as not run. This module and
``kernels/`` are the only places that import CuPy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import os
import platform
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fuseci import __version__, schema
from fuseci.atomic import atomic_write_text
from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, FuseciError, HarnessError
from fuseci.record import CaseRecord, CaseStatus, CheckRecord, HarnessRecord, VariantTiming, write_record
from fuseci.suite import BASELINE_VARIANT, Case, Correctness, InputSpec, Suite, load_suite

log = logging.getLogger("fuseci.harness")

_POISON_BYTE = 0xFF  # NaN in every float format, -1 in signed integers

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
    """How ``--time`` times each variant with CUDA events."""

    repeats: int = 30
    """Timed calls per variant; the median is reported."""
    warmup: int = 3
    """Untimed calls per variant first (compilation, library caches, clocks)."""
    l2_bytes: int = 0
    """The device's L2 size; the input rotation spans at least :data:`L2_SPAN` times it."""


def resolve(ref: str, search: list[Path]) -> Callable[..., Any]:
    """Import ``module:function``.

    Raises:
        HarnessError: the module or function does not exist; says where it looked.
    """
    module_name, func_name = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = ", ".join(str(p) for p in search)
        raise HarnessError(
            f"cannot import module {module_name!r} for {ref!r} ({exc}); searched the installed packages and {where}"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise HarnessError(f"module {module_name!r} ({getattr(module, '__file__', '?')}) has no function {func_name!r}")
    return func


def collect_env() -> dict[str, Any]:
    """The environment fingerprint fields the harness can see."""
    import cupy as cp
    import numpy as np

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {
        "gpu_name": name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "driver_version": _driver_version(),
        "cuda_driver_api": _cuda_version(cp.cuda.runtime.driverGetVersion()),
        "cuda_runtime": _cuda_version(cp.cuda.runtime.runtimeGetVersion()),
        "cupy_version": cp.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "fuseci_version": __version__,
    }


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _driver_version() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else "unknown"


def make_input(spec: InputSpec) -> Any:
    """Build one input tensor on the GPU, deterministically from its seed."""
    import cupy as cp

    rng = cp.random.default_rng(spec.seed)
    if spec.distribution == "randint":
        return rng.integers(int(spec.low), int(spec.high), size=spec.shape, dtype=spec.dtype)
    if spec.distribution == "uniform":
        values = rng.random(spec.shape, dtype=cp.float32) * (spec.high - spec.low) + spec.low
    else:
        values = rng.standard_normal(spec.shape, dtype=cp.float32) * spec.std + spec.mean
    return values.astype(spec.dtype, copy=False)


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


def _as_outputs(value: Any, who: str) -> tuple[Any, ...]:
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


def _check_case(
    case: Case, funcs: Mapping[str, Callable[..., Any]], reference: Callable[..., Any] | None, inputs: Mapping[str, Any]
) -> tuple[list[CheckRecord], int]:
    """Check every variant; also returns the case's minimum DRAM bytes (inputs plus the
    ``unfused`` outputs, each counted once)."""
    import cupy as cp
    import numpy as np

    expected_ref: tuple[Any, ...] | None = None
    if reference is not None:
        host = {k: cp.asnumpy(v).astype(np.float64) for k, v in inputs.items()}
        expected_ref = _as_outputs(reference(**host, **case.params), f"reference {case.reference}")
    checks: list[CheckRecord] = []
    unfused: tuple[Any, ...] | None = None
    min_bytes = 0
    for variant in case.variants:
        who = f"variant {variant.id!r} ({variant.fn})"
        with poisoned_allocations():
            outs = _as_outputs(funcs[variant.id](**inputs, **case.params), who)
            cp.cuda.get_current_stream().synchronize()
            # The same inputs again: a result that changes from call to call (a race, a read of
            # memory nothing wrote) fails here rather than passing by luck once.
            again = _as_outputs(funcs[variant.id](**inputs, **case.params), who)
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
                raise HarnessError(
                    f"variant {variant.id!r} returned {len(outs)} outputs, {BASELINE_VARIANT!r} {len(unfused)}"
                )
            checks += [
                compare_output(o, e, case.correctness, variant=variant.id, against=BASELINE_VARIANT, index=i)
                for i, (o, e) in enumerate(zip(outs, unfused, strict=True))
            ]
    return checks, min_bytes


def rotation_seed(seed: int, index: int) -> int:
    """Seed of input set ``index`` of a tensor whose suite seed is ``seed`` (set 0 keeps it)."""
    return (seed + index * 0x9E3779B97F4A7C15) % 2**63


def input_set_count(set_bytes: int, l2_bytes: int) -> int:
    """How many input sets the timing rotates over: at least two, spanning ``L2_SPAN`` x L2."""
    needed = math.ceil(L2_SPAN * l2_bytes / set_bytes) if set_bytes > 0 else MAX_INPUT_SETS
    return max(2, min(needed, MAX_INPUT_SETS))


def _input_sets(case: Case, first: Mapping[str, Any], l2_bytes: int) -> list[Mapping[str, Any]]:
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


def _quantile_ns(times_ms: list[float], q: float) -> float:
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

    sets = _input_sets(case, inputs, options.l2_bytes)
    stream = cp.cuda.get_current_stream()
    in_bytes = sum(int(a.nbytes) for a in sets[0].values())
    out_bytes: dict[str, int] = {}
    turn = 0
    for v in case.variants:
        for _ in range(options.warmup):
            outs = _as_outputs(funcs[v.id](**sets[turn % len(sets)], **case.params), f"variant {v.id!r}")
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
                median_ns=_quantile_ns(times, 50),
                min_ns=min(times) * 1e6,
                max_ns=max(times) * 1e6,
                iqr_ns=_quantile_ns(times, 75) - _quantile_ns(times, 25),
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
        median_ms = _quantile_ns([cp.cuda.get_elapsed_time(s, e) for s, e in events], 50) / 1e6
        return 2 * src.nbytes / (median_ms * 1e-3)
    finally:
        del src, dst
        cp.get_default_memory_pool().free_all_blocks()


def run_case(
    suite: Suite, case: Case, search: list[Path], timing: TimingOptions | None = None, *, check: bool = True
) -> CaseRecord:
    """Check, warm up and measure one case, or time it with ``timing``; ``check=False`` (timing
    only) skips the correctness checks that the profiled run made. Foreign exceptions become an
    error record."""
    import cupy as cp

    try:
        funcs = {v.id: resolve(v.fn, search) for v in case.variants}
        reference = resolve(case.reference, search) if case.reference else None
        inputs = {spec.name: make_input(spec) for spec in case.inputs}
        checks: list[CheckRecord] = []
        min_bytes = None
        if check or timing is None:
            checks, min_bytes = _check_case(case, funcs, reference, inputs)
        if case.min_bytes is not None:
            min_bytes = case.min_bytes
        failed = [k for k in checks if not k.passed]
        if failed:
            worst = max(failed, key=lambda k: k.max_abs_err)
            return CaseRecord(
                case.id, CaseStatus.WRONG, f"wrong result: {worst.describe()}", tuple(checks), min_bytes=min_bytes
            )
        if timing is not None:
            timings = time_case(case, funcs, inputs, timing)
            return CaseRecord(case.id, CaseStatus.OK, "", tuple(checks), timings=timings, min_bytes=min_bytes)
        for v in case.variants:  # warm-up, outside every range
            funcs[v.id](**inputs, **case.params)
        cp.cuda.get_current_stream().synchronize()
        for v in case.variants:
            cp.cuda.nvtx.RangePush(schema.range_name(suite.name, case.id, v.id))
            try:
                funcs[v.id](**inputs, **case.params)
                cp.cuda.get_current_stream().synchronize()
            finally:
                cp.cuda.nvtx.RangePop()
        return CaseRecord(
            case.id, CaseStatus.OK, "", tuple(checks), tuple(v.id for v in case.variants), min_bytes=min_bytes
        )
    except FuseciError as exc:
        return CaseRecord(case.id, CaseStatus.ERROR, str(exc))
    except Exception as exc:  # a user's kernel may raise anything; the other cases still run
        log.error("case %s failed:\n%s", case.id, traceback.format_exc())  # all of it, in the harness log
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        return CaseRecord(case.id, CaseStatus.ERROR, f"{type(exc).__name__}: {_first_lines(str(exc))}{where}")
    finally:
        try:
            cp.get_default_memory_pool().free_all_blocks()
        except Exception:  # a lost CUDA context cannot free; run() notices and stops
            log.warning("case %s: could not free device memory", case.id)


def _first_lines(text: str, lines: int = 3, chars: int = 400) -> str:
    """The head of a long message (a compiler's log, say); the whole text goes to the log."""
    kept = text.strip().splitlines()[:lines]
    head = " | ".join(line.strip() for line in kept)
    if len(head) > chars:
        head = head[:chars] + "..."
    return head + (" ... (full text in the harness log)" if len(text.strip().splitlines()) > lines else "")


def search_path(suite: Suite) -> list[Path]:
    """Where ``module:function`` references are looked up besides installed packages."""
    return [Path.cwd(), suite.path.resolve().parent.parent]


def run(
    suite: Suite,
    record_path: Path,
    only: set[str] | None = None,
    *,
    timing: TimingOptions | None = None,
    check: bool = True,
) -> HarnessRecord:
    """Run every case (or those in ``only``), rewriting the record after each.

    With ``timing`` the variants are timed with CUDA events instead of run in NVTX ranges, and
    the copy bandwidth is measured first; ``timing.l2_bytes`` is taken from the device.
    ``check=False`` (with ``timing`` only) skips the correctness checks.

    Raises:
        HarnessError: (``timing`` only) the copy bandwidth buffers do not fit on the device.
    """
    search = search_path(suite)
    for p in reversed(search):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    record = HarnessRecord(suite=suite.name, env=collect_env(), cases={})
    if timing is not None:
        timing = replace(timing, l2_bytes=int(record.env["l2_bytes"]))
        log.info("copy bandwidth")
        record = replace(record, copy_bandwidth=copy_bandwidth())
    write_record(record, record_path)
    cases: dict[str, CaseRecord] = {}
    todo = [case for case in suite.cases if only is None or case.id in only]
    for i, case in enumerate(todo):
        log.info("case %s", case.id)
        write_record(replace(record, cases=dict(cases), running=case.id), record_path)  # names a hang
        cases[case.id] = run_case(suite, case, search, timing, check=check)
        if cases[case.id].status == CaseStatus.ERROR and not _cuda_context_alive():
            # An illegal address or a kernel fault poisons the CUDA context for good: later
            # cases would fail for no fault of their own. Say so and stop.
            for later in todo[i + 1 :]:
                cases[later.id] = CaseRecord(
                    later.id, CaseStatus.ERROR, f"not run: case {case.id!r} left the CUDA context unusable"
                )
            cases[case.id] = replace(
                cases[case.id], message=cases[case.id].message + " (the CUDA context is lost: later cases were not run)"
            )
            break
        write_record(replace(record, cases=dict(cases)), record_path)
    record = replace(record, cases=dict(cases), complete=True)
    write_record(record, record_path)
    return record


def _cuda_context_alive() -> bool:
    """False after a sticky CUDA error (illegal address, kernel fault): nothing works after one."""
    import cupy as cp

    try:
        cp.cuda.runtime.deviceSynchronize()  # returns the sticky error, if there is one
    except cp.cuda.runtime.CUDARuntimeError:
        return False
    return True


#: ``--probe`` (``fuseci doctor``): the suite, case and variant ids of its kernel's NVTX range.
PROBE_IDS = ("doctor", "probe", "kernel")
#: ``--probe``: float32 elements of its input (16 MiB, read from DRAM once ncu has flushed the caches).
PROBE_ELEMENTS = 1 << 22
#: ``--probe``: the ``format`` field of its record.
PROBE_FORMAT = "fuseci-probe"


class ProbeFailure:
    """Why ``--probe`` failed, as its record says (strings, so the JSON stays readable)."""

    NO_CUPY = "no-cupy"
    """CuPy cannot be imported."""
    NO_DEVICE = "no-device"
    """CuPy sees no CUDA device, or cannot ask (no driver, a driver too old for CuPy's CUDA)."""
    CUDA = "cuda-error"
    """Reading the device or running the kernel raised."""
    WRONG = "wrong-result"
    """The kernel ran but computed a wrong result."""


def probe(record_path: Path) -> int:
    """Check CuPy and the GPU with one tiny kernel, inside the NVTX range of :data:`PROBE_IDS`.

    The input is fresh random data (a new seed every run, written to the record) copied from the
    host, so the range holds exactly one kernel: ``y = a * x + b``. The record says what was
    found (:func:`collect_env`) or, with ``error`` set to a :class:`ProbeFailure`, what failed.

    Returns:
        0 when the kernel computed the right result; 1 when it computed a wrong one; 3 when CuPy,
        the device or the launch failed.
    """
    import numpy as np

    doc: dict[str, Any] = {
        "format": PROBE_FORMAT,
        "ok": False,
        "error": "",
        "message": "",
        "range": schema.range_name(*PROBE_IDS),
        "elements": PROBE_ELEMENTS,
    }

    def finish(code: int, error: str = "", message: str = "") -> int:
        doc.update(ok=code == 0, error=error, message=message)
        atomic_write_text(record_path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
        if message:
            print(f"fuseci-harness: probe failed ({error}): {message}", file=sys.stderr)
        return code

    try:
        import cupy as cp
    except ImportError as exc:
        return finish(EXIT_SETUP, ProbeFailure.NO_CUPY, str(exc))
    try:
        doc["device_count"] = count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, or a driver older than CuPy's CUDA
        return finish(EXIT_SETUP, ProbeFailure.NO_DEVICE, f"{type(exc).__name__}: {exc}")
    if count < 1:
        return finish(EXIT_SETUP, ProbeFailure.NO_DEVICE, "CUDA reports no device")
    try:
        doc["env"] = collect_env()
        doc["seed"] = seed = int.from_bytes(os.urandom(8), "little") >> 1
        host = np.random.default_rng(seed).standard_normal(PROBE_ELEMENTS, dtype=np.float32)
        a, b = np.float32(0.75), np.float32(-0.5)
        kernel = cp.ElementwiseKernel("float32 x, float32 a, float32 b", "float32 y", "y = a * x + b", "fuseci_probe")
        x = cp.asarray(host)  # a copy, not a kernel: the range below holds the probe's kernel only
        cp.cuda.get_current_stream().synchronize()
        cp.cuda.nvtx.RangePush(doc["range"])
        try:
            y = kernel(x, a, b)
            cp.cuda.get_current_stream().synchronize()
        finally:
            cp.cuda.nvtx.RangePop()
        err = np.abs(cp.asnumpy(y).astype(np.float64) - (a * host.astype(np.float64) + b))
        doc["max_abs_err"] = max_err = float(err.max())
    except Exception as exc:  # CuPy raises CUDA, NVRTC and driver errors of many types
        return finish(EXIT_SETUP, ProbeFailure.CUDA, f"{type(exc).__name__}: {_first_lines(str(exc))}")
    if not max_err <= 1e-5:  # also catches NaN
        return finish(
            EXIT_REGRESSION,
            ProbeFailure.WRONG,
            f"y = a * x + b is off by up to {max_err:g} on {PROBE_ELEMENTS} elements",
        )
    return finish(0)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fuseci.harness``."""
    parser = argparse.ArgumentParser(prog="python -m fuseci.harness", description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path, nargs="?")
    parser.add_argument("--record", type=Path, required=True, help="where to write the harness record (JSON)")
    parser.add_argument(
        "--probe", action="store_true", help="instead of a suite, run one tiny kernel to check CuPy and the GPU"
    )
    parser.add_argument("--case", action="append", help="run only this case (repeatable)")
    parser.add_argument(
        "--time", action="store_true", help="time every variant with CUDA events instead of NVTX ranges (no ncu)"
    )
    parser.add_argument("--repeats", type=int, help="with --time: timed calls per variant (default 30)")
    parser.add_argument(
        "--no-checks",
        action="store_true",
        help="with --time: skip the correctness checks (the timed pass of `fuseci run`, whose profiled pass checked)",
    )
    args = parser.parse_args(argv)
    if args.probe:
        if args.suite is not None or args.case or args.time or args.repeats is not None or args.no_checks:
            parser.error("--probe takes no suite, --case, --time or --repeats")
        return probe(args.record)
    if args.suite is None:
        parser.error("a suite file is required (or --probe)")
    if (args.repeats is not None or args.no_checks) and not args.time:
        parser.error("--repeats and --no-checks need --time")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be positive, got {args.repeats}")
    timing = None
    if args.time:
        timing = TimingOptions() if args.repeats is None else TimingOptions(repeats=args.repeats)
    logging.basicConfig(
        level=os.environ.get("FUSECI_LOG", "INFO"), format="fuseci-harness: %(message)s", stream=sys.stderr
    )
    try:
        suite = load_suite(args.suite)
        try:
            import cupy  # noqa: F401
        except ImportError as exc:
            raise HarnessError(
                f"CuPy is not installed ({exc}); install fuseci with the cuda12 or cuda13 extra"
            ) from None
        record = run(suite, args.record, set(args.case) if args.case else None, timing=timing, check=not args.no_checks)
    except FuseciError as exc:
        print(f"fuseci-harness: error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    for c in record.cases.values():
        log.info("%s: %s%s", c.case, c.status, f" ({c.message})" if c.message else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
