"""History: each fusion gain across many runs, and where it changed level (pure: run files in, series and change
points out). A *series* is one gain of one fused variant of one case of one suite on one GPU model, oldest run
first; its *change points* are the runs at which a new level starts, found by a penalised least-squares search on
the series in units of its gate's tolerance (docs/REPORTS.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fuseci.config import names, quantities
from fuseci.config.model import UNFUSED, Suite

if TYPE_CHECKING:
    from fuseci.frames.run_file import Run

#: The gains a history follows: those the reports show, then the other gateable ones when gated.
SHOWN: tuple[str, ...] = (names.DRAM_BYTES, names.DURATION, names.EVENT_TIME, names.LAUNCHES)

#: Cost of one change point, in squared tolerances.
PENALTY = 2.0
#: Scale of an ``exact`` gate: a launch-count gain moves by far more when it moves at all.
MIN_SCALE = 0.01
#: Scale of a gain that has no gate (or whose suite file could not be read).
UNGATED_SCALE = 0.05
#: Each scale of the seeded intervals is this much shorter than the one above it.
_DECAY = math.sqrt(0.5)


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One run of the history."""

    path: str
    """The run file."""
    created: datetime
    """When it was saved (UTC)."""
    commit: str | None
    """The commit it measured, when known."""

    @property
    def short_commit(self) -> str:
        """The commit's first 7 characters, or ``no commit``."""
        return self.commit[:7] if self.commit else "no commit"


@dataclass(frozen=True, slots=True)
class Segment:
    """Runs between two change points."""

    start: int
    """Index of its first run in the series."""
    stop: int
    """Index after its last run."""
    level: float
    """Median gain of its runs."""


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """A run at which a gain took a new level."""

    index: int
    """Index of that run in the series."""
    run: RunPoint
    """That run."""
    before: float
    """Level of the runs before it (median of its segment)."""
    after: float
    """Level from it on (median of its segment)."""
    beyond_tolerance: bool
    """True when the step is larger than the gate's tolerance."""

    @property
    def change(self) -> float:
        """Relative step (-0.4 is 40% lower); infinite when the ratio is beyond float range."""
        return self.after / self.before - 1 if self.before else math.inf

    @property
    def rose(self) -> bool:
        """True when the gain rose (higher is better)."""
        return self.after > self.before


@dataclass(frozen=True, slots=True)
class Series:
    """One gain of one fused variant across runs."""

    gpu: str
    """GPU model the runs measured."""
    suite: str
    """Suite id."""
    case: str
    """Case id."""
    variant: str
    """Fused variant id."""
    quantity: str
    """The gained quantity (ncu metric name, ``launches``, ``event_time``)."""
    runs: tuple[RunPoint, ...]
    """Runs that measured it, oldest first."""
    values: tuple[float, ...]
    """The gain in each of them."""
    tolerance: float | None
    """The gate's relative tolerance (0 for ``exact``); None when ungated or unknown."""
    tolerance_text: str
    """The gate as written (``±3%``), or ``not gated``."""
    segments: tuple[Segment, ...]
    """Levels between change points, in order."""
    changes: tuple[ChangePoint, ...]
    """Change points, in order."""


@dataclass(frozen=True, slots=True)
class History:
    """Every series of a set of runs."""

    runs: tuple[RunPoint, ...]
    """The runs, oldest first."""
    series: tuple[Series, ...]
    """By GPU, suite, case (in suite order), variant and quantity."""
    notes: tuple[str, ...] = ()
    """What limited the history (a suite file that could not be read, so no tolerance)."""


def _time(created: str) -> datetime:
    try:
        return datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:  # a hand-edited time: keep the run, at the start of time
        return datetime.min.replace(tzinfo=timezone.utc)


def run_point(run: Run) -> RunPoint:
    """The history's view of a run file."""
    return RunPoint(path=str(run.path), created=_time(run.created), commit=run.git_commit)


