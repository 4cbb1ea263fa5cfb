"""Pure comparison: (results, suite policies, baseline) → a :class:`Comparison` of verdicts; nothing printed or
written. An environment difference blocks the baseline comparison (``INCOMPARABLE``) only where it changes what a
number means (:mod:`fuseci.judge.causes`); each variant with a finding gets one cause
(:func:`fuseci.judge.causes.decide`)."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from fuseci.config import names, quantities
from fuseci.config.model import UNFUSED, Case, Suite
from fuseci.config.quantities import Gate
from fuseci.frames.metrics import SuiteResults, inventory
from fuseci.judge import causes, counters
from fuseci.judge import checks as ck
from fuseci.judge.baseline import Baseline, SourcePrint
from fuseci.judge.verdict import (
    CaseResult,
    CauseKind,
    CheckKind,
    Comparison,
    EnvDifference,
    MetricDelta,
    Reference,
    VariantMeasurement,
    Verdict,
    env_differences,
)
from fuseci.records.fusion import Ledger, NodeChange
from fuseci.records.harness import CaseRecord, CaseStatus
from fuseci.records.sass import KernelCode


def _missing_record_reason(case: Case, results: SuiteResults) -> str:
    """Why the harness record has nothing for a case."""
    record = results.record
    if record.interrupted and record.running == case.id:
        return f"this case was running when the run stopped (a hang or a crash in it?): {record.interrupted}"
    if record.interrupted:
        return f"not reached: {record.interrupted}"
    if record.complete:
        return "the harness record has no result for this case: the report predates the case; profile the suite again"
    return "the harness never reached this case (did it crash? see the harness log)"


def _compared(against: str, output: int) -> str:
    """A failed output comparison as a check's quantity: what it was compared with, and which output."""
    what = "first_call" if against == "its first call" else re.sub(r"[^A-Za-z0-9_]+", "_", against)[:60] or "output"
    return f"{what}.output{output}"


def _correctness(case: Case, rec: CaseRecord | None) -> list[MetricDelta]:
    """A WRONG check per failed output comparison (quantity ``reference.output0``...), then a PASS
    per variant checked right."""
    out = [
        MetricDelta(
            case.id, k.variant, CheckKind.CORRECTNESS, _compared(k.against, k.output), Verdict.WRONG,
            f"wrong result: {k.describe()}", current=k.max_abs_err,
        )
        for k in (rec.checks if rec else ())
        if not k.passed
    ]  # fmt: skip
    if rec is None or rec.status is CaseStatus.ERROR:
        return out
    wrong = {c.variant for c in out}
    for v in case.variants:
        against = sorted({k.against for k in rec.checks if k.variant == v.id})
        if v.id not in wrong and against:
            matches = f"{v.id} output matches {' and '.join(against)}"
            out.append(MetricDelta(case.id, v.id, CheckKind.CORRECTNESS, "", Verdict.PASS, matches))
    return out


def _not_measured(case: Case, rec: CaseRecord | None, results: SuiteResults) -> list[MetricDelta]:
    """Why a case (or some of its variants) has nothing to judge; empty when all was measured."""

    def error(message: str, variant: str = "") -> MetricDelta:
        return MetricDelta(case.id, variant, CheckKind.CASE, "", Verdict.ERROR, message)

    if rec is None:
        return [error(_missing_record_reason(case, results))]
    if rec.status is CaseStatus.ERROR:
        logs = results.record.profiler.logs if results.record.profiler else ""
        return [error(f"{rec.message}; logs: {logs}" if logs else rec.message)]
    if rec.status is CaseStatus.WRONG:
        return []
    unmeasured = [v.id for v in case.variants if results.variant_values(case.id, v.id) is None]
    if unmeasured and results.record.interrupted:
        return [error(f"checked, not measured: {results.record.interrupted}")]
    if unmeasured:
        return [error(
            f"variant(s) {', '.join(unmeasured)} launched no kernels inside their NVTX range "
            f"({names.range_name(results.suite, case.id, unmeasured[0])}): does the function launch GPU work, "
            "or did it return a cached result?",
            unmeasured[0],
        )]  # fmt: skip
    return []


