"""Reductions: a chain of map + reduce + finish kernels against one pass that does it all.

The fused kernels read the input once with 16-byte loads, reduce in registers, warp shuffles
and shared memory, and finish in the same launch: the last block to arrive (one atomic
counter, after a memory fence) combines the per-block partials in double precision and writes
the result. Row softmax keeps one warp per row and uses the online (running max, rescaled sum)
formulation, so the row is read from DRAM once and written once.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from kernels._cuda import ceil_div, compile_kernel, require, sm_count, xp_of

_THREADS = 256

_MOMENTS_SOURCE = r"""
// One pass over x: sum(x) and sum(x*x), finished by the last block in the same launch.
// partial: 2 * gridDim.x doubles; counter: one unsigned int, zero on entry and on exit.
extern "C" __global__ void __launch_bounds__(256)
fuseci_moments(const float* __restrict__ x, const long long n, const long long n4,
               double* __restrict__ partial, unsigned int* __restrict__ counter,
               float* __restrict__ out_sum, float* __restrict__ out_sumsq, float* __restrict__ out_norm) {
  __shared__ float scratch[32];
  __shared__ bool last;
  float s = 0.0f, q = 0.0f;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (long long i = start; i < n4; i += stride) {
    const float4 v = x4[i];
    s += (v.x + v.y) + (v.z + v.w);
    q = fmaf(v.x, v.x, q); q = fmaf(v.y, v.y, q); q = fmaf(v.z, v.z, q); q = fmaf(v.w, v.w, q);
  }
  for (long long i = 4 * n4 + start; i < n; i += stride) {
    const float v = x[i];
    s += v; q = fmaf(v, v, q);
  }
  s = block_sum(s, scratch);
  q = block_sum(q, scratch);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = (double)s;
    partial[2 * blockIdx.x + 1] = (double)q;
    __threadfence();  // make the partials visible before announcing this block
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  double ds = 0.0, dq = 0.0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
    ds += __ldcg(partial + 2 * b);
    dq += __ldcg(partial + 2 * b + 1);
  }
  __shared__ double dscratch[2][32];
  for (int o = 16; o > 0; o >>= 1) {
    ds += __shfl_xor_sync(FULL_MASK, ds, o);
    dq += __shfl_xor_sync(FULL_MASK, dq, o);
  }
  if ((threadIdx.x & 31) == 0) { dscratch[0][threadIdx.x >> 5] = ds; dscratch[1][threadIdx.x >> 5] = dq; }
  __syncthreads();
  if (threadIdx.x == 0) {
    double ts = 0.0, tq = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { ts += dscratch[0][w]; tq += dscratch[1][w]; }
    if (out_sum) *out_sum = (float)ts;
    if (out_sumsq) *out_sumsq = (float)tq;
    if (out_norm) *out_norm = (float)sqrt(tq);
    *counter = 0u;  // ready for the next launch
  }
}
"""


class _Workspace:
    """Per-device scratch for the last-block reduction: partials and the arrival counter."""

    def __init__(self) -> None:
        self.blocks = sm_count() * (2048 // _THREADS)
        self.partial = cp.empty(2 * self.blocks, dtype=cp.float64)
        self.counter = cp.zeros(1, dtype=cp.uint32)


_workspaces: dict[int, _Workspace] = {}


def _moments(x: cp.ndarray, *, want_sum: bool, want_sumsq: bool, want_norm: bool) -> list[cp.ndarray]:
    x = require(x, cp.float32, "x").reshape(-1)
    dev = cp.cuda.Device().id
    ws = _workspaces.get(dev) or _workspaces.setdefault(dev, _Workspace())
    n = x.size
    n4 = n // 4 if x.data.ptr % 16 == 0 else 0
    blocks = max(1, min(ws.blocks, ceil_div(n4 or n, _THREADS)))
    outs = [cp.empty((), dtype=cp.float32) if want else None for want in (want_sum, want_sumsq, want_norm)]
    null = cp.uint64(0)
    args = (x, cp.int64(n), cp.int64(n4), ws.partial, ws.counter, *(o if o is not None else null for o in outs))
    compile_kernel(_MOMENTS_SOURCE, "fuseci_moments")((blocks,), (_THREADS,), args)
    return [o for o in outs if o is not None]


# --- L2 norm ---------------------------------------------------------------------------------


def l2_norm_unfused(x: cp.ndarray) -> cp.ndarray:
    """``sqrt(sum(x * x))`` as a user writes it: square, reduce, square root."""
    return cp.sqrt(cp.sum(x * x))


def l2_norm_fused(x: cp.ndarray) -> cp.ndarray:
    """One read of x; the square root is taken by the last block of the same launch."""
    (norm,) = _moments(x, want_sum=False, want_sumsq=False, want_norm=True)
    return norm


def l2_norm_reference(x: np.ndarray) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    xp = xp_of(x)
    return xp.asarray(xp.sqrt(xp.sum(x * x)))


# --- sum and sum of squares ------------------------------------------------------------------


def sum_sumsq_unfused(x: cp.ndarray) -> tuple[cp.ndarray, cp.ndarray]:
    """Two reductions and a square: x is read three times."""
    return cp.sum(x), cp.sum(x * x)


def sum_sumsq_fused(x: cp.ndarray) -> tuple[cp.ndarray, cp.ndarray]:
    """Both moments from one read of x, in one launch."""
    s, q = _moments(x, want_sum=True, want_sumsq=True, want_norm=False)
    return s, q


def sum_sumsq_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 reference (NumPy or CuPy arrays)."""
    xp = xp_of(x)
    return xp.asarray(xp.sum(x)), xp.asarray(xp.sum(x * x))


