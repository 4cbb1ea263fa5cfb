"""History: each fusion gain across many runs, and where it changed level. Pure: run files in,
series and change points out; nothing is read, written or printed here.

A *series* is one gain (a quantity of :data:`fuseci.config.names.GAIN_GATEABLE` that the case
gates or shows) of one fused variant of one case of one suite on one GPU model, over the runs
that measured it, oldest first. Its *change points* are the runs at which a new level starts.

They are found by `ruptures <https://centre-borelli.github.io/ruptures-docs/>`_' PELT search
(exact, linear in the number of runs for this cost) with a least-squares cost on the logarithm of
the gain divided by ``log(1 + tolerance)``, the gate's tolerance of the quantity: one unit is
one tolerance, whatever the gain's magnitude and whether it rose or fell. The penalty per change
point is :data:`PENALTY` units squared: a lasting shift of about a tolerance (or a single run a
tolerance and a half away) is a change; noise well inside the gate is not. The default gates sit
at 2–9× the largest change seen in repeated runs (docs/BENCHMARKS.md, "Noise study" and
"Sensitivity"), so the same scale keeps noise out here. ``exact`` gates (launch counts) use a scale of :data:`MIN_SCALE`; ungated gains
:data:`UNGATED_SCALE`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from fuseci.config import names
from fuseci.config.model import UNFUSED, Suite

if TYPE_CHECKING:
    from fuseci.store.runs import Run

#: The gains a history follows: those the reports show, then the other gateable ones when gated.
SHOWN: tuple[str, ...] = (names.DRAM_BYTES, names.DURATION, names.EVENT_TIME, names.LAUNCHES)

#: Cost of one change point, in squared tolerances (see the module docstring).
PENALTY = 2.0
#: Scale of an ``exact`` gate: a launch-count gain moves by far more when it moves at all.
MIN_SCALE = 0.01
#: Scale of a gain that has no gate (or whose suite file could not be read).
UNGATED_SCALE = 0.05


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
    """True when the step is larger than the gate's tolerance: a gate against the old level
    would have tripped."""

    @property
    def change(self) -> float:
        """Relative step (-0.4 is 40% lower)."""
        return self.after / self.before - 1 if self.before else math.inf


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


def change_points(values: Sequence[float], tolerance: float | None) -> list[int]:
    """Indices at which a new level starts, found by ruptures' PELT (see the module docstring).

    Values must be positive and finite.
    """
    if len(values) < 2:
        return []
    import numpy as np
    import ruptures

    scale = math.log1p(UNGATED_SCALE if tolerance is None else max(tolerance, MIN_SCALE))
    signal = (np.log(np.asarray(values, dtype=float)) / scale).reshape(-1, 1)
    ends = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(signal).predict(pen=PENALTY)
    return [int(e) for e in ends[:-1]]


def _segments(values: Sequence[float], starts: Sequence[int]) -> tuple[Segment, ...]:
    bounds = [0, *starts, len(values)]
    return tuple(Segment(a, b, float(statistics.median(values[a:b]))) for a, b in itertools.pairwise(bounds))


def series_of(
    key: tuple[str, str, str, str, str],
    points: Sequence[tuple[RunPoint, float]],
    tolerance: float | None,
    tolerance_text: str,
) -> Series:
    """One series from its (run, gain) points, oldest first, with its change points.

    ``key`` is (gpu, suite, case, variant, quantity).
    """
    runs = tuple(p for p, _ in points)
    values = tuple(v for _, v in points)
    starts = change_points(values, tolerance)
    segments = _segments(values, starts)
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
    if found is None:
        return {}
    return {q: (t.relative, str(t)) for q, t in found.gates.items()}


def _order(suite: Suite | None, case: str) -> int:
    ids = [c.id for c in suite.cases] if suite is not None else []
    return ids.index(case) if case in ids else len(ids)


def build(runs: Sequence[Run], suites: Mapping[str, Suite | None], notes: Sequence[str] = ()) -> History:
    """The history of ``runs`` (any order; sorted here by time, then file name).

    Args:
        runs: Run files read back.
        suites: The suite of each suite id whose gates give the tolerances (None when its file
            could not be read: its gains are then followed as ungated). Suites of the runs that
            are not keys here are left out.
        notes: Carried into the history as they are.
    """
    ordered = sorted(runs, key=lambda r: (run_point(r).created, str(r.path)))
    points: dict[tuple[str, str, str, str, str], list[tuple[RunPoint, float]]] = {}
    for run in ordered:
        point = run_point(run)
        for sid, results in run.suites.items():
            if sid not in suites:
                continue
            gpu = str(results.env.get("gpu_name") or run.gpu_name or "unknown GPU")
            for case, variant in results.gains[[names.CASE, names.VARIANT]].itertuples(index=False):
                if variant == UNFUSED:
                    continue
                gains = results.gain_values(str(case), str(variant)) or {}
                for q, value in gains.items():
                    if math.isfinite(value) and value > 0:
                        points.setdefault((gpu, sid, str(case), str(variant), q), []).append((point, value))
    series: list[Series] = []
    for key, found in points.items():
        gpu, sid, case, _, q = key
        gates = _gates(suites.get(sid), case)
        if q not in SHOWN and q not in gates:
            continue
        relative, text = gates.get(q, (None, "not gated"))
        series.append(series_of(key, found, relative, text))

    def rank(s: Series) -> tuple[str, str, int, str, int]:
        return (s.gpu, s.suite, _order(suites.get(s.suite), s.case), s.variant, names.GAIN_GATEABLE.index(s.quantity))

    return History(
        runs=tuple(run_point(r) for r in ordered), series=tuple(sorted(series, key=rank)), notes=tuple(notes)
    )