def _values(ctx: ck.VariantContext, *, unfused: bool = False) -> list[str]:
    """The quantities gated on the variant's own value that ``ctx``'s case gates; with ``unfused``,
    only those that judge the unfused variant too."""
    return [
        q.name
        for q in quantities.QUANTITIES
        if q.gate is Gate.VALUE and q.name in ctx.case.gates and (q.unfused or not unfused)
    ]


def _value(ctx: ck.VariantContext, quantity: str) -> MetricDelta | None:
    """A variant's own value against its baseline: a counted quantity's check, or the others'."""
    entry = quantities.get(quantity)
    if entry is not None and entry.counted is not None:
        return counters.counted_check(ctx, quantity)
    return ck.value_check(ctx, quantity)


def _variant_checks(ctx: ck.VariantContext) -> list[MetricDelta]:
    """Every check of one measured variant, in report order."""
    out = [d for d in (ck.inventory_check(ctx), ck.kernels_check(ctx)) if d]
    fused = ctx.gains is not None and ctx.variant.id != UNFUSED
    if ctx.variant.id == UNFUSED:  # a counter gated on every variant, unfused too
        out += [d for q in _values(ctx, unfused=True) if (d := _value(ctx, q))]
    if not fused:
        return out
    for q in quantities.gains():
        if q in ctx.case.gates and (q != names.EVENT_TIME or ctx.timed) and (d := ck.gain_check(ctx, q)):
            out.append(d)
    out += [d for q in _values(ctx) if (d := _value(ctx, q))]
    out = ck.occupancy_checks(ctx, out)
    if ctx.timed and (d := ck.asynchrony_check(ctx)) is not None:
        out.append(d)
    if (d := ck.bytes_check(ctx)) is not None:
        out.append(d)
    return out + ck.expect_checks(ctx)


def _first_calls(case: Case, rec: CaseRecord) -> str | None:
    """A note of each variant's first call when one took long enough to matter; None when all were quick."""
    times = {v.id: rec.first_call_ns[v.id] for v in case.variants if v.id in rec.first_call_ns}
    if not times or max(times.values()) < FIRST_CALL_NOTE_NS:
        return None
    said = ", ".join(f"{vid} {ns / 1e9:.2f} s" for vid, ns in times.items())
    return f"first calls (compilation, autotuning, caches; the cold start): {said}"


#: A case whose slowest first call takes this long gets a note of every variant's first call.
FIRST_CALL_NOTE_NS = 0.5e9


@dataclass(frozen=True, slots=True)
class Around:
    """What a suite's every case is judged around, beside its baseline."""

    reference: Reference
    """What the baseline is, for the advice of messages."""
    blocking: Sequence[EnvDifference] = ()
    """Environment differences that block every comparison."""
    environment: tuple[EnvDifference, ...] = ()
    """Those compared across (an upgrade, or accepted with ``--accept-env``)."""
    sources: Mapping[str, SourcePrint] | None = None
    """Each case's source fingerprint in this run, by case id (None: not taken)."""
    code: Mapping[str, Sequence[KernelCode]] = field(default_factory=dict)
    """The compiled code of the run's kernels, by name (the record's builds)."""
    code_notes: Mapping[str, str] = field(default_factory=dict)
    """Why a kernel's code could not be read in this run, by kernel name."""


