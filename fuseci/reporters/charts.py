"""The charts of the HTML reports, drawn with matplotlib and inlined as SVG.

Each function takes a small plain description of what to draw (the dataclasses below, built by
the reporters from verdicts or run histories) and returns a :class:`Chart`: SVG markup ready to
be placed in a page. matplotlib draws without a display (no pyplot, no GUI backend) and writes
text as ``<text>`` elements that it escapes itself; every label that comes from data is also
stripped of control characters and shortened here. The SVG keeps nothing that points outside
the page: no XML prologue, no metadata, no namespace URLs, and its element ids are salted with
the chart's id so that several charts in one page never share one.

Any finite value can be drawn. Each axis has a range set by the data's typical size (the
median of what it shows, a case's minimum bytes, the card's peak bandwidth): a value beyond it
(1.5e308 ns, a gain of 1.8e308) is drawn at the axis' edge as a ▸ or ▴ and the chart says so,
while its label still gives the number. Nothing is computed outside float range, so no value
can make an axis infinite or a transform singular.

matplotlib is imported with this module; reporters import it only when they render a page, so
``fuseci --help`` never pays for it.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from typing import Any, TypeGuard, cast

import matplotlib
from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.dates import date2num
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from fuseci.reporters.text import relative_change

#: Drawn for every chart: text stays text (small, searchable, and escaped by matplotlib),
#: ``$`` in a label is a dollar sign rather than the start of a formula, one font whose metrics
#: the browser's sans-serif is close to.
_RC = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#9e9e9e",
    "xtick.color": "#424242",
    "ytick.color": "#424242",
    "path.simplify": True,
}

_WIDTH_IN = 7.2
_MAX_LABEL = 48
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Tone(Enum):
    """How a mark is coloured: by the verdict behind it."""

    BAD = "#c62828"
    """Regressed or wrong."""
    WARN = "#ef6c00"
    """Could not be judged (error, incomparable)."""
    INFO = "#1565c0"
    """New or missing: nothing to judge against."""
    GOOD = "#2e7d32"
    """Improved."""
    OK = "#455a64"
    """Passed, or not judged at all (the unfused reference)."""


_BAND = "#bbdefb"
_BASELINE = "#000000"
_REFERENCE = "#6d4c41"


@dataclass(frozen=True, slots=True)
class Chart:
    """One drawn chart."""

    id: str
    """Its id in the page (letters, digits and ``-``)."""
    kind: str
    """What it shows: ``gains``, ``fusion``, ``timing`` or ``trend``."""
    title: str
    """A caption for people."""
    legend: str
    """What the marks mean."""
    svg: Markup
    """The ``<svg>`` element."""


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


def label(text: str) -> str:
    """``text`` fit for a chart: no control characters, at most :data:`_MAX_LABEL` characters."""
    text = _CONTROL.sub("?", text)
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


def _style(extra: Mapping[str, object] | None = None) -> AbstractContextManager[None]:
    """The charts' matplotlib settings (:data:`_RC`, and ``extra``) while drawing."""
    # matplotlib's stubs type rc_context's keys as a closed set of literals.
    return cast(AbstractContextManager[None], matplotlib.rc_context(cast(Any, {**_RC, **(extra or {})})))


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _positive(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value > 0


#: Marker of a value drawn at the edge of its axis because it lies beyond it.
_BEYOND = "▸"
_BEYOND_NOTE = f"{_BEYOND} beyond this axis: drawn at its edge"
_BEYOND_LEGEND = f" A {_BEYOND} or ▴ marks a value beyond its axis, drawn at the edge; its label gives it."
#: A log axis spans at most this many decades either side of the median of what it shows.
_DECADES = 3.0
#: Largest and smallest magnitudes an axis limit may take: far inside float range, so that
#: no padding, tick or transform of it overflows.
_HUGE = 1e300
_TINY = 1e-300


@dataclass(frozen=True, slots=True)
class _Range:
    """What an axis shows; values beyond it are drawn at its edge (:meth:`at`)."""

    low: float
    high: float

    def at(self, value: float) -> float:
        """Where ``value`` is drawn."""
        return min(max(value, self.low), self.high)

    def beyond(self, value: float) -> bool:
        """Whether ``value`` lies outside the range."""
        return not self.low <= value <= self.high


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _log_range(values: Sequence[float]) -> _Range:
    """Positive ``values`` on a log axis: at most :data:`_DECADES` either side of their median."""
    logs = [math.log10(v) for v in values if _positive(v)] or [0.0]
    centre = _median(logs)
    low = max(min(logs), centre - _DECADES, math.log10(_TINY))
    high = min(max(logs), centre + _DECADES, math.log10(_HUGE))
    pad = math.log10(1.35)
    return _Range(10 ** (low - pad), 10 ** (high + pad))


def _linear_range(values: Sequence[float], reference: float | None, factor: float) -> _Range:
    """Non-negative ``values`` on a linear axis from 0: up to the largest of them, but at most
    ``factor`` × ``reference`` (the median of the values when none is given), padded by 10%."""
    shown = [v for v in values if _finite(v) and v >= 0]
    if not _positive(reference):
        reference = _median([v for v in shown if v > 0]) if any(v > 0 for v in shown) else 1.0
    cap = min(max(reference * factor, _TINY), _HUGE)  # no axis ends at 0 in its units (µs, MB)
    top = min(max(shown, default=cap), cap) or cap
    return _Range(0.0, max(top, _TINY) * 1.1)


def _note_beyond(ax: Axes, left: bool = False) -> None:
    """Say on the chart, above the axes, that some value lies beyond them."""
    x, ha = (0.0, "left") if left else (1.0, "right")
    ax.text(x, 1.0, _BEYOND_NOTE, transform=ax.transAxes, ha=ha, va="bottom", fontsize=6.5, color="#616161")


def _share(value: float) -> str:
    """``84%``; beyond what digits can be read, ``1.7e+301%``."""
    return f"{value:.0%}" if abs(value) < 1e4 else f"{value * 100:.3g}%"


def _times(value: float) -> str:
    """``1.62×``; a ratio beyond what digits can be read, ``2.2e+299×``."""
    return f"{value:.2f}×" if abs(value) < 1e6 else f"{value:.3g}×"


def _svg(fig: Figure, chart_id: str) -> Markup:
    """The figure as an ``<svg>`` element fit to be inlined (see the module docstring)."""
    buf = io.StringIO()
    with _style({"svg.hashsalt": chart_id}), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph missing from the font is drawn as a box: fine
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    # Namespace names are URLs no browser fetches, but a page that holds no URL at all is
    # easier to trust; the HTML parser knows the SVG and xlink namespaces without them.
    text = re.sub(r' xmlns(?::xlink)?="[^"]*"', "", text)
    # matplotlib numbers its element ids per figure (figure_1, axes_1...): prefix them, and the
    # references to them, so that they stay unique in a page of many charts.
    text = re.sub(r'\b(id="|href="#|url\(#)(?=[A-Za-z_])', rf"\g<1>{chart_id}-", text)
    text = text.replace("<svg ", f'<svg class="chart-svg" role="img" aria-labelledby="{chart_id}-title" ', 1)
    return Markup(text.strip())


@dataclass(frozen=True, slots=True)
class _Margins:
    """Room around the axes, in inches. Fixed margins rather than matplotlib's constrained
    layout, which measured every label again and took most of a chart's drawing time."""

    left: float
    right: float
    top: float = 0.12
    bottom: float = 0.42


def _text_width(texts: Sequence[str], size: float = 8) -> float:
    """About how wide the widest of ``texts`` is, in inches, at ``size`` points (DejaVu Sans
    averages 0.6 em per character)."""
    longest = max((len(t) for text in texts for t in text.split("\n")), default=0)
    return longest * size * 0.6 / 72


def _figure(height_in: float, margins: _Margins, wspace: float = 0.2, hspace: float = 0.2) -> Figure:
    with _style():
        fig = Figure(figsize=(_WIDTH_IN, height_in))
    fig.subplots_adjust(
        left=min(margins.left / _WIDTH_IN, 0.45),
        right=max(1 - margins.right / _WIDTH_IN, 0.55),
        top=1 - margins.top / height_in,
        bottom=margins.bottom / height_in,
        wspace=wspace,
        hspace=hspace,
    )
    return fig


def _right_labels(ax: Axes, ys: Sequence[float], texts: Sequence[str]) -> None:
    """``texts`` just right of the axes, level with ``ys``."""
    for y, text in zip(ys, texts, strict=True):
        ax.text(1.01, y, text, transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=7)


def _chart(fig: Figure, chart_id: str, kind: str, title: str, legend: str) -> Chart:
    return Chart(id=chart_id, kind=kind, title=title, legend=legend, svg=_svg(fig, chart_id))


def _gain_axis(ax: Axes, axis: _Range) -> None:
    """A log axis labelled ``2x``, ``5x``, ``10x`` (over more than two decades only ``1x``,
    ``10x``, ``100x``, so that labels stay apart): matplotlib's default log labels are formulas,
    and formulas are off (:data:`_RC`)."""
    wide = math.log10(axis.high) - math.log10(axis.low) > 2.5
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _x(value: float) -> str:
    return f"{value:.3g}x"


def gain_chart(rows: Sequence[GainRow], chart_id: str, title: str) -> Chart:
    """Each gain (log scale) as a dot, its baseline as a black tick inside the shaded tolerance
    band, an arrow from baseline to now, and an expectation's bound as a dashed brown tick."""
    with _style():
        names = [label(r.label) for r in rows]
        texts = [_gain_text(r) for r in rows]
        margins = _Margins(left=_text_width(names) + 0.15, right=_text_width(texts, 7) + 0.1)
        fig = _figure(0.6 + 0.3 * len(rows), margins)
        ax = fig.add_subplot()
        shown = [v for r in rows for v in (r.current, r.baseline, r.bound, *(r.band or ())) if _positive(v)]
        axis = _log_range(shown)
        beyond = any(axis.beyond(v) for v in shown)
        for y, row in enumerate(rows):
            if row.band is not None and all(_positive(v) for v in row.band):
                low, high = (axis.at(v) for v in row.band)
                if high / low < 1.002:  # "exact": a band too thin to see is drawn as a thick tick
                    ax.plot(
                        [math.sqrt(low) * math.sqrt(high)], [y], marker="|", markersize=14, mew=5, color=_BAND, zorder=1
                    )
                else:
                    ax.barh(y, high - low, left=low, height=0.62, color=_BAND, zorder=1)
            if _positive(row.bound):
                ax.plot([axis.at(row.bound)], [y], marker="|", markersize=12, mew=1.4, color=_REFERENCE, zorder=2)
            if _positive(row.baseline) and _positive(row.current) and row.baseline != row.current:
                ax.annotate(
                    "",
                    xy=(axis.at(row.current), y),
                    xytext=(axis.at(row.baseline), y),
                    arrowprops={"arrowstyle": "->", "color": row.tone.value, "lw": 1.1, "shrinkA": 3, "shrinkB": 4},
                    zorder=3,
                )
            if _positive(row.baseline):
                ax.plot([axis.at(row.baseline)], [y], marker="|", markersize=10, mew=1.6, color=_BASELINE, zorder=4)
            if _positive(row.current):
                far = axis.beyond(row.current)
                marker = (">" if row.current > axis.high else "<") if far else "o"
                ax.plot([axis.at(row.current)], [y], marker=marker, markersize=6, color=row.tone.value, zorder=5)
        ax.set_xlim(axis.low, axis.high)  # first: drawn at one value, the marks alone make no axis
        ax.set_xscale("log")
        _gain_axis(ax, axis)
        ax.set_xlim(axis.low, axis.high)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)), names)
        _right_labels(ax, range(len(rows)), texts)
        ax.set_xlabel("gain (unfused ÷ variant), log scale")
        ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        if beyond:
            _note_beyond(ax)
        legend = (
            "Dot: the gain now, coloured by its verdict; black tick: the baseline's gain; blue band: "
            "the tolerance around it; brown tick: an expectation's bound."
        )
        return _chart(fig, chart_id, "gains", title, legend + (_BEYOND_LEGEND if beyond else ""))


