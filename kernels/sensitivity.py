"""Graded planted regressions of the fused scale→ReLU→add kernel, for measuring how small a
change each of fuseci's gates detects (``tools/sensitivity_study.py``, docs/BENCHMARKS.md).

Every variant is one kernel, ``fuseci_sensitivity``, with the healthy kernel's launch shape
(256 threads a block, up to 8 blocks per SM, float4 grid-stride loop) and its exact float32
arithmetic, so each computes ``relu(alpha * x) + y`` bit for bit and changes one thing:

* ``bytes_P``: also reads P% of the case's minimum DRAM bytes from a buffer of its own (filled
  once, on the first call, outside any measurement), folded in as ``0 * sum``: the output is
  unchanged but the compiler cannot drop the loads;
* ``sector_1``: the same, one 32-byte sector (two float4 loads of one warp): the smallest
  change in bytes a kernel can make, for the exact counters;
* ``time_P``: a chain of ``v = fma(v, one, zero)`` after each element (``one`` and ``zero`` are
  kernel parameters, so nothing is folded), as long as it takes to make the kernel P% slower
  than with no chain: calibrated on the first call by the kernel's own clock (the GPU's
  ``%globaltimer``, first block start to last block end, so that a profiler's per-launch
  overhead does not count), then fixed and kept in a calibration file (:func:`spins_file`), so
  that every process measures the same kernel: the profiled run and the timed pass of one run,
  and every run of a study. Calibrated in each process, the chains differed between them (near
  the point where the kernel stops being memory-bound, a few more fmas add much time), and ncu
  and CUDA events measured different kernels;
* ``host_sync``: the unchanged kernel and a read-back of one element, which waits for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path

import cupy as cp
import numpy as np

from kernels._cuda import ceil_div, compile_kernel, require, sm_count

_THREADS = 256

_SOURCE = r"""
__device__ __forceinline__ float lane(float x, float y, float a, float one, float zero, int spin) {
  float v = fmaxf(a * x, 0.0f) + y;
  for (int k = 0; k < spin; ++k) v = fmaf(v, one, zero);
  return v;
}

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void __launch_bounds__(256)
fuseci_sensitivity(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                   const float* __restrict__ extra, const index_t extra4, const int spin,
                   const float one, const float zero, const float alpha, const index_t n, const index_t n4,
                   unsigned long long* clock) {
  // clock (calibration only, else null): the first block start and the last block end, in the
  // GPU's own nanoseconds, so that the kernel's duration is measured without the host's gaps.
  if (clock != nullptr && threadIdx.x == 0) atomicMin(&clock[0], now_ns());
  const index_t stride = (index_t)gridDim.x * blockDim.x;
  const index_t start = (index_t)blockIdx.x * blockDim.x + threadIdx.x;
  float sum = 0.0f;
  for (index_t i = start; i < extra4; i += stride) {
    const float4 e = reinterpret_cast<const float4*>(extra)[i];
    sum += (e.x + e.y) + (e.z + e.w);
  }
  const float a = alpha + zero * sum;  // alpha exactly: the extra values are finite
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* y4 = reinterpret_cast<const float4*>(y);
  float4* o4 = reinterpret_cast<float4*>(out);
  for (index_t i = start; i < n4; i += stride) {
    const float4 vx = x4[i], vy = y4[i];
    float4 o;
    o.x = lane(vx.x, vy.x, a, one, zero, spin);
    o.y = lane(vx.y, vy.y, a, one, zero, spin);
    o.z = lane(vx.z, vy.z, a, one, zero, spin);
    o.w = lane(vx.w, vy.w, a, one, zero, spin);
    o4[i] = o;
  }
  for (index_t i = 4 * n4 + start; i < n; i += stride) out[i] = lane(x[i], y[i], a, one, zero, spin);
  if (clock != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&clock[1], now_ns());
  }
}
"""


def _index_type(size: int) -> str:
    return "int" if size < 2**31 - 2 * sm_count() * 2048 else "long long"


@cache
def _kernel(index_type: str) -> cp.RawKernel:
    return compile_kernel(f"typedef {index_type} index_t;\n{_SOURCE}", "fuseci_sensitivity")


@cache
def _extra(floats: int) -> cp.ndarray:
    """A buffer of finite random floats, made once per size (never zeros: the loads must read)."""
    return cp.random.default_rng(12345).random(max(floats, 4), dtype=cp.float32)


def _launch(
    x: cp.ndarray, y: cp.ndarray, alpha: float, *, extra_bytes: int = 0, spin: int = 0, clock: cp.ndarray | None = None
) -> cp.ndarray:
    xf = require(x, cp.float32, "x").reshape(-1)
    yf = require(y, cp.float32, "y").reshape(-1)
    if yf.size != xf.size:
        raise ValueError(f"y: expected {xf.size} elements like x, got {yf.size}")
    out = cp.empty(xf.size, dtype=cp.float32)
    aligned = all(a.data.ptr % 16 == 0 for a in (xf, yf, out))
    n4 = xf.size // 4 if aligned else 0
    extra4 = extra_bytes // 16
    extra = _extra(4 * extra4)
    index = cp.int32 if _index_type(xf.size) == "int" else cp.int64
    blocks = max(1, min(ceil_div(max(n4, xf.size - 4 * n4), _THREADS), sm_count() * (2048 // _THREADS)))
    _kernel(_index_type(xf.size))(
        (blocks,),
        (_THREADS,),
        (xf, yf, out, extra, index(extra4), np.int32(spin), np.float32(1.0), np.float32(0.0), np.float32(alpha),
         index(xf.size), index(n4), clock if clock is not None else np.uint64(0)),
    )  # fmt: skip
    return out.reshape(x.shape)


def _median_ns(x: cp.ndarray, y: cp.ndarray, alpha: float, spin: int, repeats: int = 7) -> float:
    """The kernel's median duration by its own clock (a profiler's per-launch overhead, which
    CUDA events around the launch would include, does not count)."""
    clock = cp.empty(2, dtype=cp.uint64)
    times = []
    for _ in range(repeats):
        clock[0], clock[1] = np.iinfo(np.uint64).max, 0
        _launch(x, y, alpha, spin=spin, clock=clock)
        start, end = (int(v) for v in clock.get())
        times.append(end - start)
    return float(np.median(times))


def spins_file() -> Path:
    """Where calibrated chains are kept: ``$FUSECI_SENSITIVITY_SPINS``, else a file in the
    temporary directory."""
    named = os.environ.get("FUSECI_SENSITIVITY_SPINS")
    return Path(named) if named else Path(tempfile.gettempdir()) / "fuseci-sensitivity-spins.json"


def _spin_key(size: int, percent: int) -> str:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    source = hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    return f"{name}|{size}|{percent}|{source}"


@cache
def _spin_for(size: int, percent: int) -> int:
    """The fma chain that makes the kernel ``percent``% slower on ``size`` elements: from
    :func:`spins_file` when calibrated before on this card, else calibrated now and kept there."""
    path, key = spins_file(), _spin_key(size, percent)
    with path.with_name(path.name + ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one calibration per key, whoever asks first
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):
            known = {}
        if not isinstance(known, dict):
            known = {}
        if isinstance(known.get(key), int) and known[key] > 0:
            return known[key]
        known[key] = spin = _calibrate(size, percent)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
        os.replace(temp, path)
        return spin


def _calibrate(size: int, percent: int) -> int:
    """The fma chain that makes the kernel ``percent``% slower on ``size`` elements, on fresh
    random data, by bisection on the kernel's own clock."""
    rng = cp.random.default_rng()
    x, y = rng.standard_normal(size, dtype=cp.float32), rng.standard_normal(size, dtype=cp.float32)
    _launch(x, y, 0.75, spin=0)  # compile and warm up
    target = _median_ns(x, y, 0.75, 0) * (1 + percent / 100)
    lo, hi = 0, 1
    while _median_ns(x, y, 0.75, hi) < target and hi < 1 << 16:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _median_ns(x, y, 0.75, mid) < target else (lo, mid)
    return hi


