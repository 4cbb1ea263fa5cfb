"""Row normalisations (LayerNorm, RMSNorm): statistics and normalisation in one kernel.

One warp per row, statistics in float32, lanes combined by shuffles. LayerNorm takes the mean
first and then the variance as the mean of squared deviations (two passes over the row, so no
cancellation). Rows of up to 1024 elements stay in registers for all passes, with every load of
a lane in flight at once; longer rows are read again from L1/L2, which the warp filled a moment
before. DRAM sees each input once and each output once.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from kernels._cuda import ceil_div, compile_kernel, require, xp_of

_THREADS = 256
_ROWS_PER_BLOCK = _THREADS // 32

_LAYERNORM_SOURCE = r"""
#define KEEP 8  // float4 per lane kept in registers: rows of up to 1024 floats
// PRE(v) maps a raw input element to the value normalised (ReLU, or identity). With RESIDUAL,
// the value is x + residual and is also written to h (the "add" of add & norm).
template <bool RELU, bool RESIDUAL>
__device__ __forceinline__ float4 pre4(float4 v, const float4* __restrict__ r4, float4* __restrict__ h4, int i) {
  if (RESIDUAL) {
    const float4 r = r4[i];
    v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w;
    __stcs(h4 + i, v);  // the sum, an output of add & norm
  }
  if (RELU) { v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f); }
  return v;
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

__device__ __forceinline__ float sqdev4(float4 v, float mean, float q) {
  const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
  return fmaf(a, a, fmaf(b, b, fmaf(c, c, fmaf(d, d, q))));
}

__device__ __forceinline__ float4 norm4(float4 v, float mean, float rstd, float4 g, float4 b) {
  float4 o;
  o.x = fmaf((v.x - mean) * rstd, g.x, b.x); o.y = fmaf((v.y - mean) * rstd, g.y, b.y);
  o.z = fmaf((v.z - mean) * rstd, g.z, b.z); o.w = fmaf((v.w - mean) * rstd, g.w, b.w);
  return o;
}

// Mean first, then the variance as the mean of squared deviations (two-pass: no cancellation).
// With RESIDUAL the value normalised is x + residual, also written to h ("add" of add & norm).
template <bool RELU, bool RESIDUAL>
__device__ __forceinline__ void layernorm_row(
    const float* __restrict__ x, const float* __restrict__ res, float* __restrict__ h,
    const float* __restrict__ gamma, const float* __restrict__ beta, float* __restrict__ y,
    const int rows, const int cols, const int vec, const float eps) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const long long base = (long long)row * cols;
  const float inv_n = 1.0f / (float)cols;
  const float4* x4 = reinterpret_cast<const float4*>(x + base);
  const float4* r4 = reinterpret_cast<const float4*>(res + base);
  float4* h4 = reinterpret_cast<float4*>(h + base);
  const float4* g4 = reinterpret_cast<const float4*>(gamma);
  const float4* b4 = reinterpret_cast<const float4*>(beta);
  float4* y4 = reinterpret_cast<float4*>(y + base);
  const int quads = cols / 4;
  if (vec && cols <= 32 * 4 * KEEP) {
    // The row stays in registers: all of a lane's 16-byte loads are in flight at once, and both
    // statistics and the normalisation run from registers, with no second read.
    float4 kept[KEEP];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < KEEP; ++j)
      if (lane + 32 * j < quads) kept[j] = pre4<RELU, RESIDUAL>(x4[lane + 32 * j], r4, h4, lane + 32 * j);
#pragma unroll
    for (int j = 0; j < KEEP; ++j)
      if (lane + 32 * j < quads) s += sum4(kept[j]);
    const float mean = warp_sum(s) * inv_n;
    float q = 0.0f;
#pragma unroll
    for (int j = 0; j < KEEP; ++j)
      if (lane + 32 * j < quads) q = sqdev4(kept[j], mean, q);
    const float rstd = rsqrtf(warp_sum(q) * inv_n + eps);
