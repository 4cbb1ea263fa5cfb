"""The charts of the HTML pages: a case's gains against the baseline, its DRAM traffic and bandwidth, its CUDA-event
timings, and a gain of each variant across runs, each from a plain description (the dataclasses below) to a
:class:`~fuseci.reporters.chartkit.Chart`; how charts are drawn is :mod:`fuseci.reporters.chartkit`'s."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from matplotlib.axes import Axes
from matplotlib.dates import date2num
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from fuseci.reporters.chartkit import (
    BAND,
    BASELINE,
    BEYOND_LEGEND,
    HUGE,
    REFERENCE,
    TINY,
    Chart,
    Margins,
    Range,
    Tone,
    chart,
    figure,
    finite,
    gbs,
    label,
    linear_range,
    log_range,
    mb,
    median,
    note_beyond,
    positive,
    ratio,
    right_labels,
    share,
    style,
    text_width,
)
from fuseci.reporters.text import relative_change


@dataclass(frozen=True, slots=True)
class GainRow:
    """One gain of one fused variant, against its baseline."""

    label: str
    """Row label (``fused · DRAM bytes``)."""
    current: float | None
    """The gain now; None when not measured."""
    baseline: float | None
    """The baseline's gain; None without one."""
    band: tuple[float, float] | None
    """The tolerance band around the baseline (low, high); None when not gated or unknown."""
    bound: float | None
    """An expectation's bound on the gain (``>= 2x``: 2.0); None without one."""
    bound_text: str
    """The expectation as written (``>= 2x``)."""
    tone: Tone
    """Colour of the current value: its verdict."""


@dataclass(frozen=True, slots=True)
class FusionBar:
    """One variant's DRAM traffic and bandwidth, now and in its baseline."""

    variant: str
    """Variant id."""
    dram_bytes: float | None
    """DRAM bytes read and written."""
    baseline_bytes: float | None
    """The same in the baseline."""
    bandwidth: float | None
    """Achieved DRAM bandwidth, bytes/s (bytes over the summed kernel duration)."""
    baseline_bandwidth: float | None
    """The same in the baseline."""
    tone: Tone
    """Colour of the DRAM-bytes bar: the verdict of the variant's checks on its DRAM bytes (its
    allowance over the minimum and its bytes gains). Bandwidth is judged by no check, so its
    bar is neutral whatever the variant's other verdicts."""


@dataclass(frozen=True, slots=True)
class Spread:
    """Timed calls of one variant (nanoseconds); quartiles are None where not recorded."""

    median: float
    """Median call."""
    minimum: float | None
    """Fastest call."""
    maximum: float | None
    """Slowest call."""
    q1: float | None
    """25th percentile."""
    q3: float | None
    """75th percentile."""
    iqr: float | None
    """Interquartile range."""
    calls: int | None
    """Timed calls."""


@dataclass(frozen=True, slots=True)
class TimingRow:
    """One variant's CUDA-event timings now and in its baseline."""

    variant: str
    """Variant id."""
    now: Spread | None
    """This run's."""
    baseline: Spread | None
    """The baseline's."""
    tone: Tone
    """Colour of this run's marks."""


def _gain_axis(ax: Axes, axis: Range) -> None:
    """A log axis labelled ``2x``, ``5x``, ``10x`` (over two decades only ``1x``, ``10x``, ``100x``, kept apart):
    matplotlib's default log labels are formulas, and formulas are off (:data:`_RC`)."""
    wide = math.log10(axis.high) - math.log10(axis.low) > 2.5
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _x(value: float) -> str:
    return f"{value:.3g}x"


