"""A self-contained HTML report of judged suites (``--html PATH`` on run, compare and merge).

One file that opens from ``file://`` with no network: the style sheet is inlined, the charts are
inline SVG drawn with matplotlib (:mod:`fuseci.reporters.charts`), there is no script and no
external font. Failures come first:

* what failed: every case that regressed, computed a wrong result or could not be judged, with
  the messages of its failing checks;
* the overview: verdict counts per suite and card, each environment fingerprint, and what
  differs from the baseline's environment;
* every case, worst first: its gains against the baseline with the tolerance band, its DRAM
  bytes against the case's minimum and its achieved bandwidth against the card's peak (unfused
  and fused side by side), its CUDA-event timings now and in the baseline, each variant's kernel
  inventory aligned with the baseline's (splits, new and vanished kernels, changed launch
  shapes highlighted), and every check.

This module turns verdicts into a page model (plain frozen dataclasses); the page itself is the
Jinja2 template ``templates/report.html.j2``, rendered with autoescaping, so ids, messages,
kernel names, paths and environment values can never become markup.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from fuseci.config import names
from fuseci.config.model import UNFUSED
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, VariantMeasurement, Verdict, exit_code
from fuseci.reporters import charts, templating
from fuseci.reporters.charts import Chart, Tone
from fuseci.reporters.text import totals

_BAND = re.compile(r"^±\s*([0-9]+(?:\.[0-9]*)?)\s*%")
_BOUND = re.compile(r"^(?:>=|<=|==|>|<)\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*x?$")
_ALLOWANCE = re.compile(r"^<=\s*([0-9]+(?:\.[0-9]*)?)\s*x$")

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


def failing(verdict: Verdict) -> bool:
    """True for the verdicts that fail a build (regressed, wrong, error, incomparable)."""
    return verdict.exit_code != 0


@dataclass(frozen=True, slots=True)
class CheckView:
    """One check as a table row."""

    verdict: str
    """Verdict name (``regressed``)."""
    tone: str
    """Its colour's name (``bad``)."""
    check: str
    """Kind of check."""
    variant: str
    """Variant id (empty for case checks)."""
    quantity: str
    """What was checked, for people."""
    now: str
    """The value now."""
    baseline: str
    """The baseline's value."""
    change: str
    """The relative change."""
    tolerance: str
    """Tolerance or expectation."""
    message: str
    """The check's sentence."""


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One line of an inventory aligned with its baseline's."""

    status: str
    """``same``, ``changed`` (launch shape), ``split``, ``merged``, ``replaced``, ``new``,
    ``extra`` (another launch of a known kernel), ``vanished``, or ``now`` (no baseline)."""
    old: KernelLaunch | None
    """The baseline's kernel on this line."""
    new: KernelLaunch | None
    """This run's kernel on this line."""
    changed: frozenset[str]
    """Fields of a kernel that stayed which differ: ``grid``, ``block``, ``registers``."""


@dataclass(frozen=True, slots=True)
class InventoryView:
    """One variant's kernels."""

    variant: str
    """Variant id."""
    rows: tuple[KernelRow, ...]
    """Aligned with the baseline's."""
    has_baseline: bool
    """False when the baseline holds no inventory for it."""
    differs: bool
    """True when anything changed from the baseline."""


@dataclass(frozen=True, slots=True)
class CaseView:
    """One case's section."""

    anchor: str
    """Its id in the page."""
    suite: str
    """Suite id."""
    card: str
    """GPU it ran on."""
    case: str
    """Case id."""
    description: str
    """From the suite."""
    where: str
    """Suite file and line."""
    verdict: str
    """Worst verdict of its checks."""
    tone: str
    """That verdict's colour's name."""
    failures: tuple[CheckView, ...]
    """Its checks that fail the build."""
    checks: tuple[CheckView, ...]
    """Every check, failing ones first."""
    charts: tuple[Chart, ...]
    """Gains, fusion, timings (those with anything to draw)."""
    inventories: tuple[InventoryView, ...]
    """Per variant."""
    notes: tuple[str, ...]
    """What a reader of the numbers should know."""


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
    exit_code: int
    """What the run exits with."""
    verdicts: tuple[tuple[str, str, int], ...]
    """(verdict, tone, count) of every verdict that occurred, worst first."""
    suites: tuple[SuiteView, ...]
    """Overview rows."""
    envs: tuple[EnvView, ...]
    """Distinct fingerprints."""
    failures: tuple[CaseView, ...]
    """Failing cases, worst first."""
    cases: tuple[CaseView, ...]
    """Every case, worst first."""