def _normalised(values: Sequence[float], tolerance: float | None) -> NDArray[np.float64]:
    """``log(value) / log(1 + tolerance)`` less its median: the series in tolerances."""
    scale = math.log1p(UNGATED_SCALE if tolerance is None else max(tolerance, MIN_SCALE))
    units = np.log(np.asarray(values, dtype=np.float64)) / scale
    return units - np.median(units)


class _Sums:
    """Running sums of a series: the least-squares cost of any stretch in O(1)."""

    def __init__(self, y: NDArray[np.float64]) -> None:
        self.s = np.concatenate(([0.0], np.cumsum(y)))
        self.q = np.concatenate(([0.0], np.cumsum(y * y)))

    def cost(self, a: Any, b: Any) -> Any:
        """Sum of squared deviations from their mean of runs ``a`` to ``b - 1`` (arrays broadcast)."""
        d = self.s[b] - self.s[a]
        return np.maximum(self.q[b] - self.q[a] - d * d / (b - a), 0.0)  # never below 0 by rounding


def _seeded_candidates(sums: _Sums, n: int) -> list[int]:
    """Candidate change points by seeded binary segmentation (Kovács et al., 2023): over half-overlapping
    intervals of every scale, the best split of each; the narrowest over the penalty first."""
    lengths = {2}
    length = float(n)
    while length > 2:
        lengths.add(min(math.ceil(length), n))
        length *= _DECAY
    found: list[tuple[int, float, int, int, int]] = []  # (interval length, -saving, split, start, stop)
    for size in sorted(lengths, reverse=True):
        count = max(1, math.ceil(2 * n / size) - 1)
        starts = np.unique(np.floor(np.linspace(0, n - size, count)).astype(np.int64))
        a = starts[:, None]
        b = a + size
        splits = a + np.arange(1, size)[None, :]
        saving = sums.cost(a, b) - sums.cost(a, splits) - sums.cost(splits, b)
        best = np.argmax(saving, axis=1)
        gain = saving[np.arange(len(starts)), best]
        for i in np.flatnonzero(gain > PENALTY):
            found.append((size, -float(gain[i]), int(splits[i, best[i]]), int(starts[i]), int(starts[i] + size)))
    chosen: list[int] = []
    for _, _, split, start, stop in sorted(found):  # narrowest first, then the largest saving
        if not any(start < c < stop for c in chosen):  # its interval holds no accepted change yet
            chosen.append(split)
    return sorted(set(chosen))


def _optimal(sums: _Sums, n: int, candidates: Sequence[int]) -> list[int]:
    """The least-cost set of change points among ``candidates`` (PELT's recursion and pruning)."""
    points = np.asarray([0, *candidates, n], dtype=np.int64)
    best = np.full(len(points), np.inf)
    best[0] = -PENALTY
    previous = np.zeros(len(points), dtype=np.int64)
    alive = np.asarray([0], dtype=np.int64)  # indices into points that may still start the last segment
    for j in range(1, len(points)):
        fit = best[alive] + sums.cost(points[alive], points[j])
        k = int(np.argmin(fit))
        best[j], previous[j] = fit[k] + PENALTY, alive[k]
        alive = np.append(alive[fit <= best[j]], j)  # PELT's pruning: a start that costs more now always will
    out: list[int] = []
    j = int(previous[-1])
    while j > 0:
        out.append(int(points[j]))
        j = int(previous[j])
    return out[::-1]


def change_points(values: Sequence[float], tolerance: float | None) -> list[int]:
    """Indices at which a new level starts; ``values`` must be positive and finite."""
    n = len(values)
    if n < 2:
        return []
    sums = _Sums(_normalised(values, tolerance))
    return _optimal(sums, n, _seeded_candidates(sums, n))