def gain_chart(rows: Sequence[GainRow], chart_id: str, title: str) -> Chart:
    """Each gain (log scale) as a dot, its baseline as a black tick inside the shaded tolerance
    band, an arrow from baseline to now, and an expectation's bound as a dashed brown tick."""
    with style():
        names = [label(r.label) for r in rows]
        texts = [_gain_text(r) for r in rows]
        margins = Margins(left=text_width(names) + 0.15, right=text_width(texts, 7) + 0.1)
        fig = figure(0.6 + 0.3 * len(rows), margins)
        ax = fig.add_subplot()
        shown = [v for r in rows for v in (r.current, r.baseline, r.bound, *(r.band or ())) if positive(v)]
        axis = log_range(shown)
        beyond = any(axis.beyond(v) for v in shown)
        for y, row in enumerate(rows):
            if row.band is not None and all(positive(v) for v in row.band):
                low, high = (axis.at(v) for v in row.band)
                if high / low < 1.002:  # "exact": a band too thin to see is drawn as a thick tick
                    ax.plot(
                        [math.sqrt(low) * math.sqrt(high)], [y], marker="|", markersize=14, mew=5, color=BAND, zorder=1
                    )
                else:
                    ax.barh(y, high - low, left=low, height=0.62, color=BAND, zorder=1)
            if positive(row.bound):
                ax.plot([axis.at(row.bound)], [y], marker="|", markersize=12, mew=1.4, color=REFERENCE, zorder=2)
            if positive(row.baseline) and positive(row.current) and row.baseline != row.current:
                ax.annotate(
                    "",
                    xy=(axis.at(row.current), y),
                    xytext=(axis.at(row.baseline), y),
                    arrowprops={"arrowstyle": "->", "color": row.tone.value, "lw": 1.1, "shrinkA": 3, "shrinkB": 4},
                    zorder=3,
                )
            if positive(row.baseline):
                ax.plot([axis.at(row.baseline)], [y], marker="|", markersize=10, mew=1.6, color=BASELINE, zorder=4)
            if positive(row.current):
                far = axis.beyond(row.current)
                marker = (">" if row.current > axis.high else "<") if far else "o"
                ax.plot([axis.at(row.current)], [y], marker=marker, markersize=6, color=row.tone.value, zorder=5)
        ax.set_xlim(axis.low, axis.high)  # first: drawn at one value, the marks alone make no axis
        ax.set_xscale("log")
        _gain_axis(ax, axis)
        ax.set_xlim(axis.low, axis.high)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)), names)
        right_labels(ax, range(len(rows)), texts)
        ax.set_xlabel("gain (unfused ÷ variant), log scale")
        ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        if beyond:
            note_beyond(ax)
        legend = (
            "Dot: the gain now, coloured by its verdict; black tick: the baseline's gain; blue band: "
            "the tolerance around it; brown tick: an expectation's bound."
        )
        return chart(fig, chart_id, "gains", title, legend + (BEYOND_LEGEND if beyond else ""))


def _change(now: float, baseline: float) -> str:
    if now > 0 and baseline > 0:
        return relative_change(now, baseline)
    return f"{(now / baseline - 1) * 100:+.1f}%"


def _gain_text(row: GainRow) -> str:
    now = _x(row.current) if finite(row.current) else "n/a"
    if not finite(row.baseline):
        text = f"{now} (no baseline)"
    elif not finite(row.current) or row.baseline == 0:
        text = f"{now}, baseline {_x(row.baseline)}"
    else:
        text = f"{_x(row.baseline)} → {now} ({_change(row.current, row.baseline)})"
    return f"{text}; expected {row.bound_text}" if row.bound_text else text


def fusion_chart(
    bars: Sequence[FusionBar],
    min_bytes: float | None,
    allowance: float | None,
    peak: float | None,
    chart_id: str,
    title: str,
) -> Chart:
    """Left: each variant's DRAM bytes against the case's minimum (dashed) and the allowance
    over it (dotted). Right: each variant's achieved DRAM bandwidth against the card's peak
    (a bandwidth roofline: a bandwidth-bound kernel that moves the minimum at the peak is as
    fast as it can be), on an axis that ends just past the peak. Baselines are black ticks;
    variants are rows, unfused first, each bar's numbers written under it, clear of the ticks."""
    with style():
        margins = Margins(left=text_width([label(b.variant) for b in bars]) + 0.15, right=0.1, top=0.18)
        fig = figure(0.8 + 0.5 * len(bars), margins, wspace=0.08)
        left, right = fig.subplots(1, 2, sharey=True)
        beyond = _bytes_panel(left, bars, min_bytes, allowance)
        beyond |= _rate_panel(right, bars, peak)
        left.set_yticks(list(range(len(bars))), [label(b.variant) for b in bars])
        left.set_ylim(len(bars) - 0.35, -0.8)
        if beyond:
            note_beyond(right, left=True)
        roof = (
            "dashed: the card's peak DRAM bandwidth, as ncu's percentage of peak implies it"
            if positive(peak)
            else "no peak bandwidth is known for this card (ncu reported no percentage of peak)"
        )
        legend = (
            "Bars: each variant now; black ticks: its baseline. Left: DRAM bytes read and written, coloured by "
            f"the verdict on them; dashed: the case's minimum (every input read once, every output written once); "
            f"dotted: the allowance over it. Right: achieved DRAM bandwidth (bytes over kernel time), which no "
            f"check judges; {roof}."
        )
        return chart(fig, chart_id, "fusion", title, legend + (BEYOND_LEGEND if beyond else ""))