#: Verdicts in the overview's columns, worst first.
VERDICTS: tuple[Verdict, ...] = tuple(Verdict)


def _num(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _quantity(k: MetricDelta) -> str:
    return names.LABELS.get(k.quantity, k.quantity)


def _value(k: MetricDelta, value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    match k.check:
        case CheckKind.GAIN | CheckKind.EXPECT:
            return f"{value:.3g}x"
        case CheckKind.VALUE:
            return f"{value:.1f}%"
        case CheckKind.ASYNCHRONY:
            return f"{value:.0%} of calls wait"
        case CheckKind.BYTES:
            return f"{value:.2f}× min"
        case CheckKind.INVENTORY | CheckKind.KERNELS:
            return f"{value:.0f} kernel{'s' if value != 1 else ''}"
        case CheckKind.CORRECTNESS | CheckKind.PLANTED | CheckKind.CASE | CheckKind.COMPILE:
            return f"{value:.4g}"


def _check_view(k: MetricDelta) -> CheckView:
    return CheckView(
        verdict=k.verdict.value,
        tone=tone(k.verdict).name.lower(),
        check=k.check.value,
        variant=k.variant,
        quantity=_quantity(k),
        now=_value(k, k.current),
        baseline=_value(k, k.baseline_value),
        change=f"{k.change * 100:+.1f}%" if _num(k.change) and k.change is not None else "",
        tolerance=k.tolerance,
        message=k.message,
    )


def band(tolerance: str, baseline: float | None) -> tuple[float, float] | None:
    """The band a gain may move in around ``baseline``, from the tolerance as reports write it
    (``±3%``, ``±10.0% (...)``, ``exact``); None when it states none."""
    if baseline is None or not math.isfinite(baseline):
        return None
    if tolerance == "exact":
        return (baseline, baseline)
    m = _BAND.match(tolerance)
    if m is None:
        return None
    slack = float(m.group(1)) / 100
    return (baseline * (1 - slack), baseline * (1 + slack))


def _bound(text: str) -> float | None:
    m = _BOUND.match(text.strip())
    return float(m.group(1)) if m else None


def _gain_rows(case: CaseResult) -> list[charts.GainRow]:
    rows: list[charts.GainRow] = []
    gains = {v.variant: v.gains for v in case.variants}
    fused = [v.variant for v in case.variants if v.variant != UNFUSED]
    for variant in fused:
        checks = [k for k in case.checks if k.variant == variant]
        gated = {k.quantity: k for k in checks if k.check is CheckKind.GAIN}
        expected = {k.quantity: k for k in checks if k.check is CheckKind.EXPECT}
        for q in (q for q in names.GAIN_GATEABLE if q in gated or q in expected):
            gate, expect = gated.get(q), expected.get(q)
            verdict = min((k.verdict for k in (gate, expect) if k is not None), key=lambda v: v.rank)
            baseline = gate.baseline_value if gate is not None else None
            rows.append(
                charts.GainRow(
                    label=f"{variant} · {names.LABELS.get(q, q)}",
                    current=gains.get(variant, {}).get(q, gate.current if gate else None),
                    baseline=baseline,
                    band=band(gate.tolerance, baseline) if gate is not None else None,
                    bound=_bound(expect.tolerance) if expect is not None else None,
                    bound_text=expect.tolerance if expect is not None else "",
                    tone=tone(verdict),
                )
            )
    return rows


def _variant_tone(case: CaseResult, variant: str) -> Tone:
    if variant == UNFUSED:
        return Tone.OK
    verdicts = [k.verdict for k in case.checks if k.variant == variant]
    return tone(min(verdicts, key=lambda v: v.rank, default=Verdict.PASS))


def _bandwidth(values: Mapping[str, float]) -> float | None:
    read, write = values.get(names.DRAM_READ_RATE), values.get(names.DRAM_WRITE_RATE)
    if not _num(read) or not _num(write) or read is None or write is None:
        return None
    return read + write


def _fusion_chart(case: CaseResult, env: Mapping[str, Any], anchor: str) -> Chart | None:
    measured = [v for v in case.variants if _num(v.values.get(names.DRAM_BYTES))]
    if not measured:
        return None
    bars = [
        charts.FusionBar(
            variant=v.variant,
            dram_bytes=v.values.get(names.DRAM_BYTES),
            baseline_bytes=v.baseline_values.get(names.DRAM_BYTES),
            bandwidth=_bandwidth(v.values),
            baseline_bandwidth=_bandwidth(v.baseline_values),
            tone=_variant_tone(case, v.variant),
        )
        for v in sorted(measured, key=lambda v: v.variant != UNFUSED)
    ]
    min_bytes = next((v.values[names.MIN_BYTES] for v in measured if _num(v.values.get(names.MIN_BYTES))), None)
    allowance = next(
        (
            float(m.group(1))
            for k in case.checks
            if k.check is CheckKind.BYTES and (m := _ALLOWANCE.match(k.tolerance.strip()))
        ),
        None,
    )
    peak = env.get(names.DRAM_PEAK)
    return charts.fusion_chart(
        bars,
        min_bytes,
        allowance,
        float(peak) if isinstance(peak, (int, float)) and math.isfinite(peak) else None,
        f"{anchor}-fusion",
        f"{case.case}: DRAM bytes against the minimum, bandwidth against the card's peak",
    )


def _spread(values: Mapping[str, float]) -> charts.Spread | None:
    median = values.get(names.EVENT_TIME)
    if median is None or not math.isfinite(median):
        return None

    def get(q: str) -> float | None:
        v = values.get(q)
        return v if v is not None and math.isfinite(v) else None

    calls = get(names.EVENT_TIME_REPEATS)
    return charts.Spread(
        median=median,
        minimum=get(names.EVENT_TIME_MIN),
        maximum=get(names.EVENT_TIME_MAX),
        q1=get(names.EVENT_TIME_Q1),
        q3=get(names.EVENT_TIME_Q3),
        iqr=get(names.EVENT_TIME_IQR),
        calls=int(calls) if calls is not None else None,
    )


def _timing_chart(case: CaseResult, anchor: str) -> Chart | None:
    rows = [
        charts.TimingRow(v.variant, _spread(v.values), _spread(v.baseline_values), _variant_tone(case, v.variant))
        for v in case.variants
    ]
    rows = [r for r in rows if r.now is not None or r.baseline is not None]
    if not rows:
        return None
    return charts.timing_chart(rows, f"{anchor}-timing", f"{case.case}: CUDA-event time per call, now and baseline")


def align(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch]) -> tuple[KernelRow, ...]:
    """This run's kernels lined up with the baseline's, by name in launch order (the same
    matching as the inventory check's, :func:`fuseci.judge.checks.inventory_diff`)."""
    if not old:
        return tuple(KernelRow("now", None, k, frozenset()) for k in new)
    rows: list[KernelRow] = []
    matcher = difflib.SequenceMatcher(a=[k.name for k in old], b=[k.name for k in new], autojunk=False)
    known = {k.name for k in old}
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        a, b = old[i1:i2], new[j1:j2]
        match op:
            case "equal":
                for ka, kb in zip(a, b, strict=True):
                    changed = frozenset(f for f in ("grid", "block", "registers") if getattr(ka, f) != getattr(kb, f))
                    rows.append(KernelRow("changed" if changed else "same", ka, kb, changed))
            case "insert":
                rows += [KernelRow("extra" if k.name in known else "new", None, k, frozenset()) for k in b]
            case "delete":
                rows += [KernelRow("vanished", k, None, frozenset()) for k in a]
            case _:
                status = "split" if len(b) > len(a) else "merged" if len(b) < len(a) else "replaced"
                rows += [KernelRow(status, ka, kb, frozenset()) for ka, kb in zip_longest(a, b)]
    return tuple(rows)


def _inventory(v: VariantMeasurement) -> InventoryView | None:
    if not v.kernels and not v.baseline_kernels:
        return None
    rows = align(v.baseline_kernels, v.kernels)
    return InventoryView(
        variant=v.variant,
        rows=rows,
        has_baseline=bool(v.baseline_kernels),
        differs=any(r.status not in ("same", "now") for r in rows),
    )


def _case_view(comparison: Comparison, case: CaseResult, index: int) -> CaseView:
    anchor = f"case-{index}"
    checks = sorted(case.checks, key=lambda k: k.verdict.rank)
    drawn: list[Chart | None] = []
    rows = _gain_rows(case)
    if rows:
        drawn.append(charts.gain_chart(rows, f"{anchor}-gains", f"{case.case}: fusion gains against the baseline"))
    drawn.append(_fusion_chart(case, comparison.env, anchor))
    drawn.append(_timing_chart(case, anchor))
    inventories = [_inventory(v) for v in case.variants]
    return CaseView(
        anchor=anchor,
        suite=comparison.suite,
        card=str(comparison.env.get("gpu_name", "")),
        case=case.case,
        description=case.description,
        where=f"{comparison.suite_path}:{case.line}" if case.line else comparison.suite_path,
        verdict=case.verdict.value,
        tone=tone(case.verdict).name.lower(),
        failures=tuple(_check_view(k) for k in checks if failing(k.verdict)),
        checks=tuple(_check_view(k) for k in checks),
        charts=tuple(c for c in drawn if c is not None),
        inventories=tuple(i for i in inventories if i is not None),
        notes=case.notes,
    )


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _suite_view(c: Comparison) -> SuiteView:
    counts = Counter(k.verdict for case in c.cases for k in case.checks)
    if c.has_baseline and c.baseline_path:
        baseline = c.baseline_path
    elif c.baseline_path:
        baseline = f"none at {c.baseline_path}"
    else:
        baseline = "none"
    return SuiteView(
        suite=c.suite,
        suite_path=c.suite_path,
        card=str(c.env.get("gpu_name", "-")),
        verdict=c.verdict.value,
        tone=tone(c.verdict).name.lower(),
        counts=tuple(counts[v] for v in VERDICTS),
        baseline=baseline,
        differences=tuple(
            EnvDifferenceView(d.field, _text(d.baseline_value), _text(d.current), d.accepted) for d in c.env_differences
        ),
    )


def _env_fields(env: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    fields = [
        (label, _text(env.get(key)))
        for key, label in _ENV_LABELS
        if key not in names.FRAMEWORK_ENV_FIELDS or env.get(key)  # a framework only where the suite used it
    ]
    peak = env.get(names.DRAM_PEAK)
    if isinstance(peak, (int, float)) and math.isfinite(peak):
        fields.append(("peak DRAM bandwidth (from ncu's % of peak)", f"{peak / 1e9:,.0f} GB/s"))
    return tuple(fields)


def _envs(comparisons: Sequence[Comparison]) -> tuple[EnvView, ...]:
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for c in comparisons:
        if c.env:
            groups.setdefault(_env_fields(c.env), []).append(c.suite)
    return tuple(EnvView(fields, tuple(suites)) for fields, suites in groups.items())


def page(comparisons: list[Comparison]) -> Page:
    """The page model of ``comparisons``: failing cases first, then the rest, each in suite order."""
    cases = [(c, case) for c in comparisons for case in c.cases]
    order = sorted(range(len(cases)), key=lambda i: cases[i][1].verdict.rank)
    views = [_case_view(*cases[i], n) for n, i in enumerate(order)]
    counts = Counter(k.verdict for c in comparisons for case in c.cases for k in case.checks)
    title = comparisons[0].suite if len(comparisons) == 1 else f"{len(comparisons)} suites"
    return Page(
        title=f"fuseci: {title}",
        totals=totals(comparisons),
        exit_code=exit_code(comparisons),
        verdicts=tuple((v.value, tone(v).name.lower(), counts[v]) for v in VERDICTS if counts[v]),
        suites=tuple(_suite_view(c) for c in comparisons),
        envs=_envs(comparisons),
        failures=tuple(v for v in views if v.failures),
        cases=tuple(views),
    )


def render(comparisons: list[Comparison]) -> str:
    """The HTML document."""
    return templating.render("report.html.j2", page=page(comparisons), verdict_names=[v.value for v in VERDICTS])
