"""The charts of the HTML reports, drawn with matplotlib and inlined as SVG.

Each function takes a small plain description of what to draw (the dataclasses below, built by
the reporters from verdicts or run histories) and returns a :class:`Chart`: SVG markup ready to
be placed in a page. matplotlib draws without a display (no pyplot, no GUI backend) and writes
text as ``<text>`` elements that it escapes itself; every label that comes from data is also
stripped of control characters and shortened here. The SVG keeps nothing that points outside
the page: no XML prologue, no metadata, no namespace URLs, and its element ids are salted with
the chart's id so that several charts in one page never share one.

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
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, TypeGuard, cast

import matplotlib
from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.dates import date2num
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

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
    """Colour of the bars: the variant's verdict."""


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
    changes: tuple[int, ...]
    """Indices of the runs at which a new level starts."""


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


def _gain_axis(ax: Axes) -> None:
    """A log axis labelled ``2x``, ``5x``, ``10x``: matplotlib's default log labels are
    formulas, and formulas are off (:data:`_RC`)."""
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
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
        for y, row in enumerate(rows):
            if row.band is not None and all(_positive(v) for v in row.band):
                low, high = row.band
                if high / low < 1.002:  # "exact": a band too thin to see is drawn as a thick tick
                    ax.plot([(low + high) / 2], [y], marker="|", markersize=14, mew=5, color=_BAND, zorder=1)
                else:
                    ax.barh(y, high - low, left=low, height=0.62, color=_BAND, zorder=1)
            if _positive(row.bound):
                ax.plot([row.bound], [y], marker="|", markersize=12, mew=1.4, color=_REFERENCE, zorder=2)
            if _positive(row.baseline) and _positive(row.current) and row.baseline != row.current:
                ax.annotate(
                    "",
                    xy=(row.current, y),
                    xytext=(row.baseline, y),
                    arrowprops={"arrowstyle": "->", "color": row.tone.value, "lw": 1.1, "shrinkA": 3, "shrinkB": 4},
                    zorder=3,
                )
            if _positive(row.baseline):
                ax.plot([row.baseline], [y], marker="|", markersize=10, mew=1.6, color=_BASELINE, zorder=4)
            if _positive(row.current):
                ax.plot([row.current], [y], marker="o", markersize=6, color=row.tone.value, zorder=5)
        ax.set_xscale("log")
        _gain_axis(ax)
        if shown:
            ax.set_xlim(min(shown) / 1.35, max(shown) * 1.35)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)), names)
        _right_labels(ax, range(len(rows)), texts)
        ax.set_xlabel("gain (unfused ÷ variant), log scale")
        ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        legend = (
            "Dot: the gain now, coloured by its verdict; black tick: the baseline's gain; blue band: "
            "the tolerance around it; brown tick: an expectation's bound."
        )
        return _chart(fig, chart_id, "gains", title, legend)


def _gain_text(row: GainRow) -> str:
    now = _x(row.current) if _finite(row.current) else "n/a"
    if not _finite(row.baseline):
        text = f"{now} (no baseline)"
    elif not _finite(row.current) or row.baseline == 0:
        text = f"{now}, baseline {_x(row.baseline)}"
    else:
        text = f"{_x(row.baseline)} → {now} ({(row.current / row.baseline - 1) * 100:+.1f}%)"
    return f"{text}; expected {row.bound_text}" if row.bound_text else text


def _mb(value: float) -> str:
    return f"{value / 1e6:,.0f} MB"