def _bytes_panel(ax: Axes, bars: Sequence[FusionBar], min_bytes: float | None, allowance: float | None) -> bool:
    """The fusion chart's left panel: DRAM bytes against the minimum and the allowance over it;
    True when a value lies beyond the axis."""
    limit = min_bytes * allowance if positive(min_bytes) and positive(allowance) else None
    bytes_axis = linear_range(
        [v for b in bars for v in (b.dram_bytes, b.baseline_bytes) if finite(v)]
        + [v for v in (min_bytes, limit) if positive(v)],
        min_bytes,
        100.0,  # the worst shipped unfused chain moves 12x its minimum
    )
    bytes_texts = [
        f"{mb(b.dram_bytes)}" + (f" · {ratio(b.dram_bytes / min_bytes)} min" if positive(min_bytes) else "")
        if finite(b.dram_bytes)
        else ""
        for b in bars
    ]
    beyond = _fusion_panel(
        ax, bars, [b.dram_bytes for b in bars], [b.baseline_bytes for b in bars], 1e6, bytes_axis, bytes_texts
    )
    if positive(min_bytes):
        _reference(ax, bytes_axis.at(min_bytes) / 1e6, f" dashed: minimum {mb(min_bytes)}", left=True)
        if limit is not None:
            ax.axvline(bytes_axis.at(limit) / 1e6, color=REFERENCE, linestyle=":", linewidth=1)
    ax.set_xlabel("DRAM bytes (MB)")
    return beyond


def _rate_panel(ax: Axes, bars: Sequence[FusionBar], peak: float | None) -> bool:
    """The fusion chart's right panel: achieved DRAM bandwidth against the card's peak; True
    when a value lies beyond the axis."""
    rates = [v for b in bars for v in (b.bandwidth, b.baseline_bandwidth) if finite(v)]
    # A kernel cannot beat the card's peak: the axis ends just past it, and a value past
    # that (a hostile or broken record) is drawn at the edge.
    rate_axis = linear_range([*rates, peak] if positive(peak) else rates, peak, 1.0 if positive(peak) else 100.0)
    rate_texts = [
        gbs(b.bandwidth) + (f" · {share(b.bandwidth / peak)} of peak" if positive(peak) else "")
        if finite(b.bandwidth)
        else ""
        for b in bars
    ]
    beyond = _fusion_panel(
        ax,
        [replace(b, tone=Tone.OK) for b in bars],
        [b.bandwidth for b in bars],
        [b.baseline_bandwidth for b in bars],
        1e9,
        rate_axis,
        rate_texts,
    )
    if positive(peak):
        _reference(ax, rate_axis.at(peak) / 1e9, f"dashed: peak {gbs(peak)} ", left=False)
    ax.set_xlabel("achieved DRAM bandwidth (GB/s)")
    return beyond


def _reference(ax: Axes, x: float, text: str, left: bool) -> None:
    """A dashed reference line at ``x`` and, above the bars, what it is."""
    ax.axvline(x, color=REFERENCE, linestyle="--", linewidth=1)
    at, ha = (0.0, "left") if left else (1.0, "right")
    ax.text(at, -0.6, text, color=REFERENCE, va="center", ha=ha, fontsize=7, transform=ax.get_yaxis_transform())


def _fusion_panel(
    ax: Axes,
    bars: Sequence[FusionBar],
    values: list[float | None],
    baselines: list[float | None],
    unit: float,
    axis: Range,
    texts: list[str],
) -> bool:
    """One panel's bars, baseline ticks and, under each bar, its numbers; True when a value lies
    beyond the axis."""
    beyond = False
    for y, (bar, value, base, text) in enumerate(zip(bars, values, baselines, texts, strict=True)):
        if finite(value):
            ax.barh(y - 0.12, axis.at(value) / unit, height=0.42, color=bar.tone.value, alpha=0.85)
            if axis.beyond(value):
                beyond = True
                ax.plot([axis.at(value) / unit], [y - 0.12], marker=">", markersize=6, color=bar.tone.value)
        if finite(base):
            beyond |= axis.beyond(base)
            ax.plot([axis.at(base) / unit], [y - 0.12], marker="|", markersize=11, mew=1.8, color=BASELINE)
        if text:
            ax.text(0.0, y + 0.12, text, va="top", ha="left", fontsize=7, transform=ax.get_yaxis_transform())
    ax.set_xlim(0, axis.high / unit)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # a wide range's long numbers stay apart
    ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
    return beyond


