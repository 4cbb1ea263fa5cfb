"""A CuPy variant for ``fuseci check --execute``'s tests (tests/test_check_execute.py): it takes
CuPy arrays, which need a GPU, so the CPU run says it cannot run here."""

from __future__ import annotations

from typing import Any

try:
    import cupy
except ImportError:  # no CuPy on a CPU-only machine: the variant is not called there
    cupy = None


def rms_cupy(x: Any, weight: Any) -> Any:
    """RMSNorm of each row of ``x``, scaled by ``weight``, in CuPy."""
    return x * cupy.reciprocal(cupy.sqrt(cupy.mean(x * x, axis=-1, keepdims=True) + 1e-6)) * weight
