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
