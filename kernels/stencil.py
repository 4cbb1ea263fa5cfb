"""Stencils in NCHW: 3×3 convolution with a bias + ReLU epilogue, and a depthwise 3×3
convolution followed by a per-channel affine (folded BatchNorm) and ReLU6.

The unfused chains use the *same* convolution kernel as the fused ones, compiled without the
epilogue, followed by CuPy elementwise operations: the only difference measured is the fusion.

Each input element is read from DRAM about once. The 3×3 convolution stages a 32×8 output
tile's input (plus halo) in shared memory with all weights of its output-channel group, and
every thread accumulates ``COUT_PER_BLOCK`` output channels of one pixel. The depthwise one
walks each column down its plane with a three-row window in registers.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from kernels._cuda import ceil_div, compile_kernel, require, xp_of

_TILE_W, _TILE_H = 32, 8
_COUT_PER_BLOCK = 8

_CONV_SOURCE = r"""
#define TW 32
#define TH 8
#define CPB 8   // output channels per block

template <bool EPILOGUE>
__device__ __forceinline__ void conv3x3(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ y, const int cin, const int cout, const int height, const int width) {
  extern __shared__ float smem[];
  float* wsh = smem;                     // [CPB][cin][9]
  float* tile = smem + CPB * cin * 9;    // [TH + 2][TW + 2]
  const int tiles_x = (width + TW - 1) / TW;
  const int tx0 = (blockIdx.x % tiles_x) * TW, ty0 = (blockIdx.x / tiles_x) * TH;
  const int co0 = blockIdx.y * CPB;
  const int n = blockIdx.z;
  const int t = threadIdx.x, lx = t % TW, ly = t / TW;
  for (int i = t; i < CPB * cin * 9; i += blockDim.x) {
    const int co = co0 + i / (cin * 9);
    wsh[i] = co < cout ? w[(long long)co0 * cin * 9 + i] : 0.0f;
  }
  float acc[CPB];
#pragma unroll
  for (int k = 0; k < CPB; ++k) acc[k] = 0.0f;
  const long long plane = (long long)height * width;
  for (int ci = 0; ci < cin; ++ci) {
    const float* xp = x + ((long long)n * cin + ci) * plane;
    __syncthreads();  // the previous channel's tile is no longer in use
    for (int i = t; i < (TH + 2) * (TW + 2); i += blockDim.x) {
      const int gy = ty0 + i / (TW + 2) - 1, gx = tx0 + i % (TW + 2) - 1;
      tile[i] = (gy >= 0 && gy < height && gx >= 0 && gx < width) ? __ldg(xp + (long long)gy * width + gx) : 0.0f;
    }
    __syncthreads();
    float v[9];
#pragma unroll
    for (int dy = 0; dy < 3; ++dy)
#pragma unroll
      for (int dx = 0; dx < 3; ++dx) v[dy * 3 + dx] = tile[(ly + dy) * (TW + 2) + lx + dx];
    const float* wc = wsh + ci * 9;
#pragma unroll
    for (int k = 0; k < CPB; ++k) {
#pragma unroll
      for (int j = 0; j < 9; ++j) acc[k] = fmaf(v[j], wc[k * cin * 9 + j], acc[k]);
    }
  }
  const int gy = ty0 + ly, gx = tx0 + lx;
  if (gy >= height || gx >= width) return;
#pragma unroll
  for (int k = 0; k < CPB; ++k) {
    const int co = co0 + k;
    if (co >= cout) break;
    float r = acc[k];
    if (EPILOGUE) r = fmaxf(r + __ldg(bias + co), 0.0f);
    y[((long long)n * cout + co) * plane + (long long)gy * width + gx] = r;
  }
}

extern "C" __global__ void __launch_bounds__(256)
fuseci_conv3x3(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
               const int cin, const int cout, const int height, const int width) {
  conv3x3<false>(x, w, nullptr, y, cin, cout, height, width);
}

