"""``fuseci history``'s output from a :class:`~fuseci.judge.history.History`: a text summary of every change point,
and a self-contained HTML page (``templates/history.html.j2``), a trend chart per gain per case, within
:data:`fuseci.reporters.budget.PAGE_BYTES` (charts while their share lasts, change points first; long lists counted)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fuseci.config import quantities
from fuseci.reporters.budget import NAME, TEXT, Budget, cut, more, weight
from fuseci.reporters.text import clean, count, relative_change

if TYPE_CHECKING:
    from fuseci.judge.history import ChangePoint, History, RunPoint, Series
    from fuseci.reporters.chartkit import Chart

#: At most this many runs get their own label on a chart's time axis (change points always do).
_TICKS = 12
#: Bytes of the page for the charts, the change points and the runs; at most this many of each.
_CHART_BYTES = 2_200_000
_CHANGE_BYTES = 300_000
_RUN_BYTES = 300_000
_CHANGES = 500
_RUNS = 500


def _gain(value: float) -> str:
    return f"{value:.3g}x"


def _when(run: RunPoint) -> str:
    return run.created.strftime("%Y-%m-%d %H:%M UTC")


def _label(s: Series) -> str:
    return f"{s.case}/{s.variant} {quantities.label(s.quantity)} gain"


def sentence(s: Series, c: ChangePoint, with_gpu: bool = False) -> str:
    """``elementwise: scale_relu_add/fused DRAM bytes gain stepped from 2.32x to 1.4x (-39.6%,
    beyond its ±3% gate) at commit 1a2b3c4 (2026-11-22 10:00 UTC)``."""
    where = f"{s.suite} on {s.gpu}" if with_gpu else s.suite
    if s.tolerance is None:
        gate = "not gated"
    else:
        gate = f"{'beyond' if c.beyond_tolerance else 'within'} its {s.tolerance_text} gate"
    return (
        f"{where}: {_label(s)} stepped from {_gain(c.before)} to {_gain(c.after)} "
        f"({relative_change(c.after, c.before)}, {gate}) "
        f"at commit {c.run.short_commit} ({_when(c.run)})"
    )


def _several_gpus(history: History) -> bool:
    return len({s.gpu for s in history.series}) > 1


def render_text(history: History, directory: str = "") -> str:
    """The console summary: the runs, one line per change point, notes, a totals line."""
    runs = history.runs
    where = f" in {directory}" if directory else ""
    lines = [
        f"fuseci: history of {count(len(runs), 'run')}{where}"
        + (f", {_when(runs[0])} to {_when(runs[-1])}" if runs else "")
    ]
    gpus = _several_gpus(history)
    changes = [(s, c) for s in history.series for c in s.changes]
    lines += [f"  {sentence(s, c, gpus)}" for s, c in changes]
    lines += [f"fuseci: note: {n}" for n in history.notes]
    n = len(changes)
    lines.append(
        f"fuseci: {n or 'no'} change point{'s' if n != 1 else ''} in {count(len(history.series), 'gain')} "
        f"over {count(len(runs), 'run')}"
    )
    return "".join(clean(line) + "\n" for line in lines)  # GPU names and notes come from run files


def tone(c: ChangePoint) -> str:
    """How a change point is shown: ``bad`` where the gain fell beyond its gate, ``good`` where
    it rose beyond it (a recovery or an improvement), ``info`` for a step within the gate."""
    if not c.beyond_tolerance:
        return "info"
    return "good" if c.rose else "bad"


def badge(c: ChangePoint) -> str:
    """``fell beyond gate``, ``rose beyond gate`` or ``within gate``."""
    return f"{'rose' if c.rose else 'fell'} beyond gate" if c.beyond_tolerance else "within gate"


@dataclass(frozen=True, slots=True)
class ChangeView:
    """One change point, as the page lists it."""

    anchor: str
    """The id of the chart that shows it (empty when its chart is not drawn)."""
    text: str
    """Its sentence."""
    tone: str
    """Its colour's name (:func:`tone`)."""
    badge: str
    """Its badge (:func:`badge`)."""


@dataclass(frozen=True, slots=True)
class CaseHistory:
    """The charts of one case on one GPU."""

    anchor: str
    """Its id in the page."""
    title: str
    """Suite, case (and GPU)."""
    charts: tuple[Chart, ...]
    """One per gain."""
    changes: int
    """Change points among its gains."""
    tone: str
    """The worst tone of its change points (``ok`` without any)."""


@dataclass(frozen=True, slots=True)
class RunView:
    """One run in the page's list of runs."""

    when: str
    """When it was saved."""
    commit: str
    """Its commit."""
    path: str
    """Its run file."""


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Everything ``history.html.j2`` shows."""

    title: str
    """The page's title."""
    summary: str
    """The last line of the text summary."""
    changes: tuple[ChangeView, ...]
    """The change points (the first of them)."""
    changes_more: str
    """How many are not listed, or empty."""
    notes: tuple[str, ...]
    """What limited the history."""
    runs: tuple[RunView, ...]
    """The runs, newest first (the newest of them)."""
    runs_more: str
    """How many earlier runs are not listed, or empty."""
    cases: tuple[CaseHistory, ...]
    """Per case, its charts (cases with change points first)."""
    cases_more: str
    """How many gains are not drawn, or empty."""


