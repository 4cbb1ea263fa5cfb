"""A tensor as fuseci holds it: a CuPy array of the element type's storage (raw bits for
bfloat16 and float8) and the element type; and what fuseci does with one (float64 values,
comparison, host copies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuseci.config.dtypes import DType, dtype_of
from fuseci.harness.arrays import device, minifloat


@dataclass(frozen=True, slots=True)
class Tensor:
    """An input or an output, on the device (or, for a reference computed in NumPy, the host)."""

    data: Any
    """A CuPy array of :attr:`DType.storage` (a NumPy array when it lives on the host)."""
    dtype: DType
    """Its element type."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Its shape."""
        return tuple(self.data.shape)

    @property
    def nbytes(self) -> int:
        """Bytes it occupies."""
        return int(self.data.nbytes)

    @property
    def size(self) -> int:
        """Elements it holds."""
        return int(self.data.size)

    @property
    def on_host(self) -> bool:
        """True for a NumPy array."""
        return type(self.data).__module__.split(".")[0] == "numpy"


def native_dtype(name: str, itemsize: int, kind: str) -> DType:
    """The dtype of an array whose dtype ``str()`` reads ``name``: one of fuseci's, or one it
    has no input of (bool, uint32, complex...) kept as it is and compared as float64."""
    known = dtype_of(name)
    if known is not None:
        return known
    kinds = {"f": "float", "i": "int", "u": "uint", "b": "uint", "c": "complex"}
    return DType(name, itemsize, kinds.get(kind, kind), name, ())


def from_array(a: Any) -> Tensor:
    """A CuPy or NumPy array as a tensor; one of an ``ml_dtypes`` type (bfloat16, float8) is
    viewed as its raw bits."""
    dt = native_dtype(str(a.dtype), int(a.dtype.itemsize), str(a.dtype.kind))
    if dt.minifloat is not None and str(a.dtype) != dt.storage:
        a = a.view(dt.storage)
    return Tensor(a, dt)


def _decoder(dt: DType) -> Any:
    fmt = dt.minifloat
    assert fmt is not None
    return device.elementwise_kernel(
        "T x",
        "float64 y",
        f"y = {minifloat.decode_name(fmt)}((unsigned int)x)",
        f"fuseci_decode_{dt.name}",
        preamble=minifloat.cuda_source(fmt),
    )


def float64(t: Tensor) -> Any:
    """Its exact values as a float64 CuPy array (uploaded when on the host)."""
    cp = device.cupy()
    data = cp.asarray(t.data)
    if t.dtype.minifloat is not None:
        return _decoder(t.dtype)(data)
    if t.dtype.kind == "complex":
        raise ValueError(f"{t.dtype.name} outputs cannot be compared as real numbers")
    return data.astype(cp.float64, copy=False)


def float64_tensor(t: Tensor) -> Tensor:
    """The tensor's values as a float64 tensor (what a float64 reference is called with)."""
    return from_array(float64(t))


def host_float64(t: Tensor) -> Any:
    """Its exact values as a float64 NumPy array."""
    import numpy as np

    if t.on_host:
        values = t.data
        if t.dtype.minifloat is not None:
            return minifloat.decode_host(values, t.dtype.minifloat)
        return np.asarray(values).astype(np.float64)
    return device.cupy().asnumpy(float64(t))


def own_copy(t: Tensor) -> Tensor:
    """A copy in memory fuseci owns: a framework's output buffer may be reused or overwritten by
    its next call (CUDA-graph outputs, cached allocations)."""
    return Tensor(t.data.copy(), t.dtype)


@dataclass(frozen=True, slots=True)
class Difference:
    """How an output differs from what it is compared with, elementwise in float64."""

    mismatches: int
    """Elements outside ``atol + rtol * |expected|`` (NaN counts as outside)."""
    elements: int
    """Elements compared."""
    max_abs_err: float
    """Largest absolute difference (inf where an element is NaN or inf)."""
    rel_l2_err: float
    """``‖out − expected‖₂ / ‖expected‖₂`` (inf when the output holds NaN)."""
    worst_index: int
    """Flat index of the largest difference."""
    nan_count: int
    """Elements that are NaN in the output where the expected value is not: never written, when
    fuseci filled the output's memory with NaN before the call."""


def compare(out: Tensor, expected: Tensor, rtol: float, atol: float) -> Difference:
    """``|out - expected| <= atol + rtol * |expected|`` elementwise, in float64 on the GPU."""
    import math

    cp = device.cupy()
    o = float64(out).ravel()
    e = float64(expected).ravel()
    diff = cp.abs(o - e)
    diff = cp.where(cp.isfinite(diff), diff, cp.inf)  # NaN compares as the worst possible error
    bad = ~(diff <= atol + rtol * cp.abs(e))
    worst = int(cp.argmax(diff))
    ref_norm = float(cp.linalg.norm(e))
    err_norm = float(cp.linalg.norm(cp.where(cp.isinf(diff), cp.inf, o - e)))
    return Difference(
        mismatches=int(bad.sum()),
        elements=int(o.size),
        max_abs_err=float(diff[worst]),
        rel_l2_err=err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf),
        worst_index=worst,
        nan_count=int((cp.isnan(o) & ~cp.isnan(e)).sum()),
    )
