"""relu(alpha * x) + y from several array frameworks, for the gpu-marked framework tests
(tests/data/suites/frameworks.yaml and tests/test_gpu_frameworks.py): every function returns
what its framework makes, with no conversion."""

from __future__ import annotations

import itertools
import os
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX would take 75% of the GPU


def scale_relu_add_torch(x: Any, y: Any, alpha: float) -> Any:
    """Eager PyTorch (framework: torch): three kernels, a torch tensor back."""
    import torch

    return torch.relu(alpha * x) + y


def _triton_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def scale_relu_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, SALT: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.maximum(alpha * x, 0.0) + y, mask=mask)

    return scale_relu_add_kernel


_KERNEL: list[Any] = []


def scale_relu_add_triton(x: Any, y: Any, alpha: float) -> Any:
    """A Triton kernel on torch tensors (framework: torch): one kernel."""
    import torch
    import triton

    if not _KERNEL:
        _KERNEL.append(_triton_kernel())
    out = torch.empty_like(x)
    n = x.numel()
    _KERNEL[0][(triton.cdiv(n, 1024),)](x, y, out, n, alpha, BLOCK=1024, SALT=0)
    return out


def half_written_torch(x: Any, y: Any, alpha: float) -> Any:
    """Writes only the first half of a torch.empty output: the rest is whatever torch's caching
    allocator handed out."""
    import torch

    out = torch.empty_like(x)
    half = x.numel() // 2
    out.view(-1)[:half] = torch.relu(alpha * x.view(-1)[:half]) + y.view(-1)[:half]
    return out


_calls = itertools.count()


def recompiling_triton(x: Any, y: Any, alpha: float) -> Any:
    """Right, but a new Triton specialisation (a constexpr from a counter) on every call."""
    import torch
    import triton

    if not _KERNEL:
        _KERNEL.append(_triton_kernel())
    out = torch.empty_like(x)
    n = x.numel()
    _KERNEL[0][(triton.cdiv(n, 1024),)](x, y, out, n, alpha, BLOCK=1024, SALT=next(_calls) + 1)
    return out


_JAX: list[Any] = []


def scale_relu_add_jax(x: Any, y: Any, alpha: float) -> Any:
    """CuPy arrays in, a jax.jit function (XLA fuses it), a JAX array out (DLPack)."""
    import jax
    import jax.numpy as jnp

    if not _JAX:
        _JAX.append(jax.jit(lambda a, b, s: jnp.maximum(s * a, 0.0) + b))
    return _JAX[0](jax.dlpack.from_dlpack(x), jax.dlpack.from_dlpack(y), alpha)


def scale_relu_add_fused_sync(x: Any, y: Any, alpha: float) -> Any:
    """CuPy's fused kernel and a read-back of one element, which waits for the GPU: the neighbour
    whose host sync must not move the other variants' timings."""
    from kernels.elementwise import scale_relu_add_fused

    out = scale_relu_add_fused(x, y, alpha)
    if float(out.reshape(-1)[0]) != float(out.reshape(-1)[0]):
        raise FloatingPointError("out[0] is NaN")
    return out


def scale_relu_add_torch_sync(x: Any, y: Any, alpha: float) -> Any:
    """Eager PyTorch and ``torch.cuda.synchronize()``, the leftover a PyTorch user plants."""
    import torch

    out = torch.relu(alpha * x) + y
    torch.cuda.synchronize()
    return out
