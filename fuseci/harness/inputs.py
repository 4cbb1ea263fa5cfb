"""Input tensors, built on the GPU from their seeds by one counter-based kernel.

Element ``i`` of an input is a pure function of ``(seed, i)``: Philox4x32-10 (Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011) with the seed as its 64-bit key and the
element's index as its counter, then turned into the value the distribution asks for. So a
tensor is the same on every run, card and launch shape, and one kernel launch writes it in its
own dtype with no state to set up. CuPy's ``cupy.random`` generators would do as well, but their
kernels are built with cuRAND's headers, whose precomputed tables make the first use in a
process cost a few hundred milliseconds (more under ncu), in every harness process, while the
GPU is held. :func:`host_values` computes the same values with NumPy on the host: the reference
the kernel is tested against, bit for bit where the arithmetic is exact.

- ``uniform``: ``low + u * (high - low)`` with ``u`` in [0, 1) from 53 random bits.
- ``normal``: ``mean + std * z``, ``z`` by the Box-Muller transform of two such numbers.
- ``randint``: an integer in [low, high) by Lemire's multiply-high reduction of 64 random bits
  (a bias under ``(high - low) / 2**64``), in any dtype.

The value is computed in float64; a float input of another dtype gets it rounded to float32 and
then to its own dtype (float16 through float32, as NumPy's ``astype`` would; bfloat16 and
float8 to nearest even, clamped to the format's largest finite value, kept as raw bits: see
:mod:`fuseci.config.dtypes`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from fuseci.config.dtypes import dtype
from fuseci.config.model import InputSpec, randint_range
from fuseci.errors import HarnessError
from fuseci.harness import arrays
from fuseci.harness.arrays import minifloat

#: The Philox4x32 round multipliers and key increments (Random123's constants).
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_MASK32 = 0xFFFFFFFF
_2_POW_53 = 2.0**-53

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
    """The elementwise kernel that writes one input of ``distribution`` and ``dtype_name``: the
    float64 or int64 value ``v`` converted for the output ``y`` (:func:`_store`)."""
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
    """How the value ``v`` becomes an element of ``dtype_name`` (see the module docstring)."""
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
    """The first value and the count of values of a ``randint`` input (:func:`randint_range`).

    Raises:
        HarnessError: the range is empty or holds a value its dtype cannot (the suite parser
            refuses both; this guards a spec built another way).
    """
    try:
        return randint_range(spec.dtype, spec.low, spec.high)
    except ValueError as exc:
        raise HarnessError(f"input {spec.name!r}: {exc}") from None


def make_input(spec: InputSpec) -> arrays.Tensor:
    """Build one input tensor on the GPU, deterministically from its seed (see the module docstring).

    Raises:
        HarnessError: a ``randint`` range that is empty or leaves the input's dtype, or no room
            on the device.
    """
    import numpy as np

    kind = dtype(spec.dtype)
    out = arrays.empty(spec.shape, kind.storage, f"input {spec.name!r} ({spec.nbytes / 1e6:,.1f} MB)")
    kernel = _kernel(spec.distribution, spec.dtype)
    seed = np.uint64(spec.seed % 2**64)
    if spec.distribution == "randint":
        lo, count = randint_bounds(spec)
        kernel(seed, np.int64(lo), np.uint64(count - 1), out)
    elif spec.distribution == "uniform":
        kernel(seed, np.float64(spec.low), np.float64(spec.high), out)
    else:
        kernel(seed, np.float64(spec.mean), np.float64(spec.std), out)
    return arrays.Tensor(out, kind)


def philox4x32(counter: Any, key: tuple[int, int]) -> Any:
    """Philox4x32-10 on the host: ``counter`` an (n, 4) uint32 array, ``key`` two 32-bit words;
    the (n, 4) uint32 output."""
    import numpy as np

    c = [np.asarray(counter[:, j], dtype=np.uint64) for j in range(4)]
    k0, k1 = key[0] & _MASK32, key[1] & _MASK32
    for _ in range(_ROUNDS):
        p0 = np.uint64(_M0) * c[0]
        p1 = np.uint64(_M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & np.uint64(_MASK32)
        hi1, lo1 = p1 >> np.uint64(32), p1 & np.uint64(_MASK32)
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return np.stack(c, axis=1).astype(np.uint32)


def host_values(spec: InputSpec, count: int | None = None) -> Any:
    """The first ``count`` elements (all by default) of the input ``spec``, flattened, computed
    on the host with NumPy, in the dtype's storage (raw bits for bfloat16 and float8): the
    reference :func:`make_input` is tested against.

    Raises:
        HarnessError: as :func:`make_input`.
    """
    import numpy as np

    n = math.prod(spec.shape) if count is None else count
    index = np.arange(n, dtype=np.uint64)
    counter = np.zeros((n, 4), dtype=np.uint32)
    counter[:, 0] = (index & np.uint64(_MASK32)).astype(np.uint32)
    counter[:, 1] = (index >> np.uint64(32)).astype(np.uint32)
    seed = spec.seed % 2**64
    words = philox4x32(counter, (seed & _MASK32, seed >> 32)).astype(np.uint64)
    w0 = (words[:, 0] << np.uint64(32)) | words[:, 1]
    w1 = (words[:, 2] << np.uint64(32)) | words[:, 3]
    if spec.distribution == "randint":
        lo, span = randint_bounds(spec)
        # the high 64 bits of w0 * span, exactly, in Python integers
        off = [int(w) if span == 2**64 else (int(w) * span) >> 64 for w in w0]
        values = np.array([lo + o for o in off], dtype=object)
        if not dtype(spec.dtype).is_float:
            return values.astype(spec.dtype)
        return _rounded(values.astype(np.float64), spec.dtype)
    unit0 = (w0 >> np.uint64(11)).astype(np.float64) * _2_POW_53
    if spec.distribution == "uniform":
        v = spec.low + unit0 * (spec.high - spec.low)
    else:
        unit1 = (w1 >> np.uint64(11)).astype(np.float64) * _2_POW_53
        v = spec.mean + spec.std * np.sqrt(-2.0 * np.log(1.0 - unit0)) * np.cos(2.0 * np.pi * unit1)
    return _rounded(v, spec.dtype)


def _rounded(v: Any, dtype_name: str) -> Any:
    """Float64 values as the kernel's casts (:func:`_store`) make them elements of ``dtype_name``:
    kept, rounded through float32 (to a format kept as raw bits: those bits), or truncated to
    int64 and then wrapped."""
    import numpy as np

    kind = dtype(dtype_name)
    if kind.minifloat is not None:
        return minifloat.encode_host(v.astype(np.float32), kind.minifloat, kind.storage)
    if dtype_name == "float64":
        return v
    if kind.is_float:
        return v.astype(np.float32).astype(dtype_name)
    return v.astype(np.int64).astype(dtype_name)
