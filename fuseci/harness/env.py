"""The environment fingerprint fields the harness can see from inside the CUDA context."""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

from fuseci import __version__


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


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _driver_version() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else "unknown"
