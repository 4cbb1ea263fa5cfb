"""Launches ncu left out because they repeat an earlier launch's configuration (a ledger
variant's ``repeats: once``, :mod:`fuseci.harness.arrays.launch_ranges`), counted back in.

The harness records, for each such variant and pass, ``[N, M, R]``: launch N, in graph run R,
repeats launch M. ncu profiled M's kernels inside its ``fuseci-launch:R':M`` range and none of
N's. :func:`expand` puts a copy of each of M's kernels where N ran, its range renamed
``fuseci-launch:R:N``, so that a variant's launches, bytes and time, and each ledger row's, are
those of every launch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fuseci.config import names
from fuseci.errors import ReportError
from fuseci.wording import shown

#: Repeats one variant's pass may record (a forward of a million launches is far past any model).
MAX_REPEATS = 1_000_000

#: launch → (the earlier launch it repeats, its graph run).
Repeats = Mapping[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel of a variant's pass: its frame row and its NVTX range stack."""

    row: dict[str, Any]
    stack: tuple[str, ...]
    repeat: bool = False
    """A copy standing for a launch ncu left out."""


def _pairs(raw: Any, where: str) -> dict[int, tuple[int, int]]:
    if not isinstance(raw, list) or len(raw) > MAX_REPEATS:
        raise ValueError(f"{where} is {shown(raw)}, not a list of [launch, earlier launch, graph run]")
    out: dict[int, tuple[int, int]] = {}
    for i, item in enumerate(raw):
        ok = (
            isinstance(item, list)
            and len(item) == 3
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 31 for x in item)
        )
        if not ok or item[1] >= item[0] or item[0] in out:
            raise ValueError(
                f"{where}[{i}] is {shown(item)}, not [launch, earlier launch, graph run] of a new launch "
                "after the one it repeats"
            )
        out[item[0]] = (item[1], item[2])
    if any(m in out for m, _ in out.values()):
        raise ValueError(f"{where} names a launch that repeats another as the one repeated")
    return out


def recorded(
    provenance: Mapping[str, Mapping[str, Any]], case: str, where: str
) -> dict[tuple[str, str], dict[int, Repeats]]:
    """Each variant's repeats by pass, from a case record's ``provenance`` (the record file is
    ``where``).

    Raises:
        ReportError: a repeats entry that is not what the harness writes, naming its place.
    """
    out: dict[tuple[str, str], dict[int, Repeats]] = {}
    for variant, capture in provenance.items():
        raw = capture.get("repeats") if isinstance(capture, Mapping) else None
        if raw is None:
            continue
        place = f"cases.{case}.provenance.{variant}.repeats"
        try:
            if not isinstance(raw, dict) or not all(isinstance(k, str) and k.isdigit() for k in raw):
                raise ValueError(f"{place} is {shown(raw)}, not the repeats of each pass by its number")
            out[(case, variant)] = {int(k): _pairs(v, f"{place}.{k}") for k, v in raw.items()}
        except ValueError as exc:
            raise ReportError(f"{where}: {exc}; profile the suite again (the harness writes it)") from None
    return out


def expand(kernels: Sequence[Kernel], repeats: Repeats) -> list[Kernel]:
    """A variant's pass with each left-out launch counted back in (see the module docstring), in
    launch order: profiled kernels in ncu's order, each copy where its launch ran (after the
    kernels of the launches before it). A launch whose original launched no kernel adds none."""
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
