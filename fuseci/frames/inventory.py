"""A variant's kernel inventory entry: a plain value, so that baselines, verdicts and reports
can hold one without pandas."""

from __future__ import annotations

from dataclasses import dataclass

from fuseci import validation as v


@dataclass(frozen=True, slots=True)
class KernelLaunch(v.OpenDocument):
    """One entry of a variant's kernel inventory; a results file holds it as it is (an object of
    these members)."""

    name: v.Name
    """Kernel function name as ncu reports it."""
    grid: v.Count
    """Blocks in the grid."""
    block: v.Count
    """Threads per block."""
    registers: v.Count
    """Registers per thread."""
    shared_mem: v.Count = 0
    """Shared memory per block, static and dynamic, bytes (0 where the report does not say)."""
