"""Input values and the spin kernel as Triton kernels, for the PyTorch runtime: the same inputs,
bit for bit, as :mod:`fuseci.harness.inputs` writes with CuPy (the same Philox4x32-10 and the
same operations in the same order: libdevice's ``sqrt``, ``log`` and ``cospi``, and the fused
multiply-adds NVRTC contracts to), converted to the input's dtype by torch."""

from __future__ import annotations

import functools
import struct
from typing import Any

from fuseci.errors import HarnessError

#: Elements computed per launch: the float64 values of a chunk are a temporary of 8 bytes each.
CHUNK = 1 << 25
_BLOCK = 1024
_DISTRIBUTIONS = {"uniform": 0, "normal": 1, "randint": 2}


def _bits(x: float) -> int:
    """A float64's bits as a signed 64-bit integer (Triton types a Python float as float32)."""
    return int(struct.unpack("<q", struct.pack("<d", float(x)))[0])


def _signed(x: int) -> int:
    """An unsigned 64-bit integer as the signed one with the same bits."""
    x %= 1 << 64
    return x - (1 << 64) if x >= 1 << 63 else x


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """The Triton kernels (a HarnessError where Triton cannot be imported)."""
    try:
        from fuseci.harness.arrays import triton_kernels
    except ImportError as exc:
        raise HarnessError(
            f"fuseci's PyTorch runtime makes its inputs with Triton, which cannot be imported ({exc}); "
            "install Triton (it comes with PyTorch's CUDA wheels) or CuPy"
        ) from None
    return triton_kernels.values, triton_kernels.spin


def values(distribution: str, start: int, count: int, seed: int, p0: float | int, p1: float | int) -> Any:
    """The float64 (int64 for ``randint``) values of elements ``start .. start + count - 1``, as a torch tensor.

    ``p0, p1``: low and high (``uniform``), mean and std (``normal``), or the first value and the number of values
    less one (``randint``, as integers)."""
    import torch

    kernel, _ = _kernels()
    dist = _DISTRIBUTIONS[distribution]
    seed %= 1 << 64
    randint = dist == _DISTRIBUTIONS["randint"]
    out = torch.empty(count, dtype=torch.int64 if randint else torch.float64, device="cuda")
    a, b = (_signed(int(p0)), _signed(int(p1))) if randint else (_bits(float(p0)), _bits(float(p1)))
    grid = ((count + _BLOCK - 1) // _BLOCK,)
    kernel[grid](out, count, start, seed & 0xFFFFFFFF, seed >> 32, a, b, DIST=dist, BLOCK=_BLOCK)
    return out


def fill(
    out: Any, distribution: str, seed: int, p0: float | int, p1: float | int, convert: Any, compute: Any = values
) -> None:
    """Write the flat tensor ``out``, :data:`CHUNK` elements at a time: ``convert`` turns a chunk of
    ``compute``'s values (:func:`values`, or the host's) into ``out``'s dtype."""
    count = out.numel()
    for start in range(0, count, CHUNK):
        n = min(CHUNK, count - start)
        out[start : start + n].copy_(convert(compute(distribution, start, n, seed, p0, p1)))


def spinner() -> Any:
    """A function that queues one kernel spinning ``ns`` nanoseconds of the GPU's clock."""
    _, kernel = _kernels()
    return lambda ns: kernel[(1,)](int(ns), 0)
