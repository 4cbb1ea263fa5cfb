"""A tensor as fuseci holds it (the runtime's device array of its dtype's storage, and the dtype),
and what fuseci does with one: float64 values, comparison, host copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuseci.config.dtypes import DType, dtype_of
from fuseci.harness.arrays import device, minifloat


@dataclass(frozen=True, slots=True)
class Tensor:
    """An input or an output, on the device (or, for a reference computed in NumPy, the host)."""

    data: Any
    """A device array of :attr:`DType.storage` (CuPy's or torch's, as the runtime is; a NumPy
    array when it lives on the host)."""
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
    def on_host(self) -> bool:
        """True for a NumPy array."""
        return type(self.data).__module__.split(".")[0] == "numpy"


def native_dtype(name: str, itemsize: int, kind: str) -> DType:
    """The dtype of an array whose dtype ``str()`` reads ``name``: fuseci's, or another kept as it is."""
    known = dtype_of(name)
    if known is not None:
        return known
    kinds = {"f": "float", "i": "int", "u": "uint", "b": "uint", "c": "complex"}
    return DType(name, itemsize, kinds.get(kind, kind), name, ())


def from_array(a: Any) -> Tensor:
    """A CuPy or NumPy array, or a torch tensor of the PyTorch runtime, as a tensor (bfloat16 and float8 as raw bits)."""
    if type(a).__module__.split(".")[0] == "torch":
        return _from_torch(a)
    dt = native_dtype(str(a.dtype), int(a.dtype.itemsize), str(a.dtype.kind))
    if dt.minifloat is not None and str(a.dtype) != dt.storage:
        a = a.view(dt.storage)
    return Tensor(a, dt)


def _from_torch(a: Any) -> Tensor:
    import torch

    name = str(a.dtype).removeprefix("torch.")
    known = dtype_of(name)
    if known is not None and known.minifloat is not None:
        return Tensor(a.view(torch.uint16 if known.itemsize == 2 else torch.uint8), known)
    if a.dtype == torch.bool:
        a = a.view(torch.uint8)
        name = "uint8"
    kind = (
        "f" if a.dtype.is_floating_point else ("c" if a.dtype.is_complex else ("u" if name.startswith("uint") else "i"))
    )
    return Tensor(a, native_dtype(name, int(a.element_size()), kind))


def float64(t: Tensor) -> Any:
    """Its exact values as a float64 device array (uploaded when on the host)."""
    rt = device.runtime()
    data = rt.to_device(t.data)
    fmt = t.dtype.minifloat
    if fmt is not None:
        return rt.decode_minifloat(data, minifloat.cuda_source(fmt), minifloat.decode_name(fmt), t.dtype.name)
    if t.dtype.kind == "complex":
        raise ValueError(f"{t.dtype.name} outputs cannot be compared as real numbers")
    return rt.astype_float64(data)


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
    return device.runtime().asnumpy(float64(t))


def own_copy(t: Tensor) -> Tensor:
    """A copy in memory fuseci owns (a framework may reuse its output buffers)."""
    return Tensor(t.data.copy() if t.on_host else device.runtime().clone(t.data), t.dtype)


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
    """Elements that are NaN in the output where the expected value is not (unwritten, after NaN-filling)."""


def compare(out: Tensor, expected: Tensor, rtol: float, atol: float) -> Difference:
    """``|out - expected| <= atol + rtol * |expected|`` elementwise, in float64 on the GPU."""
    import math

    xp = device.runtime().xp()
    o = float64(out).ravel()
    e = float64(expected).ravel()
    diff = xp.abs(o - e)
    diff = xp.where(xp.isfinite(diff), diff, math.inf)  # NaN compares as the worst possible error
    bad = ~(diff <= atol + rtol * xp.abs(e))
    worst = int(xp.argmax(diff))
    ref_norm = float(xp.linalg.norm(e))
    err_norm = float(xp.linalg.norm(xp.where(xp.isinf(diff), math.inf, o - e)))
    return Difference(
        mismatches=int(bad.sum()),
        elements=int(o.shape[0]),
        max_abs_err=float(diff[worst]),
        rel_l2_err=err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf),
        worst_index=worst,
        nan_count=int((xp.isnan(o) & ~xp.isnan(e)).sum()),
    )
