"""Factories of whole models, for suites that name ``factory:`` instead of ``fn:``
(docs/SUITES.md, "A model from a factory"): fuseci calls a factory once per case with the case's
params, under a seed of its own, and calls the module it returns on the case's inputs, eagerly
or through ``torch.compile``.

- ``prenorm``: the pre-norm transformer block of :mod:`kernels.models`, in bfloat16 on the GPU;
- ``prenorm_missing_weights`` and ``prenorm_weights_only``: broken factories, for the tests: one
  raises (a checkpoint it cannot find), one returns the block's weights instead of the block.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kernels.models import PreNorm


def prenorm(d: int = 1024, heads: int = 16) -> nn.Module:
    """A pre-norm transformer block of width ``d`` with ``heads`` heads, in bfloat16 on the GPU;
    its weights are drawn from the seed fuseci sets before the call."""
    return PreNorm(d, heads).to("cuda", torch.bfloat16)


def prenorm_missing_weights(d: int = 1024, heads: int = 16) -> nn.Module:
    """Raises, as a factory does whose checkpoint is not there."""
    raise FileNotFoundError(f"no checkpoint prenorm-{d}x{heads}.pt for this block")


def prenorm_weights_only(d: int = 1024, heads: int = 16) -> Any:
    """Returns the block's weights (a state dict), not the block: a factory's usual mistake."""
    return PreNorm(d, heads).state_dict()
