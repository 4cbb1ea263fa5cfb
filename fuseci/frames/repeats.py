"""Launches ncu left out as repeats of an earlier launch's configuration (``repeats: once``), counted back in: for each
``[N, M, R]`` recorded (launch N, in graph run R, repeats launch M), a copy of M's kernels is put where N ran, its
range renamed ``fuseci-launch:R:N``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fuseci.config import names
from fuseci.records.fusion import Repeats


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel of a variant's pass: its frame row and its NVTX range stack."""

    row: dict[str, Any]
    stack: tuple[str, ...]
    repeat: bool = False
    """A copy standing for a launch ncu left out."""


def expand(kernels: Sequence[Kernel], repeats: Repeats) -> list[Kernel]:
    """A variant's pass with each left-out launch counted back in, in launch order: each copy
    where its launch ran. A launch whose original launched no kernel adds none."""
    keyed: list[tuple[tuple[int, int], Kernel]] = []
    by_launch: dict[int, list[tuple[int, Kernel, int]]] = {}
    last = -1
    for i, k in enumerate(kernels):
        mark = names.find_launch_range(k.stack)
        if mark is not None:
            last = mark[2]
            by_launch.setdefault(last, []).append((i, k, mark[0]))
        keyed.append(((last, i), k))
    for launch, (earlier, run) in repeats.items():
        for i, k, at in by_launch.get(earlier, ()):
            stack = (*k.stack[:at], names.launch_range(run, launch), *k.stack[at + 1 :])
            keyed.append(((launch, i), Kernel(dict(k.row), stack, repeat=True)))
    keyed.sort(key=lambda item: item[0])
    return [k for _, k in keyed]
