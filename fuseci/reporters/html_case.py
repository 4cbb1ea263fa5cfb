"""One case's section of the HTML report (:mod:`fuseci.reporters.html`): its checks, its charts' data
(:mod:`fuseci.reporters.charts`), each variant's kernel inventory aligned with the baseline's, and its fusion ledgers,
every string cut and every list bounded (:mod:`fuseci.reporters.budget`)."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest
from typing import Any, TypedDict

from fuseci.config import names, quantities
from fuseci.config.model import UNFUSED
from fuseci.config.quantities import Unit
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, VariantMeasurement, Verdict
from fuseci.reporters import charts
from fuseci.reporters.budget import NAME, TEXT, cut, more, weight
from fuseci.reporters.chartkit import Chart, Tone, finite, tone
from fuseci.reporters.ledger_html import LedgerSection, ledgers_more, sections
from fuseci.reporters.text import worst

#: At most this many of each in a case's section (:data:`MESSAGES`: failing checks listed).
MESSAGES = 12
_CHECKS = 60
_NOTES = 10
_INVENTORIES = 8
_KERNELS = 40
_CHART_ROWS = 24
#: Variants drawn in a case's DRAM and timing charts (unfused among them).
_CHART_VARIANTS = 12
#: Kernels lined up with the baseline's by name; beyond, a variant's kernels are listed as they are.
_ALIGNED = 2_000
_BAND = re.compile(r"^±\s*([0-9]+(?:\.[0-9]*)?)\s*%")
_BOUND = re.compile(r"^(?:>=|<=|==|>|<)\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*x?$")
_ALLOWANCE = re.compile(r"^<=\s*([0-9]+(?:\.[0-9]*)?)\s*x$")


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
class InventoryLine:
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
    rows: tuple[InventoryLine, ...]
    """Aligned with the baseline's."""
    has_baseline: bool
    """False when the baseline holds no inventory for it."""
    differs: bool
    """True when anything changed from the baseline."""
    more: str
    """How many more kernels there are than rows (``and 960 more kernels``), or empty."""


@dataclass(frozen=True, slots=True)
class CauseView:
    """Why one variant's finding came about, said once in its case's section."""

    variant: str
    """Variant id."""
    kind: str
    """``code``, ``compiler``, ``autotune``, ``environment``, ``measurement`` or ``undetermined``."""
    evidence: tuple[str, ...]
    """What decided it, one fact a line (the first of them)."""
    missing: str
    """What would decide it, for ``undetermined``; else empty."""
    also: tuple[str, ...]
    """Environment changes named alongside."""


#: Lines of a cause's evidence a section shows at most.
_EVIDENCE = 20


def _causes(case: CaseResult) -> tuple[CauseView, ...]:
    return tuple(
        CauseView(
            cut(v.variant, NAME),
            v.cause.kind.value,
            tuple(cut(e, TEXT) for e in v.cause.evidence[:_EVIDENCE]),
            cut(v.cause.missing, TEXT),
            tuple(cut(e, TEXT) for e in v.cause.also[:_EVIDENCE]),
        )
        for v in case.variants[:_INVENTORIES]
        if v.cause is not None
    )


@dataclass(frozen=True, slots=True)
class CaseHead:
    """What every view of a case shows first."""

    anchor: str
    """Its id in the page."""
    suite: str
    """Suite id."""
    card: str
    """GPU it ran on."""
    case: str
    """Case id."""
    verdict: str
    """Worst verdict of its checks."""
    tone: str
    """That verdict's colour's name."""


class CaseHeadFields(TypedDict):
    """:class:`CaseHead`'s fields, as its views are built with them (so that mypy checks them)."""

    anchor: str
    suite: str
    card: str
    case: str
    verdict: str
    tone: str


def case_head(comparison: Comparison, case: CaseResult, anchor: str) -> CaseHeadFields:
    """The fields of :class:`CaseHead` for ``case``, its strings cut."""
    return {
        "anchor": anchor,
        "suite": cut(comparison.suite, NAME),
        "card": cut(str(comparison.env.get("gpu_name", "")), NAME),
        "case": cut(case.case, NAME),
        "verdict": case.verdict.value,
        "tone": tone(case.verdict).name.lower(),
    }


