"""The device through PyTorch alone, for a project without CuPy: :mod:`fuseci.harness.arrays.device`'s
functions (documented there) on torch tensors, inputs and the spin kernel by Triton."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fuseci.errors import HarnessError
from fuseci.harness.arrays.device_errors import DeviceMemoryError

#: The runtime's name, as ``FUSECI_RUNTIME`` and the records say it.
NAME = "torch"


def torch() -> Any:
    """The torch module; HarnessError when PyTorch cannot be imported."""
    try:
        import torch as t
    except ImportError as exc:
        raise HarnessError(f"PyTorch cannot be imported: {exc}") from None
    return t


def load() -> None:
    """Import PyTorch (before the GPU's turn); HarnessError for a CPU build."""
    t = torch()
    if t.version.cuda is None:
        raise HarnessError(f"PyTorch {t.__version__} has no CUDA (a CPU build?); install a CUDA build")


def storage_dtype(storage: str) -> Any:
    """torch's dtype for NumPy dtype name ``storage`` (fuseci's storage dtypes share their names)."""
    try:
        return getattr(torch(), storage)
    except AttributeError:
        raise HarnessError(f"PyTorch has no dtype for {storage!r} arrays") from None


def start_driver() -> None:
    t = torch()
    try:
        if t.cuda.device_count() < 1:
            raise HarnessError("CUDA sees no GPU; `fuseci doctor` checks the set-up")
        t.cuda.get_device_properties(t.cuda.current_device())
    except (RuntimeError, AssertionError) as exc:
        raise HarnessError(f"CUDA cannot start: {exc}; `fuseci doctor` checks the set-up") from None


def device_count() -> int:
    return int(torch().cuda.device_count())


def open_context() -> None:
    t = torch()
    try:
        t.cuda.init()
        t.cuda.synchronize()
    except RuntimeError as exc:
        raise HarnessError(
            f"CUDA cannot create a context on this GPU: {exc}; `fuseci doctor` checks the set-up"
        ) from None


def _driver_api_version() -> str:
    """The CUDA driver API version (``cuDriverGetVersion``), or "unknown"."""
    v = ctypes.c_int(0)
    with contextlib.suppress(OSError):
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0:
            return f"{v.value // 1000}.{(v.value % 1000) // 10}"
    return "unknown"


def device_facts() -> dict[str, Any]:
    t = torch()
    props = t.cuda.get_device_properties(t.cuda.current_device())
    return {
        "gpu_name": str(props.name),
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": int(props.multi_processor_count),
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
        "memory_bytes": int(props.total_memory),
        "cuda_driver_api": _driver_api_version(),
        "cuda_runtime": str(t.version.cuda),
        "torch_version": str(t.__version__),
    }


def stream_handle() -> int:
    """The CUDA stream fuseci times and synchronises: torch's current stream."""
    return int(torch().cuda.current_stream().cuda_stream)


def synchronize() -> None:
    torch().cuda.current_stream().synchronize()


def context_alive() -> bool:
    try:
        torch().cuda.synchronize()
    except RuntimeError:
        return False
    return True


def free_pool() -> None:
    torch().cuda.empty_cache()


@contextmanager
def poisoned_pool(byte: int) -> Iterator[None]:
    """Nothing to do: the torch framework fills the caching allocator's free memory (``Torch.poisoned``)."""
    yield


class _Memory:
    """A CUDA Array Interface over raw device memory (torch makes a tensor view of it)."""

    def __init__(self, address: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
            "strides": None,
        }


def memset(address: int, byte: int, size: int) -> None:
    torch().as_tensor(_Memory(address, size), device="cuda").fill_(byte)


@contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    nvtx = torch().cuda.nvtx
    nvtx.range_push(name)
    try:
        yield
    finally:
        nvtx.range_pop()


def empty(shape: tuple[int, ...], storage: str, what: str = "an array") -> Any:
    t = torch()
    try:
        return t.empty(shape, dtype=storage_dtype(storage), device="cuda")
    except t.cuda.OutOfMemoryError as exc:
        raise DeviceMemoryError(f"cannot allocate {what} on the GPU ({' '.join(str(exc).split())[:200]})") from None


def upload(host: Any) -> Any:
    return torch().from_numpy(host).to("cuda")


def copy(dst: Any, src: Any) -> None:
    dst.copy_(src)


class Event:
    """A CUDA event on :func:`stream_handle`."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = torch().cuda.Event(enable_timing=True)

    def record(self) -> None:
        """Record it on fuseci's stream."""
        self._event.record(torch().cuda.current_stream())

    def ms_since(self, start: Event) -> float:
        """Milliseconds from ``start`` to this event (both recorded and complete)."""
        return float(start._event.elapsed_time(self._event))


def spinner() -> Any:
    from fuseci.harness.arrays import philox_triton

    return philox_triton.spinner()


def xp() -> Any:
    """The array namespace fuseci's float64 comparisons use."""
    return torch()


def to_device(a: Any) -> Any:
    """A NumPy array or torch tensor as a device tensor (uploaded when on the host)."""
    t = torch()
    return a if isinstance(a, t.Tensor) else t.as_tensor(a, device="cuda")


def astype_float64(a: Any) -> Any:
    """A real tensor's values in float64 (no copy when it is one)."""
    return a.to(torch().float64)


@functools.cache
def _minifloat_dtypes() -> dict[str, Any]:
    t = torch()
    return {n: getattr(t, n) for n in ("bfloat16", "float8_e4m3fn", "float8_e5m2") if hasattr(t, n)}


def decode_minifloat(bits: Any, decoder_source: str, decode_name: str, type_name: str) -> Any:
    """Raw bits of a bfloat16 or float8 format as exact float64 values (by torch's exact conversion)."""
    del decoder_source, decode_name
    try:
        kind = _minifloat_dtypes()[type_name]
    except KeyError:
        raise HarnessError(f"this PyTorch has no {type_name} dtype to read such outputs with") from None
    return bits.view(kind).to(torch().float64)


def asnumpy(a: Any) -> Any:
    """A device tensor copied to the host."""
    return a.detach().cpu().numpy()


def clone(a: Any) -> Any:
    """A copy of a device tensor in new memory."""
    return a.clone()


def from_dlpack(o: Any) -> Any:
    """A DLPack producer's device tensor, on the same memory."""
    return torch().from_dlpack(o)


def from_cuda_array_interface(o: Any) -> Any:
    """A CUDA Array Interface producer's tensor, on the same memory."""
    return torch().as_tensor(o, device="cuda")


def affine(x: Any, a: float, b: float) -> Any:
    t = torch()
    return t.add(t.tensor(b, dtype=t.float32), x, alpha=a)


def random_input(
    shape: tuple[int, ...], kind: Any, distribution: str, seed: int, p0: Any, p1: Any, values: Any = None
) -> Any:
    """An input of fuseci dtype ``kind`` written from its seed, the same bits as the CuPy runtime's;
    ``values`` computes the float64 (int64) values, on the GPU by Triton unless given (the host's)."""
    from fuseci.harness.arrays import philox_triton

    t = torch()
    n = math.prod(shape)
    if values is None:
        out = empty((n,), kind.storage, f"an input of {n:,} {kind.name} elements")
    else:
        out = t.empty((n,), dtype=storage_dtype(kind.storage))
    storage = storage_dtype(kind.storage)
    fmt = kind.minifloat
    randint = distribution == "randint"

    def convert(v: Any) -> Any:
        if randint and not kind.is_float:
            return v.to(storage)  # (T)v
        if randint:
            v = v.to(t.float64)  # (double)v
        if kind.name == "float64":
            return v
        if not kind.is_float:
            return v.to(t.int64).to(storage)  # (T)(long long)v
        f = v.to(t.float32)
        if fmt is not None:
            return f.clamp_(-fmt.max_finite, fmt.max_finite).to(_minifloat_dtypes()[kind.name]).view(storage)
        return f.to(storage)

    philox_triton.fill(out, distribution, seed, p0, p1, convert, values or philox_triton.values)
    return out.view(shape)
