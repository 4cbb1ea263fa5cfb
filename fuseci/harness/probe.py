"""``--probe`` (``fuseci doctor``): CuPy and the GPU checked with one tiny kernel in its NVTX range."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from fuseci.config import names
from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, HarnessError
from fuseci.files.atomic import atomic_write_text
from fuseci.harness import arrays
from fuseci.harness.case_runner import first_lines
from fuseci.harness.env import collect_env
from fuseci.records.harness import ProbeRecord

#: ``--probe`` (``fuseci doctor``): the suite, case and variant ids of its kernel's NVTX range.
PROBE_IDS = ("doctor", "probe", "kernel")
#: ``--probe``: float32 elements of its input (16 MiB, read from DRAM once ncu has flushed the caches).
PROBE_ELEMENTS = 1 << 22


class ProbeFailure:
    """Why ``--probe`` failed, as its record says (strings, so the JSON stays readable)."""

    NO_CUPY = "no-cupy"
    """Neither runtime can be imported (CuPy, or PyTorch with CUDA where CuPy is not installed)."""
    NO_DEVICE = "no-device"
    """CuPy sees no CUDA device, or cannot ask (no driver, a driver too old for CuPy's CUDA)."""
    CUDA = "cuda-error"
    """Reading the device or running the kernel raised."""
    WRONG = "wrong-result"
    """The kernel ran but computed a wrong result."""


def probe(record_path: Path) -> int:
    """Check CuPy and the GPU with one kernel, ``y = a * x + b`` on fresh random data, inside the NVTX range of
    :data:`PROBE_IDS`; the record says what was found or, as a :class:`ProbeFailure`, what failed. Returns 0 when the
    kernel computed the right result, 1 when it computed a wrong one, 3 when CuPy, the device or the launch failed."""
    import numpy as np

    facts: dict[str, Any] = {"range": names.range_name(*PROBE_IDS), "elements": PROBE_ELEMENTS}

    def finish(code: int, error: str = "", message: str = "") -> int:
        record = ProbeRecord(ok=code == 0, error=error, message=message, **facts)
        atomic_write_text(record_path, json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
        if message:
            print(f"fuseci-harness: probe failed ({error}): {message}", file=sys.stderr)
        return code

    try:
        facts["runtime"] = arrays.runtime_name()
    except HarnessError as exc:
        return finish(EXIT_SETUP, ProbeFailure.NO_CUPY, str(exc))
    try:
        facts["device_count"] = count = arrays.device_count()
    except Exception as exc:  # CUDARuntimeError: no driver, or a driver older than CuPy's CUDA
        return finish(EXIT_SETUP, ProbeFailure.NO_DEVICE, f"{type(exc).__name__}: {exc}")
    if count < 1:
        return finish(EXIT_SETUP, ProbeFailure.NO_DEVICE, "CUDA reports no device")
    try:
        facts["env"] = collect_env()
        facts["seed"] = seed = int.from_bytes(os.urandom(8), "little") >> 1
        host = np.random.default_rng(seed).standard_normal(PROBE_ELEMENTS, dtype=np.float32)
        a, b = np.float32(0.75), np.float32(-0.5)
        x = arrays.upload(host)  # a copy, not a kernel: the range below holds the probe's kernel only
        arrays.synchronize()
        with arrays.nvtx_range(facts["range"]):
            y = arrays.affine(x, float(a), float(b))
            arrays.synchronize()
        err = np.abs(arrays.host_float64(arrays.from_array(y)) - (a * host.astype(np.float64) + b))
        max_err = float(err.max())
        facts["max_abs_err"] = max_err if math.isfinite(max_err) else None  # JSON has no NaN
    except Exception as exc:  # CuPy raises CUDA, NVRTC and driver errors of many types
        return finish(EXIT_SETUP, ProbeFailure.CUDA, f"{type(exc).__name__}: {first_lines(str(exc))}")
    if not max_err <= 1e-5:  # also catches NaN
        return finish(
            EXIT_REGRESSION,
            ProbeFailure.WRONG,
            f"y = a * x + b is off by up to {max_err:g} on {PROBE_ELEMENTS} elements",
        )
    return finish(0)
