"""Pure comparison: (results, suite policies, baseline) → a :class:`Comparison` of verdicts.

Nothing here prints or touches files. Every check becomes a :class:`MetricDelta` with a
:class:`Verdict`; reporters render them and the CLI maps them to an exit code.

Checks per case:

* ``correctness`` per variant, from the harness: a wrong result is ``WRONG``.
* ``gain`` per fused variant and gated quantity: the fusion gain (unfused ÷ variant, higher is
  better) against the baseline's, within the case's tolerance.
* ``expect`` per fused variant and expectation: the gain against an absolute bound.
* ``case`` when the case could not be measured at all (``ERROR``) or vanished (``MISSING``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fuseci import schema
from fuseci.baseline import Baseline
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP
from fuseci.metrics import ENV_FIELDS, KernelLaunch, SuiteResults, inventory, ratio
from fuseci.policy import Band, Direction
from fuseci.record import CaseStatus
from fuseci.suite import BASELINE_VARIANT, Case, Suite


class Verdict(enum.Enum):
    """Outcome of one check; ordered from worst to best by :attr:`rank`."""

    WRONG = "wrong"
    REGRESSED = "regressed"
    ERROR = "error"
    INCOMPARABLE = "incomparable"
    MISSING = "missing"
    NEW = "new"
    IMPROVED = "improved"
    PASS = "pass"

    @property
    def rank(self) -> int:
        """0 for the worst verdict."""
        return list(Verdict).index(self)

    @property
    def exit_code(self) -> int:
        """What this verdict alone makes the run exit with."""
        match self:
            case Verdict.WRONG | Verdict.REGRESSED:
                return EXIT_REGRESSION
            case Verdict.ERROR | Verdict.INCOMPARABLE:
                return EXIT_SETUP
            case Verdict.MISSING | Verdict.NEW | Verdict.IMPROVED | Verdict.PASS:
                return EXIT_PASS


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """One check of one case."""

    case: str
    """Case id."""
    variant: str
    """Variant id, or empty for case-level checks."""
    check: str
    """``correctness``, ``gain``, ``expect`` or ``case``."""
    quantity: str
    """Gated quantity (ncu metric name or ``launches``); empty for correctness and case checks."""
    verdict: Verdict
    """Outcome."""
    message: str
    """One sentence for people: what was expected, what was seen, by how much."""
    current: float | None = None
    """Current value (a gain for gain and expect checks)."""
    baseline: float | None = None
    """Baseline value, when there is one."""
    change: float | None = None
    """Relative change from the baseline (-0.4 is 40% lower); None without one or when it is 0."""
    tolerance: str = ""
    """The tolerance or expectation applied, as written for people."""


@dataclass(frozen=True, slots=True)
class VariantMeasurement:
    """What one variant measured, for reports."""

    variant: str
    """Variant id."""
    values: Mapping[str, float]
    """Aggregated quantities (empty when the variant was not measured)."""
    gains: Mapping[str, float]
    """Fusion gains (empty for ``unfused``)."""
    kernels: tuple[KernelLaunch, ...]
    """Kernel inventory."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """All checks and measurements of one case."""

    case: str
    """Case id."""
    line: int
    """Line of the case in the suite file (0 when unknown)."""
    description: str
    """From the suite."""
    checks: tuple[MetricDelta, ...]
    """Every check, in a stable order."""
    variants: tuple[VariantMeasurement, ...]
    """Measurements per variant."""

    @property
    def verdict(self) -> Verdict:
        """The worst verdict among the checks."""
        return min((c.verdict for c in self.checks), key=lambda v: v.rank, default=Verdict.PASS)


@dataclass(frozen=True, slots=True)
class EnvDifference:
    """One fingerprint field that differs between the baseline and this run."""

    field: str
    """Field name (see :data:`fuseci.metrics.ENV_FIELDS`)."""
    baseline: Any
    """Value in the baseline."""
    current: Any
    """Value now."""
    accepted: bool
    """True when the user accepted the difference with ``--accept-env``."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """The result of comparing one suite's run with its baseline."""

    suite: str
    """Suite id."""
    suite_path: str
    """Suite file, as given."""
    env: Mapping[str, Any]
    """This run's environment."""
    baseline_path: str | None
    """Where the baseline was looked for."""
    has_baseline: bool
    """False when no baseline file exists."""
    env_differences: tuple[EnvDifference, ...]
    """Fingerprint fields that differ from the baseline's."""
    cases: tuple[CaseResult, ...]
    """Per case, in suite order, then cases only the baseline has."""

    @property
    def verdict(self) -> Verdict:
        """The worst verdict of the suite."""
        return min((c.verdict for c in self.cases), key=lambda v: v.rank, default=Verdict.PASS)

    @property
    def comparable(self) -> bool:
        """False when an unaccepted environment difference blocks every baseline comparison."""
        return all(d.accepted for d in self.env_differences)