@dataclass(frozen=True, slots=True)
class CaseView(CaseHead):
    """One case's section."""

    description: str
    """From the suite."""
    where: str
    """Suite file and line."""
    causes: tuple[CauseView, ...]
    """Why each variant with a finding came to it (the first of them), once per variant."""
    failures: tuple[CheckView, ...]
    """Its checks that fail the build (the first of them)."""
    checks: tuple[CheckView, ...]
    """Its checks, failing ones first (the first of them)."""
    checks_total: int
    """How many checks it has."""
    checks_more: str
    """How many are not in :attr:`checks` (``and 40 more checks``), or empty."""
    charts: tuple[Chart, ...]
    """Gains, fusion, timings (those with anything to draw)."""
    inventories: tuple[InventoryView, ...]
    """Per variant (the first of them)."""
    inventories_more: str
    """How many variants' kernels are not shown, or empty."""
    ledgers: tuple[LedgerSection, ...]
    """The fusion ledger of each variant that has one (the first of them)."""
    ledgers_more: str
    """How many variants' ledgers are not shown, or empty."""
    notes: tuple[str, ...]
    """What a reader of the numbers should know."""


def _value(k: MetricDelta, value: float | None) -> str:
    if not finite(value):
        return ""
    match k.check:
        case CheckKind.GAIN | CheckKind.EXPECT:
            return f"{value:.3g}x"
        case CheckKind.VALUE:
            return quantities.show(k.quantity, value)
        case CheckKind.ASYNCHRONY:
            return f"{value:.0%} of calls wait"
        case CheckKind.BYTES:
            return f"{value:.2f}× min"
        case CheckKind.INVENTORY | CheckKind.KERNELS:
            return f"{value:.0f} kernel{'s' if value != 1 else ''}"
        case CheckKind.LEDGER:
            return f"{value / 1e6:,.1f} MB"
        case CheckKind.CORRECTNESS | CheckKind.PLANTED | CheckKind.CASE | CheckKind.COMPILE:
            return f"{value:.4g}"


def check_view(k: MetricDelta) -> CheckView:
    """One check as a table row, its strings cut."""
    return CheckView(
        verdict=k.verdict.value,
        tone=tone(k.verdict).name.lower(),
        check=k.check.value,
        variant=cut(k.variant, NAME),
        quantity=cut(quantities.label(k.quantity), NAME),
        now=_value(k, k.current),
        baseline=_value(k, k.baseline_value),
        change=f"{k.change * 100:+.1f}%" if finite(k.change) else "",
        tolerance=cut(k.tolerance, NAME),
        message=cut(k.message, TEXT),
    )


def check_weight(k: CheckView) -> int:
    return weight(
        k.verdict, k.check, k.variant, k.quantity, k.now, k.baseline, k.change, k.tolerance, k.message, markup=200
    )


def band(tolerance: str, baseline: float | None) -> tuple[float, float] | None:
    """The band a gain may move in around ``baseline``, from the tolerance as reports write it
    (``±3%``, ``±10.0% (...)``, ``exact``); None when it states none."""
    if not finite(baseline):
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
        for q in (q for q in quantities.gains() if q in gated or q in expected):
            gate, expect = gated.get(q), expected.get(q)
            verdict = min((k.verdict for k in (gate, expect) if k is not None), key=lambda v: v.rank)
            baseline = gate.baseline_value if gate is not None else None
            rows.append(
                charts.GainRow(
                    label=f"{variant} · {quantities.label(q)}",
                    current=gains.get(variant, {}).get(q, gate.current if gate else None),
                    baseline=baseline,
                    band=band(gate.tolerance, baseline) if gate is not None else None,
                    bound=_bound(expect.tolerance) if expect is not None else None,
                    bound_text=charts.label(expect.tolerance) if expect is not None else "",
                    tone=tone(verdict),
                )
            )
    return rows


