"""The device: fuseci's own GPU work (inputs, comparisons, probes, timing) and the CUDA facts it
records, through one runtime chosen once per process: CuPy (:mod:`.device_cupy`) when it imports,
else PyTorch alone (:mod:`.device_torch`); ``FUSECI_RUNTIME`` chooses where both are installed, and
``cpu`` (:mod:`.device_cpu`) is the host, for ``fuseci check --execute``."""

from __future__ import annotations

import functools
import importlib
import os
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

from fuseci.errors import HarnessError

#: The environment variable that chooses the runtime where both are installed.
RUNTIME_ENV = "FUSECI_RUNTIME"
RUNTIMES = ("cupy", "torch", "cpu")


@functools.cache
def runtime() -> ModuleType:
    """The runtime module of this process: ``FUSECI_RUNTIME``'s, else CuPy when it imports, else PyTorch.

    Raises:
        HarnessError: ``FUSECI_RUNTIME`` names no runtime, or the runtime cannot be imported.
    """
    asked = os.environ.get(RUNTIME_ENV, "").strip().lower()
    if asked and asked not in RUNTIMES:
        raise HarnessError(f"{RUNTIME_ENV}={asked!r} names no runtime; use one of {', '.join(RUNTIMES)}, or unset it")
    no_cupy = ""
    if not asked:
        try:
            importlib.import_module("cupy")
            asked = "cupy"
        except ImportError as exc:
            asked, no_cupy = "torch", str(exc)
    module = importlib.import_module(f"fuseci.harness.arrays.device_{asked}")
    try:
        module.load()
    except HarnessError as exc:
        if asked == "cpu":
            raise HarnessError(f"{exc}; install PyTorch (a CPU build will do)") from None
        if not no_cupy:
            raise HarnessError(f"{exc}; install fuseci with the torch extra, or unset {RUNTIME_ENV}") from None
        raise HarnessError(
            f"neither CuPy ({no_cupy}) nor PyTorch with CUDA ({exc}) can be imported; "
            "install fuseci with the cuda12 or cuda13 extra (CuPy), or the torch extra"
        ) from None
    return module


def runtime_name() -> str:
    """``cupy`` or ``torch``."""
    return str(runtime().NAME)


def start_driver() -> None:
    """Start the CUDA driver and read the device, creating no context.

    Raises:
        HarnessError: CUDA cannot start (no device, a driver too old, a lost GPU).
    """
    runtime().start_driver()


def device_count() -> int:
    """GPUs CUDA sees.

    Raises:
        Exception: whatever the runtime raises when the driver is absent or too old (the probe reports it).
    """
    return int(runtime().device_count())


def open_context() -> None:
    """Create this process's CUDA context.

    Raises:
        HarnessError: the context cannot be created.
    """
    runtime().open_context()


def device_facts() -> dict[str, Any]:
    """The current device's facts (name, compute capability, L2, CUDA versions...) and the runtime."""
    return {**runtime().device_facts(), "runtime": runtime_name()}


def stream_handle() -> int:
    """The CUDA stream fuseci times and synchronises (0: the legacy default stream)."""
    return int(runtime().stream_handle())


def synchronize() -> None:
    """Wait for everything queued on :func:`stream_handle`."""
    runtime().synchronize()


def context_alive() -> bool:
    """False after a sticky CUDA error (illegal address, kernel fault): nothing works after one."""
    return bool(runtime().context_alive())


def free_pool() -> None:
    """Give the runtime's cached device memory back to the driver."""
    runtime().free_pool()


def poisoned_pool(byte: int) -> AbstractContextManager[None]:
    """Fill every allocation the runtime's own pool hands out with ``byte`` while the block runs."""
    return runtime().poisoned_pool(byte)


def memset(address: int, byte: int, size: int) -> None:
    """Fill ``size`` bytes of device memory at ``address`` with ``byte``, on :func:`stream_handle`."""
    runtime().memset(address, byte, size)


def nvtx_range(name: str) -> AbstractContextManager[None]:
    """An NVTX push/pop range (ncu's ``--nvtx-include`` selects the kernels inside it)."""
    return runtime().nvtx_range(name)


def empty(shape: tuple[int, ...], storage: str, what: str = "an array") -> Any:
    """An uninitialised device array of NumPy dtype ``storage``.

    Raises:
        DeviceMemoryError: it does not fit in device memory.
    """
    return runtime().empty(shape, storage, what)


def upload(host: Any) -> Any:
    """A NumPy array copied to the device (a copy, no kernel)."""
    return runtime().upload(host)


def copy(dst: Any, src: Any) -> None:
    """Device-to-device copy, on :func:`stream_handle`."""
    runtime().copy(dst, src)


def Event() -> Any:
    """A CUDA event on :func:`stream_handle`: ``record()``, ``ms_since(start)``."""
    return runtime().Event()


def spinner() -> Any:
    """A function queuing one kernel that spins ``ns`` nanoseconds of the GPU's clock."""
    return runtime().spinner()


def affine(x: Any, a: float, b: float) -> Any:
    """``a * x + b`` in one kernel (``fuseci doctor``'s probe)."""
    return runtime().affine(x, a, b)
