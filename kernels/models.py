"""Small, real model blocks in bfloat16, eager and ``torch.compile``'d, for the fusion ledger
(``suites/models.yaml``), and planted breaks of their model code (``suites/model_mutants.yaml``):

- ``prenorm``: a pre-norm transformer block: LayerNorm, QKV projection, causal attention through
  ``F.scaled_dot_product_attention``, output projection and residual add; LayerNorm, a GELU (tanh)
  MLP and residual add;
- ``swiglu``: RMSNorm and a SwiGLU MLP (Llama style) with its residual add;
- ``convbn``: a 3x3 convolution, batch norm (inference), SiLU and a residual add;
- ``stack``: ``depth`` pre-norm blocks in a row, compiled as one graph (``stack_compiled``) or
  block by block (``stack_blocks_compiled``: one graph run ``depth`` times): a model whose
  launches repeat, for the ledger's ``repeats`` and its cost as the kernel count grows;
- ``lengths``: the pre-norm block run on a sequence and on its first half, as a model runs a
  prompt and then a shorter chunk: the compiled block's frame is compiled twice (the second time
  with a dynamic length), for a ledger of several graphs of one frame.

Each block is built once per process from a fixed seed (``functools.cache``) and called on the
case's input; the float64 reference runs a float64 copy of the same weights. A planted break is a
subclass whose ``forward`` is the block's own with one edit in the model's source, as a model
change would make it:

- ``prenorm_break_add_norm``: a graph break between the attention's residual add and the second
  LayerNorm, which Inductor otherwise fuses with it;
- ``prenorm_contiguous``: a ``.contiguous()`` copy of a transposed query that no neighbour absorbs
  (the next op is the attention library call);
- ``prenorm_opaque``: an op Inductor cannot see into (a custom op) between the residual add and
  the LayerNorm: it blocks their fusion;
- ``prenorm_free_break``: a graph break between the QKV projection and the attention, two library
  calls nothing fuses across: it costs nothing;
- ``swiglu_fp32``: the RMSNorm's float32 upcast written to memory (a graph break right after it);
- ``convbn_opaque``: a custom op between the batch norm and the SiLU.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


@torch.library.custom_op("fuseci_models::scale", mutates_args=())
def opaque_scale(x: torch.Tensor) -> torch.Tensor:
    """``x * 1``, as a custom op: Inductor calls it as a library call and fuses nothing across it."""
    return x * 1.0


@opaque_scale.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


# --- the blocks --------------------------------------------------------------------------------------


class PreNorm(nn.Module):
    """A pre-norm transformer block (GPT style), causal attention through SDPA."""

    def __init__(self, d: int = 1024, heads: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class SwiGLU(nn.Module):
    """RMSNorm, then a SwiGLU MLP, plus the residual (a Llama block's second half)."""

    def __init__(self, d: int = 2048, hidden: int = 5632) -> None:
        super().__init__()
        self.norm = RMSNorm(d)
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class ConvBN(nn.Module):
    """A 3x3 convolution, batch norm (inference), SiLU and the residual."""

    def __init__(self, channels: int = 128) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.bn(self.conv(x))) + x


# --- planted breaks: one edit of a block's forward each ------------------------------------------------


