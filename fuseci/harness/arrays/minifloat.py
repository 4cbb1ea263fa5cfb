"""bfloat16 and float8 as raw bits: a float32 rounded to a format (to nearest even, clamped to
its largest finite value; NaN to the format's NaN) as CUDA source, and the bits read back exactly."""

from __future__ import annotations

import math
from typing import Any

from fuseci.config.dtypes import MiniFloat


def max_bits(fmt: MiniFloat) -> int:
    """The bits of the format's largest finite value (sign clear)."""
    mantissa, exponent = math.frexp(fmt.max_finite)  # max = mantissa * 2**exponent, mantissa in [0.5, 1)
    field = exponent - 1 + fmt.bias
    fraction = int(mantissa * 2 ** (fmt.mantissa_bits + 1)) - (1 << fmt.mantissa_bits)
    return (field << fmt.mantissa_bits) | fraction


def nan_bits(fmt: MiniFloat) -> int:
    """A NaN of the format (sign clear): every exponent and mantissa bit set."""
    return (1 << (fmt.exponent_bits + fmt.mantissa_bits)) - 1


def _suffix(fmt: MiniFloat) -> str:
    return f"e{fmt.exponent_bits}m{fmt.mantissa_bits}"


def encode_name(fmt: MiniFloat) -> str:
    """The device function that rounds a float to the format's bits."""
    return f"fuseci_encode_{_suffix(fmt)}"


def decode_name(fmt: MiniFloat) -> str:
    """The device function that reads the format's bits as a double."""
    return f"fuseci_decode_{_suffix(fmt)}"


def cuda_source(fmt: MiniFloat) -> str:
    """Device functions ``unsigned int <encode_name>(float)`` and ``double <decode_name>(unsigned
    int)`` for the format (in double arithmetic, exact but for ``rint``'s one rounding)."""
    m, bias, width = fmt.mantissa_bits, fmt.bias, fmt.exponent_bits + fmt.mantissa_bits
    top = (1 << fmt.exponent_bits) - 1
    nan, inf = "__longlong_as_double(0x7ff8000000000000LL)", "__longlong_as_double(0x7ff0000000000000LL)"
    special = (
        f"if (e == {top}u) v = m ? {nan} : {inf}; else"
        if fmt.has_inf
        else f"if (e == {top}u && m == {(1 << m) - 1}u) v = {nan}; else"
    )
    return f"""
__device__ __forceinline__ unsigned int {encode_name(fmt)}(float f) {{
    unsigned int sign = signbit(f) ? 1u : 0u;
    double a = fabs((double)f);
    unsigned int bits;
    if (isnan(a)) {{
        bits = {nan_bits(fmt)}u;
    }} else {{
        if (a > {fmt.max_finite!r}) a = {fmt.max_finite!r};
        if (a < {fmt.min_normal!r}) {{
            bits = (unsigned int)rint(ldexp(a, {bias - 1 + m}));
        }} else {{
            int e;
            frexp(a, &e);
            double q = rint(ldexp(a, {m} - (e - 1)));
            unsigned int field = (unsigned int)(e - 1 + {bias});
            if (q >= {float(1 << (m + 1))!r}) {{ q = {float(1 << m)!r}; field += 1u; }}
            bits = (field << {m}) | ((unsigned int)q - {1 << m}u);
            if (bits > {max_bits(fmt)}u) bits = {max_bits(fmt)}u;
        }}
    }}
    return (sign << {width}) | bits;
}}
__device__ __forceinline__ double {decode_name(fmt)}(unsigned int bits) {{
    unsigned int e = (bits >> {m}) & {top}u, m = bits & {(1 << m) - 1}u;
    double v;
    {special} if (e == 0u) v = ldexp((double)m, {1 - bias - m});
    else v = ldexp((double)(m | {1 << m}u), (int)e - {bias + m});
    return ((bits >> {width}) & 1u) ? -v : v;
}}
"""


def decode_host(bits: Any, fmt: MiniFloat) -> Any:
    """The format's bits as exact float64 values."""
    import numpy as np

    b = np.asarray(bits).astype(np.int64) & ((1 << (1 + fmt.exponent_bits + fmt.mantissa_bits)) - 1)
    m_bits, top = fmt.mantissa_bits, (1 << fmt.exponent_bits) - 1
    e = (b >> m_bits) & top
    m = b & ((1 << m_bits) - 1)
    v = np.where(
        e == 0,
        np.ldexp(m.astype(np.float64), 1 - fmt.bias - m_bits),
        np.ldexp((m | (1 << m_bits)).astype(np.float64), (e - fmt.bias - m_bits).astype(np.int32)),
    )
    if fmt.has_inf:
        v = np.where(e == top, np.where(m != 0, np.nan, np.inf), v)
    else:
        v = np.where((e == top) & (m == (1 << m_bits) - 1), np.nan, v)
    return np.where((b >> (fmt.exponent_bits + m_bits)) & 1, -v, v)
