"""The device, through CuPy: fuseci's own GPU work (inputs, comparisons, probes, timing) and
the CUDA runtime facts it records. Only this package imports CuPy."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fuseci.errors import HarnessError


def cupy() -> Any:
    """The CuPy module.

    Raises:
        HarnessError: CuPy is not installed.
    """
    try:
        import cupy as cp
    except ImportError as exc:
        raise HarnessError(f"CuPy is not installed ({exc}); install fuseci with the cuda12 or cuda13 extra") from None
    return cp


class DeviceMemoryError(HarnessError):
    """The device has no room for an allocation fuseci itself makes."""


def start_driver() -> None:
    """Start the CUDA driver and read the device, creating no context.

    Raises:
        HarnessError: CUDA cannot start (no device, a driver too old for this CuPy, a lost GPU).
    """
    cp = cupy()
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise HarnessError("CUDA sees no GPU; `fuseci doctor` checks the set-up")
        cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise HarnessError(f"CUDA cannot start: {exc}; `fuseci doctor` checks the set-up") from None


def device_count() -> int:
    """GPUs CUDA sees.

    Raises:
        Exception: whatever CuPy raises when the driver is absent or too old (the probe reports it).
    """
    return int(cupy().cuda.runtime.getDeviceCount())


def open_context() -> None:
    """Create this process's CUDA context (``cudaFree(0)``, the customary way, and no more).

    Raises:
        HarnessError: the context cannot be created.
    """
    cp = cupy()
    try:
        cp.cuda.runtime.free(0)
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise HarnessError(
            f"CUDA cannot create a context on this GPU: {exc}; `fuseci doctor` checks the set-up"
        ) from None


def device_facts() -> dict[str, Any]:
    """The current device's name, compute capability, multiprocessors, L2 and memory size, and
    the CUDA driver API and runtime versions."""
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
    """The CUDA stream fuseci times and synchronises: CuPy's current stream (0: the legacy
    default stream, where every framework launches unless told otherwise)."""
    return int(cupy().cuda.get_current_stream().ptr)


def synchronize() -> None:
    """Wait for everything queued on :func:`stream_handle` (and, for the legacy default stream,
    on every blocking stream)."""
    cupy().cuda.get_current_stream().synchronize()


def context_alive() -> bool:
    """False after a sticky CUDA error (illegal address, kernel fault): nothing works after one."""
    cp = cupy()
    try:
        cp.cuda.runtime.deviceSynchronize()  # returns the sticky error, if there is one
    except cp.cuda.runtime.CUDARuntimeError:
        return False
    return True


def free_pool() -> None:
    """Give CuPy's cached device memory back to the driver."""
    cupy().get_default_memory_pool().free_all_blocks()


@contextmanager
def poisoned_pool(byte: int) -> Iterator[None]:
    """Fill every allocation CuPy's pool hands out with ``byte`` while the block runs."""
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
    """Fill ``size`` bytes of device memory at ``address`` (memory fuseci did not allocate, such
    as a framework's cached blocks) with ``byte``, on :func:`stream_handle`."""
    cp = cupy()
    cp.cuda.runtime.memsetAsync(address, byte, size, cp.cuda.get_current_stream().ptr)


@contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX push/pop range (ncu's ``--nvtx-include`` selects the kernels inside it)."""
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
    """An uninitialised device array of NumPy dtype ``storage``.

    Raises:
        DeviceMemoryError: it does not fit in device memory.
    """
    cp = cupy()
    try:
        return cp.empty(shape, dtype=storage)
    except cp.cuda.memory.OutOfMemoryError as exc:
        raise DeviceMemoryError(f"cannot allocate {what} on the GPU ({exc})") from None


def upload(host: Any) -> Any:
    """A NumPy array copied to the device (a copy, no kernel)."""
    return cupy().asarray(host)


def copy(dst: Any, src: Any) -> None:
    """Device-to-device copy, on :func:`stream_handle`."""
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