# --- row softmax -----------------------------------------------------------------------------

_SOFTMAX_SOURCE = r"""
// One warp per row. Pass 1 keeps a running max m and a sum s of exp(x - m) rescaled whenever
// m grows (online softmax); lanes merge their (m, s) by shuffles. Pass 2 writes exp(x - m) / s
// from registers (rows up to 1024 columns) or re-reads the row from L1/L2 (longer rows).
#define KEEP 8
__device__ __forceinline__ void online(float& m, float& s, float v) {
  if (v > m) { s = fmaf(s, exp2f((m - v) * LOG2E), 1.0f); m = v; }
  else { s += exp2f((v - m) * LOG2E); }
}

extern "C" __global__ void __launch_bounds__(256)
fuseci_softmax_rows(const float* __restrict__ x, float* __restrict__ y, const int rows, const int cols, const int vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float* xr = x + (long long)row * cols;
  float* yr = y + (long long)row * cols;
  float m = NEG_INF, s = 0.0f;
  // Rows of up to 32 * 4 * KEEP columns stay in registers between the passes: one DRAM read.
  float4 kept[KEEP];
  const bool in_registers = vec && cols <= 32 * 4 * KEEP;
  if (in_registers) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll
    for (int k = 0; k < KEEP; ++k) {
      const int i = lane + 32 * k;
      if (i < cols / 4) {
        kept[k] = x4[i];
        online(m, s, kept[k].x); online(m, s, kept[k].y); online(m, s, kept[k].z); online(m, s, kept[k].w);
      }
    }
  } else if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int i = lane; i < cols / 4; i += 32) {
      const float4 v = x4[i];
      online(m, s, v.x); online(m, s, v.y); online(m, s, v.z); online(m, s, v.w);
    }
  } else {
    for (int i = lane; i < cols; i += 32) online(m, s, xr[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float mo = __shfl_xor_sync(FULL_MASK, m, o);
    const float so = __shfl_xor_sync(FULL_MASK, s, o);
    const float mn = fmaxf(m, mo);
    if (mn != NEG_INF) s = s * exp2f((m - mn) * LOG2E) + so * exp2f((mo - mn) * LOG2E);
    m = mn;
  }
  const float inv = 1.0f / s;
  auto normalise = [&](const float4 v) {
    float4 r;
    r.x = exp2f((v.x - m) * LOG2E) * inv; r.y = exp2f((v.y - m) * LOG2E) * inv;
    r.z = exp2f((v.z - m) * LOG2E) * inv; r.w = exp2f((v.w - m) * LOG2E) * inv;
    return r;
  };
  float4* y4 = reinterpret_cast<float4*>(yr);
  if (in_registers) {
#pragma unroll
    for (int k = 0; k < KEEP; ++k) {
      const int i = lane + 32 * k;
      if (i < cols / 4) __stcs(y4 + i, normalise(kept[k]));  // streaming: not read again here
    }
  } else if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int i = lane; i < cols / 4; i += 32) __stcs(y4 + i, normalise(x4[i]));
  } else {
    for (int i = lane; i < cols; i += 32) yr[i] = exp2f((xr[i] - m) * LOG2E) * inv;
  }
}
"""


def softmax_unfused(x: cp.ndarray) -> cp.ndarray:
    """Numerically safe softmax over the last axis, one CuPy operation at a time."""
    m = x.max(axis=-1, keepdims=True)
    e = cp.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_fused(x: cp.ndarray) -> cp.ndarray:
    """Single-pass online softmax: one warp per row, the row read once from DRAM."""
    x = require(x, cp.float32, "x")
    cols = x.shape[-1]
    rows = x.size // cols
    y = cp.empty_like(x)
    vec = int(cols % 4 == 0 and x.data.ptr % 16 == 0)
    warps = _THREADS // 32
    kernel = compile_kernel(_SOFTMAX_SOURCE, "fuseci_softmax_rows")
    kernel((ceil_div(rows, warps),), (_THREADS,), (x, y, cp.int32(rows), cp.int32(cols), cp.int32(vec)))
    return y


def softmax_reference(x: np.ndarray) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    e = xp_of(x).exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