def _caused(
    case: Case,
    checks: list[MetricDelta],
    measurements: list[VariantMeasurement],
    rec: CaseRecord,
    baseline: Baseline | None,
    around: Around,
) -> list[VariantMeasurement]:
    """``measurements``, each with the cause of its variant's finding (:func:`causes.decide`)."""
    unfused = next((m for m in measurements if m.variant == UNFUSED), None)
    before = baseline.code.get(case.id, {}) if baseline is not None else {}
    out = []
    for m in measurements:
        spreads = [causes.relative_spread(x) for x in (m.values, m.baseline_values)]
        if unfused is not None and m is not unfused:
            spreads += [causes.relative_spread(x) for x in (unfused.values, unfused.baseline_values)]
        code_changes, code_notes = causes.evidence(m.kernels, around.code, before, around.code_notes)
        seen = causes.CauseEvidence(
            checks=tuple(k for k in checks if k.variant == m.variant),
            kernels=m.kernels,
            baseline_kernels=m.baseline_kernels,
            spread=max((x for x in spreads if not math.isnan(x)), default=math.nan),
            has_baseline=bool(m.baseline_values or m.baseline_kernels),
            source=(around.sources or {}).get(case.id),
            baseline_source=baseline.sources.get(case.id) if baseline is not None else None,
            environment=around.environment,
            autotuned=tuple(rec.autotuned.get(m.variant, ())),
            reference=around.reference.name,
            code_changes=code_changes,
            code_notes=code_notes,
        )
        cause = causes.decide(seen)
        out.append(replace(m, cause=cause) if cause is not None else m)
    return out


@dataclass(frozen=True, slots=True)
class LedgerJudged:
    """A ledger variant's ledger, its baseline's, and the ledger checks between them (made by
    :mod:`fuseci.ledger.gate`, placed among the case's checks before a planted regression's)."""

    ledger: Ledger | None
    baseline: Ledger | None
    checks: tuple[MetricDelta, ...]
    changes: tuple[NodeChange, ...] = ()
    """What changed from :attr:`baseline` to :attr:`ledger`, node by node (none without a baseline)."""


def _judge_case(
    case: Case,
    results: SuiteResults,
    baseline: Baseline | None,
    around: Around,
    ledgers: Mapping[tuple[str, str], LedgerJudged],
) -> CaseResult:
    rec = results.record.cases.get(case.id)
    checks = _correctness(case, rec) + _not_measured(case, rec, results)
    measurements: list[VariantMeasurement] = []
    if rec is not None and rec.ok:
        unfused = results.variant_values(case.id, UNFUSED) or {}
        for v in case.variants:
            if rec.compiled.get(v.id):
                checks.append(ck.compile_check(case, v, rec.compiled[v.id]))
            ctx = ck.VariantContext(
                case=case,
                variant=v,
                values=results.variant_values(case.id, v.id) or {},
                gains=results.gain_values(case.id, v.id) if v.id != UNFUSED else None,
                kernels=inventory(results.kernels, case.id, v.id),
                unfused=unfused,
                baseline=baseline,
                comparable=not around.blocking,
                reference=around.reference,
                remeasured=len(rec.retimings),
                timed=results.record.timed,
                sm_count=_int(results.env.get("sm_count")),
                dram_peak=_positive(results.env.get(names.DRAM_PEAK)),
            )
            judged = ledgers.get((case.id, v.id))
            measurements.append(
                VariantMeasurement(
                    v.id,
                    ctx.values,
                    ctx.gains or {},
                    ctx.kernels,
                    baseline_values=ctx.baseline_values() or {},
                    baseline_kernels=ctx.baseline_kernels(),
                    ledger=judged.ledger if judged else None,
                    baseline_ledger=judged.baseline if judged else None,
                    ledger_changes=judged.changes if judged else (),
                )
            )
            if judged is not None:
                checks += judged.checks
            checks += _variant_checks(ctx)
    for v in case.variants:
        if v.caught_by:
            checks = ck.planted(case, v, checks)
    if rec is not None and measurements:
        measurements = _caused(case, checks, measurements, rec, baseline, around)
    notes = [n for n in (ck.undercount_note(measurements),) if n]
    if rec is not None:
        notes += [*rec.notes, *(n for n in (_first_calls(case, rec),) if n)]
    timing_gate = case.gates.get(names.EVENT_TIME)
    if timing_gate and timing_gate.enabled and not results.record.timed and measurements:
        notes.append(
            "not timed: this run's record has no CUDA-event timings (it was recorded without the timed "
            "pass), so the speedup gate was not applied"
        )
    return CaseResult(case.id, case.line, case.description, tuple(checks), tuple(measurements), tuple(notes))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _positive(value: object) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else 0.0  # type: ignore[arg-type]