def _us(ns: float) -> float:
    return ns / 1e3


def _micros(ns: float) -> str:
    """``643.4 µs``; beyond what digits can be read, ``1.5e+305 µs``."""
    us = _us(ns)
    return f"{us:,.1f} µs" if abs(us) < 1e9 else f"{us:.3g} µs"


def timing_chart(rows: Sequence[TimingRow], chart_id: str, title: str) -> Chart:
    """Per variant, its timed calls now and in the baseline: fastest to slowest call (line),
    the interquartile box where quartiles were recorded, the median (tall tick)."""
    with style():
        texts = [_spread_text(s) for r in rows for s in (r.baseline, r.now)]
        margins = Margins(left=0.6, right=text_width(texts, 7) + 0.1, top=0.2)
        fig = figure(0.45 + 0.7 * len(rows), margins, hspace=0.9)
        axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
        beyond = False
        for ax, row in zip(axes, rows, strict=True):
            spreads = [("baseline", row.baseline, Tone.OK.value), ("now", row.now, row.tone.value)]
            known = [s for _, s, _ in spreads if s is not None]
            times = [v for s in known for v in (s.median, s.minimum, s.maximum, s.q1, s.q3) if finite(v)]
            # The slowest call may be far from the median (a first call's warm-up), but not 100-fold
            # the baseline's median (this run's without one), short of a broken or hostile record.
            reference = next((s.median for s in (row.baseline, row.now) if s is not None and positive(s.median)), None)
            axis = linear_range(times, reference, 100.0)
            for y, (_, spread, colour) in enumerate(spreads):
                if spread is None:
                    continue
                low, high, q1, q3 = spread.minimum, spread.maximum, spread.q1, spread.q3
                if finite(low) and finite(high):
                    ax.plot([_us(axis.at(low)), _us(axis.at(high))], [y, y], color=colour, linewidth=1)
                if finite(q1) and finite(q3):
                    left, right = _us(axis.at(q1)), _us(axis.at(q3))
                    ax.barh(y, right - left, left=left, height=0.5, color=colour, alpha=0.35)
                ax.plot([_us(axis.at(spread.median))], [y], marker="|", markersize=14, mew=2.2, color=colour)
                far = [v for v in (spread.median, low, high, q1, q3) if finite(v) and axis.beyond(v)]
                if far:
                    beyond = True
                    ax.plot([_us(axis.high)], [y], marker=">", markersize=6, color=colour, clip_on=False)
            ax.set_xlim(0, _us(axis.high))
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
            ax.set_yticks([0, 1], ["baseline", "now"])
            ax.set_ylim(1.6, -0.6)
            right_labels(ax, [0, 1], [_spread_text(s) for _, s, _ in spreads])
            ax.set_title(label(row.variant), loc="left", pad=2)
            ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        axes[-1].set_xlabel("CUDA-event time per call (µs)")
        if beyond:
            note_beyond(axes[0])
        legend = (
            "Per variant, the calls timed with CUDA events outside ncu: line from the fastest to the "
            "slowest call, box from the 25th to the 75th percentile where recorded, tall tick at the median."
        )
        return chart(fig, chart_id, "timing", title, legend + (BEYOND_LEGEND if beyond else ""))


def _spread_text(spread: Spread | None) -> str:
    if spread is None:
        return "not recorded"
    parts = [f"median {_micros(spread.median)}"]
    if finite(spread.iqr):
        parts.append(f"IQR {_micros(spread.iqr)}")
    if spread.calls:
        parts.append(f"{spread.calls} calls")
    return " · ".join(parts)


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
    """A gain axis around the runs' median: within ten-fold of it, padded (a run past that drawn at the edge), and
    within :data:`TINY` and :data:`HUGE` however near float's ends the runs are (a single run's gain of 1.5e308)."""
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
