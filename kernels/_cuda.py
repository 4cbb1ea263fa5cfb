"""Shared CUDA device code and launch helpers for the hand-written kernels."""

from __future__ import annotations

from functools import cache
from types import ModuleType

import cupy as cp

#: Device helpers prepended to every kernel source.
PRELUDE = r"""
#include <cuda_fp16.h>
#define FULL_MASK 0xffffffffu
#define LOG2E 1.4426950408889634f
#define NEG_INF (-__int_as_float(0x7f800000))  // NVRTC has no <cmath> INFINITY

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
  return v;
}

// Block-wide sum of one float per thread; every thread gets the result. blockDim.x <= 1024.
__device__ __forceinline__ float block_sum(float v, float* scratch /* >= 32 floats */) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
"""


@cache
def sm_count() -> int:
    """Multiprocessors of the current device."""
    return int(cp.cuda.Device().attributes["MultiProcessorCount"])


@cache
def compile_kernel(source: str, name: str) -> cp.RawKernel:
    """Compile ``PRELUDE + source`` once per process and return the kernel ``name``."""
    return cp.RawKernel(PRELUDE + source, name, options=("-std=c++17",))


def ceil_div(a: int, b: int) -> int:
    """Smallest integer >= a / b."""
    return -(-a // b)


def require(array: object, dtype: object, name: str, ndim: int | None = None) -> cp.ndarray:
    """A C-contiguous CuPy array of ``dtype`` (copied if it is a strided view).

    Raises:
        TypeError: not a CuPy array of that dtype, or of the wrong rank.
    """
    if not isinstance(array, cp.ndarray) or array.dtype != cp.dtype(dtype):
        raise TypeError(
            f"{name}: expected a {cp.dtype(dtype).name} cupy array, got {type(array).__name__} {getattr(array, 'dtype', '')}"
        )
    if ndim is not None and array.ndim != ndim:
        raise TypeError(f"{name}: expected {ndim} dimensions, got shape {array.shape}")
    return cp.ascontiguousarray(array)


def xp_of(*arrays: object) -> ModuleType:
    """The array namespace of ``arrays``: CuPy for device arrays, NumPy otherwise. References
    use it so that the harness can evaluate them on the GPU in float64, and tests on the host."""
    return cp.get_array_module(*arrays)