def _why_incomparable(blocking: Sequence[EnvDifference], reference: Reference) -> str:
    """The suite's one line for a baseline its checks are not compared with; ``""`` when none."""
    if not blocking:
        return ""
    return (
        f"not compared with {reference.name}: recorded under "
        + "; ".join(f"{d.field} {d.baseline_value!r} (now {d.current!r})" for d in blocking)
        + reference.incomparable(",".join(d.field for d in blocking))
    )


def compare(
    results: SuiteResults,
    suite: Suite,
    baseline: Baseline | None,
    *,
    baseline_path: str | None = None,
    accept_env: frozenset[str] = frozenset(),
    reference: Reference | None = None,
    ledgers: Mapping[tuple[str, str], LedgerJudged] | None = None,
    sources: Mapping[str, SourcePrint] | None = None,
) -> Comparison:
    """Judge one suite's results against its policies and baseline. Prints nothing.

    ``reference`` says what the baseline is, for the advice of messages (default: the suite's
    baseline file); ``sources`` holds each case's source fingerprint in this run, for the causes
    of findings (None: not taken)."""
    reference = reference or Reference(f"fuseci update-baselines {shlex.quote(str(suite.path))}")
    found = env_differences(baseline.env, results.env, accept_env) if baseline is not None else ()
    upgrades = [d for d in found if causes.is_upgrade(d)]
    diffs = tuple(replace(d, accepted=True) if causes.is_upgrade(d) else d for d in found)
    blocking = [d for d in diffs if not d.accepted]
    said = causes.upgrade_said(upgrades)
    compared = tuple(d for d in diffs if d.accepted)
    around = Around(reference, blocking, compared, sources, results.record.code, results.record.code_notes)
    cases = [_judge_case(case, results, baseline, around, ledgers or {}) for case in suite.cases]
    if baseline is not None:
        known = {c.id for c in suite.cases}
        for cid in sorted(set(baseline.cases) - known):
            miss = MetricDelta(cid, "", CheckKind.CASE, "", Verdict.MISSING, reference.dropped(cid))
            cases.append(CaseResult(cid, 0, "", (miss,), ()))
    comparison = Comparison(
        suite=suite.name,
        suite_path=str(suite.path),
        env=dict(results.env),
        baseline_path=baseline_path,
        has_baseline=baseline is not None,
        env_differences=diffs,
        cases=tuple(cases),
        reference=reference,
    )
    note = counters.legacy_note(comparison, () if suite.ncu.tma else quantities.TMA_METRICS)
    upgraded = f"compared across an upgrade since {reference.name}: {said}" if said else ""
    pinned = results.record.pinned
    unrecorded = _unrecorded_sources(comparison, baseline, reference)
    notes = tuple(n for n in (_why_incomparable(blocking, reference), upgraded, note, pinned, unrecorded) if n)
    return replace(comparison, notes=notes) if notes else comparison


def _unrecorded_sources(comparison: Comparison, baseline: Baseline | None, reference: Reference) -> str:
    """The suite's one note that a finding's cause needs the baseline recorded again (it holds no
    source fingerprints); ``""`` otherwise."""
    if baseline is None or baseline.sources:
        return ""
    if not any(
        v.cause is not None and v.cause.kind is CauseKind.UNDETERMINED for c in comparison.cases for v in c.variants
    ):
        return ""
    again = f" (`{reference.command}`)" if reference.command else ""
    return (
        f"causes need a re-recorded baseline: {reference.name} holds no source fingerprints (recorded before fuseci "
        f"kept them), so a change of its kernels cannot be told a code change or another compile; record it again{again}"
    )
