"""The Triton kernels of :mod:`fuseci.harness.arrays.philox_triton` (imported only where Triton
is installed: the PyTorch runtime)."""

# mypy: disable-error-code="no-untyped-def,misc"

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _umul64hi(ah, al, b):
    """The high 64 bits of ``(ah * 2**32 + al) * b`` (CUDA's ``__umul64hi``), from 32-bit halves."""
    bh = b >> 32
    bl = b & 0xFFFFFFFF
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    mid = (ll >> 32) + (lh & 0xFFFFFFFF) + (hl & 0xFFFFFFFF)
    return ah * bh + (lh >> 32) + (hl >> 32) + (mid >> 32)


@triton.jit
def values(out_ptr, n, start, seed_lo, seed_hi, p0_bits, p1_bits, DIST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < n
    i = offs + start
    c0 = (i & 0xFFFFFFFF).to(tl.uint32)
    c1 = (i >> 32).to(tl.uint32)
    c2 = tl.zeros_like(c0)
    c3 = tl.zeros_like(c0)
    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    for _ in tl.static_range(10):
        hi0 = tl.umulhi(c0, 0xD2511F53)
        lo0 = c0 * 0xD2511F53
        hi1 = tl.umulhi(c2, 0xCD9E8D57)
        lo1 = c2 * 0xCD9E8D57
        c0 = hi1 ^ c1 ^ k0
        c1 = lo1
        c2 = hi0 ^ c3 ^ k1
        c3 = lo0
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    w0 = (c0.to(tl.uint64) << 32) | c1.to(tl.uint64)
    if DIST == 2:  # randint: lo + the high half of w0 * span (or w0 itself over 2**64 values)
        lo = p0_bits.to(tl.int64).to(tl.uint64, bitcast=True)
        span_m1 = p1_bits.to(tl.int64).to(tl.uint64, bitcast=True)
        if p1_bits == -1:  # noqa: SIM108 (a statement: Triton's JIT compiles it to a branch)
            off = w0
        else:
            off = _umul64hi(c0.to(tl.uint64), c1.to(tl.uint64), span_m1 + 1)
        v = (lo + off).to(tl.int64, bitcast=True)
        tl.store(out_ptr + offs, v, mask=mask)
    else:
        a = p0_bits.to(tl.int64).to(tl.float64, bitcast=True)
        b = p1_bits.to(tl.int64).to(tl.float64, bitcast=True)
        u0 = (w0 >> 11).to(tl.float64) * 1.1102230246251565e-16
        if DIST == 0:
            v = tl.fma(u0, b - a, a)
        else:
            w1 = (c2.to(tl.uint64) << 32) | c3.to(tl.uint64)
            u1 = (w1 >> 11).to(tl.float64) * 1.1102230246251565e-16
            s = libdevice.sqrt(-2.0 * libdevice.log(1.0 - u0))
            v = tl.fma(b * s, libdevice.cospi(2.0 * u1), a)
        tl.store(out_ptr + offs, v, mask=mask)


@triton.jit
def spin(ns, flag):
    start = tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,l", [flag], dtype=tl.uint64, is_pure=False, pack=1
    )
    now = start
    while now - start < ns.to(tl.uint64):
        now = tl.inline_asm_elementwise(
            "mov.u64 $0, %globaltimer;", "=l,l", [flag], dtype=tl.uint64, is_pure=False, pack=1
        )
