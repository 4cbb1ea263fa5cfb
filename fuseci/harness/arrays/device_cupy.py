"""The device through CuPy: :mod:`fuseci.harness.arrays.device`'s functions, documented there."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fuseci.errors import HarnessError
from fuseci.harness.arrays.device_errors import DeviceMemoryError


def cupy() -> Any:
    """The CuPy module; HarnessError when it is not installed."""
    try:
        import cupy as cp
    except ImportError as exc:
        raise HarnessError(f"CuPy is not installed ({exc}); install fuseci with the cuda12 or cuda13 extra") from None
    return cp


def start_driver() -> None:
    cp = cupy()
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise HarnessError("CUDA sees no GPU; `fuseci doctor` checks the set-up")
        cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise HarnessError(f"CUDA cannot start: {exc}; `fuseci doctor` checks the set-up") from None


def device_count() -> int:
    return int(cupy().cuda.runtime.getDeviceCount())


def open_context() -> None:
    """Create this process's CUDA context (``cudaFree(0)``)."""
    cp = cupy()
    try:
        cp.cuda.runtime.free(0)
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise HarnessError(
            f"CUDA cannot create a context on this GPU: {exc}; `fuseci doctor` checks the set-up"
        ) from None


def device_facts() -> dict[str, Any]:
    cp = cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {
        "gpu_name": name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "cuda_driver_api": _cuda_version(cp.cuda.runtime.driverGetVersion()),
        "cuda_runtime": _cuda_version(cp.cuda.runtime.runtimeGetVersion()),
        "cupy_version": cp.__version__,
    }


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def stream_handle() -> int:
    """The CUDA stream fuseci times and synchronises: CuPy's current stream."""
    return int(cupy().cuda.get_current_stream().ptr)


def synchronize() -> None:
    cupy().cuda.get_current_stream().synchronize()


def context_alive() -> bool:
    cp = cupy()
    try:
        cp.cuda.runtime.deviceSynchronize()  # returns the sticky error, if there is one
    except cp.cuda.runtime.CUDARuntimeError:
        return False
    return True


def free_pool() -> None:
    cupy().get_default_memory_pool().free_all_blocks()


@contextmanager
def poisoned_pool(byte: int) -> Iterator[None]:
    cp = cupy()
    pool = cp.get_default_memory_pool()

    def alloc(size: int) -> Any:
        mem = pool.malloc(size)
        if size:
            mem.memset_async(byte, size)
        return mem

    pool.free_all_blocks()
    cp.cuda.set_allocator(alloc)
    try:
        yield
    finally:
        cp.cuda.set_allocator(pool.malloc)


def memset(address: int, byte: int, size: int) -> None:
    cp = cupy()
    cp.cuda.runtime.memsetAsync(address, byte, size, cp.cuda.get_current_stream().ptr)


@contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    cp = cupy()
    cp.cuda.nvtx.RangePush(name)
    try:
        yield
    finally:
        cp.cuda.nvtx.RangePop()


@functools.cache
def elementwise_kernel(in_params: str, out_params: str, operation: str, name: str, preamble: str = "") -> Any:
    """A CuPy ``ElementwiseKernel`` (cached: one compilation per process)."""
    return cupy().ElementwiseKernel(in_params, out_params, operation, name, preamble=preamble)


@functools.cache
def raw_kernel(source: str, name: str) -> Any:
    """A CuPy ``RawKernel`` (cached)."""
    return cupy().RawKernel(source, name)


def empty(shape: tuple[int, ...], storage: str, what: str = "an array") -> Any:
    cp = cupy()
    try:
        return cp.empty(shape, dtype=storage)
    except cp.cuda.memory.OutOfMemoryError as exc:
        raise DeviceMemoryError(f"cannot allocate {what} on the GPU ({exc})") from None


def upload(host: Any) -> Any:
    return cupy().asarray(host)


def copy(dst: Any, src: Any) -> None:
    cupy().copyto(dst, src)


class Event:
    """A CUDA event on :func:`stream_handle`."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = cupy().cuda.Event()

    def record(self) -> None:
        """Record it on fuseci's stream."""
        self._event.record(cupy().cuda.get_current_stream())

    def ms_since(self, start: Event) -> float:
        """Milliseconds from ``start`` to this event (both recorded and complete)."""
        return float(cupy().cuda.get_elapsed_time(start._event, self._event))


#: The runtime's name, as ``FUSECI_RUNTIME`` and the records say it.
NAME = "cupy"


def load() -> None:
    """Import CuPy (before the GPU's turn)."""
    cupy()


_SPIN_SOURCE = r"""
extern "C" __global__ void fuseci_spin(const unsigned long long ns) {
  // The GPU's nanosecond clock, not SM cycles: the spin lasts as long whatever the clocks do.
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


def spinner() -> Any:
    import numpy as np

    kernel = raw_kernel(_SPIN_SOURCE, "fuseci_spin")
    return lambda ns: kernel((1,), (1,), (np.uint64(ns),))


def xp() -> Any:
    """The array namespace fuseci's float64 comparisons use."""
    return cupy()


def to_device(a: Any) -> Any:
    """A NumPy or CuPy array as a CuPy array (uploaded when on the host)."""
    return cupy().asarray(a)


def astype_float64(a: Any) -> Any:
    """A real array's values in float64 (no copy when it is one)."""
    return a.astype(cupy().float64, copy=False)


def decode_minifloat(bits: Any, decoder_source: str, decode_name: str, type_name: str) -> Any:
    """Raw bits of a bfloat16 or float8 format as exact float64 values (``decode_name`` of ``decoder_source``)."""
    kernel = elementwise_kernel(
        "T x", "float64 y", f"y = {decode_name}((unsigned int)x)", f"fuseci_decode_{type_name}", decoder_source
    )
    return kernel(bits)


def asnumpy(a: Any) -> Any:
    """A device array copied to the host."""
    return cupy().asnumpy(a)


def clone(a: Any) -> Any:
    """A copy of a device array in new memory."""
    return a.copy()


def from_dlpack(o: Any) -> Any:
    """A DLPack producer's device array, on the same memory."""
    return cupy().from_dlpack(o)


def from_cuda_array_interface(o: Any) -> Any:
    """A CUDA Array Interface producer's array, on the same memory."""
    return cupy().asarray(o)


def affine(x: Any, a: float, b: float) -> Any:
    kernel = elementwise_kernel("float32 x, float32 a, float32 b", "float32 y", "y = a * x + b", "fuseci_probe")
    import numpy as np

    return kernel(x, np.float32(a), np.float32(b))