def exit_code(comparisons: list[Comparison]) -> int:
    """1 if anything regressed or is wrong; else 3 if anything errored or was incomparable; else 0."""
    codes = {c.exit_code for comp in comparisons for case in comp.cases for c in (x.verdict for x in case.checks)}
    if EXIT_REGRESSION in codes:
        return EXIT_REGRESSION
    if EXIT_SETUP in codes:
        return EXIT_SETUP
    return EXIT_PASS


def env_differences(
    baseline_env: Mapping[str, Any], env: Mapping[str, Any], accept: frozenset[str]
) -> tuple[EnvDifference, ...]:
    """Fingerprint fields that differ; ``accept`` may hold field names or ``all``."""
    return tuple(
        EnvDifference(f, baseline_env.get(f), env.get(f), accepted=f in accept or "all" in accept)
        for f in ENV_FIELDS
        if baseline_env.get(f) != env.get(f)
    )


def _fmt_gain(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3g}x"


def _label(quantity: str) -> str:
    return schema.LABELS.get(quantity, quantity)


def _gain_check(
    case: Case,
    variant: str,
    quantity: str,
    current: float,
    base_gains: Mapping[str, float] | None,
    comparable: bool,
    why_incomparable: str,
) -> MetricDelta | None:
    tol = case.gates[quantity]
    if not tol.enabled:
        return None
    name = f"{_label(quantity)} gain ({BASELINE_VARIANT} ÷ {variant})"
    d = MetricDelta(case.id, variant, "gain", quantity, Verdict.ERROR, "", current=current, tolerance=str(tol))
    if math.isnan(current):
        return replace(
            d,
            message=f"{name} cannot be computed: a side measured zero or nothing (tensors that fit in L2 hide DRAM traffic; size them at 4x L2 or more)",
        )
    if base_gains is None:
        return replace(
            d,
            verdict=Verdict.NEW,
            message=f"{name} is {_fmt_gain(current)}; no baseline yet (record one with `fuseci update-baselines`)",
        )
    base = base_gains.get(quantity, math.nan)
    if math.isnan(base):
        return replace(
            d, verdict=Verdict.NEW, message=f"{name} is {_fmt_gain(current)}; the baseline has no value for it"
        )
    change = (current - base) / abs(base) if base else None  # no relative change from 0
    pct = "n/a" if change is None else f"{change:+.1%}"
    d = replace(d, baseline=base, change=change)
    if not comparable:
        return replace(
            d,
            verdict=Verdict.INCOMPARABLE,
            message=f"{name} is {_fmt_gain(current)}, baseline {_fmt_gain(base)}, not compared: {why_incomparable}",
        )
    moved = f"{name} {'fell' if current < base else 'rose'} from {_fmt_gain(base)} to {_fmt_gain(current)} ({pct}); tolerance {tol}"
    match tol.classify(base, current, Direction.HIGHER_IS_BETTER):
        case Band.WORSE:
            return replace(d, verdict=Verdict.REGRESSED, message=moved)
        case Band.BETTER:
            return replace(d, verdict=Verdict.IMPROVED, message=moved + " (update the baseline to keep it)")
        case Band.WITHIN:
            return replace(
                d,
                verdict=Verdict.PASS,
                message=f"{name} {_fmt_gain(current)}, baseline {_fmt_gain(base)} ({pct}); tolerance {tol}",
            )


def _baseline_gains(baseline: Baseline | None, case: str, variant: str) -> dict[str, float] | None:
    if baseline is None or case not in baseline.cases:
        return None
    variants = baseline.cases[case]
    if BASELINE_VARIANT not in variants or variant not in variants:
        return None
    b, v = variants[BASELINE_VARIANT].values, variants[variant].values
    return {q: ratio(b.get(q, math.nan), v.get(q, math.nan)) for q in schema.GATEABLE}


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


