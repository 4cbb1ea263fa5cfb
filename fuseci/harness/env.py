"""The environment fingerprint fields the harness can see from inside the CUDA context."""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

from fuseci import __version__
from fuseci.errors import HarnessError


def collect_env() -> dict[str, Any]:
    """The environment fingerprint fields the harness can see."""
    import cupy as cp
    import numpy as np

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {
        "gpu_name": name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "driver_version": _driver_version(),
        "cuda_driver_api": _cuda_version(cp.cuda.runtime.driverGetVersion()),
        "cuda_runtime": _cuda_version(cp.cuda.runtime.runtimeGetVersion()),
        "cupy_version": cp.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "fuseci_version": __version__,
    }


def start_driver() -> None:
    """Start the CUDA driver and read the device, before this process's turn on the GPU: no
    context is created, so nothing runs on the GPU, and the driver's start (ncu sets itself up
    in it) costs no other process a wait.

    Raises:
        HarnessError: CUDA cannot start (no device, a driver too old for this CuPy, a lost GPU).
    """
    import cupy as cp

    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise HarnessError("CUDA sees no GPU; `fuseci doctor` checks the set-up")
        cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise HarnessError(f"CUDA cannot start: {exc}; `fuseci doctor` checks the set-up") from None


def open_context() -> None:
    """Create this process's CUDA context, in its turn on the GPU: the context's set-up moves
    data on the device (under ncu, a few megabytes), which the DRAM counters of another
    process's profiled kernel would count.

    Raises:
        HarnessError: the context cannot be created.
    """
    import cupy as cp

    try:
        cp.cuda.runtime.free(0)  # cudaFree(0): the customary way to create the context, and no more
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise HarnessError(
            f"CUDA cannot create a context on this GPU: {exc}; `fuseci doctor` checks the set-up"
        ) from None


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _driver_version() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else "unknown"
