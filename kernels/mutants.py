"""Deliberately broken fused variants, for proving that fuseci catches each kind of regression."""

from __future__ import annotations

import cupy as cp

from kernels._cuda import ceil_div, compile_kernel, require, sm_count
from kernels._vector import THREADS, VectorKernel, _max_threads

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


# --- planted performance regressions: the right result, one broken metric each ------------------
#
# Each mutant below computes exactly what scale_relu_add_fused computes (bit for bit: the same
# float32 operations in the same order) and breaks one thing fuseci measures, leaving the others
# as the healthy kernel has them: 256 threads a block, the same index width and, except for
# register_heavy, the same theoretical occupancy.


def _operands(x: cp.ndarray, y: cp.ndarray) -> tuple[cp.ndarray, cp.ndarray]:
    """Flat C-contiguous float32 views of ``x`` and ``y``.

    Raises:
        TypeError: either is not a float32 CuPy array.
        ValueError: ``y`` does not have as many elements as ``x``.
    """
    xf = require(x, cp.float32, "x").reshape(-1)
    yf = require(y, cp.float32, "y").reshape(-1)
    if yf.size != xf.size:
        raise ValueError(f"y: expected {xf.size} elements like x, got {yf.size}")
    return xf, yf


def _index_type(size: int) -> str:
    # The healthy kernel's rule (kernels._vector): a different index width would change the
    # register count, and with it the occupancy, of mutants meant to break something else.
    return "int" if size < 2**31 - 2 * _max_threads() else "long long"


def _index(size: int) -> type[cp.int32] | type[cp.int64]:
    return cp.int32 if _index_type(size) == "int" else cp.int64


def _vectors(*arrays: cp.ndarray) -> int:
    """float4 vectors in the head, as the healthy kernel counts them (0: scalar path only)."""
    size = arrays[0].size
    return size // 4 if all(a.data.ptr % 16 == 0 for a in arrays) else 0


def _launch(
    kernel: cp.RawKernel,
    xf: cp.ndarray,
    yf: cp.ndarray,
    out: cp.ndarray,
    alpha: float,
    *,
    work: int,
    per_sm: int,
    count: int,
) -> None:
    """Run a mutant kernel ``(x, y, out, alpha, n, count)`` over ``work`` parallel items with at
    most ``per_sm`` blocks of :data:`THREADS` per SM (a grid-stride loop does the rest)."""
    index = _index(xf.size)
    blocks = max(1, min(ceil_div(work, THREADS), sm_count() * per_sm))
    kernel((blocks,), (THREADS,), (xf, yf, out, cp.float32(alpha), index(xf.size), index(count)))


_REREADS_SOURCE = r"""
// Pass 1 streams this thread's share of x and sums it, clamped to [-1, 1] so the sum is always
// finite; pass 2 is the healthy kernel with alpha + 0 * sum, which is alpha exactly but cannot be
// folded away (0 * sum is NaN for an infinite sum as far as the compiler knows). The grid sweeps
// all of x before pass 2 starts, so x comes from DRAM twice.
extern "C" __global__ void __launch_bounds__(256)
fuseci_mutant_rereads(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                      const float alpha, const index_t n, const index_t n4) {
  const index_t stride = (index_t)gridDim.x * blockDim.x;
  const index_t start = (index_t)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float sum = 0.0f;
  for (index_t i = start; i < n4; i += stride) {
    const float4 v = x4[i];
    sum += (fminf(fmaxf(v.x, -1.0f), 1.0f) + fminf(fmaxf(v.y, -1.0f), 1.0f))
         + (fminf(fmaxf(v.z, -1.0f), 1.0f) + fminf(fmaxf(v.w, -1.0f), 1.0f));
  }
  for (index_t i = 4 * n4 + start; i < n; i += stride) sum += fminf(fmaxf(x[i], -1.0f), 1.0f);
  const float a = alpha + 0.0f * sum;
  for (index_t i = start; i < n4; i += stride) {
    const float4 v = x4[i], w = reinterpret_cast<const float4*>(y)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(fmaxf(a * v.x, 0.0f) + w.x, fmaxf(a * v.y, 0.0f) + w.y,
                                                    fmaxf(a * v.z, 0.0f) + w.z, fmaxf(a * v.w, 0.0f) + w.w);
  }
  for (index_t i = 4 * n4 + start; i < n; i += stride) out[i] = fmaxf(a * x[i], 0.0f) + y[i];
}
"""


def _rereads_kernel(index_type: str) -> cp.RawKernel:
    return compile_kernel(f"typedef {index_type} index_t;\n{_REREADS_SOURCE}", "fuseci_mutant_rereads")