def _bytes_check(k: MetricDelta) -> bool:
    """A check of DRAM bytes: the allowance over the minimum, or a gain of bytes."""
    entry = quantities.get(k.quantity)
    return k.check is CheckKind.BYTES or (k.check is CheckKind.GAIN and entry is not None and entry.unit is Unit.BYTES)


def _variant_tone(case: CaseResult, variant: str, bytes_only: bool = False) -> Tone:
    """The colour of a variant's marks: its checks' worst verdict; with ``bytes_only``, of the
    checks on its DRAM bytes alone (a split kernel's time is no reason to paint its bytes red)."""
    if variant == UNFUSED:
        return Tone.OK
    return tone(worst(k for k in case.checks if k.variant == variant and (not bytes_only or _bytes_check(k))))


def _bandwidth(values: Mapping[str, float]) -> float | None:
    read, write = values.get(names.DRAM_READ_RATE), values.get(names.DRAM_WRITE_RATE)
    return read + write if finite(read) and finite(write) else None


def _fusion_chart(case: CaseResult, env: Mapping[str, Any], anchor: str) -> Chart | None:
    measured = [v for v in case.variants if finite(v.values.get(names.DRAM_BYTES))]
    if not measured:
        return None
    bars = [
        charts.FusionBar(
            variant=v.variant,
            dram_bytes=v.values.get(names.DRAM_BYTES),
            baseline_bytes=v.baseline_values.get(names.DRAM_BYTES),
            bandwidth=_bandwidth(v.values),
            baseline_bandwidth=_bandwidth(v.baseline_values),
            tone=_variant_tone(case, v.variant, bytes_only=True),
        )
        for v in sorted(measured, key=lambda v: v.variant != UNFUSED)[:_CHART_VARIANTS]
    ]
    min_bytes = next((v.values[names.MIN_BYTES] for v in measured if finite(v.values.get(names.MIN_BYTES))), None)
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
        f"{cut(case.case, NAME)}: DRAM bytes against the minimum, bandwidth against the card's peak"
        + _first(len(bars), len(measured), "variants"),
    )


def _first(shown: int, total: int, what: str) -> str:
    """`` (the first 12 of 300 variants)`` when not all are drawn."""
    return f" (the first {shown} of {total:,} {what})" if shown < total else ""


def _spread(values: Mapping[str, float]) -> charts.Spread | None:
    median = values.get(names.EVENT_TIME)
    if not finite(median):
        return None

    def get(q: str) -> float | None:
        v = values.get(q)
        return v if finite(v) else None

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
    title = f"{cut(case.case, NAME)}: CUDA-event time per call, now and baseline"
    return charts.timing_chart(
        rows[:_CHART_VARIANTS], f"{anchor}-timing", title + _first(_CHART_VARIANTS, len(rows), "variants")
    )


def align(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch]) -> tuple[InventoryLine, ...]:
    """This run's kernels lined up with the baseline's, by name in launch order (the same
    matching as the inventory check's, :func:`fuseci.judge.checks.inventory_diff`)."""
    if not old:
        return tuple(InventoryLine("now", None, k, frozenset()) for k in new)
    rows: list[InventoryLine] = []
    matcher = difflib.SequenceMatcher(a=[k.name for k in old], b=[k.name for k in new], autojunk=False)
    known = {k.name for k in old}
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        a, b = old[i1:i2], new[j1:j2]
        match op:
            case "equal":
                for ka, kb in zip(a, b, strict=True):
                    changed = frozenset(f for f in ("grid", "block", "registers") if getattr(ka, f) != getattr(kb, f))
                    rows.append(InventoryLine("changed" if changed else "same", ka, kb, changed))
            case "insert":
                rows += [InventoryLine("extra" if k.name in known else "new", None, k, frozenset()) for k in b]
            case "delete":
                rows += [InventoryLine("vanished", k, None, frozenset()) for k in a]
            case _:
                status = "split" if len(b) > len(a) else "merged" if len(b) < len(a) else "replaced"
                rows += [InventoryLine(status, ka, kb, frozenset()) for ka, kb in zip_longest(a, b)]
    return tuple(rows)