def _change(now: float, baseline: float) -> str:
    if now > 0 and baseline > 0:
        return relative_change(now, baseline)
    return f"{(now / baseline - 1) * 100:+.1f}%"


def _gain_text(row: GainRow) -> str:
    now = _x(row.current) if _finite(row.current) else "n/a"
    if not _finite(row.baseline):
        text = f"{now} (no baseline)"
    elif not _finite(row.current) or row.baseline == 0:
        text = f"{now}, baseline {_x(row.baseline)}"
    else:
        text = f"{_x(row.baseline)} → {now} ({_change(row.current, row.baseline)})"
    return f"{text}; expected {row.bound_text}" if row.bound_text else text


def amount(value: float, unit: float, name: str) -> str:
    """``1,301 MB``; beyond what digits can be read, ``1.8e+302 MB``."""
    scaled = value / unit
    return f"{scaled:,.0f} {name}" if abs(scaled) < 1e9 else f"{scaled:.3g} {name}"


def _mb(value: float) -> str:
    return amount(value, 1e6, "MB")


def _gbs(value: float) -> str:
    return amount(value, 1e9, "GB/s")


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
    with _style():
        margins = _Margins(left=_text_width([label(b.variant) for b in bars]) + 0.15, right=0.1, top=0.18)
        fig = _figure(0.8 + 0.5 * len(bars), margins, wspace=0.08)
        left, right = fig.subplots(1, 2, sharey=True)
        limit = min_bytes * allowance if _positive(min_bytes) and _positive(allowance) else None
        bytes_axis = _linear_range(
            [v for b in bars for v in (b.dram_bytes, b.baseline_bytes) if _finite(v)]
            + [v for v in (min_bytes, limit) if _positive(v)],
            min_bytes,
            100.0,  # the worst shipped unfused chain moves 12x its minimum
        )
        bytes_texts = [
            f"{_mb(b.dram_bytes)}" + (f" · {_times(b.dram_bytes / min_bytes)} min" if _positive(min_bytes) else "")
            if _finite(b.dram_bytes)
            else ""
            for b in bars
        ]
        beyond = _fusion_panel(
            left, bars, [b.dram_bytes for b in bars], [b.baseline_bytes for b in bars], 1e6, bytes_axis, bytes_texts
        )
        if _positive(min_bytes):
            left.axvline(bytes_axis.at(min_bytes) / 1e6, color=_REFERENCE, linestyle="--", linewidth=1)
            left.text(
                0.0,
                -0.6,
                f" dashed: minimum {_mb(min_bytes)}",
                color=_REFERENCE,
                va="center",
                ha="left",
                fontsize=7,
                transform=left.get_yaxis_transform(),
            )
            if limit is not None:
                left.axvline(bytes_axis.at(limit) / 1e6, color=_REFERENCE, linestyle=":", linewidth=1)
        left.set_xlabel("DRAM bytes (MB)")
        rates = [v for b in bars for v in (b.bandwidth, b.baseline_bandwidth) if _finite(v)]
        # A kernel cannot beat the card's peak: the axis ends just past it, and a value past
        # that (a hostile or broken record) is drawn at the edge.
        rate_axis = _linear_range([*rates, peak] if _positive(peak) else rates, peak, 1.0 if _positive(peak) else 100.0)
        rate_texts = [
            _gbs(b.bandwidth) + (f" · {_share(b.bandwidth / peak)} of peak" if _positive(peak) else "")
            if _finite(b.bandwidth)
            else ""
            for b in bars
        ]
        beyond |= _fusion_panel(
            right,
            [replace(b, tone=Tone.OK) for b in bars],
            [b.bandwidth for b in bars],
            [b.baseline_bandwidth for b in bars],
            1e9,
            rate_axis,
            rate_texts,
        )
        if _positive(peak):
            right.axvline(rate_axis.at(peak) / 1e9, color=_REFERENCE, linestyle="--", linewidth=1)
            right.text(1.0, -0.6, f"dashed: peak {_gbs(peak)} ", color=_REFERENCE, va="center", ha="right", fontsize=7,
                       transform=right.get_yaxis_transform())  # fmt: skip
        right.set_xlabel("achieved DRAM bandwidth (GB/s)")
        left.set_yticks(list(range(len(bars))), [label(b.variant) for b in bars])
        left.set_ylim(len(bars) - 0.35, -0.8)
        if beyond:
            _note_beyond(right, left=True)
        roof = (
            "dashed: the card's peak DRAM bandwidth, as ncu's percentage of peak implies it"
            if _positive(peak)
            else "no peak bandwidth is known for this card (ncu reported no percentage of peak)"
        )
        legend = (
            "Bars: each variant now; black ticks: its baseline. Left: DRAM bytes read and written, coloured by "
            f"the verdict on them; dashed: the case's minimum (every input read once, every output written once); "
            f"dotted: the allowance over it. Right: achieved DRAM bandwidth (bytes over kernel time), which no "
            f"check judges; {roof}."
        )
        return _chart(fig, chart_id, "fusion", title, legend + (_BEYOND_LEGEND if beyond else ""))