def _gbs(value: float) -> str:
    return f"{value / 1e9:,.0f} GB/s"


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
    fast as it can be). Baselines are black ticks; variants are rows, unfused first."""
    with _style():
        margins = _Margins(left=_text_width([label(b.variant) for b in bars]) + 0.15, right=0.1, top=0.05)
        fig = _figure(0.75 + 0.34 * len(bars), margins, wspace=0.08)
        left, right = fig.subplots(1, 2, sharey=True)
        ys = range(len(bars))
        _fusion_panel(left, bars, [b.dram_bytes for b in bars], [b.baseline_bytes for b in bars], 1e6)
        if _positive(min_bytes):
            left.axvline(min_bytes / 1e6, color=_REFERENCE, linestyle="--", linewidth=1)
            left.text(min_bytes / 1e6, -0.62, f" minimum {_mb(min_bytes)}", color=_REFERENCE, va="bottom")
            if _positive(allowance):
                left.axvline(min_bytes * allowance / 1e6, color=_REFERENCE, linestyle=":", linewidth=1)
        for y, b in zip(ys, bars, strict=True):
            if _positive(b.dram_bytes):
                over = f" · {b.dram_bytes / min_bytes:.2f}× min" if _positive(min_bytes) and min_bytes else ""
                at = _after(b.dram_bytes, b.baseline_bytes) / 1e6
                left.text(at, y, f"  {_mb(b.dram_bytes)}{over}", va="center", fontsize=7)
        left.set_xlabel("DRAM bytes (MB)")
        _fusion_panel(right, bars, [b.bandwidth for b in bars], [b.baseline_bandwidth for b in bars], 1e9)
        if _positive(peak):
            right.axvline(peak / 1e9, color=_REFERENCE, linestyle="--", linewidth=1)
            right.text(peak / 1e9, -0.62, f"peak {_gbs(peak)} ", color=_REFERENCE, va="bottom", ha="right")
            right.set_xlim(0, peak / 1e9 * 1.7)
        right.set_xlabel("achieved DRAM bandwidth (GB/s)")
        for y, b in zip(ys, bars, strict=True):
            if _positive(b.bandwidth):
                share = f" · {b.bandwidth / peak:.0%} of peak" if _positive(peak) and peak else ""
                at = _after(b.bandwidth, b.baseline_bandwidth) / 1e9
                right.text(at, y, f"  {_gbs(b.bandwidth)}{share}", va="center", fontsize=7)
        left.set_yticks(list(ys), [label(b.variant) for b in bars])
        left.set_ylim(len(bars) - 0.5, -0.9)
        roof = (
            "dashed: the card's peak DRAM bandwidth, as ncu's percentage of peak implies it"
            if _positive(peak)
            else "no peak bandwidth is known for this card (ncu reported no percentage of peak)"
        )
        legend = (
            "Bars: each variant now; black ticks: its baseline. Left: DRAM bytes read and written; "
            f"dashed: the case's minimum (every input read once, every output written once); dotted: the "
            f"allowance over it. Right: achieved DRAM bandwidth (bytes over kernel time); {roof}."
        )
        return _chart(fig, chart_id, "fusion", title, legend)


def _after(value: float, baseline: float | None) -> float:
    """Where a bar's label starts: past the bar and past its baseline's tick."""
    return max(value, baseline) if _positive(baseline) else value


def _fusion_panel(
    ax: Axes, bars: Sequence[FusionBar], values: list[float | None], baselines: list[float | None], unit: float
) -> None:
    top = [v for v in (*values, *baselines) if _positive(v)]
    for y, (bar, value, base) in enumerate(zip(bars, values, baselines, strict=True)):
        if _positive(value):
            ax.barh(y, value / unit, height=0.58, color=bar.tone.value, alpha=0.85)
        if _positive(base):
            ax.plot([base / unit], [y], marker="|", markersize=13, mew=1.8, color=_BASELINE)
    if top:
        ax.set_xlim(0, max(top) / unit * 1.9)
    ax.grid(axis="x", color="#eeeeee", linewidth=0.6)


def _us(ns: float) -> float:
    return ns / 1e3


def timing_chart(rows: Sequence[TimingRow], chart_id: str, title: str) -> Chart:
    """Per variant, its timed calls now and in the baseline: fastest to slowest call (line),
    the interquartile box where quartiles were recorded, the median (tall tick)."""
    with _style():
        texts = [_spread_text(s) for r in rows for s in (r.baseline, r.now)]
        margins = _Margins(left=0.6, right=_text_width(texts, 7) + 0.1, top=0.2)
        fig = _figure(0.45 + 0.7 * len(rows), margins, hspace=0.9)
        axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
        for ax, row in zip(axes, rows, strict=True):
            spreads = [("baseline", row.baseline, Tone.OK.value), ("now", row.now, row.tone.value)]
            for y, (_, spread, colour) in enumerate(spreads):
                if spread is None:
                    continue
                low, high, q1, q3 = spread.minimum, spread.maximum, spread.q1, spread.q3
                if _finite(low) and _finite(high):
                    ax.plot([_us(low), _us(high)], [y, y], color=colour, linewidth=1)
                if _finite(q1) and _finite(q3):
                    q1, q3 = _us(q1), _us(q3)
                    ax.barh(y, q3 - q1, left=q1, height=0.5, color=colour, alpha=0.35)
                ax.plot([_us(spread.median)], [y], marker="|", markersize=14, mew=2.2, color=colour)
            ax.set_yticks([0, 1], ["baseline", "now"])
            ax.set_ylim(1.6, -0.6)
            _right_labels(ax, [0, 1], [_spread_text(s) for _, s, _ in spreads])
            ax.set_title(label(row.variant), loc="left", pad=2)
            ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        axes[-1].set_xlabel("CUDA-event time per call (µs)")
        legend = (
            "Per variant, the calls timed with CUDA events outside ncu: line from the fastest to the "
            "slowest call, box from the 25th to the 75th percentile where recorded, tall tick at the median."
        )
        return _chart(fig, chart_id, "timing", title, legend)


def _spread_text(spread: Spread | None) -> str:
    if spread is None:
        return "not recorded"
    parts = [f"median {_us(spread.median):,.1f} µs"]
    if _finite(spread.iqr):
        parts.append(f"IQR {_us(spread.iqr):,.1f} µs")
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


def trend_chart(lines: Sequence[TrendLine], ticks: Sequence[tuple[datetime, str]], chart_id: str, title: str) -> Chart:
    """Each line's gain per run over time; around each level between change points, the
    tolerance band; a dashed vertical line where a new level starts. ``ticks`` label the time
    axis (a run's time and commit)."""
    with _style():
        fig = _figure(2.3, _Margins(left=0.6, right=0.15, top=0.1, bottom=0.5))
        ax = fig.add_subplot()
        ax.margins(x=0.04)
        colours = ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00", "#4e342e"]
        for n, line in enumerate(lines):
            colour = colours[n % len(colours)]
            times = [float(date2num(t)) for t in line.times]
            for start, stop, level in line.segments:
                if line.tolerance is None or not _positive(level):
                    continue
                xs = [_edge(times, start, -1), _edge(times, stop - 1, +1)]
                ax.fill_between(
                    xs, level * (1 - line.tolerance), level * (1 + line.tolerance), color=colour, alpha=0.13, lw=0
                )
                ax.plot(xs, [level, level], color=colour, alpha=0.5, linewidth=0.8, linestyle="-")
            ax.plot(times, line.values, marker="o", markersize=4, color=colour, linewidth=1.2, label=label(line.label))
            for i in line.changes:
                ax.axvline(times[i], color=Tone.BAD.value, linestyle="--", linewidth=1)
                ax.annotate(
                    "change",
                    (times[i], 1.0),
                    xycoords=("data", "axes fraction"),
                    color=Tone.BAD.value,
                    fontsize=7,
                    ha="left",
                    va="top",
                    xytext=(2, 0),
                    textcoords="offset points",
                )
        if ticks:
            texts = ["\n".join(label(part) for part in text.split("\n")) for _, text in ticks]
            ax.set_xticks([float(date2num(t)) for t, _ in ticks], texts, fontsize=6.5)
        values = [v for line in lines for v in line.values if _finite(v)]
        if values:
            spread = max(values) - min(values)
            pad = max(spread * 0.25, max(abs(v) for v in values) * 0.08, 1e-9)
            ax.set_ylim(min(values) - pad, max(values) + pad)
        ax.set_ylabel("gain (unfused ÷ variant)")
        ax.grid(axis="y", color="#eeeeee", linewidth=0.6)
        if len(lines) > 1:
            ax.legend(loc="best", fontsize=7, frameon=False)
        legend = (
            "Dots: the gain in each run (x: when it ran, labelled with its commit); shaded: the gate's "
            "tolerance around each level between change points; red dashed line: a change point."
        )
        return _chart(fig, chart_id, "trend", title, legend)