#pragma unroll
    for (int j = 0; j < KEEP; ++j) {
      const int i = lane + 32 * j;
      if (i < quads) __stcs(y4 + i, norm4(kept[j], mean, rstd, __ldg(g4 + i), __ldg(b4 + i)));
    }
    return;
  }
  // Longer or unaligned rows: one read from DRAM, then two more from L1/L2 (the warp read or, for
  // h, wrote the row a moment ago).
  auto pre = [&](long long k) { float v = x[k]; if (RESIDUAL) v += res[k]; if (RELU) v = fmaxf(v, 0.0f); return v; };
  const float* src = RESIDUAL ? h : x;
  auto again = [&](long long k) { float v = RESIDUAL ? __ldcg(src + k) : src[k]; if (RELU) v = fmaxf(v, 0.0f); return v; };
  float s = 0.0f;
  if (vec) {
#pragma unroll 4
    for (int i = lane; i < quads; i += 32) s += sum4(pre4<RELU, RESIDUAL>(x4[i], r4, h4, i));
  } else {
    for (int i = lane; i < cols; i += 32) {
      const float v = pre(base + i);
      if (RESIDUAL) h[base + i] = v;
      s += v;
    }
  }
  const float mean = warp_sum(s) * inv_n;
  __syncwarp();  // h written by one lane is read back by another below: order the memory
  float q = 0.0f;
  for (int i = lane; i < cols; i += 32) { const float d = again(base + i) - mean; q = fmaf(d, d, q); }
  const float rstd = rsqrtf(warp_sum(q) * inv_n + eps);
  if (vec) {
    const float4* s4 = reinterpret_cast<const float4*>(src + base);
    for (int i = lane; i < quads; i += 32) {
      float4 v = RESIDUAL ? __ldcg(s4 + i) : s4[i];
      if (RELU) { v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f); }
      __stcs(y4 + i, norm4(v, mean, rstd, __ldg(g4 + i), __ldg(b4 + i)));
    }
  } else {
    for (int i = lane; i < cols; i += 32) y[base + i] = fmaf((again(base + i) - mean) * rstd, gamma[i], beta[i]);
  }
}

extern "C" __global__ void __launch_bounds__(256)
fuseci_relu_layernorm(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                      float* __restrict__ y, const int rows, const int cols, const int vec, const float eps) {
  layernorm_row<true, false>(x, nullptr, nullptr, gamma, beta, y, rows, cols, vec, eps);
}

extern "C" __global__ void __launch_bounds__(256)
fuseci_add_layernorm(const float* __restrict__ x, const float* __restrict__ res, float* __restrict__ h,
                     const float* __restrict__ gamma, const float* __restrict__ beta, float* __restrict__ y,
                     const int rows, const int cols, const int vec, const float eps) {
  layernorm_row<false, true>(x, res, h, gamma, beta, y, rows, cols, vec, eps);
}
"""

_RMSNORM_SOURCE = r"""
#define KEEP8 4  // 16-byte loads per lane kept in registers: rows of up to 1024 halves
// float16 in and out, float32 statistics. 16-byte loads carry 8 halves.
extern "C" __global__ void __launch_bounds__(256)
fuseci_rmsnorm_f16(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y,
                   const int rows, const int cols, const int vec, const float eps) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const long long base = (long long)row * cols;
  if (vec && cols <= 32 * 8 * KEEP8) {
    // The row stays in registers (8 halves per 16-byte load): one read, loads all in flight.
    const uint4* x8 = reinterpret_cast<const uint4*>(x + base);
    uint4 kept[KEEP8];
    float q = 0.0f;
#pragma unroll
    for (int j = 0; j < KEEP8; ++j) {
      if (lane + 32 * j < cols / 8) kept[j] = x8[lane + 32 * j];
    }
#pragma unroll
    for (int j = 0; j < KEEP8; ++j) {
      if (lane + 32 * j < cols / 8) {
        const __half2* h2 = reinterpret_cast<const __half2*>(&kept[j]);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const float2 f = __half22float2(h2[t]);
          q = fmaf(f.x, f.x, q); q = fmaf(f.y, f.y, q);
        }
      }
    }
    const float r = rsqrtf(warp_sum(q) / (float)cols + eps);
    const uint4* w8 = reinterpret_cast<const uint4*>(w);
    uint4* y8 = reinterpret_cast<uint4*>(y + base);
