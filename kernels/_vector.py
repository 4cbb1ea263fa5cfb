"""Generator for bandwidth-bound fused elementwise kernels.

A fused elementwise chain is limited by DRAM bandwidth only if every thread keeps several
16-byte loads in flight. The generated kernel is a grid-stride loop over ``float4`` vectors of
every streamed tensor (one vector per tensor per iteration), with a scalar tail for sizes that
are not a multiple of 4 and a scalar path for tensors that are not 16-byte aligned. The body is
a scalar CUDA statement applied to each lane; it sees each streamed input by name, the scalar
parameters, ``idx`` (the flat element index, for per-channel or per-column operands read
through ``__ldg``) and assigns each output by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import cupy as cp

THREADS = 256
_LANES = ("x", "y", "z", "w")


@dataclass(frozen=True)
class VectorKernel:
    """A compiled fused elementwise kernel over float32 tensors of one size."""

    name: str
    streamed: tuple[str, ...]
    """float32 tensors read with one element per output element."""
    outputs: tuple[str, ...]
    """float32 tensors written, one element per index."""
    gathered: tuple[str, ...]
    """float32 tensors indexed freely by the body (per-channel or per-column operands)."""
    scalars: tuple[tuple[str, str], ...]
    """(name, C type) of scalar parameters; ``int`` and ``float`` are supported."""
    body: str
    """Scalar CUDA statements computing every output from the inputs of one element."""

    def source(self, index_type: str) -> str:
        params = [f"const float* __restrict__ {n}_" for n in self.streamed]
        params += [f"const float* __restrict__ {n}" for n in self.gathered]
        params += [f"float* __restrict__ {n}_" for n in self.outputs]
        params += [f"const {t} {n}" for n, t in self.scalars]
        params += [f"const {index_type} n", f"const {index_type} n4"]
        lanes = []
        for k, lane in enumerate(_LANES):
            load = " ".join(f"const float {n} = v_{n}.{lane};" for n in self.streamed)
            decl = " ".join(f"float {n};" for n in self.outputs)
            store = " ".join(f"o_{n}.{lane} = {n};" for n in self.outputs)
            lanes.append(
                f"    {{ const {index_type} idx = 4 * i + {k}; (void)idx; {load} {decl} {self.body} {store} }}"
            )
        vec_loads = " ".join(f"const float4 v_{n} = reinterpret_cast<const float4*>({n}_)[i];" for n in self.streamed)
        vec_decl = " ".join(f"float4 o_{n};" for n in self.outputs)
        vec_store = " ".join(f"reinterpret_cast<float4*>({n}_)[i] = o_{n};" for n in self.outputs)
        tail_load = " ".join(f"const float {n} = {n}_[idx];" for n in self.streamed)
        tail_decl = " ".join(f"float {n};" for n in self.outputs)
        tail_store = " ".join(f"{n}_[idx] = {n};" for n in self.outputs)
        return f"""
extern "C" __global__ void __launch_bounds__({THREADS}) {self.name}({", ".join(params)}) {{
  const {index_type} stride = ({index_type})gridDim.x * blockDim.x;
  const {index_type} start = ({index_type})blockIdx.x * blockDim.x + threadIdx.x;
  for ({index_type} i = start; i < n4; i += stride) {{
    {vec_loads}
    {vec_decl}
{chr(10).join(lanes)}
    {vec_store}
  }}
  for ({index_type} idx = 4 * n4 + start; idx < n; idx += stride) {{
    {tail_load} {tail_decl} {self.body} {tail_store}
  }}
}}
"""

    def __call__(self, *, size: int, **arrays_and_scalars: object) -> tuple[cp.ndarray, ...]:
        """Launch over ``size`` elements; returns the outputs (new arrays) in declared order."""
        streamed = [_as_f32(n, arrays_and_scalars[n], size) for n in self.streamed]
        gathered = [_as_f32(n, arrays_and_scalars[n], None) for n in self.gathered]
        outs = [cp.empty(size, dtype=cp.float32) for _ in self.outputs]
        aligned = all(a.data.ptr % 16 == 0 for a in (*streamed, *outs))
        n4 = size // 4 if aligned else 0
        index_type = "int" if size < 2**31 - 2 * _max_threads() else "long long"
        kernel = _compile(self, index_type)
        scalars = []
        for name, ctype in self.scalars:
            value = arrays_and_scalars[name]
            scalars.append(cp.int32(value) if ctype == "int" else cp.float32(value))
        index = cp.int32 if index_type == "int" else cp.int64
        blocks = max(1, min(_ceil_div(max(n4, size - 4 * n4), THREADS), _max_blocks()))
        kernel((blocks,), (THREADS,), (*streamed, *gathered, *outs, *scalars, index(size), index(n4)))
        return tuple(outs)


def _as_f32(name: str, a: object, size: int | None) -> cp.ndarray:
    if not isinstance(a, cp.ndarray) or a.dtype != cp.float32:
        raise TypeError(f"{name}: expected a float32 cupy array, got {type(a).__name__} {getattr(a, 'dtype', '')}")
    if not a.flags.c_contiguous:
        a = cp.ascontiguousarray(a)
    if size is not None and a.size != size:
        raise ValueError(f"{name}: expected {size} elements, got {a.size}")
    return a.reshape(-1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@cache
def _sm_count() -> int:
    return int(cp.cuda.Device().attributes["MultiProcessorCount"])


def _max_blocks() -> int:
    # Enough resident blocks to fill every SM (2048 threads each); the loop covers the rest.
    return _sm_count() * (2048 // THREADS)


def _max_threads() -> int:
    return _max_blocks() * THREADS


@cache
def _compile(kernel: VectorKernel, index_type: str) -> cp.RawKernel:
    return cp.RawKernel(kernel.source(index_type), kernel.name, options=("-std=c++17",))
