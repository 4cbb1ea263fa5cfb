"""Input tensors, built on the GPU from their seeds by one counter-based kernel: element ``i`` is
Philox4x32-10 of ``(seed, i)`` turned into the distribution's value (``uniform`` and ``normal``
in float64 by Box-Muller, ``randint`` by Lemire's multiply-high) and rounded to the input's dtype,
the same on every run, card and runtime (:mod:`fuseci.harness.arrays.philox_triton`)."""

from __future__ import annotations

import functools
from typing import Any

from fuseci.config.dtypes import dtype
from fuseci.config.model import InputSpec, randint_range
from fuseci.errors import HarnessError
from fuseci.harness import arrays
from fuseci.harness.arrays import minifloat

_PREAMBLE = r"""
__device__ __forceinline__ void fuseci_philox(unsigned long long index, unsigned long long seed,
                                              unsigned long long* a, unsigned long long* b) {
    unsigned int c0 = (unsigned int)index, c1 = (unsigned int)(index >> 32), c2 = 0u, c3 = 0u;
    unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
    #pragma unroll
    for (int r = 0; r < 10; ++r) {
        unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    *a = ((unsigned long long)c0 << 32) | c1;
    *b = ((unsigned long long)c2 << 32) | c3;
}
__device__ __forceinline__ double fuseci_unit(unsigned long long bits) {  /* [0, 1) */
    return (double)(bits >> 11) / 9007199254740992.0;
}
"""

_UNIFORM = "double v = a + fuseci_unit(w0) * (b - a);"
_NORMAL = "double v = a + b * sqrt(-2.0 * log(1.0 - fuseci_unit(w0))) * cospi(2.0 * fuseci_unit(w1));"
_RANDINT = (
    "unsigned long long off = span_m1 == 0xFFFFFFFFFFFFFFFFull ? w0 : __umul64hi(w0, span_m1 + 1ull);"
    "long long v = (long long)((unsigned long long)lo + off);"
)


@functools.cache
def _kernel(distribution: str, dtype_name: str) -> Any:
    """The elementwise kernel that writes one input of ``distribution`` and ``dtype_name``."""
    if distribution == "randint":
        params, body = "uint64 seed, int64 lo, uint64 span_m1", _RANDINT
    else:
        params, body = "uint64 seed, float64 a, float64 b", _UNIFORM if distribution == "uniform" else _NORMAL
    fmt = dtype(dtype_name).minifloat
    preamble = _PREAMBLE + (minifloat.cuda_source(fmt) if fmt is not None else "")
    operation = (
        "unsigned long long w0, w1; fuseci_philox((unsigned long long)i, seed, &w0, &w1);"
        f"{body} y = {_store(distribution, dtype_name)};"
    )
    return arrays.elementwise_kernel(params, "T y", operation, f"fuseci_input_{distribution}", preamble)


def _store(distribution: str, dtype_name: str) -> str:
    """How the value ``v`` becomes an element of ``dtype_name`` (floats but float64 through float32)."""
    as_double = "v" if distribution != "randint" else "(double)v"
    fmt = dtype(dtype_name).minifloat
    if fmt is not None:
        return f"(T){minifloat.encode_name(fmt)}((float){as_double})"
    if dtype_name == "float64":
        return f"(T){as_double}"
    if dtype(dtype_name).is_float:
        return f"(T)(float){as_double}"
    return "(T)v" if distribution == "randint" else "(T)(long long)v"


def randint_bounds(spec: InputSpec) -> tuple[int, int]:
    """The first value and the count of values of a ``randint`` input.

    Raises:
        HarnessError: the range is empty or holds a value its dtype cannot.
    """
    try:
        return randint_range(spec.dtype, spec.low, spec.high)
    except ValueError as exc:
        raise HarnessError(f"input {spec.name!r}: {exc}") from None


def make_input(spec: InputSpec) -> arrays.Tensor:
    """Build one input tensor on the GPU from its seed.

    Raises:
        HarnessError: a ``randint`` range that is empty or leaves the input's dtype, or no room on the device.
    """
    kind = dtype(spec.dtype)
    p0: float
    p1: float
    if spec.distribution == "randint":
        lo, count = randint_bounds(spec)
        p0, p1 = lo, count - 1
    elif spec.distribution == "uniform":
        p0, p1 = spec.low, spec.high
    else:
        p0, p1 = spec.mean, spec.std
    if arrays.runtime_name() in ("torch", "cpu"):  # the same values, written by Triton (or the host)
        data = arrays.runtime().random_input(spec.shape, kind, spec.distribution, spec.seed, p0, p1)
        return arrays.Tensor(data, kind)
    import numpy as np

    out = arrays.empty(spec.shape, kind.storage, f"input {spec.name!r} ({spec.nbytes / 1e6:,.1f} MB)")
    params = (np.int64(p0), np.uint64(p1)) if spec.distribution == "randint" else (np.float64(p0), np.float64(p1))
    _kernel(spec.distribution, spec.dtype)(np.uint64(spec.seed % 2**64), *params, out)
    return arrays.Tensor(out, kind)
