"""The host as the device, through PyTorch's CPU tensors, for ``fuseci check --execute``: the
functions :mod:`fuseci.harness.trial` needs, with the GPU runtimes' Philox inputs computed in
torch's integer operations (the normal distribution's cosine may differ in its last bit)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fuseci.errors import HarnessError
from fuseci.harness.arrays import device_torch
from fuseci.harness.arrays.device_torch import (
    asnumpy,
    astype_float64,
    clone,
    decode_minifloat,
    from_dlpack,
    storage_dtype,
    torch,
    xp,
)

__all__ = ["asnumpy", "astype_float64", "clone", "decode_minifloat", "from_dlpack", "xp"]

#: The runtime's name, as ``FUSECI_RUNTIME`` says it.
NAME = "cpu"

#: Philox4x32's round multipliers and key increments (Random123's), as the CUDA source has them.
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def load() -> None:
    """Import PyTorch (any build)."""
    torch()


def start_driver() -> None:
    """Nothing to start on the host."""


def open_context() -> None:
    """Nothing to open on the host."""


def device_count() -> int:
    return 0


def device_facts() -> dict[str, Any]:
    return {"gpu_name": "cpu", "torch_version": str(torch().__version__)}


def stream_handle() -> int:
    return 0


def synchronize() -> None:
    """CPU tensors are computed when their operation returns."""


def context_alive() -> bool:
    return True


def free_pool() -> None:
    """Nothing cached on the host."""


@contextmanager
def poisoned_pool(byte: int) -> Iterator[None]:
    """Nothing is NaN-filled on the host: ``fuseci check --execute`` calls each function once."""
    yield


def empty(shape: tuple[int, ...], storage: str, what: str = "an array") -> Any:
    del what
    return torch().empty(shape, dtype=storage_dtype(storage))


def to_device(a: Any) -> Any:
    """A NumPy array or torch tensor as a CPU tensor."""
    t = torch()
    return a if isinstance(a, t.Tensor) else t.as_tensor(a)


def from_cuda_array_interface(o: Any) -> Any:
    raise HarnessError(f"a {type(o).__name__} in GPU memory, which fuseci check --execute cannot read on the host")


def _mul32(a: int, b: Any) -> tuple[Any, Any]:
    """The high and low 32 bits of ``a * b`` (``b`` an int64 tensor of 32-bit values), in 16-bit
    halves of ``a`` so that no product leaves int64."""
    t0 = b * (a & 0xFFFF)
    t1 = b * (a >> 16)
    return (t1 + (t0 >> 16)) >> 16, (((t1 & 0xFFFF) << 16) + t0) & _MASK32


def _philox(start: int, count: int, seed: int) -> tuple[Any, Any, Any, Any]:
    """Philox4x32-10 of counters ``start .. start + count - 1`` under key ``seed``: four tensors of 32-bit words."""
    t = torch()
    index = t.arange(start, start + count, dtype=t.int64)
    c0, c1 = index & _MASK32, index >> 32
    c2 = t.zeros_like(index)
    c3 = t.zeros_like(index)
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    for _ in range(10):
        hi0, lo0 = _mul32(_M0, c0)
        hi1, lo1 = _mul32(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return c0, c1, c2, c3


def _unit(hi: Any, lo: Any) -> Any:
    """The 64-bit word ``hi:lo`` as a float64 in [0, 1) from its 53 high bits."""
    return ((hi << 21) | (lo >> 11)).to(torch().float64) * 2.0**-53


def _mulhi64(hi: Any, lo: Any, span: int) -> tuple[Any, Any]:
    """The high 64 bits of the 64-bit word ``hi:lo`` times ``span`` (< 2**64), as two 32-bit halves."""
    s0, s1 = span & _MASK32, span >> 32
    h00, _ = _mul32(s0, lo)
    h01, l01 = _mul32(s1, lo)
    h10, l10 = _mul32(s0, hi)
    h11, l11 = _mul32(s1, hi)
    mid = h00 + l01 + l10
    low = h01 + h10 + l11 + (mid >> 32)
    return (h11 + (low >> 32)) & _MASK32, low & _MASK32


def host_values(distribution: str, start: int, count: int, seed: int, p0: float | int, p1: float | int) -> Any:
    """:func:`fuseci.harness.arrays.philox_triton.values` computed on the host."""
    t = torch()
    w0, w1, w2, w3 = _philox(start, count, seed % (1 << 64))
    if distribution == "randint":
        span = int(p1) + 1
        hi, lo = (w0, w1) if span == 1 << 64 else _mulhi64(w0, w1, span)
        signed_hi = hi - (hi >= 1 << 31).to(t.int64) * (1 << 32)
        return signed_hi * (1 << 32) + lo + int(p0)
    u0 = _unit(w0, w1)
    if distribution == "uniform":
        return float(p0) + u0 * (float(p1) - float(p0))
    u1 = _unit(w2, w3)
    return float(p0) + float(p1) * t.sqrt(-2.0 * t.log(1.0 - u0)) * t.cos((2.0 * math.pi) * u1)


def random_input(shape: tuple[int, ...], kind: Any, distribution: str, seed: int, p0: Any, p1: Any) -> Any:
    """An input as :func:`fuseci.harness.arrays.device_torch.random_input` writes it, on the host."""
    return device_torch.random_input(shape, kind, distribution, seed, p0, p1, values=host_values)
