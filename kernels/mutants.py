"""Deliberately broken fused variants, for proving that fuseci catches each kind of regression."""

from __future__ import annotations

import cupy as cp

from kernels._vector import VectorKernel

_SCALE_RELU = VectorKernel(
    name="fuseci_mutant_scale_relu",
    streamed=("x",),
    outputs=("t",),
    gathered=(),
    scalars=(("alpha", "float"),),
    body="t = fmaxf(alpha * x, 0.0f);",
)
_ADD = VectorKernel(
    name="fuseci_mutant_add",
    streamed=("t", "y"),
    outputs=("out",),
    gathered=(),
    scalars=(),
    body="out = t + y;",
)


def scale_relu_add_defused(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """scale→ReLU→add split in two: the intermediate goes to global memory and is read back.

    The regression a refactor makes when it splits a fused kernel: one more launch and two more
    passes over DRAM (write the intermediate, read it again), with the same result.
    """
    (t,) = _SCALE_RELU(size=x.size, x=x, alpha=alpha)
    (out,) = _ADD(size=x.size, t=t, y=y)
    return out.reshape(x.shape)


_SCALE_ADD = VectorKernel(
    name="fuseci_mutant_scale_add",
    streamed=("x", "y"),
    outputs=("out",),
    gathered=(),
    scalars=(("alpha", "float"),),
    body="out = alpha * x + y;",
)


def scale_relu_add_wrong(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """Forgets the ReLU: fast, fused, and wrong wherever ``alpha * x`` is negative."""
    (out,) = _SCALE_ADD(size=x.size, x=x, y=y, alpha=alpha)
    return out.reshape(x.shape)


def scale_relu_add_skips_tail(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """Handles only whole float4 vectors: the last ``size % 4`` outputs are never written."""
    from kernels.elementwise import _SCALE_RELU_ADD

    whole = x.size - x.size % 4
    out = cp.empty(x.size, dtype=cp.float32)
    (head,) = _SCALE_RELU_ADD(size=whole, x=x.reshape(-1)[:whole], y=y.reshape(-1)[:whole], alpha=alpha)
    out[:whole] = head
    return out.reshape(x.shape)


# --- faults: variants that break the way user code breaks ---------------------------------------


def raises(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """A variant with a bug that raises before launching anything."""
    raise ValueError(f"shapes {x.shape} and {y.shape} do not match the tile size")


_OUT_OF_BOUNDS = cp.RawKernel(
    r"""
extern "C" __global__ void fuseci_mutant_out_of_bounds(const float* x, float* out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i + (1ll << 40)] = x[i];  // a terabyte past the end: an illegal address
}
""",
    "fuseci_mutant_out_of_bounds",
)


def illegal_address(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """Writes far outside its output: cudaErrorIllegalAddress, which poisons the CUDA context."""
    out = cp.empty_like(x)
    _OUT_OF_BOUNDS((max(1, -(-x.size // 256)),), (256,), (x, out, cp.int64(x.size)))
    cp.cuda.get_current_stream().synchronize()
    return out


_SPIN = cp.RawKernel(
    r"""
extern "C" __global__ void fuseci_mutant_spin(volatile int* flag) {
  while (*flag == 0) { }  // nothing ever sets it
}
""",
    "fuseci_mutant_spin",
)


def hangs(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """A kernel that never returns (a deadlock on a flag nobody sets)."""
    flag = cp.zeros(1, dtype=cp.int32)
    _SPIN((1,), (1,), (flag,))
    cp.cuda.get_current_stream().synchronize()
    return x


def nondeterministic(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """Right on average, different on every call: noise stands in for a race between blocks."""
    from kernels.elementwise import scale_relu_add_fused

    noise = cp.random.default_rng().standard_normal(x.shape, dtype=cp.float32) * cp.float32(1e-2)
    return scale_relu_add_fused(x, y, alpha) + noise
