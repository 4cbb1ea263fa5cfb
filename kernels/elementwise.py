"""Elementwise fusion patterns: unfused chains as users write them, fused single-pass kernels.

Every case has three functions: ``*_unfused`` (CuPy operations, one kernel each),
``*_fused`` (one bandwidth-bound kernel) and ``*_reference`` (float64 NumPy).
"""

from __future__ import annotations

import math

import cupy as cp
import numpy as np

from kernels._cuda import ceil_div, compile_kernel, require, sm_count, xp_of
from kernels._vector import VectorKernel

# --- scale -> ReLU -> add --------------------------------------------------------------------


def scale_relu_add_unfused(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """``relu(alpha * x) + y`` as three CuPy kernels with two intermediates in DRAM."""
    t = x * cp.float32(alpha)
    t = cp.maximum(t, cp.float32(0))
    return t + y


_SCALE_RELU_ADD = VectorKernel(
    name="fuseci_scale_relu_add",
    streamed=("x", "y"),
    outputs=("out",),
    gathered=(),
    scalars=(("alpha", "float"),),
    body="out = fmaxf(alpha * x, 0.0f) + y;",
)


def scale_relu_add_fused(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:
    """``relu(alpha * x) + y`` in one pass: read x and y once, write the output once."""
    (out,) = _SCALE_RELU_ADD(size=x.size, x=x, y=y, alpha=alpha)
    return out.reshape(x.shape)


def scale_relu_add_reference(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    return xp_of(x).maximum(alpha * x, 0.0) + y


# --- bias + GELU (tanh approximation) --------------------------------------------------------

_GELU_C = math.sqrt(2.0 / math.pi)


def bias_gelu_unfused(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """``gelu(x + bias)`` (tanh form) written with CuPy array operations."""
    h = x + bias
    inner = cp.float32(_GELU_C) * (h + cp.float32(0.044715) * h * h * h)
    return cp.float32(0.5) * h * (cp.float32(1.0) + cp.tanh(inner))


# gelu(h) = 0.5 h (1 + tanh(u)) = h * sigmoid(2u): one exponential, no cancellation near -1.
_GELU_BODY = f"const float u = {_GELU_C!r}f * fmaf(0.044715f * h, h * h, h); out = h / (1.0f + __expf(-2.0f * u));"

_BIAS_GELU = VectorKernel(
    name="fuseci_bias_gelu",
    streamed=("x",),
    outputs=("out",),
    gathered=("bias",),
    scalars=(("cols", "int"),),
    body="const float h = x + __ldg(bias + idx % cols);" + _GELU_BODY,
)

_BIAS_GELU_ROWS = f"""
// Each thread owns one 4-column group: its bias stays in registers while the thread walks
// down the rows, so no per-element index arithmetic and one 16-byte load per 4 outputs.
__device__ __forceinline__ float gelu(float h) {{ float out; {_GELU_BODY} return out; }}

extern "C" __global__ void __launch_bounds__(256)
fuseci_bias_gelu_rows(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                      const int rows, const int quads) {{
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= quads) return;
  const float4 b = __ldg(reinterpret_cast<const float4*>(bias) + q);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {{
    const long long i = (long long)r * quads + q;
    float4 v = x4[i];
    v.x = gelu(v.x + b.x); v.y = gelu(v.y + b.y); v.z = gelu(v.z + b.z); v.w = gelu(v.w + b.w);
    __stcs(y4 + i, v);
  }}
}}
"""


def bias_gelu_fused(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """``gelu(x + bias)`` in one pass; each thread keeps its slice of the bias in registers."""
    x, bias = require(x, cp.float32, "x"), require(bias, cp.float32, "bias", 1)
    cols = x.shape[-1]
    rows = x.size // cols
    if cols % 4 or x.data.ptr % 16 or bias.data.ptr % 16:
        (out,) = _BIAS_GELU(size=x.size, x=x, bias=bias, cols=cols)
        return out.reshape(x.shape)
    y = cp.empty_like(x)
    quads = cols // 4
    gx = ceil_div(quads, 256)
    gy = max(1, min(rows, sm_count() * 8 // gx))
    compile_kernel(_BIAS_GELU_ROWS, "fuseci_bias_gelu_rows")(
        (gx, gy), (256,), (x, bias, y, cp.int32(rows), cp.int32(quads))
    )
    return y


def bias_gelu_reference(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    h = x + bias
    return 0.5 * h * (1.0 + xp_of(h).tanh(_GELU_C * (h + 0.044715 * h**3)))


# --- ReLU -> BatchNorm (inference) -> residual add -> ReLU --------------------------------------


def _channel(v: cp.ndarray) -> cp.ndarray:
    return v.reshape(1, -1, 1, 1)


def relu_bn_add_relu_unfused(
    x: cp.ndarray,
    residual: cp.ndarray,
    mean: cp.ndarray,
    var: cp.ndarray,
    gamma: cp.ndarray,
    beta: cp.ndarray,
    eps: float,
) -> cp.ndarray:
    """ReLU, inference BatchNorm over NCHW channels, residual add, ReLU: one CuPy op at a time."""
    h = cp.maximum(x, cp.float32(0))
    h = (h - _channel(mean)) / cp.sqrt(_channel(var) + cp.float32(eps))
    h = h * _channel(gamma) + _channel(beta)
    h = h + residual
    return cp.maximum(h, cp.float32(0))


_RELU_BN_ADD_RELU = VectorKernel(
    name="fuseci_relu_bn_add_relu",
    streamed=("x", "residual"),
    outputs=("out",),
    gathered=("mean", "var", "gamma", "beta"),
    scalars=(("hw", "int"), ("channels", "int"), ("eps", "float")),
    body=(
        "const int c = (int)((idx / hw) % channels);"
        "const float s = __ldg(gamma + c) * rsqrtf(__ldg(var + c) + eps);"
        "const float h = (fmaxf(x, 0.0f) - __ldg(mean + c)) * s + __ldg(beta + c);"
        "out = fmaxf(h + residual, 0.0f);"
    ),
)


def relu_bn_add_relu_fused(
    x: cp.ndarray,
    residual: cp.ndarray,
    mean: cp.ndarray,
    var: cp.ndarray,
    gamma: cp.ndarray,
    beta: cp.ndarray,
    eps: float,
) -> cp.ndarray:
    """The same chain in one pass over x and the residual."""
    _, channels, h, w = x.shape
    (out,) = _RELU_BN_ADD_RELU(
        size=x.size,
        x=x,
        residual=residual,
        mean=mean,
        var=var,
        gamma=gamma,
        beta=beta,
        hw=h * w,
        channels=channels,
        eps=eps,
    )
    return out.reshape(x.shape)


def relu_bn_add_relu_reference(
    x: np.ndarray,
    residual: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray,
    eps: float,
) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    xp = xp_of(x)

    def ch(v: np.ndarray) -> np.ndarray:
        return v.reshape(1, -1, 1, 1)

    h = xp.maximum(x, 0.0)
    h = (h - ch(mean)) / xp.sqrt(ch(var) + eps) * ch(gamma) + ch(beta)
    return xp.maximum(h + residual, 0.0)


# --- loop fusion: A = B + C, then D = A * E, A dead afterwards -------------------------------


def add_mul_unfused(b: cp.ndarray, c: cp.ndarray, e: cp.ndarray) -> cp.ndarray:
    """Two loops; the temporary A makes a round trip through DRAM."""
    a = b + c
    return a * e


_ADD_MUL = VectorKernel(
    name="fuseci_add_mul",
    streamed=("b", "c", "e"),
    outputs=("d",),
    gathered=(),
    scalars=(),
    body="d = (b + c) * e;",
)


def add_mul_fused(b: cp.ndarray, c: cp.ndarray, e: cp.ndarray) -> cp.ndarray:
    """One loop: A lives in a register."""
    (d,) = _ADD_MUL(size=b.size, b=b, c=c, e=e)
    return d.reshape(b.shape)


def add_mul_reference(b: np.ndarray, c: np.ndarray, e: np.ndarray) -> np.ndarray:
    """float64 reference (NumPy or CuPy arrays)."""
    return (b + c) * e


# --- horizontal fusion: two independent operations in one launch ------------------------------


def relu_and_scale_unfused(x1: cp.ndarray, x2: cp.ndarray, alpha: float) -> tuple[cp.ndarray, cp.ndarray]:
    """``relu(x1)`` and ``alpha * x2``: independent, two launches."""
    return cp.maximum(x1, cp.float32(0)), x2 * cp.float32(alpha)


_RELU_AND_SCALE = VectorKernel(
    name="fuseci_relu_and_scale",
    streamed=("x1", "x2"),
    outputs=("y1", "y2"),
    gathered=(),
    scalars=(("alpha", "float"),),
    body="y1 = fmaxf(x1, 0.0f); y2 = alpha * x2;",
)


def relu_and_scale_fused(x1: cp.ndarray, x2: cp.ndarray, alpha: float) -> tuple[cp.ndarray, cp.ndarray]:
    """Both operations in one launch (same bytes, one launch and one tail instead of two)."""
    y1, y2 = _RELU_AND_SCALE(size=x1.size, x1=x1, x2=x2, alpha=alpha)
    return y1.reshape(x1.shape), y2.reshape(x2.shape)


def relu_and_scale_reference(x1: np.ndarray, x2: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 reference (NumPy or CuPy arrays)."""
    return xp_of(x1).maximum(x1, 0.0), alpha * x2
