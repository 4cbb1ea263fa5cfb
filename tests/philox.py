"""The host reference of fuseci's input generator (:mod:`fuseci.harness.inputs`): Philox4x32-10
and each distribution computed with NumPy, which the GPU kernel is tested against, bit for bit
where the arithmetic is exact."""

from __future__ import annotations

import math
from typing import Any

from fuseci.config.dtypes import dtype
from fuseci.config.model import InputSpec
from fuseci.harness.arrays import minifloat
from fuseci.harness.inputs import randint_bounds

#: The Philox4x32 round multipliers and key increments (Random123's constants).
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_MASK32 = 0xFFFFFFFF
_2_POW_53 = 2.0**-53


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
    reference :func:`fuseci.harness.inputs.make_input` is tested against.

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
    """Float64 values as the kernel's casts (:func:`fuseci.harness.inputs._store`) make them elements of ``dtype_name``:
    kept, rounded through float32 (to a format kept as raw bits: those bits), or truncated to
    int64 and then wrapped."""
    import numpy as np

    kind = dtype(dtype_name)
    if kind.minifloat is not None:
        return encode_host(v.astype(np.float32), kind.minifloat, kind.storage)
    if dtype_name == "float64":
        return v
    if kind.is_float:
        return v.astype(np.float32).astype(dtype_name)
    return v.astype(np.int64).astype(dtype_name)


def encode_host(values: Any, fmt: minifloat.MiniFloat, storage: str) -> Any:
    """Float values (rounded to float32 first, as the device does) as the format's bits, in
    NumPy dtype ``storage``: the host's reference of the device's encoding."""
    import numpy as np

    f = np.asarray(values, dtype=np.float32).astype(np.float64)
    sign = np.signbit(f).astype(np.int64)
    a = np.minimum(np.abs(f), fmt.max_finite)
    m = fmt.mantissa_bits
    with np.errstate(invalid="ignore"):
        _, exp = np.frexp(a)
        sub = a < fmt.min_normal
        q_sub = np.rint(np.ldexp(a, fmt.bias - 1 + m))
        q = np.rint(np.ldexp(a, m - (exp - 1)))
        field = exp - 1 + fmt.bias
        carry = q >= 2 ** (m + 1)
        q = np.where(carry, 2.0**m, q)
        field = np.where(carry, field + 1, field)
        normal = (field.astype(np.int64) << m) | (np.nan_to_num(q).astype(np.int64) - (1 << m))
        normal = np.minimum(normal, minifloat.max_bits(fmt))
        bits = np.where(sub, np.nan_to_num(q_sub).astype(np.int64), normal)
    bits = np.where(np.isnan(a), minifloat.nan_bits(fmt), bits)
    return ((sign << (fmt.exponent_bits + m)) | bits).astype(storage)
