"""What every chart of the HTML reports is drawn with: matplotlib's settings, colours, axes' ranges, the figure and
its margins, written as inlinable SVG that points nowhere outside the page, its ids salted per chart. Data labels are
cleaned and shortened (:func:`label`); an axis' range follows the data's typical size, a finite value beyond it drawn
at the edge with a marker. Importing this module imports matplotlib, so reporters import it lazily."""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeGuard, cast

import matplotlib
from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fuseci.judge.verdict import Verdict

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


def tone(verdict: Verdict) -> Tone:
    """The colour a verdict is shown in."""
    match verdict:
        case Verdict.WRONG | Verdict.REGRESSED:
            return Tone.BAD
        case Verdict.ERROR | Verdict.INCOMPARABLE | Verdict.WARN:
            return Tone.WARN
        case Verdict.MISSING | Verdict.NEW:
            return Tone.INFO
        case Verdict.IMPROVED:
            return Tone.GOOD
        case Verdict.PASS:
            return Tone.OK


BAND = "#bbdefb"
BASELINE = "#000000"
REFERENCE = "#6d4c41"


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


def label(text: str) -> str:
    """``text`` fit for a chart: no control characters, at most :data:`_MAX_LABEL` characters."""
    text = _CONTROL.sub("?", text)
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


def style(extra: Mapping[str, object] | None = None) -> AbstractContextManager[None]:
    """The charts' matplotlib settings (:data:`_RC`, and ``extra``) while drawing."""
    # matplotlib's stubs type rc_context's keys as a closed set of literals.
    return cast(AbstractContextManager[None], matplotlib.rc_context(cast(Any, {**_RC, **(extra or {})})))


def finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def positive(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value > 0


#: Marker of a value drawn at the edge of its axis because it lies beyond it.
_BEYOND = "▸"
_BEYOND_NOTE = f"{_BEYOND} beyond this axis: drawn at its edge"
BEYOND_LEGEND = f" A {_BEYOND} or ▴ marks a value beyond its axis, drawn at the edge; its label gives it."
#: A log axis spans at most this many decades either side of the median of what it shows.
_DECADES = 3.0
#: Largest and smallest magnitudes an axis limit may take: far inside float range, so that
#: no padding, tick or transform of it overflows.
HUGE = 1e300
TINY = 1e-300


@dataclass(frozen=True, slots=True)
class Range:
    """What an axis shows; values beyond it are drawn at its edge (:meth:`at`)."""

    low: float
    high: float

    def at(self, value: float) -> float:
        """Where ``value`` is drawn."""
        return min(max(value, self.low), self.high)

    def beyond(self, value: float) -> bool:
        """Whether ``value`` lies outside the range."""
        return not self.low <= value <= self.high


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def log_range(values: Sequence[float]) -> Range:
    """Positive ``values`` on a log axis: at most :data:`_DECADES` either side of their median."""
    logs = [math.log10(v) for v in values if positive(v)] or [0.0]
    centre = median(logs)
    low = max(min(logs), centre - _DECADES, math.log10(TINY))
    high = min(max(logs), centre + _DECADES, math.log10(HUGE))
    pad = math.log10(1.35)
    return Range(10 ** (low - pad), 10 ** (high + pad))


def linear_range(values: Sequence[float], reference: float | None, factor: float) -> Range:
    """Non-negative ``values`` on a linear axis from 0: up to the largest of them, but at most
    ``factor`` × ``reference`` (the median of the values when none is given), padded by 10%."""
    shown = [v for v in values if finite(v) and v >= 0]
    if not positive(reference):
        reference = median([v for v in shown if v > 0]) if any(v > 0 for v in shown) else 1.0
    cap = min(max(reference * factor, TINY), HUGE)  # no axis ends at 0 in its units (µs, MB)
    top = min(max(shown, default=cap), cap) or cap
    return Range(0.0, max(top, TINY) * 1.1)


def note_beyond(ax: Axes, left: bool = False) -> None:
    """Say on the chart, above the axes, that some value lies beyond them."""
    x, ha = (0.0, "left") if left else (1.0, "right")
    ax.text(x, 1.0, _BEYOND_NOTE, transform=ax.transAxes, ha=ha, va="bottom", fontsize=6.5, color="#616161")


def share(value: float) -> str:
    """``84%``; beyond what digits can be read, ``1.7e+301%``."""
    return f"{value:.0%}" if abs(value) < 1e4 else f"{value * 100:.3g}%"


def ratio(value: float) -> str:
    """``1.62×``; a ratio beyond what digits can be read, ``2.2e+299×``."""
    return f"{value:.2f}×" if abs(value) < 1e6 else f"{value:.3g}×"


def chart(fig: Figure, chart_id: str, kind: str, title: str, legend: str) -> Chart:
    """The figure as a :class:`Chart`, its ``<svg>`` element fit to be inlined (see the module docstring)."""
    buf = io.StringIO()
    with style({"svg.hashsalt": chart_id}), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph missing from the font is drawn as a box: fine
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    # No URL in the page, not even a namespace name: the HTML parser knows SVG's and xlink's.
    text = re.sub(r' xmlns(?::xlink)?="[^"]*"', "", text)
    # matplotlib numbers its element ids per figure: prefix them and their references, per chart.
    text = re.sub(r'\b(id="|href="#|url\(#)(?=[A-Za-z_])', rf"\g<1>{chart_id}-", text)
    text = text.replace("<svg ", f'<svg class="chart-svg" role="img" aria-labelledby="{chart_id}-title" ', 1)
    return Chart(id=chart_id, kind=kind, title=title, legend=legend, svg=Markup(text.strip()))


@dataclass(frozen=True, slots=True)
class Margins:
    """Room around the axes, in inches (fixed: matplotlib's constrained layout is slow)."""

    left: float
    right: float
    top: float = 0.12
    bottom: float = 0.42


def text_width(texts: Sequence[str], size: float = 8) -> float:
    """About how wide the widest of ``texts`` is, in inches, at ``size`` points (DejaVu Sans
    averages 0.6 em per character)."""
    longest = max((len(t) for text in texts for t in text.split("\n")), default=0)
    return longest * size * 0.6 / 72


def figure(height_in: float, margins: Margins, wspace: float = 0.2, hspace: float = 0.2) -> Figure:
    with style():
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


def right_labels(ax: Axes, ys: Sequence[float], texts: Sequence[str]) -> None:
    """``texts`` just right of the axes, level with ``ys``."""
    for y, text in zip(ys, texts, strict=True):
        ax.text(1.01, y, text, transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=7)


def amount(value: float, unit: float, name: str) -> str:
    """``1,301 MB``; beyond what digits can be read, ``1.8e+302 MB``."""
    scaled = value / unit
    return f"{scaled:,.0f} {name}" if abs(scaled) < 1e9 else f"{scaled:.3g} {name}"


def mb(value: float) -> str:
    return amount(value, 1e6, "MB")


def gbs(value: float) -> str:
    return amount(value, 1e9, "GB/s")