def _median(values: Sequence[float]) -> float:
    """The median, without overflow near the float maximum."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    low, high = ordered[mid - 1], ordered[mid]
    total = low + high
    return float(total / 2 if math.isfinite(total) else low / 2 + high / 2)


def series_of(
    key: tuple[str, str, str, str, str],
    points: Sequence[tuple[RunPoint, float]],
    tolerance: float | None,
    tolerance_text: str,
) -> Series:
    """One series, ``key`` (gpu, suite, case, variant, quantity), from its (run, gain) points, oldest first."""
    runs = tuple(p for p, _ in points)
    values = tuple(v for _, v in points)
    bounds = [0, *change_points(values, tolerance), len(values)]
    segments = tuple(Segment(a, b, _median(values[a:b])) for a, b in itertools.pairwise(bounds))
    slack = UNGATED_SCALE if tolerance is None else max(tolerance, 1e-9)
    changes = tuple(
        ChangePoint(
            index=after.start,
            run=runs[after.start],
            before=before.level,
            after=after.level,
            beyond_tolerance=abs(after.level / before.level - 1) > slack if before.level else True,
        )
        for before, after in itertools.pairwise(segments)
    )
    gpu, suite, case, variant, quantity = key
    return Series(gpu, suite, case, variant, quantity, runs, values, tolerance, tolerance_text, segments, changes)


def _gates(suite: Suite | None, case: str) -> Mapping[str, tuple[float | None, str]]:
    found = next((c for c in suite.cases if c.id == case), None) if suite is not None else None
    return {q: (t.relative, str(t)) for q, t in found.gates.items()} if found is not None else {}


def _order(suite: Suite | None, case: str) -> int:
    ids = [c.id for c in suite.cases] if suite is not None else []
    return ids.index(case) if case in ids else len(ids)


@dataclass(frozen=True, slots=True)
class RunGains:
    """One run file as a history needs it: the run, and the gains of every fused variant."""

    point: RunPoint
    """The run."""
    gains: Mapping[tuple[str, str, str, str], Mapping[str, float]]
    """Per (suite, GPU, case, fused variant), its positive finite gains by quantity."""
    suite_paths: Mapping[str, str]
    """The suite file of each suite id, as the run recorded it."""


def gains_of(run: Run) -> RunGains:
    """The history's view of a run file: its gains, without its frames."""
    found: dict[tuple[str, str, str, str], dict[str, float]] = {}
    gained = quantities.gains()
    for sid, results in run.suites.items():
        gpu = str(results.env.get("gpu_name") or run.gpu_name or "unknown GPU")
        for row in results.gain_rows:  # the rows, not their frame: it is never built here
            if row[names.VARIANT] == UNFUSED:
                continue
            gains = {q: v for q in gained if 0 < (v := float(row.get(q, math.nan))) < math.inf}
            found[(sid, gpu, str(row[names.CASE]), str(row[names.VARIANT]))] = gains
    return RunGains(run_point(run), found, dict(run.suite_paths))


def build(runs: Sequence[RunGains], suites: Mapping[str, Suite | None], notes: Sequence[str] = ()) -> History:
    """The history of ``runs`` (:func:`gains_of`, any order) of ``suites``, whose gates give the tolerances (None:
    ungated)."""
    ordered = sorted(runs, key=lambda r: (r.point.created, r.point.path))
    points: dict[tuple[str, str, str, str, str], list[tuple[RunPoint, float]]] = {}
    for run in ordered:
        for (sid, gpu, case, variant), gains in run.gains.items():
            if sid not in suites:
                continue
            for q, value in gains.items():
                points.setdefault((gpu, sid, case, variant, q), []).append((run.point, value))
    series: list[Series] = []
    for key, found in points.items():
        gpu, sid, case, _, q = key
        gates = _gates(suites.get(sid), case)
        if q not in SHOWN and q not in gates:
            continue
        relative, text = gates.get(q, (None, "not gated"))
        series.append(series_of(key, found, relative, text))

    gained = quantities.gains()

    def rank(s: Series) -> tuple[str, str, int, str, int]:
        return (s.gpu, s.suite, _order(suites.get(s.suite), s.case), s.variant, gained.index(s.quantity))

    return History(runs=tuple(r.point for r in ordered), series=tuple(sorted(series, key=rank)), notes=tuple(notes))