extern "C" __global__ void __launch_bounds__(256)
fuseci_conv3x3_bias_relu(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                         float* __restrict__ y, const int cin, const int cout, const int height, const int width) {
  conv3x3<true>(x, w, bias, y, cin, cout, height, width);
}
"""

_DEPTHWISE_SOURCE = r"""
// One thread per output column walks down its (n, c) plane, keeping the three input rows it
// needs in registers: each new row costs one coalesced load of its own column (the left and
// right neighbours are the same load of the adjacent threads and come from L1). Every input
// element is read from DRAM once and every output written once, with no shared-memory staging.
template <bool EPILOGUE>
__device__ __forceinline__ void depthwise3x3(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ scale,
    const float* __restrict__ shift, float* __restrict__ y, const int channels, const int height, const int width) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= width) return;
  const int c = blockIdx.y, n = blockIdx.z;
  const long long plane = (long long)height * width;
  const float* xp = x + ((long long)n * channels + c) * plane;
  float* yp = y + ((long long)n * channels + c) * plane;
  float wr[9];
#pragma unroll
  for (int j = 0; j < 9; ++j) wr[j] = __ldg(w + c * 9 + j);
  const float sc = EPILOGUE ? __ldg(scale + c) : 1.0f, sh = EPILOGUE ? __ldg(shift + c) : 0.0f;
  const bool has_left = col > 0, has_right = col + 1 < width;
  auto load = [&](int row, float& l, float& m, float& r) {
    if (row < 0 || row >= height) { l = m = r = 0.0f; return; }
    const float* p = xp + (long long)row * width + col;
    m = __ldg(p);
    l = has_left ? __ldg(p - 1) : 0.0f;
    r = has_right ? __ldg(p + 1) : 0.0f;
  };
  float a0, a1, a2, b0, b1, b2, c0, c1, c2;  // rows above, at and below the output row
  load(-1, a0, a1, a2);
  load(0, b0, b1, b2);
#pragma unroll 4
  for (int row = 0; row < height; ++row) {
    load(row + 1, c0, c1, c2);
    float r = a0 * wr[0];
    r = fmaf(a1, wr[1], r); r = fmaf(a2, wr[2], r);
    r = fmaf(b0, wr[3], r); r = fmaf(b1, wr[4], r); r = fmaf(b2, wr[5], r);
    r = fmaf(c0, wr[6], r); r = fmaf(c1, wr[7], r); r = fmaf(c2, wr[8], r);
    if (EPILOGUE) r = fminf(fmaxf(fmaf(r, sc, sh), 0.0f), 6.0f);
    __stcs(yp + (long long)row * width + col, r);
    a0 = b0; a1 = b1; a2 = b2; b0 = c0; b1 = c1; b2 = c2;
  }
}

// The same stencil, four columns per thread: one 16-byte load per row for the thread's own
// columns plus one scalar (from L1) on each side; each thread walks SEG rows of its quad, so a
// plane is covered by ceil(H / SEG) threads per quad. Needs width % 4 == 0 and 16-byte rows.
#define SEG 32
template <bool EPILOGUE>
__device__ __forceinline__ void depthwise3x3_vec4(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ scale,
    const float* __restrict__ shift, float* __restrict__ y, const int channels, const int height, const int width) {
  const int quads = width >> 2;
  const int chunks_x = (quads + 31) >> 5;
  const int q = (blockIdx.x % chunks_x) * 32 + threadIdx.x;
  const int row0 = ((blockIdx.x / chunks_x) * blockDim.y + threadIdx.y) * SEG;
  if (q >= quads || row0 >= height) return;
  const int c = blockIdx.y, n = blockIdx.z, col = 4 * q;
  const long long plane = (long long)height * width;
  const float* xp = x + ((long long)n * channels + c) * plane;
  float* yp = y + ((long long)n * channels + c) * plane;
  float wr[9];
#pragma unroll
  for (int j = 0; j < 9; ++j) wr[j] = __ldg(w + c * 9 + j);
  const float sc = EPILOGUE ? __ldg(scale + c) : 1.0f, sh = EPILOGUE ? __ldg(shift + c) : 0.0f;
  const bool has_left = col > 0, has_right = col + 4 < width;
  float e[3][6];  // rows above, at and below the output row; columns col-1 .. col+4
  auto load = [&](int row, float* r) {
    if (row < 0 || row >= height) {
#pragma unroll
      for (int j = 0; j < 6; ++j) r[j] = 0.0f;
      return;
    }
    const float* p = xp + (long long)row * width + col;
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    r[0] = has_left ? __ldg(p - 1) : 0.0f;
    r[1] = v.x; r[2] = v.y; r[3] = v.z; r[4] = v.w;
    r[5] = has_right ? __ldg(p + 4) : 0.0f;
  };
  load(row0 - 1, e[0]);
  load(row0, e[1]);
  const int row_end = min(row0 + SEG, height);
  for (int row = row0; row < row_end; ++row) {
    load(row + 1, e[2]);
    float o[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float r = 0.0f;
#pragma unroll
      for (int dy = 0; dy < 3; ++dy)
#pragma unroll
        for (int dx = 0; dx < 3; ++dx) r = fmaf(e[dy][j + dx], wr[dy * 3 + dx], r);
      o[j] = EPILOGUE ? fminf(fmaxf(fmaf(r, sc, sh), 0.0f), 6.0f) : r;
    }
    __stcs(reinterpret_cast<float4*>(yp + (long long)row * width + col), make_float4(o[0], o[1], o[2], o[3]));
#pragma unroll
    for (int j = 0; j < 6; ++j) { e[0][j] = e[1][j]; e[1][j] = e[2][j]; }
  }
}

