"""Elementwise fusion patterns: unfused chains as users write them, fused single-pass kernels.

Every case has three functions: ``*_unfused`` (CuPy operations, one kernel each),
``*_fused`` (one bandwidth-bound kernel) and ``*_reference`` (float64 NumPy).
"""

from __future__ import annotations

import math

import cupy as cp
import numpy as np

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
    """float64 reference."""
    return np.maximum(alpha * x, 0.0) + y


# --- bias + GELU (tanh approximation) --------------------------------------------------------

_GELU_C = math.sqrt(2.0 / math.pi)


def bias_gelu_unfused(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """``gelu(x + bias)`` (tanh form) written with CuPy array operations."""
    h = x + bias
    inner = cp.float32(_GELU_C) * (h + cp.float32(0.044715) * h * h * h)
    return cp.float32(0.5) * h * (cp.float32(1.0) + cp.tanh(inner))


_BIAS_GELU = VectorKernel(
    name="fuseci_bias_gelu",
    streamed=("x",),
    outputs=("out",),
    gathered=("bias",),
    scalars=(("cols", "int"),),
    body=(
        "const float h = x + __ldg(bias + idx % cols);"
        f"const float u = {_GELU_C!r}f * fmaf(0.044715f * h, h * h, h);"
        "out = 0.5f * h * (1.0f + tanhf(u));"
    ),
)


def bias_gelu_fused(x: cp.ndarray, bias: cp.ndarray) -> cp.ndarray:
    """``gelu(x + bias)`` in one pass; the bias row stays in L1/L2."""
    (out,) = _BIAS_GELU(size=x.size, x=x, bias=bias, cols=x.shape[-1])
    return out.reshape(x.shape)


def bias_gelu_reference(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """float64 reference."""
    h = x + bias
    return 0.5 * h * (1.0 + np.tanh(_GELU_C * (h + 0.044715 * h**3)))


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
    """float64 reference."""

    def ch(v: np.ndarray) -> np.ndarray:
        return v.reshape(1, -1, 1, 1)

    h = np.maximum(x, 0.0)
    h = (h - ch(mean)) / np.sqrt(ch(var) + eps) * ch(gamma) + ch(beta)
    return np.maximum(h + residual, 0.0)
