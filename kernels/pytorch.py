"""Three fusions PyTorch users meet, in bfloat16, each as eager PyTorch (the unfused chain),
``torch.compile`` (Inductor generates one Triton kernel) and a hand-written Triton kernel, with
float64 references (``suites/pytorch.yaml``).

- ``bias_gelu_residual``: ``gelu_tanh(x + bias) + residual``, a transformer MLP's epilogue;
- ``add_rmsnorm``: the residual add and RMSNorm of a pre-norm block, returning the normalised
  rows and the new residual stream, as Llama-style models compute them;
- ``softmax``: a scaled row softmax in float32 arithmetic with bfloat16 in and out;
- ``gemm_bias_gelu``: a cuBLAS GEMM and its bias + GELU epilogue, eager and compiled;
- ``attention``: attention written out (cuBLAS GEMMs around a softmax) against PyTorch's
  scaled-dot-product attention (cuDNN's or FlashAttention's kernel): the library kernels every
  counted gate must meet.

Every function takes torch tensors on the GPU (``framework: torch``) and returns them; nothing
converts anything. The eager versions are the code people write; the Triton kernels keep every
intermediate in registers and read each input once.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# --- bias + GELU(tanh) + residual -----------------------------------------------------------------


def bias_gelu_residual_eager(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Three kernels: the bias add, the GELU and the residual add, each through DRAM."""
    return F.gelu(x + bias, approximate="tanh") + residual


bias_gelu_residual_compiled = torch.compile(bias_gelu_residual_eager, dynamic=False)


@triton.jit
def bias_gelu_residual_kernel(x_ptr, b_ptr, r_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    at = row * n_cols + cols
    h = tl.load(x_ptr + at, mask=mask).to(tl.float32) + tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (h + 0.044715 * h * h * h)  # sqrt(2/pi) (h + 0.044715 h^3)
    gelu = 0.5 * h * (2.0 * tl.sigmoid(2.0 * inner))  # 1 + tanh(u) = 2 sigmoid(2u)
    y = gelu + tl.load(r_ptr + at, mask=mask).to(tl.float32)
    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu_residual_triton(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """One kernel: each element read once, the result written once."""
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = 1024
    bias_gelu_residual_kernel[(rows, triton.cdiv(cols, block))](x, bias, residual, y, cols, BLOCK=block, num_warps=4)
    return y


def bias_gelu_residual_reference(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """float64 reference (fuseci passes float64 tensors)."""
    return F.gelu(x + bias, approximate="tanh") + residual


# --- residual add + RMSNorm ------------------------------------------------------------------------


def add_rmsnorm_eager(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """About nine kernels: the add, the float32 upcast, square, mean, eps, rsqrt, scale, the
    downcast and the weight, as a Llama-style RMSNorm computes them."""
    h = x + residual
    hf = h.to(torch.float32)
    variance = hf.pow(2).mean(-1, keepdim=True)
    normed = hf * torch.rsqrt(variance + eps)
    return weight * normed.to(h.dtype), h


add_rmsnorm_compiled = torch.compile(add_rmsnorm_eager, dynamic=False)


@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    at = row * n_cols + cols
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + at, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(h_ptr.dtype.element_ty)  # the residual stream, rounded as the eager code rounds it
    tl.store(h_ptr + at, h, mask=mask)
    hf = h.to(tl.float32)
    inv = tl.rsqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
    normed = (hf * inv).to(y_ptr.dtype.element_ty).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + at, (w * normed).to(y_ptr.dtype.element_ty), mask=mask)


def add_rmsnorm_triton(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """One kernel, one row per program: x and residual read once, both outputs written once."""
    rows, cols = x.shape
    y, h = torch.empty_like(x), torch.empty_like(x)
    add_rmsnorm_kernel[(rows,)](x, residual, weight, y, h, cols, eps, BLOCK=triton.next_power_of_2(cols), num_warps=8)
    return y, h


def add_rmsnorm_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 reference."""
    h = x + residual
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)), h


# --- scaled softmax --------------------------------------------------------------------------------


def softmax_eager(x: torch.Tensor, scale: float) -> torch.Tensor:
    """About eight kernels: upcast, scale, row max, subtract, exp, row sum, divide, downcast."""
    z = x.to(torch.float32) * scale
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


softmax_compiled = torch.compile(softmax_eager, dynamic=False)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    z = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32) * scale
    z = tl.where(mask, z, -float("inf"))  # padding past the row's end weighs nothing
    e = tl.exp(z - tl.max(z, axis=0))
    tl.store(y_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax_triton(x: torch.Tensor, scale: float) -> torch.Tensor:
    """One kernel, one row per program."""
    rows, cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(rows,)](x, y, cols, scale, BLOCK=triton.next_power_of_2(cols), num_warps=8)
    return y


def softmax_reference(x: torch.Tensor, scale: float) -> torch.Tensor:
    """float64 reference."""
    return torch.softmax(x * scale, dim=-1)


# --- GEMM + bias + GELU: a cuBLAS GEMM and its epilogue ---------------------------------------------


def gemm_bias_gelu_eager(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Three kernels: cuBLAS's GEMM, the bias add and the GELU, the product through DRAM twice."""
    return F.gelu(a @ b + bias, approximate="tanh")


#: Inductor keeps the GEMM a cuBLAS call and fuses the bias add and the GELU into one Triton kernel
#: behind it (its epilogue): the product is written once and read once.
gemm_bias_gelu_compiled = torch.compile(gemm_bias_gelu_eager, dynamic=False)


def gemm_bias_gelu_reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """float64 reference."""
    return F.gelu(a @ b + bias, approximate="tanh")


# --- attention: softmax(q k^T / sqrt(d)) v -----------------------------------------------------------


def attention_eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention as people write it: two batched GEMMs (cuBLAS) around a scale and a softmax, the
    scores (heads x sequence x sequence) through DRAM."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def attention_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch's scaled-dot-product attention: one fused kernel (cuDNN's or FlashAttention's, as
    PyTorch picks for the card), the scores kept on chip."""
    return F.scaled_dot_product_attention(q, k, v)


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """float64 reference."""
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