def _kernel(k: KernelLaunch | None) -> KernelLaunch | None:
    return replace(k, name=cut(k.name, NAME)) if k is not None else None


def _inventory(v: VariantMeasurement) -> InventoryView | None:
    if not v.kernels and not v.baseline_kernels:
        return None
    # Lining up thousands of kernels by name would take longer than the rest of the page.
    rows = align(v.baseline_kernels if max(len(v.kernels), len(v.baseline_kernels)) <= _ALIGNED else (), v.kernels)
    shown = tuple(InventoryLine(r.status, _kernel(r.old), _kernel(r.new), r.changed) for r in rows[:_KERNELS])
    return InventoryView(
        variant=cut(v.variant, NAME),
        rows=shown,
        has_baseline=bool(v.baseline_kernels),
        differs=any(r.status not in ("same", "now") for r in rows),
        more=more(len(rows) - len(shown), "kernels"),
    )


def case_view(comparison: Comparison, case: CaseResult, anchor: str) -> CaseView:
    """The case's section, every list bounded and every string cut."""
    checks = sorted(case.checks, key=lambda k: k.verdict.rank)
    bad = [k for k in checks if failing(k.verdict)]
    drawn: list[Chart | None] = []
    rows = _gain_rows(case)
    if rows:
        title = f"{cut(case.case, NAME)}: fusion gains against the baseline" + _first(_CHART_ROWS, len(rows), "gains")
        drawn.append(charts.gain_chart(rows[:_CHART_ROWS], f"{anchor}-gains", title))
    drawn.append(_fusion_chart(case, comparison.env, anchor))
    drawn.append(_timing_chart(case, anchor))
    inventories = [i for i in (_inventory(v) for v in case.variants[: _INVENTORIES * 4]) if i is not None]
    ledgers = sections(case)
    suite_notes = comparison.notes if case is comparison.cases[0] else ()  # the suite's own, once
    return CaseView(
        **case_head(comparison, case, anchor),
        description=cut(case.description, TEXT),
        where=cut(where(comparison, case), NAME),
        causes=_causes(case),
        failures=tuple(check_view(k) for k in bad[:MESSAGES]),
        checks=tuple(check_view(k) for k in checks[:_CHECKS]),
        checks_total=len(checks),
        checks_more=more(len(checks) - _CHECKS, "checks"),
        charts=tuple(c for c in drawn if c is not None),
        inventories=tuple(inventories[:_INVENTORIES]),
        inventories_more=more(
            sum(1 for v in case.variants if v.kernels or v.baseline_kernels) - min(len(inventories), _INVENTORIES),
            "variants' kernels",
        ),
        ledgers=ledgers,
        ledgers_more=ledgers_more(case, len(ledgers)),
        notes=tuple(cut(n, TEXT) for n in [*suite_notes, *case.notes][:_NOTES]),
    )


def where(comparison: Comparison, case: CaseResult) -> str:
    """The case's suite file and line."""
    return f"{comparison.suite_path}:{case.line}" if case.line else comparison.suite_path


def case_weight(v: CaseView) -> int:
    """About the bytes the case's section takes (more, never less)."""
    texts = [v.suite, v.card, v.case, v.description, v.where, *v.notes]
    kernels = sum(
        weight(*(k.name for k in (r.old, r.new) if k is not None), markup=400) for i in v.inventories for r in i.rows
    )
    charts_size = sum(len(c.svg) + weight(c.title, c.legend, markup=300) for c in v.charts)
    checks = sum(check_weight(k) for k in (*v.checks, *v.failures))
    ledgers = sum(weight(s.variant, markup=200) + s.view.weight for s in v.ledgers)
    causes = sum(weight(c.variant, c.kind, c.missing, *c.evidence, *c.also, markup=300) for c in v.causes)
    return weight(*texts, markup=3000) + kernels + charts_size + checks + ledgers + causes