def scale_relu_add(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """The healthy kernel, as the graded variants are built (the study's clean reference)."""
    return _launch(x, y, alpha)


def _minimum_bytes(x: cp.ndarray) -> int:
    return 3 * int(x.nbytes)  # x and y read once, out written once


def _bytes(percent: float):  # type: ignore[no-untyped-def]
    def variant(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
        return _launch(x, y, alpha, extra_bytes=int(_minimum_bytes(x) * percent / 100))

    variant.__doc__ = f"Reads {percent:g}% of the case's minimum DRAM bytes more than the healthy kernel."
    return variant


def _sectors(count: int):  # type: ignore[no-untyped-def]
    def variant(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
        return _launch(x, y, alpha, extra_bytes=32 * count)

    variant.__doc__ = f"Reads {count} 32-byte sector(s) more than the healthy kernel ({32 * count} bytes)."
    return variant


def _time(percent: int):  # type: ignore[no-untyped-def]
    def variant(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
        return _launch(x, y, alpha, spin=_spin_for(x.size, percent))

    variant.__doc__ = f"Takes {percent}% longer than the healthy kernel (a calibrated fma chain)."
    return variant


bytes_0_5 = _bytes(0.5)
bytes_1 = _bytes(1)
bytes_2 = _bytes(2)
bytes_5 = _bytes(5)
bytes_10 = _bytes(10)
sector_1 = _sectors(1)
time_5 = _time(5)
time_10 = _time(10)
time_20 = _time(20)
time_40 = _time(40)


def host_sync(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """The healthy kernel and a read-back of its first element, which waits for it."""
    out = _launch(x, y, alpha)
    if not np.isfinite(float(out.reshape(-1)[0])):
        raise FloatingPointError("out[0] is not finite")
    return out