def _fusion_panel(
    ax: Axes,
    bars: Sequence[FusionBar],
    values: list[float | None],
    baselines: list[float | None],
    unit: float,
    axis: _Range,
    texts: list[str],
) -> bool:
    """One panel's bars, baseline ticks and, under each bar, its numbers; True when a value lies
    beyond the axis."""
    beyond = False
    for y, (bar, value, base, text) in enumerate(zip(bars, values, baselines, texts, strict=True)):
        if _finite(value):
            ax.barh(y - 0.12, axis.at(value) / unit, height=0.42, color=bar.tone.value, alpha=0.85)
            if axis.beyond(value):
                beyond = True
                ax.plot([axis.at(value) / unit], [y - 0.12], marker=">", markersize=6, color=bar.tone.value)
        if _finite(base):
            beyond |= axis.beyond(base)
            ax.plot([axis.at(base) / unit], [y - 0.12], marker="|", markersize=11, mew=1.8, color=_BASELINE)
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
    with _style():
        texts = [_spread_text(s) for r in rows for s in (r.baseline, r.now)]
        margins = _Margins(left=0.6, right=_text_width(texts, 7) + 0.1, top=0.2)
        fig = _figure(0.45 + 0.7 * len(rows), margins, hspace=0.9)
        axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
        beyond = False
        for ax, row in zip(axes, rows, strict=True):
            spreads = [("baseline", row.baseline, Tone.OK.value), ("now", row.now, row.tone.value)]
            known = [s for _, s, _ in spreads if s is not None]
            times = [v for s in known for v in (s.median, s.minimum, s.maximum, s.q1, s.q3) if _finite(v)]
            # The slowest call may be far from the median (a first call's warm-up), but not 100-fold
            # the baseline's median (this run's without one), short of a broken or hostile record.
            reference = next((s.median for s in (row.baseline, row.now) if s is not None and _positive(s.median)), None)
            axis = _linear_range(times, reference, 100.0)
            for y, (_, spread, colour) in enumerate(spreads):
                if spread is None:
                    continue
                low, high, q1, q3 = spread.minimum, spread.maximum, spread.q1, spread.q3
                if _finite(low) and _finite(high):
                    ax.plot([_us(axis.at(low)), _us(axis.at(high))], [y, y], color=colour, linewidth=1)
                if _finite(q1) and _finite(q3):
                    q1, q3 = _us(axis.at(q1)), _us(axis.at(q3))
                    ax.barh(y, q3 - q1, left=q1, height=0.5, color=colour, alpha=0.35)
                ax.plot([_us(axis.at(spread.median))], [y], marker="|", markersize=14, mew=2.2, color=colour)
                far = [v for v in (spread.median, low, high, q1, q3) if _finite(v) and axis.beyond(v)]
                if far:
                    beyond = True
                    ax.plot([_us(axis.high)], [y], marker=">", markersize=6, color=colour, clip_on=False)
            ax.set_xlim(0, _us(axis.high))
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
            ax.set_yticks([0, 1], ["baseline", "now"])
            ax.set_ylim(1.6, -0.6)
            _right_labels(ax, [0, 1], [_spread_text(s) for _, s, _ in spreads])
            ax.set_title(label(row.variant), loc="left", pad=2)
            ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        axes[-1].set_xlabel("CUDA-event time per call (µs)")
        if beyond:
            _note_beyond(axes[0])
        legend = (
            "Per variant, the calls timed with CUDA events outside ncu: line from the fastest to the "
            "slowest call, box from the 25th to the 75th percentile where recorded, tall tick at the median."
        )
        return _chart(fig, chart_id, "timing", title, legend + (_BEYOND_LEGEND if beyond else ""))