def _measured_case(
    case: Case, results: SuiteResults, baseline: Baseline | None, comparable: bool, why: str
) -> tuple[list[MetricDelta], list[VariantMeasurement]]:
    rec = results.record.cases.get(case.id)
    checks: list[MetricDelta] = []
    measurements: list[VariantMeasurement] = []
    for k in rec.checks if rec else ():
        if not k.passed:
            checks.append(
                MetricDelta(
                    case.id,
                    k.variant,
                    "correctness",
                    "",
                    Verdict.WRONG,
                    f"wrong result: {k.describe()}",
                    current=k.max_abs_err,
                )
            )
    for v in case.variants:
        if (
            not any(c.variant == v.id and c.check == "correctness" for c in checks)
            and rec
            and rec.status != CaseStatus.ERROR
        ):
            against = sorted({k.against for k in rec.checks if k.variant == v.id})
            if against:
                checks.append(
                    MetricDelta(
                        case.id, v.id, "correctness", "", Verdict.PASS, f"{v.id} output matches {' and '.join(against)}"
                    )
                )
    if rec is None or rec.status != CaseStatus.OK:
        if rec is None:
            checks.append(MetricDelta(case.id, "", "case", "", Verdict.ERROR, _missing_record_reason(case, results)))
        elif rec.status == CaseStatus.ERROR:
            logs = results.record.profiler.get("logs")
            message = f"{rec.message}; logs: {logs}" if logs else rec.message
            checks.append(MetricDelta(case.id, "", "case", "", Verdict.ERROR, message))
        return checks, measurements
    unmeasured = [v.id for v in case.variants if results.variant_values(case.id, v.id) is None]
    if unmeasured and results.record.interrupted:
        checks.append(
            MetricDelta(case.id, "", "case", "", Verdict.ERROR, f"checked, not measured: {results.record.interrupted}")
        )
    elif unmeasured:
        checks.append(MetricDelta(
            case.id, unmeasured[0], "case", "", Verdict.ERROR,
            f"variant(s) {', '.join(unmeasured)} launched no kernels inside their NVTX range "
            f"({schema.range_name(results.suite, case.id, unmeasured[0])}): does the function launch GPU work, "
            "or did it return a cached result?",
        ))  # fmt: skip
    for v in case.variants:
        values = results.variant_values(case.id, v.id) or {}
        gains = results.gain_values(case.id, v.id) if v.id != BASELINE_VARIANT else None
        measurements.append(VariantMeasurement(v.id, values, gains or {}, inventory(results.kernels, case.id, v.id)))
        if gains is None or v.id == BASELINE_VARIANT:
            continue
        base_gains = _baseline_gains(baseline, case.id, v.id)
        for q in schema.GATEABLE:
            if q in case.gates and (delta := _gain_check(case, v.id, q, gains[q], base_gains, comparable, why)):
                checks.append(delta)
        for q, exp in v.expect.items():
            ok = exp.holds(gains[q])
            checks.append(MetricDelta(
                case.id, v.id, "expect", q, Verdict.PASS if ok else Verdict.REGRESSED,
                f"{_label(q)} gain ({BASELINE_VARIANT} ÷ {v.id}) is {_fmt_gain(gains[q])}; expected {exp}",
                current=gains[q], tolerance=str(exp),
            ))  # fmt: skip
    return checks, measurements


def compare(
    results: SuiteResults,
    suite: Suite,
    baseline: Baseline | None,
    *,
    baseline_path: str | None = None,
    accept_env: frozenset[str] = frozenset(),
) -> Comparison:
    """Judge one suite's results against its policies and baseline. Prints nothing."""
    diffs = env_differences(baseline.env, results.env, accept_env) if baseline is not None else ()
    blocking = [d for d in diffs if not d.accepted]
    why = (
        "recorded under "
        + "; ".join(f"{d.field} {d.baseline!r} (now {d.current!r})" for d in blocking)
        + (
            "; if this is intended, re-record with `fuseci update-baselines`, or compare anyway with "
            f"--accept-env {','.join(d.field for d in blocking)}"
        )
    )
    cases: list[CaseResult] = []
    for case in suite.cases:
        checks, measurements = _measured_case(case, results, baseline, not blocking, why)
        cases.append(CaseResult(case.id, case.line, case.description, tuple(checks), tuple(measurements)))
    if baseline is not None:
        known = {c.id for c in suite.cases}
        for cid in sorted(set(baseline.cases) - known):
            miss = MetricDelta(
                cid,
                "",
                "case",
                "",
                Verdict.MISSING,
                f"case {cid!r} is in the baseline but not in the suite; `fuseci update-baselines` drops it",
            )
            cases.append(CaseResult(cid, 0, "", (miss,), ()))
    return Comparison(
        suite=suite.name,
        suite_path=str(suite.path),
        env=dict(results.env),
        baseline_path=baseline_path,
        has_baseline=baseline is not None,
        env_differences=diffs,
        cases=tuple(cases),
    )


def failed(suite: Suite, message: str) -> Comparison:
    """A comparison standing for a suite that could not be judged at all (an ERROR check)."""
    check = MetricDelta("(suite)", "", "case", "", Verdict.ERROR, message)
    return Comparison(
        suite=suite.name,
        suite_path=str(suite.path),
        env={},
        baseline_path=None,
        has_baseline=False,
        env_differences=(),
        cases=(CaseResult("(suite)", 0, "the suite could not be profiled or read", (check,), ()),),
    )
