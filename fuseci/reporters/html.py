"""A self-contained HTML report of judged suites (``--html PATH``) that opens offline (inline style sheet and SVG, no
script): failures, the overview, then every case worst first (:mod:`fuseci.reporters.html_case`), within
:data:`fuseci.reporters.budget.PAGE_BYTES` (worst cases in full while their share lasts, the next a row each, the rest
counted), rendered by ``templates/report.html.j2`` with autoescaping, so no data can become markup."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fuseci.config import names
from fuseci.judge.verdict import CaseResult, Comparison, Tally, Verdict, tally
from fuseci.reporters import templating
from fuseci.reporters.budget import NAME, TEXT, Budget, cut, more, weight
from fuseci.reporters.chartkit import Tone, amount, tone
from fuseci.reporters.html_case import (
    MESSAGES,
    CaseHead,
    CaseView,
    CheckView,
    case_head,
    case_view,
    case_weight,
    check_view,
    check_weight,
    failing,
    where,
)
from fuseci.reporters.text import tally_text, totals, verdict_count

#: Bytes of the page for each section (they add up to less than the page's budget, leaving
#: room for the fixed markup and style sheet).
_OVERVIEW_BYTES = 200_000
_FAILURE_BYTES = 400_000
_DETAIL_BYTES = 2_100_000
_ROW_BYTES = 250_000
#: At most this many of each.
_FAILURES = 100
_DETAILED = 40
_ROWS = 2_000
_SUITES = 300
_ENVS = 20
_ENV_DIFFERENCES = 50

#: Environment fields shown in the fingerprint, in order, with their labels.
_ENV_LABELS: tuple[tuple[str, str], ...] = (
    ("gpu_name", "GPU"),
    ("compute_capability", "compute capability"),
    ("driver_version", "driver"),
    ("cuda_runtime", "CUDA runtime"),
    ("cupy_version", "CuPy"),
    ("torch_version", "PyTorch"),
    ("triton_version", "Triton"),
    ("ncu_version", "ncu"),
    ("clock_control", "clock control"),
    ("cache_control", "cache control"),
    ("replay_mode", "replay mode"),
)


@dataclass(frozen=True, slots=True)
class FailureView(CaseHead):
    """One failing case in "What failed" (its anchor: the case's section or row in the page)."""

    failures: tuple[CheckView, ...]
    """Its failing checks (the first of them)."""
    more: str
    """How many more failing checks it has, or empty."""


@dataclass(frozen=True, slots=True)
class CaseRow(CaseHead):
    """A case beyond those drawn in full: one row."""

    where: str
    """Suite file and line."""
    checks: int
    """How many checks it has."""
    worst: str
    """The message of its worst check that did not pass, or empty when all passed."""


@dataclass(frozen=True, slots=True)
class EnvDifferenceView:
    """One fingerprint field that differs from the baseline's."""

    field: str
    """Field name."""
    baseline: str
    """The baseline's value."""
    now: str
    """This run's."""
    accepted: bool
    """Accepted with ``--accept-env``."""


@dataclass(frozen=True, slots=True)
class SuiteView:
    """One suite's row of the overview."""

    suite: str
    """Suite id (``suite@gpu`` when merged from several cards)."""
    suite_path: str
    """Suite file."""
    card: str
    """GPU."""
    verdict: str
    """Worst verdict."""
    tone: str
    """Its colour's name."""
    counts: tuple[int, ...]
    """Checks per verdict, in :data:`VERDICTS` order."""
    baseline: str
    """The baseline file, or why there is none."""
    differences: tuple[EnvDifferenceView, ...]
    """Fingerprint fields that differ from the baseline's."""


@dataclass(frozen=True, slots=True)
class EnvView:
    """One environment fingerprint and the suites measured under it."""

    fields: tuple[tuple[str, str], ...]
    """(label, value) pairs."""
    suites: tuple[str, ...]
    """Suite ids."""


@dataclass(frozen=True, slots=True)
class Page:
    """Everything the template shows."""

    title: str
    """The page's title."""
    totals: str
    """Every verdict counted and the exit code."""
    verdicts: tuple[tuple[str, str], ...]
    """(``1 variant regressed: 8 checks``, tone) of every outcome that occurred, worst first
    (:func:`~fuseci.judge.verdict.tally`)."""
    suites: tuple[SuiteView, ...]
    """Overview rows."""
    suites_more: str
    """How many suites are not in the overview, or empty."""
    envs: tuple[EnvView, ...]
    """Distinct fingerprints."""
    failures: tuple[FailureView, ...]
    """Failing cases, worst first (the first of them)."""
    failures_more: str
    """How many failing cases are not listed, or empty."""
    cases: tuple[CaseView, ...]
    """The worst cases, drawn in full."""
    rows: tuple[CaseRow, ...]
    """The next cases, worst first, one row each."""
    rows_more: str
    """What is left beyond them, counted by verdict (``and 3,980 more cases: 3,980 pass``), or empty."""


#: Verdicts in the overview's columns, worst first.
VERDICTS: tuple[Verdict, ...] = tuple(Verdict)


def _failure_view(comparison: Comparison, case: CaseResult, anchor: str) -> FailureView:
    bad = [k for k in sorted(case.checks, key=lambda k: k.verdict.rank) if failing(k.verdict)]
    return FailureView(
        **case_head(comparison, case, anchor),
        failures=tuple(check_view(k) for k in bad[:MESSAGES]),
        more=more(len(bad) - MESSAGES, "failing checks"),
    )


def _failure_weight(f: FailureView) -> int:
    return weight(f.anchor, f.suite, f.card, f.case, f.more, markup=300) + sum(check_weight(k) for k in f.failures)


def _case_row(comparison: Comparison, case: CaseResult, anchor: str) -> CaseRow:
    worst = min(case.checks, key=lambda k: k.verdict.rank, default=None)
    return CaseRow(
        **case_head(comparison, case, anchor),
        where=cut(where(comparison, case), NAME),
        checks=len(case.checks),
        worst=cut(worst.message, TEXT // 2) if worst is not None and worst.verdict is not Verdict.PASS else "",
    )


def _row_weight(r: CaseRow) -> int:
    return weight(r.anchor, r.suite, r.card, r.case, r.where, r.worst, markup=250)


def _text(value: Any) -> str:
    return "-" if value is None else cut(str(value), NAME)


def _suite_view(c: Comparison) -> SuiteView:
    counts = Counter(k.verdict for case in c.cases for k in case.checks)
    baseline = (c.baseline_path if c.has_baseline else f"none at {c.baseline_path}") if c.baseline_path else "none"
    return SuiteView(
        suite=cut(c.suite, NAME),
        suite_path=cut(c.suite_path, NAME),
        card=_text(c.env.get("gpu_name", "-")),
        verdict=c.verdict.value,
        tone=tone(c.verdict).name.lower(),
        counts=tuple(counts[v] for v in VERDICTS),
        baseline=cut(baseline, NAME),
        differences=tuple(
            EnvDifferenceView(cut(d.field, NAME), _text(d.baseline_value), _text(d.current), d.accepted)
            for d in c.env_differences[:_ENV_DIFFERENCES]
        ),
    )


def _suite_weight(v: SuiteView) -> int:
    return weight(
        v.suite, v.suite_path, v.card, v.baseline, *(t for d in v.differences for t in (d.field, d.baseline, d.now))
    )


def _env_fields(env: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    fields = [
        (label, _text(env.get(key)))
        for key, label in _ENV_LABELS
        if key not in names.FRAMEWORK_ENV_FIELDS or env.get(key)  # a framework only where the suite used it
    ]
    peak = env.get(names.DRAM_PEAK)
    if isinstance(peak, (int, float)) and math.isfinite(peak):
        fields.append(("peak DRAM bandwidth (from ncu's % of peak)", amount(peak, 1e9, "GB/s")))
    return tuple(fields)


def _envs(comparisons: Sequence[Comparison]) -> tuple[EnvView, ...]:
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for c in comparisons:
        if c.env:
            groups.setdefault(_env_fields(c.env), []).append(cut(c.suite, NAME))
    return tuple(EnvView(fields, tuple(suites[:_SUITES])) for fields, suites in list(groups.items())[:_ENVS])


def _tally_tone(t: Tally) -> str:
    return (tone(t.outcome) if isinstance(t.outcome, Verdict) else Tone.GOOD).name.lower()  # GOOD: caught


def _rest(cases: Sequence[CaseResult]) -> str:
    """``and 3,980 more cases: 3,970 pass, 10 regressed``; empty for none."""
    if not cases:
        return ""
    counts = Counter(case.verdict for case in cases)
    by = ", ".join(verdict_count(v, counts[v], separators=True) for v in VERDICTS if counts[v])
    return f"{more(len(cases), 'cases')}: {by}"


def page(comparisons: list[Comparison]) -> Page:
    """The page model of ``comparisons``, within the page's budget (see the module docstring):
    failing cases first, then the rest, each in suite order."""
    cases = sorted(((c, case) for c in comparisons for case in c.cases), key=lambda p: p[1].verdict.rank)
    detailed = Budget(_DETAIL_BYTES).fit(
        ((v, case_weight(v)) for v in (case_view(c, case, f"case-{n}") for n, (c, case) in enumerate(cases))),
        _DETAILED,
    )
    rows = Budget(_ROW_BYTES).fit(
        (
            (r, _row_weight(r))
            for r in (_case_row(c, case, f"case-{n}") for n, (c, case) in enumerate(cases) if n >= len(detailed))
        ),
        _ROWS,
    )
    shown = len(detailed) + len(rows)
    bad = [(n, c, case) for n, (c, case) in enumerate(cases) if failing(case.verdict)]
    listed = Budget(_FAILURE_BYTES).fit(
        (
            (f, _failure_weight(f))
            for f in (_failure_view(c, case, f"case-{n}" if n < shown else "more-cases") for n, c, case in bad)
        ),
        _FAILURES,
    )
    suites = Budget(_OVERVIEW_BYTES).fit(((v, _suite_weight(v)) for v in map(_suite_view, comparisons)), _SUITES)
    title = cut(comparisons[0].suite, NAME) if len(comparisons) == 1 else f"{len(comparisons):,} suites"
    return Page(
        title=f"fuseci: {title}",
        totals=totals(comparisons),
        verdicts=tuple((tally_text(t, separators=True), _tally_tone(t)) for t in tally(comparisons)),
        suites=tuple(suites),
        suites_more=more(len(comparisons) - len(suites), "suites"),
        envs=_envs(comparisons),
        failures=tuple(listed),
        failures_more=more(len(bad) - len(listed), "failing cases"),
        cases=tuple(detailed),
        rows=tuple(rows),
        rows_more=_rest([case for _, case in cases[shown:]]),
    )


def render(comparisons: list[Comparison]) -> str:
    """The HTML document."""
    return templating.render("report.html.j2", page=page(comparisons), verdict_names=[v.value for v in VERDICTS])