def _spread_text(spread: Spread | None) -> str:
    if spread is None:
        return "not recorded"
    parts = [f"median {_micros(spread.median)}"]
    if _finite(spread.iqr):
        parts.append(f"IQR {_micros(spread.iqr)}")
    if spread.calls:
        parts.append(f"{spread.calls} calls")
    return " · ".join(parts)


def _edge(times: Sequence[float], i: int, side: int) -> float:
    """Halfway from run ``i`` to its neighbour on ``side`` (-1 before, +1 after), or the run
    itself at either end: segments tile the time axis, and one of a single run is visible."""
    j = i + side
    if not 0 <= j < len(times):
        return times[i]
    return times[i] + (times[j] - times[i]) / 2


def _trend_range(values: Sequence[float]) -> _Range:
    """A gain axis around the runs' median: what lies within ten-fold of it, padded; past
    that, a run is drawn at the edge. The axis stays within :data:`_TINY` and :data:`_HUGE`,
    however near the ends of float range the runs are (a single run's gain of 1.5e308)."""
    shown = [min(max(v, _TINY), _HUGE) for v in values]
    centre = _median(shown)
    low = max(min(shown), centre / 10)
    high = min(max(shown), centre * 10)
    pad = max((high - low) * 0.25, high * 0.08, centre * 1e-6)
    return _Range(max(low - pad, 0.0), high + pad)


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
    with _style():
        fig = _figure(2.3, _Margins(left=0.6, right=0.15, top=0.1, bottom=0.5))
        ax = fig.add_subplot()
        ax.margins(x=0.04)
        colours = ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00", "#4e342e"]
        values = [v for line in lines for v in line.values if _positive(v)]
        axis = _trend_range(values) if values else _Range(0.0, 1.0)
        beyond = any(axis.beyond(v) for v in values)
        for n, line in enumerate(lines):
            colour = colours[n % len(colours)]
            times = [float(t) for t in date2num(list(line.times))]  # one call: per-date calls cost 70 ms a chart
            for start, stop, level in line.segments:
                if line.tolerance is None or not _positive(level):
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
            _note_beyond(ax)
        legend = (
            "Line: the gain in each run (x: when it ran, labelled with its commit); shaded: the gate's "
            "tolerance around each level between change points; dashed line: a change point, red where "
            "the gain fell, green where it rose."
        )
        return _chart(fig, chart_id, "trend", title, legend + (_BEYOND_LEGEND if beyond else ""))
