"""A variant's kernel inventory entry: a plain value, so that baselines, verdicts and reports can hold one without
pandas."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from fuseci import validation as v

#: What :attr:`KernelLaunch.shape` holds after the name, as messages call it.
_SHAPE_NAMES = ("grid", "block", "registers", "shared memory")
#: The counted quantities of one kernel launch, by quantity name.
Counts = Annotated[dict[v.QuantityName, v.Amount], Field(max_length=100)]


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
    counts: Counts = field(default_factory=dict)
    """Its counted quantities (:func:`fuseci.config.quantities.counted`) by name; empty in files from before."""
    spread: Counts = field(default_factory=dict)
    """How far each counted quantity moved over its profiled passes (max - min), by name; empty after one."""

    @property
    def shape(self) -> tuple[str, int, int, int, int]:
        """What makes it the same build of the same kernel as another launch: its name and launch
        shape (grid, block, registers, shared memory)."""
        return (self.name, self.grid, self.block, self.registers, self.shared_mem)

    def __hash__(self) -> int:
        return hash((self.shape, tuple(sorted(self.counts.items())), tuple(sorted(self.spread.items()))))


def same_build(a: Sequence[KernelLaunch], b: Sequence[KernelLaunch]) -> bool:
    """True when two inventories launch the same kernels, by name and launch shape, in order."""
    return [k.shape for k in a] == [k.shape for k in b]


def spread_of(kernels: Sequence[KernelLaunch], quantity: str) -> float | None:
    """How far ``quantity`` of a variant moved over its profiled passes, as the sum of its
    kernels' spreads; None when a kernel was profiled once (nothing is known)."""
    if not kernels or any(quantity not in k.spread for k in kernels):
        return None
    return float(sum(k.spread[quantity] for k in kernels))


def kernel_names(kernels: Sequence[KernelLaunch]) -> str:
    """The kernels' names joined by `` + `` (``nothing`` for none)."""
    return " + ".join(k.name for k in kernels) or "nothing"


def inventory_diff(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch]) -> list[str]:
    """How a variant's ordered kernels changed, as phrases: splits, merges, new and vanished
    kernels, renames, and changed launch shapes of kernels that stayed."""
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=[k.name for k in old], b=[k.name for k in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        a, b = old[i1:i2], new[j1:j2]
        match op:
            case "equal":
                for ka, kb in zip(a, b, strict=True):
                    changed = zip(_SHAPE_NAMES, ka.shape[1:], kb.shape[1:], strict=True)
                    shape = [f"{what} {x} -> {y}" for what, x, y in changed if x != y]
                    if shape:
                        out.append(f"{ka.name}: {', '.join(shape)}")
            case "insert":
                same = [k for k in b if any(k.name == o.name for o in old)]
                what = "extra launch" if len(same) == len(b) else "new kernel"
                out.append(f"{what}{'s' if len(b) > 1 else ''}: {kernel_names(b)}")
            case "delete":
                out.append(f"vanished kernel{'s' if len(a) > 1 else ''}: {kernel_names(a)}")
            case "replace" if len(b) > len(a):
                out.append(f"split: {kernel_names(a)} became {kernel_names(b)}")
            case "replace" if len(b) < len(a):
                out.append(f"merged: {kernel_names(a)} became {kernel_names(b)}")
            case _:
                out.append(f"replaced: {kernel_names(a)} by {kernel_names(b)}")
    return out
