"""RMS-normalisation variants for `fuseci check --execute` (tests/test_check_execute.py and
tests/data/suites/execute*.yaml): right ones in eager PyTorch and in Triton (run by Triton's
interpreter on the CPU), and ones that are wrong, raise, need CUDA, crash or hang."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import torch


def rms_reference(x: Any, weight: Any) -> Any:
    """The float64 reference: every row of x scaled to unit root mean square, times weight."""
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * weight


def rms_unfused(x: Any, weight: Any) -> Any:
    """Eager PyTorch, in the inputs' dtype."""
    return rms_reference(x, weight)


def rms_triton(x: Any, weight: Any) -> Any:
    """One Triton program per row."""
    import triton

    y = torch.empty_like(x)
    rows, cols = x.shape
    _kernel()[(rows,)](x, weight, y, cols, BLOCK=triton.next_power_of_2(cols))
    return y


def _kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def rms_kernel(x_ptr, w_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        m = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0)
        w = tl.load(w_ptr + cols, mask=m, other=0.0)
        ms = tl.sum(x * x, axis=0) / n_cols
        tl.store(y_ptr + row * n_cols + cols, x * tl.rsqrt(ms + 1e-6) * w, mask=m)

    return rms_kernel


def rms_off(x: Any, weight: Any) -> Any:
    """Off by 1%: a wrong result."""
    return rms_reference(x, weight) * 1.01


def rms_rows_of_7(x: Any, weight: Any) -> Any:
    """Indexes by a shape the suite does not have: raises."""
    return x.view(-1, 7) * weight


def rms_on_cuda(x: Any, weight: Any) -> Any:
    """Needs CUDA: could not run on the CPU."""
    return rms_reference(x.cuda(), weight.cuda())


def rms_crash(x: Any, weight: Any) -> Any:
    """Kills its process, as a segmentation fault in an extension would."""
    os.kill(os.getpid(), signal.SIGSEGV)
    return x


def rms_hang(x: Any, weight: Any) -> Any:
    """Never returns."""
    time.sleep(3600)
    return x