class PreNormBreakAddNorm(PreNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        torch._dynamo.graph_break()  # planted: stands for a print, an .item(), an unsupported call
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class PreNormContiguous(PreNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q = q.transpose(-1, -2).contiguous().transpose(-1, -2)  # planted: a copy nothing absorbs
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class PreNormOpaque(PreNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = opaque_scale(x + self.proj(a.transpose(1, 2).reshape(b, t, d)))  # planted: blocks the fusion
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class PreNormFreeBreak(PreNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        torch._dynamo.graph_break()  # planted, benign: between two library calls nothing fuses across
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class RMSNormFp32(RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        torch._dynamo.graph_break()  # planted: the float32 upcast goes through memory
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class SwiGLUFp32(SwiGLU):
    def __init__(self) -> None:
        super().__init__()
        self.norm = RMSNormFp32(self.w1.in_features)


class ConvBNOpaque(ConvBN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(opaque_scale(self.bn(self.conv(x)))) + x  # planted: blocks the fusion


class Stack(nn.Module):
    """``depth`` pre-norm blocks in a row."""

    def __init__(self, depth: int, d: int = 1024, heads: int = 16) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(PreNorm(d, heads) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


# --- built once, called on the case's input ------------------------------------------------------------


def _made(cls: type[nn.Module]) -> nn.Module:
    """The block in bfloat16 on the GPU, for inference, its weights from a fixed seed (the same
    for a block and its planted breaks); batch norm's running statistics set away from 0 and 1."""
    torch.manual_seed(0)
    m = cls()
    if isinstance(m, ConvBN):
        with torch.no_grad():
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 2.0)
            m.bn.weight.uniform_(0.5, 1.5)
            m.bn.bias.uniform_(-0.5, 0.5)
    return m.to("cuda", torch.bfloat16).eval()


@functools.cache
def _eager(cls: type[nn.Module]) -> nn.Module:
    return _made(cls)


@functools.cache
def _compiled(cls: type[nn.Module]) -> Callable[[torch.Tensor], torch.Tensor]:
    return torch.compile(_eager(cls))


@functools.cache
def _float64(cls: type[nn.Module]) -> nn.Module:
    return copy.deepcopy(_eager(cls)).to(torch.float64)


def _run(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return fn(x)


def prenorm_eager(x: torch.Tensor) -> torch.Tensor:
    return _run(_eager(PreNorm), x)


def prenorm_compiled(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(PreNorm), x)


def prenorm_reference(x: torch.Tensor) -> torch.Tensor:
    return _run(_float64(PreNorm), x)


def swiglu_eager(x: torch.Tensor) -> torch.Tensor:
    return _run(_eager(SwiGLU), x)


def swiglu_compiled(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(SwiGLU), x)


def swiglu_reference(x: torch.Tensor) -> torch.Tensor:
    return _run(_float64(SwiGLU), x)


def convbn_eager(x: torch.Tensor) -> torch.Tensor:
    return _run(_eager(ConvBN), x)


def convbn_compiled(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(ConvBN), x)


def convbn_reference(x: torch.Tensor) -> torch.Tensor:
    return _run(_float64(ConvBN), x)


def prenorm_break_add_norm(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(PreNormBreakAddNorm), x)


def prenorm_contiguous(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(PreNormContiguous), x)


def prenorm_opaque(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(PreNormOpaque), x)


def prenorm_free_break(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(PreNormFreeBreak), x)


def swiglu_fp32(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(SwiGLUFp32), x)


def convbn_opaque(x: torch.Tensor) -> torch.Tensor:
    return _run(_compiled(ConvBNOpaque), x)


@functools.cache
def _stack(depth: int) -> nn.Module:
    torch.manual_seed(0)
    return Stack(depth).to("cuda", torch.bfloat16).eval()


@functools.cache
def _stack_compiled(depth: int, per_block: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    if not per_block:
        return torch.compile(_stack(depth))
    blocks = [torch.compile(b) for b in _stack(depth).blocks]

    def forward(x: torch.Tensor) -> torch.Tensor:
        for block in blocks:
            x = block(x)
        return x

    return forward


def stack_eager(x: torch.Tensor, depth: int) -> torch.Tensor:
    return _run(_stack(depth), x)


def stack_compiled(x: torch.Tensor, depth: int) -> torch.Tensor:
    return _run(_stack_compiled(depth, False), x)


def stack_blocks_compiled(x: torch.Tensor, depth: int) -> torch.Tensor:
    return _run(_stack_compiled(depth, True), x)


def stack_reference(x: torch.Tensor, depth: int) -> torch.Tensor:
    return _run(_stack_float64(depth), x)


@functools.cache
def _stack_float64(depth: int) -> nn.Module:
    return copy.deepcopy(_stack(depth)).to(torch.float64)


def _lengths(block: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([block(x), block(x[:, : x.shape[1] // 2])], dim=1)


def lengths_eager(x: torch.Tensor) -> torch.Tensor:
    return _lengths(_eager(PreNorm), x)


@functools.cache
def _lengths_compiled() -> Callable[[torch.Tensor], torch.Tensor]:
    return torch.compile(copy.deepcopy(_eager(PreNorm)))  # a frame of its own, not prenorm_compiled's


def lengths_compiled(x: torch.Tensor) -> torch.Tensor:
    return _lengths(_lengths_compiled(), x)


def lengths_reference(x: torch.Tensor) -> torch.Tensor:
    return _lengths(_float64(PreNorm), x)
