"""A variant's compiled code against its baseline's, as a cause's evidence: per kernel, what
moves bytes and time that differs (``fuseci_scale_relu_add: LDG.E.128 ×10 → none; registers
32 → 40``), and a note for a kernel whose code could not be read.

The harness record holds each kernel's builds by name (several where autotuning compiled one per
configuration); the build a run launched is the one with the registers ncu saw
(:func:`fuseci.records.sass.pick`). A baseline keeps the one build per kernel name of each case,
so a later run diffs against it without the old cubin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fuseci.frames.inventory import KernelLaunch
from fuseci.records.sass import KernelCode, code_changes, pick

#: Kernels a cause names the compiled code of at most (the rest are counted).
MAX_KERNELS = 8


def code_of(kernels: Sequence[KernelLaunch], builds: Mapping[str, Sequence[KernelCode]]) -> dict[str, KernelCode]:
    """Each launched kernel's compiled code among a record's builds, by name (a kernel whose
    build cannot be told is left out)."""
    out = {}
    for k in kernels:
        if k.name not in out and k.name in builds and (code := pick(builds[k.name], k.registers)) is not None:
            out[k.name] = code
    return out


def evidence(
    kernels: Sequence[KernelLaunch],
    now: Mapping[str, Sequence[KernelCode]],
    before: Mapping[str, KernelCode],
    notes: Mapping[str, str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What differs in the compiled code of a variant's ``kernels`` (this run's builds ``now``,
    the baseline's code ``before``), a line per kernel in launch order, and a note per kernel
    whose code could not be read in this run (``notes``, by kernel name); at most
    :data:`MAX_KERNELS` lines each, the last then counting the rest."""
    code = code_of(kernels, now)
    changes, unread = [], []
    for name in dict.fromkeys(k.name for k in kernels):
        if name in code and name in before and (said := code_changes(before[name], code[name])):
            changes.append(f"{name}: {'; '.join(said)}")
        elif name not in code and name in notes:
            unread.append(f"{name}: compiled code not compared ({notes[name]})")
    return _few(changes, "kernels' code changed too"), _few(unread, "kernels' code could not be read either")


def _few(lines: list[str], more: str) -> tuple[str, ...]:
    if len(lines) <= MAX_KERNELS:
        return tuple(lines)
    return (*lines[: MAX_KERNELS - 1], f"{len(lines) - MAX_KERNELS + 1} more {more}")
