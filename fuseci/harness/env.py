"""The environment fingerprint fields the harness can see from inside the CUDA context."""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fuseci import __version__
from fuseci.harness import arrays


def collect_env(frameworks: Iterable[arrays.Framework] = ()) -> dict[str, Any]:
    """The device, driver, CUDA and runtime, and the versions of the suite's array frameworks."""
    import numpy as np

    env = {
        **arrays.device_facts(),
        "driver_version": _driver_version(),
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "fuseci_version": __version__,
    }
    for framework in frameworks:
        env.update(framework.versions())
    return env


def _driver_version() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else "unknown"