extern "C" __global__ void __launch_bounds__(128)
fuseci_depthwise3x3_vec4(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                         const int channels, const int height, const int width) {
  depthwise3x3_vec4<false>(x, w, nullptr, nullptr, y, channels, height, width);
}

extern "C" __global__ void __launch_bounds__(128)
fuseci_depthwise3x3_affine_relu6_vec4(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ scale, const float* __restrict__ shift,
                                      float* __restrict__ y, const int channels, const int height, const int width) {
  depthwise3x3_vec4<true>(x, w, scale, shift, y, channels, height, width);
}

extern "C" __global__ void __launch_bounds__(128)
fuseci_depthwise3x3(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                    const int channels, const int height, const int width) {
  depthwise3x3<false>(x, w, nullptr, nullptr, y, channels, height, width);
}

extern "C" __global__ void __launch_bounds__(128)
fuseci_depthwise3x3_affine_relu6(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ scale,
                                 const float* __restrict__ shift, float* __restrict__ y,
                                 const int channels, const int height, const int width) {
  depthwise3x3<true>(x, w, scale, shift, y, channels, height, width);
}
"""


def _spatial_grid(height: int, width: int) -> int:
    return ceil_div(width, _TILE_W) * ceil_div(height, _TILE_H)


def _channel(v: cp.ndarray) -> cp.ndarray:
    return v.reshape(1, -1, 1, 1)


# --- Conv2d 3x3 + bias + ReLU ----------------------------------------------------------------


def _conv(x: cp.ndarray, weight: cp.ndarray, bias: cp.ndarray | None) -> cp.ndarray:
    x = require(x, cp.float32, "x", 4)
    weight = require(weight, cp.float32, "weight", 4)
    n, cin, height, width = x.shape
    cout = weight.shape[0]
    if weight.shape != (cout, cin, 3, 3):
        raise ValueError(f"weight: expected shape ({cout}, {cin}, 3, 3), got {weight.shape}")
    y = cp.empty((n, cout, height, width), dtype=cp.float32)
    grid = (_spatial_grid(height, width), ceil_div(cout, _COUT_PER_BLOCK), n)
    smem = 4 * (_COUT_PER_BLOCK * cin * 9 + (_TILE_H + 2) * (_TILE_W + 2))
    if smem > 48 * 1024:
        raise ValueError(f"x: {cin} input channels need {smem} bytes of shared memory; this kernel supports up to 160")
    dims = (cp.int32(cin), cp.int32(cout), cp.int32(height), cp.int32(width))
    if bias is None:
        kernel = compile_kernel(_CONV_SOURCE, "fuseci_conv3x3")
        kernel(grid, (_TILE_W * _TILE_H,), (x, weight, y, *dims), shared_mem=smem)
    else:
        bias = require(bias, cp.float32, "bias", 1)
        kernel = compile_kernel(_CONV_SOURCE, "fuseci_conv3x3_bias_relu")
        kernel(grid, (_TILE_W * _TILE_H,), (x, weight, bias, y, *dims), shared_mem=smem)
    return y


def conv_bias_relu_unfused(x: cp.ndarray, weight: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """The convolution kernel alone, then bias and ReLU as CuPy operations (two more passes)."""
    y = _conv(x, weight, None)
    y = y + _channel(bias)
    return cp.maximum(y, cp.float32(0))


def conv_bias_relu_fused(x: cp.ndarray, weight: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """The same convolution kernel with bias and ReLU applied to the accumulators."""
    return _conv(x, weight, bias)


def conv_bias_relu_reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays): 3×3, stride 1, zero padding 1, cross-correlation
    as in deep learning."""
    xp = xp_of(x)
    n, _, height, width = x.shape
    padded = xp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = xp.zeros((n, weight.shape[0], height, width))
    # NumPy's einsum sums two operands in a plain loop unless asked to use BLAS; CuPy's always does.
    options = {"optimize": True} if xp is np else {}
    for dy in range(3):
        for dx in range(3):
            window = padded[:, :, dy : dy + height, dx : dx + width]
            y += xp.einsum("nchw,oc->nohw", window, weight[:, :, dy, dx], **options)
    return xp.maximum(y + bias.reshape(1, -1, 1, 1), 0.0)