def scale_relu_add_rereads(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """One launch that reads ``x`` from DRAM twice: a first sweep feeds a no-op into the second.

    The regression of a kernel that grows a pre-pass (a statistic, a check) over an input it then
    reads again. Launches and occupancy are the healthy kernel's; DRAM bytes read grow by one
    tensor (+33 % of all bytes moved for 2 reads and 1 write), so the DRAM bytes and bytes
    efficiency checks must catch it; the time check may not on its own.

    Raises:
        TypeError: ``x`` or ``y`` is not a float32 CuPy array.
        ValueError: ``y`` does not have as many elements as ``x``.
    """
    xf, yf = _operands(x, y)
    out = cp.empty(xf.size, dtype=cp.float32)
    n, n4 = xf.size, _vectors(xf, yf, out)
    kernel = _rereads_kernel(_index_type(n))
    _launch(kernel, xf, yf, out, alpha, work=max(n4, n - 4 * n4), per_sm=2048 // THREADS, count=n4)
    return out.reshape(x.shape)


_STATUS_SOURCE = r"""
extern "C" __global__ void fuseci_mutant_status(int* __restrict__ status) {
  if (threadIdx.x == 0) status[0] = 1;  // "done": one word that nobody reads
}
"""


def scale_relu_add_extra_launch(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """The healthy fused kernel, then a one-block kernel that writes a status flag to scratch.

    The regression of a bookkeeping launch slipped in beside a fused kernel: DRAM bytes and the
    fused kernel's own metrics are unchanged, but the variant launches 2 kernels instead of 1 and
    a new kernel name (``fuseci_mutant_status``) appears. The launch-count and kernel-inventory
    checks must catch it; it is too small for any byte or time gate.
    """
    from kernels.elementwise import scale_relu_add_fused

    out = scale_relu_add_fused(x, y, alpha)
    status = cp.empty(1, dtype=cp.int32)
    # A full 256-thread block, not a single warp: 32-thread blocks cap an SM at 32 warps (50 %
    # theoretical occupancy), which would nudge the variant's duration-weighted occupancy too.
    compile_kernel(_STATUS_SOURCE, "fuseci_mutant_status")((1,), (THREADS,), (status,))
    return out


#: Per index width: float4 vectors of each input that a thread keeps in flight, and the resident
#: blocks per SM promised in ``__launch_bounds__``. The healthy kernel compiles to 32 registers with
#: 32-bit indices (8 blocks of 256 threads per SM: 100 % theoretical occupancy) and to 40 with
#: 64-bit ones (6 blocks, 75 %). Holding 2 x 5 (2 x 6) float4 live needs 64 (80) registers, which
#: allows 4 (3) blocks per SM: exactly half. The bound keeps the compiler from going above that.
_HEAVY = {"int": (5, 4), "long long": (6, 3)}

_REGISTER_HEAVY_SOURCE = r"""
// Grid-stride over groups of VECTORS float4 per tensor: all loads of a group are issued before
// any is used, so 2 * VECTORS float4 (8 * VECTORS registers) are live at once.
extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS)
fuseci_mutant_register_heavy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                             const float alpha, const index_t n, const index_t n4) {
  const index_t stride = (index_t)gridDim.x * blockDim.x;
  const index_t start = (index_t)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* y4 = reinterpret_cast<const float4*>(y);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (index_t base = start; base < n4; base += VECTORS * stride) {
    float4 vx[VECTORS], vy[VECTORS];
#pragma unroll
    for (int k = 0; k < VECTORS; ++k) {
      const index_t i = base + k * stride;
      if (i < n4) { vx[k] = x4[i]; vy[k] = y4[i]; }
    }
#pragma unroll
    for (int k = 0; k < VECTORS; ++k) {
      const index_t i = base + k * stride;
      if (i < n4) out4[i] = make_float4(fmaxf(alpha * vx[k].x, 0.0f) + vy[k].x, fmaxf(alpha * vx[k].y, 0.0f) + vy[k].y,
                                        fmaxf(alpha * vx[k].z, 0.0f) + vy[k].z, fmaxf(alpha * vx[k].w, 0.0f) + vy[k].w);
    }
  }
  for (index_t i = 4 * n4 + start; i < n; i += stride) out[i] = fmaxf(alpha * x[i], 0.0f) + y[i];
}
"""


def _register_heavy_kernel(index_type: str) -> cp.RawKernel:
    vectors, min_blocks = _HEAVY[index_type]
    header = f"typedef {index_type} index_t;\n#define VECTORS {vectors}\n#define MIN_BLOCKS {min_blocks}\n"
    return compile_kernel(header + _REGISTER_HEAVY_SOURCE, "fuseci_mutant_register_heavy")


def scale_relu_add_register_heavy(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """One pass over memory, but so many registers a thread that half as many warps fit an SM.

    The regression of over-unrolling: each thread keeps 10 (12 with 64-bit indices) float4 loads
    live, which takes 64 (80) registers instead of the healthy 32 (40), so theoretical occupancy
    (``sm__maximum_warps_per_active_cycle_pct``) halves, from register pressure alone (no shared
    memory, no spills). DRAM bytes and launches are unchanged; the occupancy check must catch it.
    It may also run somewhat slower.

    Raises:
        TypeError: ``x`` or ``y`` is not a float32 CuPy array.
        ValueError: ``y`` does not have as many elements as ``x``.
    """
    xf, yf = _operands(x, y)
    out = cp.empty(xf.size, dtype=cp.float32)
    n, n4 = xf.size, _vectors(xf, yf, out)
    index_type = _index_type(n)
    vectors, min_blocks = _HEAVY[index_type]
    kernel = _register_heavy_kernel(index_type)
    _launch(kernel, xf, yf, out, alpha, work=max(ceil_div(n4, vectors), n - 4 * n4), per_sm=min_blocks, count=n4)
    return out.reshape(x.shape)


_STRIDED_SOURCE = r"""
// The head (8 * rows elements) is a rows x 8 matrix walked column by column: consecutive threads
// take consecutive rows, 32 bytes apart, so a warp's 32 loads of a tensor hit 32 sectors and use
// 4 bytes of each. A sector's next element is needed one column later, after the grid has touched
// one sector of x, y and out for every row (3 tensors' worth of sectors), long after L2 evicted
// it: every sector comes from DRAM up to 8 times. The last n % 8 elements go in order.
extern "C" __global__ void __launch_bounds__(256)
fuseci_mutant_strided(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                      const float alpha, const index_t n, const index_t rows) {
  const index_t stride = (index_t)gridDim.x * blockDim.x;
  const index_t start = (index_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (int column = 0; column < 8; ++column) {
    for (index_t r = start; r < rows; r += stride) {
      const index_t i = 8 * r + column;
      out[i] = fmaxf(alpha * x[i], 0.0f) + y[i];
    }
  }
  for (index_t i = 8 * rows + start; i < n; i += stride) out[i] = fmaxf(alpha * x[i], 0.0f) + y[i];
}
"""


def _strided_kernel(index_type: str) -> cp.RawKernel:
    return compile_kernel(f"typedef {index_type} index_t;\n{_STRIDED_SOURCE}", "fuseci_mutant_strided")


def scale_relu_add_strided(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """One launch, each element read and written once, in an order no cache can save.

    The regression of a transposed thread-to-element mapping: out[i] still depends on x[i] and
    y[i] alone, but neighbouring elements are touched by the same thread a whole sweep of the
    tensor apart, so each 32-byte sector is fetched from DRAM once per element it holds (up to 8
    times) on tensors larger than L2. Launches and occupancy are the healthy kernel's; DRAM bytes
    rise several-fold (at least 2x for tensors of 4x L2), so the DRAM bytes and bytes efficiency
    checks must catch it, and the time check should too.

    Raises:
        TypeError: ``x`` or ``y`` is not a float32 CuPy array.
        ValueError: ``y`` does not have as many elements as ``x``.
    """
    xf, yf = _operands(x, y)
    out = cp.empty(xf.size, dtype=cp.float32)
    n, rows = xf.size, xf.size // 8
    kernel = _strided_kernel(_index_type(n))
    _launch(kernel, xf, yf, out, alpha, work=max(rows, n - 8 * rows), per_sm=2048 // THREADS, count=rows)
    return out.reshape(x.shape)


def scale_relu_add_host_sync(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """The healthy fused kernel with a debug check left in: it reads one element back each call.

    No kernel, no DRAM bytes and hardly any GPU time are added, so ncu and the CUDA-event
    speedup barely see it; but the copy of one float to the host waits for the kernel, so the
    call returns only when the GPU is done, and a pipeline that would queue its next work behind
    the kernel stalls instead. The asynchrony check (``host_blocking``) must catch it.

    Raises:
        FloatingPointError: the first output is not finite (the check the debug line made).
    """
    from kernels.elementwise import scale_relu_add_fused

    out = scale_relu_add_fused(x, y, alpha)
    first = float(out.reshape(-1)[0])  # a device-to-host copy: waits for the kernel above
    if first != first or abs(first) == float("inf"):
        raise FloatingPointError(f"out[0] is {first}")
    return out


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


# --- planted source edits: the healthy kernel's file edited as a pull request edits it -----------
#
# Each runs fuseci_bias_gelu_rows compiled from kernels/elementwise.py as an edit of
# kernels/edits.py leaves it (the kernel keeps its name), so the edit recompiles the kernel: its
# registers or launch shape change with it, as they do with nearly every real edit.


def _edited_bias_gelu(edit: str, x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    from kernels.edits import edited

    return edited(edit, "bias_gelu_fused")(x, bias)  # type: ignore[no-any-return]


def bias_gelu_sector(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """Planted: one thread reads one more element of ``x`` (one 32-byte sector)."""
    return _edited_bias_gelu("cuda_sector", x, bias)


def bias_gelu_halo(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """Planted: each block's last thread reads an element of the next row in every row (a halo)."""
    return _edited_bias_gelu("cuda_halo", x, bias)


def bias_gelu_store(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """Planted: the threads of the first row write their outputs a second time, with the same values."""
    return _edited_bias_gelu("cuda_store", x, bias)


def bias_gelu_unrolled(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """Benign: two rows in flight per thread, the same loads and stores (more registers)."""
    return _edited_bias_gelu("cuda_unrolled", x, bias)


def bias_gelu_block(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """Benign: blocks of 128 threads instead of 256, the same traffic (another launch shape)."""
    return _edited_bias_gelu("cuda_block", x, bias)
