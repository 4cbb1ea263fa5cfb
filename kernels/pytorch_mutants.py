"""Planted regressions of the PyTorch fusion of ``kernels.pytorch``'s bias + GELU + residual,
as they happen to ``torch.compile`` and Triton code (``suites/mutants.yaml``):

- ``graph_break``: the compiled function split in two graphs (a ``print``, a ``.item()``, an
  unsupported call in the middle): two Triton kernels, the intermediate through DRAM;
- ``fallback``: a fused path that silently stops applying (its guard no longer holds for these
  inputs) and falls back to eager PyTorch: three library kernels instead of one;
- ``recompiles``: a Triton kernel specialised on a value that changes from call to call (a
  ``tl.constexpr`` fed from a counter), so calls compile again, the measured one included.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels.pytorch import bias_gelu_residual_compiled, bias_gelu_residual_eager, bias_gelu_residual_kernel


def _split(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x + bias, approximate="tanh")
    torch._dynamo.graph_break()  # stands for a print, an .item() or an unsupported call
    return h + residual


bias_gelu_residual_graph_break = torch.compile(_split, dynamic=False)


def bias_gelu_residual_fallback(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """The fused path only for widths it was written for; these inputs fall back to eager."""
    if x.shape[-1] % 3 == 0:
        return bias_gelu_residual_compiled(x, bias, residual)
    return bias_gelu_residual_eager(x, bias, residual)


#: Distinct specialisations the counter cycles through: every call among the first this many
#: compiles a new kernel (afterwards they come from Triton's cache, as a warmed-up call would).
_SPECIALISATIONS = 16
_calls = itertools.count()


@triton.jit
def bias_gelu_residual_salted_kernel(x_ptr, b_ptr, r_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, SALT: tl.constexpr):
    bias_gelu_residual_kernel(x_ptr, b_ptr, r_ptr, y_ptr, n_cols, BLOCK)


def bias_gelu_residual_recompiles(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """The right result, one kernel; but each of its first calls compiles it anew."""
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = 1024
    salt = next(_calls) % _SPECIALISATIONS
    bias_gelu_residual_salted_kernel[(rows, triton.cdiv(cols, block))](
        x, bias, residual, y, cols, BLOCK=block, SALT=salt, num_warps=4
    )
    return y