# --- depthwise 3x3 -> affine -> ReLU6 --------------------------------------------------------


def _depthwise(x: cp.ndarray, weight: cp.ndarray, scale: cp.ndarray | None, shift: cp.ndarray | None) -> cp.ndarray:
    x = require(x, cp.float32, "x", 4)
    weight = require(weight, cp.float32, "weight", 3)
    n, channels, height, width = x.shape
    if weight.shape != (channels, 3, 3):
        raise ValueError(f"weight: expected shape ({channels}, 3, 3), got {weight.shape}")
    y = cp.empty_like(x)
    dims = (cp.int32(channels), cp.int32(height), cp.int32(width))
    epilogue = () if scale is None else (require(scale, cp.float32, "scale", 1), require(shift, cp.float32, "shift", 1))
    name = "fuseci_depthwise3x3" if scale is None else "fuseci_depthwise3x3_affine_relu6"
    if width % 4 == 0 and x.data.ptr % 16 == 0 and y.data.ptr % 16 == 0:
        rows_per_block = 4 * 32  # blockDim.y segments of SEG rows
        grid = (ceil_div(width // 4, 32) * ceil_div(height, rows_per_block), channels, n)
        block: tuple[int, ...] = (32, 4)
        name += "_vec4"
    else:
        grid, block = (ceil_div(width, 128), channels, n), (128,)
    compile_kernel(_DEPTHWISE_SOURCE, name)(grid, block, (x, weight, *epilogue, y, *dims))
    return y


def depthwise_affine_relu6_unfused(
    x: cp.ndarray, weight: cp.ndarray, scale: cp.ndarray, shift: cp.ndarray
) -> cp.ndarray:
    """Depthwise convolution kernel, then the affine and ReLU6 as CuPy operations."""
    y = _depthwise(x, weight, None, None)
    y = y * _channel(scale) + _channel(shift)
    return cp.clip(y, cp.float32(0), cp.float32(6))


def depthwise_affine_relu6_fused(x: cp.ndarray, weight: cp.ndarray, scale: cp.ndarray, shift: cp.ndarray) -> cp.ndarray:
    """The same depthwise kernel with the affine and ReLU6 applied before the store."""
    return _depthwise(x, weight, scale, shift)


def depthwise_affine_relu6_reference(
    x: np.ndarray, weight: np.ndarray, scale: np.ndarray, shift: np.ndarray
) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    xp = xp_of(x)
    _, _, height, width = x.shape
    padded = xp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = xp.zeros_like(x)
    for dy in range(3):
        for dx in range(3):
            y += padded[:, :, dy : dy + height, dx : dx + width] * weight[:, dy, dx].reshape(1, -1, 1, 1)
    return xp.clip(y * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1), 0.0, 6.0)
