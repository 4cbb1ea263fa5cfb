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


# --- planted source edits of the Triton kernel (kernels/edits.py): it keeps its name, and the edit
# recompiles it with other registers or another launch shape, as nearly every real edit does.


def _edited_triton(edit: str, x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    from kernels.edits import edited

    return edited(edit, "bias_gelu_residual_triton")(x, bias, residual)  # type: ignore[no-any-return]


def bias_gelu_residual_sector(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Planted: program 0 reads one more element of ``x`` (one 32-byte sector per warp)."""
    return _edited_triton("triton_sector", x, bias, residual)


def bias_gelu_residual_halo(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Planted: every program reads the next row's first 8 elements (a halo)."""
    return _edited_triton("triton_halo", x, bias, residual)


def bias_gelu_residual_store(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Planted: program 0 writes one output element a second time, with the same value."""
    return _edited_triton("triton_store", x, bias, residual)


def bias_gelu_residual_warps(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Benign: 2 warps per program instead of 4, the same traffic (more registers)."""
    return _edited_triton("triton_warps", x, bias, residual)


def bias_gelu_residual_block(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Benign: 2048 columns per program instead of 1024, the same traffic (another launch shape)."""
    return _edited_triton("triton_block", x, bias, residual)