#pragma unroll
    for (int j = 0; j < KEEP8; ++j) {
      const int i = lane + 32 * j;
      if (i < cols / 8) {
        const uint4 wraw = __ldg(w8 + i);
        const __half2* h2 = reinterpret_cast<const __half2*>(&kept[j]);
        const __half2* w2 = reinterpret_cast<const __half2*>(&wraw);
        uint4 out;
        __half2* o2 = reinterpret_cast<__half2*>(&out);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const float2 f = __half22float2(h2[t]), g = __half22float2(w2[t]);
          o2[t] = __floats2half2_rn(f.x * r * g.x, f.y * r * g.y);
        }
        __stcs(y8 + i, out);
      }
    }
    return;
  }
  float q = 0.0f;
  if (vec) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x + base);
#pragma unroll 4
    for (int i = lane; i < cols / 8; i += 32) {
      const uint4 raw = x8[i];
      const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(h2[j]);
        q = fmaf(f.x, f.x, q); q = fmaf(f.y, f.y, q);
      }
    }
  } else {
    for (int i = lane; i < cols; i += 32) { const float f = __half2float(x[base + i]); q = fmaf(f, f, q); }
  }
  q = warp_sum(q);
  const float r = rsqrtf(q / (float)cols + eps);
  if (vec) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x + base);
    const uint4* w8 = reinterpret_cast<const uint4*>(w);
    uint4* y8 = reinterpret_cast<uint4*>(y + base);
    for (int i = lane; i < cols / 8; i += 32) {
      const uint4 raw = x8[i], wraw = __ldg(w8 + i);
      const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
      const __half2* w2 = reinterpret_cast<const __half2*>(&wraw);
      uint4 out;
      __half2* o2 = reinterpret_cast<__half2*>(&out);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(h2[j]), g = __half22float2(w2[j]);
        o2[j] = __floats2half2_rn(f.x * r * g.x, f.y * r * g.y);
      }
      __stcs(y8 + i, out);
    }
  } else {
    for (int i = lane; i < cols; i += 32)
      y[base + i] = __float2half_rn(__half2float(x[base + i]) * r * __half2float(w[i]));
  }
}
"""


def _rows(x: cp.ndarray) -> tuple[int, int]:
    cols = x.shape[-1]
    return x.size // cols, cols


def _grid(rows: int) -> tuple[int]:
    return (ceil_div(rows, _ROWS_PER_BLOCK),)


def _aligned(*arrays: cp.ndarray) -> bool:
    return all(a.data.ptr % 16 == 0 for a in arrays)


# --- ReLU + LayerNorm ------------------------------------------------------------------------


def _layernorm_cupy(h: cp.ndarray, gamma: cp.ndarray, beta: cp.ndarray, eps: float) -> cp.ndarray:
    mean = h.mean(axis=-1, keepdims=True)
    centered = h - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / cp.sqrt(var + cp.float32(eps)) * gamma + beta


def relu_layernorm_unfused(x: cp.ndarray, gamma: cp.ndarray, beta: cp.ndarray, eps: float) -> cp.ndarray:
    """``LayerNorm(relu(x)) * gamma + beta`` over the last axis, with CuPy operations."""
    return _layernorm_cupy(cp.maximum(x, cp.float32(0)), gamma, beta, eps)


def relu_layernorm_fused(x: cp.ndarray, gamma: cp.ndarray, beta: cp.ndarray, eps: float) -> cp.ndarray:
    """One warp per row: ReLU, statistics and affine normalisation, x read once from DRAM."""
    x = require(x, cp.float32, "x")
    gamma, beta = require(gamma, cp.float32, "gamma", 1), require(beta, cp.float32, "beta", 1)
    rows, cols = _rows(x)
    y = cp.empty_like(x)
    vec = int(cols % 4 == 0 and _aligned(x, gamma, beta, y))
    kernel = compile_kernel(_LAYERNORM_SOURCE, "fuseci_relu_layernorm")
    kernel(
        _grid(rows), (_THREADS,), (x, gamma, beta, y, cp.int32(rows), cp.int32(cols), cp.int32(vec), cp.float32(eps))
    )
    return y


def _layernorm_np(h: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = h.mean(axis=-1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=-1, keepdims=True)
    return (h - mean) / xp_of(h).sqrt(var + eps) * gamma + beta


def relu_layernorm_reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    return _layernorm_np(xp_of(x).maximum(x, 0.0), gamma, beta, eps)


# --- residual add + LayerNorm (returns the normalised output and the sum) --------------------


def add_layernorm_unfused(
    x: cp.ndarray, residual: cp.ndarray, gamma: cp.ndarray, beta: cp.ndarray, eps: float
) -> tuple[cp.ndarray, cp.ndarray]:
    """``h = x + residual; y = LayerNorm(h) * gamma + beta``; returns (y, h)."""
    h = x + residual
    return _layernorm_cupy(h, gamma, beta, eps), h


def add_layernorm_fused(
    x: cp.ndarray, residual: cp.ndarray, gamma: cp.ndarray, beta: cp.ndarray, eps: float
) -> tuple[cp.ndarray, cp.ndarray]:
    """Add & norm in one kernel: reads x and residual once, writes h and y once."""
    x, residual = require(x, cp.float32, "x"), require(residual, cp.float32, "residual")
    gamma, beta = require(gamma, cp.float32, "gamma", 1), require(beta, cp.float32, "beta", 1)
    rows, cols = _rows(x)
    h, y = cp.empty_like(x), cp.empty_like(x)
    vec = int(cols % 4 == 0 and _aligned(x, residual, gamma, beta, h, y))
    kernel = compile_kernel(_LAYERNORM_SOURCE, "fuseci_add_layernorm")
    args = (x, residual, h, gamma, beta, y, cp.int32(rows), cp.int32(cols), cp.int32(vec), cp.float32(eps))
    kernel(_grid(rows), (_THREADS,), args)
    return y, h


def add_layernorm_reference(
    x: np.ndarray, residual: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """float64 reference (NumPy or CuPy arrays)."""
    h = x + residual
    return _layernorm_np(h, gamma, beta, eps), h


# --- RMSNorm, float16 with float32 accumulation ----------------------------------------------


def rmsnorm_f16_unfused(x: cp.ndarray, weight: cp.ndarray, eps: float) -> cp.ndarray:
    """RMSNorm as commonly written: upcast to float32, normalise, scale, downcast."""
    xf = x.astype(cp.float32)
    ms = (xf * xf).mean(axis=-1, keepdims=True)
    y = xf * (cp.float32(1) / cp.sqrt(ms + cp.float32(eps)))
    return (y * weight.astype(cp.float32)).astype(cp.float16)


def rmsnorm_f16_fused(x: cp.ndarray, weight: cp.ndarray, eps: float) -> cp.ndarray:
    """float16 in and out, float32 statistics, 8 halves per 16-byte load, one kernel."""
    x, weight = require(x, cp.float16, "x"), require(weight, cp.float16, "weight", 1)
    rows, cols = _rows(x)
    y = cp.empty_like(x)
    vec = int(cols % 8 == 0 and _aligned(x, weight, y))
    kernel = compile_kernel(_RMSNORM_SOURCE, "fuseci_rmsnorm_f16")
    kernel(_grid(rows), (_THREADS,), (x, weight, y, cp.int32(rows), cp.int32(cols), cp.int32(vec), cp.float32(eps)))
    return y


def rmsnorm_f16_reference(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """float64 reference, NumPy or CuPy arrays (the harness compares the float16 outputs against it)."""
    return x / xp_of(x).sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight
