"""A variant's kernel inventory entry: a plain value, so that baselines, verdicts and reports
can hold one without pandas."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """One entry of a variant's kernel inventory."""

    name: str
    """Kernel function name as ncu reports it."""
    grid: int
    """Blocks in the grid."""
    block: int
    """Threads per block."""
    registers: int
    """Registers per thread."""
    shared_mem: int = 0
    """Shared memory per block, static and dynamic, bytes (0 where the report does not say)."""