def _ticks(series: Sequence[Series]) -> list[tuple[datetime, str]]:
    runs = {r.created: r for s in series for r in s.runs}
    times = sorted(runs)
    keep = set(times if len(times) <= _TICKS else times[:: -(-len(times) // _TICKS)])
    keep |= {c.run.created for s in series for c in s.changes}
    return [(t, f"{runs[t].short_commit}\n{t:%m-%d %H:%M}") for t in times if t in keep]


def _chart(group: Sequence[Series], chart_id: str) -> Chart:
    from fuseci.reporters import charts

    lines = [
        charts.TrendLine(
            label=s.variant,
            times=tuple(r.created for r in s.runs),
            values=s.values,
            segments=tuple((seg.start, seg.stop, seg.level) for seg in s.segments),
            tolerance=s.tolerance,
            changes=tuple((c.index, c.rose) for c in s.changes),
        )
        for s in group
    ]
    first = group[0]
    gate = first.tolerance_text if first.tolerance is not None else "not gated"
    title = cut(f"{first.case}: {quantities.label(first.quantity)} gain ({gate})", NAME)
    return charts.trend_chart(lines, _ticks(group), chart_id, title)


#: A case's tones, the worst first.
_TONES = ("bad", "good", "info", "ok")


def _case_tone(group: Sequence[Series]) -> str:
    tones = {tone(c) for s in group for c in s.changes}
    return next((t for t in _TONES if t in tones), "ok")


def page(history: History, directory: str = "") -> HistoryPage:
    """The page model: per (GPU, suite, case), one chart per gain with a line per fused variant."""
    gpus = _several_gpus(history)
    groups: dict[tuple[str, str, str], dict[str, list[Series]]] = {}
    for s in history.series:
        groups.setdefault((s.gpu, s.suite, s.case), {}).setdefault(s.quantity, []).append(s)
    # Cases whose gains changed come first: if the page's share for charts runs out, it is the
    # quiet ones that are left undrawn.
    ordered = sorted(
        groups.items(), key=lambda item: _TONES.index(_case_tone([s for g in item[1].values() for s in g]))
    )
    budget = Budget(_CHART_BYTES)
    cases: list[CaseHistory] = []
    drawn_ids: set[int] = set()
    undrawn = 0
    for n, ((gpu, suite, case), by_quantity) in enumerate(ordered):
        anchor = f"case-{n}"
        drawn = []
        for m, group in enumerate(by_quantity.values()):
            chart = None if undrawn else _chart(group, f"{anchor}-{m}")  # once one is left out, so is the rest
            if chart is None or not budget.take(len(chart.svg) + weight(chart.title, chart.legend)):
                undrawn += 1
                continue
            drawn.append(chart)
            drawn_ids.update(id(s) for s in group)
        if drawn:
            everything = [s for group in by_quantity.values() for s in group]
            points = sum(len(s.changes) for s in everything)
            title = cut(f"{suite} / {case}" + (f" on {gpu}" if gpus else ""), NAME)
            cases.append(CaseHistory(anchor, title, tuple(drawn), points, _case_tone(everything)))
    anchors = {
        id(s): f"case-{n}-{m}" for n, (_, by_q) in enumerate(ordered) for m, g in enumerate(by_q.values()) for s in g
    }
    changes = Budget(_CHANGE_BYTES).fit(
        (
            (view, weight(view.text))
            for view in (
                ChangeView(
                    anchors[id(s)] if id(s) in drawn_ids else "", cut(sentence(s, c, gpus), TEXT), tone(c), badge(c)
                )
                for s in history.series
                for c in s.changes
            )
        ),
        _CHANGES,
    )
    total_changes = sum(len(s.changes) for s in history.series)
    runs = Budget(_RUN_BYTES).fit(
        (
            (view, weight(view.when, view.commit, view.path))
            for view in (
                RunView(_when(r), cut(r.commit or "-", NAME), cut(r.path, NAME)) for r in reversed(history.runs)
            )
        ),
        _RUNS,
    )
    summary = render_text(history, directory).rstrip("\n").rsplit("\n", 1)[-1]
    return HistoryPage(
        title=cut(f"fuseci history: {len(history.runs)} runs" + (f" in {directory}" if directory else ""), NAME),
        summary=summary,
        changes=tuple(changes),
        changes_more=more(total_changes - len(changes), "change points"),
        notes=tuple(cut(n, TEXT) for n in history.notes),
        runs=tuple(runs),
        runs_more=more(len(history.runs) - len(runs), "earlier runs"),
        cases=tuple(cases),
        cases_more=more(undrawn, "gains not drawn (narrow the history with --suite or --last)"),
    )


def render_html(history: History, directory: str = "") -> str:
    """The HTML page."""
    from fuseci.reporters import templating

    return templating.render("history.html.j2", page=page(history, directory))
