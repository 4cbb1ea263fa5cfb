"""The history page's chart: a gain of each variant across runs, its levels between change
points with the gate's tolerance around them, and where a level starts (drawn with
:mod:`fuseci.reporters.chartkit`, as the report's charts are).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from matplotlib.dates import date2num

from fuseci.reporters.chartkit import (
    BEYOND_LEGEND,
    HUGE,
    TINY,
    Chart,
    Margins,
    Range,
    Tone,
    chart,
    figure,
    label,
    median,
    note_beyond,
    positive,
    style,
)


@dataclass(frozen=True, slots=True)
class TrendLine:
    """One gain of one variant across runs."""

    label: str
    """Legend label (the variant id)."""
    times: tuple[datetime, ...]
    """When each run was saved."""
    values: tuple[float, ...]
    """The gain in each run."""
    segments: tuple[tuple[int, int, float], ...]
    """Runs between change points: (first index, index after the last, level)."""
    tolerance: float | None
    """Relative tolerance of the gate, drawn around each segment's level; None when ungated."""
    changes: tuple[tuple[int, bool], ...]
    """Runs at which a new level starts: (index, True when the gain rose there)."""


def _edge(times: Sequence[float], i: int, side: int) -> float:
    """Halfway from run ``i`` to its neighbour on ``side`` (-1 before, +1 after), or the run
    itself at either end: segments tile the time axis, and one of a single run is visible."""
    j = i + side
    if not 0 <= j < len(times):
        return times[i]
    return times[i] + (times[j] - times[i]) / 2


def _trend_range(values: Sequence[float]) -> Range:
    """A gain axis around the runs' median: what lies within ten-fold of it, padded; past
    that, a run is drawn at the edge. The axis stays within :data:`TINY` and :data:`HUGE`,
    however near the ends of float range the runs are (a single run's gain of 1.5e308)."""
    shown = [min(max(v, TINY), HUGE) for v in values]
    centre = median(shown)
    low = max(min(shown), centre / 10)
    high = min(max(shown), centre * 10)
    pad = max((high - low) * 0.25, high * 0.08, centre * 1e-6)
    return Range(max(low - pad, 0.0), high + pad)


#: A series of more runs than this is drawn as a line without a dot per run (the page stays
#: small; the line still shows each run's value).
_DOTS = 200
#: A series of more runs than this is drawn through the lowest and highest run of each stretch
#: of runs, this many points in all: every dip and spike stays visible at a page's width.
_POINTS = 600


def _thinned(count: int, values: Sequence[float]) -> list[int]:
    """The indices of the runs drawn (see :data:`_POINTS`)."""
    if count <= _POINTS:
        return list(range(count))
    size = math.ceil(count / (_POINTS // 2))
    keep: list[int] = []
    for start in range(0, count, size):
        stretch = range(start, min(start + size, count))
        keep += sorted({min(stretch, key=values.__getitem__), max(stretch, key=values.__getitem__)})
    return keep


def trend_chart(lines: Sequence[TrendLine], ticks: Sequence[tuple[datetime, str]], chart_id: str, title: str) -> Chart:
    """Each line's gain per run over time; around each level between change points, the
    tolerance band; a dashed vertical line where a new level starts, red where the gain fell and
    green where it rose (recovered or improved). ``ticks`` label the time axis (a run's time and
    commit)."""
    with style():
        fig = figure(2.3, Margins(left=0.6, right=0.15, top=0.1, bottom=0.5))
        ax = fig.add_subplot()
        ax.margins(x=0.04)
        colours = ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00", "#4e342e"]
        values = [v for line in lines for v in line.values if positive(v)]
        axis = _trend_range(values) if values else Range(0.0, 1.0)
        beyond = any(axis.beyond(v) for v in values)
        for n, line in enumerate(lines):
            colour = colours[n % len(colours)]
            times = [float(t) for t in date2num(list(line.times))]  # one call: per-date calls cost 70 ms a chart
            for start, stop, level in line.segments:
                if line.tolerance is None or not positive(level):
                    continue
                xs = [_edge(times, start, -1), _edge(times, stop - 1, +1)]
                low, high = axis.at(level * (1 - line.tolerance)), axis.at(level * (1 + line.tolerance))
                ax.fill_between(xs, low, high, color=colour, alpha=0.13, lw=0)
                ax.plot(xs, [axis.at(level)] * 2, color=colour, alpha=0.5, linewidth=0.8, linestyle="-")
            kept = _thinned(len(line.values), line.values)
            xs_kept = [times[i] for i in kept]
            drawn = [axis.at(line.values[i]) for i in kept]
            dots = 4 if len(line.values) <= _DOTS else 0
            ax.plot(xs_kept, drawn, marker="o", markersize=dots, color=colour, linewidth=1.2, label=label(line.label))
            far = [(times[i], d) for i, d in zip(kept, drawn, strict=True) if axis.beyond(line.values[i])]
            for marker, side in (("^", axis.high), ("v", axis.low)):
                xs = [t for t, d in far if d == side]
                if xs:
                    ax.plot(xs, [side] * len(xs), linestyle="none", marker=marker, markersize=6, color=colour)
            for i, rose in line.changes:
                tone = Tone.GOOD if rose else Tone.BAD
                ax.axvline(times[i], color=tone.value, linestyle="--", linewidth=1)
                ax.annotate(
                    "rose" if rose else "fell",
                    (times[i], 1.0),
                    xycoords=("data", "axes fraction"),
                    color=tone.value,
                    fontsize=7,
                    ha="left",
                    va="top",
                    xytext=(2, 0),
                    textcoords="offset points",
                )
        if ticks:
            texts = ["\n".join(label(part) for part in text.split("\n")) for _, text in ticks]
            ax.set_xticks([float(t) for t in date2num([t for t, _ in ticks])], texts, fontsize=6.5)
        ax.set_ylim(axis.low, axis.high)
        ax.set_ylabel("gain (unfused ÷ variant)")
        ax.grid(axis="y", color="#eeeeee", linewidth=0.6)
        if len(lines) > 1:
            ax.legend(loc="best", fontsize=7, frameon=False)
        if beyond:
            note_beyond(ax)
        legend = (
            "Line: the gain in each run (x: when it ran, labelled with its commit); shaded: the gate's "
            "tolerance around each level between change points; dashed line: a change point, red where "
            "the gain fell, green where it rose."
        )
        return chart(fig, chart_id, "trend", title, legend + (BEYOND_LEGEND if beyond else ""))
