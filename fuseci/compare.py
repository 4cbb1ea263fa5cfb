"""Pure comparison: (results, suite policies, baseline) → a :class:`Comparison` of verdicts.

Nothing here prints or touches files. Every check becomes a :class:`MetricDelta` with a
:class:`Verdict`; reporters render them and the CLI maps them to an exit code.

Checks per case:

* ``correctness`` per variant, from the harness: a wrong result is ``WRONG``.
* ``gain`` per fused variant and gated quantity: the fusion gain (unfused ÷ variant, higher is
  better) against the baseline's, within the case's tolerance. The CUDA-event speedup's band
  is widened to what its measured noise can resolve (:func:`time_band`), and a speedup that
  falls a little outside it is flagged for re-measurement (:attr:`MetricDelta.retry`) before
  it counts as a regression.
* ``value`` per fused variant and gated occupancy: the variant's own value against its baseline.
* ``inventory`` per variant, while launches are gated: the ordered kernel names against the
  baseline's; a split, a new kernel or a vanished one is named as such (:func:`inventory_diff`).
* ``bytes`` per fused variant: DRAM bytes over the case's minimum, within its allowance.
* ``expect`` per fused variant and expectation: the gain against an absolute bound.
* ``planted`` per planted variant (``caught_by``): whether every check meant to catch it did.
* ``case`` when the case could not be measured at all (``ERROR``) or vanished (``MISSING``).

A variant may be judged against another variant's baseline (``baseline:`` in the suite).
"""

from __future__ import annotations

import difflib
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fuseci import schema
from fuseci.baseline import Baseline
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP
from fuseci.metrics import ENV_FIELDS, KernelLaunch, SuiteResults, inventory, ratio
from fuseci.policy import Band, Direction
from fuseci.record import CaseStatus
from fuseci.suite import BASELINE_VARIANT, Case, Suite, Variant

#: A CUDA-event speedup's band is at least this many standard errors of its change (z-score):
#: a change smaller than that cannot be told from noise.
NOISE_Z = 4.0
#: A speedup that falls outside its band by at most this factor of the band is borderline:
#: ``fuseci run`` re-measures the case before declaring the regression.
BORDERLINE_FACTOR = 3.0
#: DRAM writes count as undercounted (output still in L2) when L2 received this fraction more.
L2_UNDERCOUNT = 0.02


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
    retry: bool = False
    """A borderline CUDA-event speedup regression: re-measure the case before believing it."""


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
    notes: tuple[str, ...] = ()
    """What a reader of the numbers should know (DRAM writes undercounted because output stayed
    in L2); never a verdict."""

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


def time_noise(values: Mapping[str, float]) -> float:
    """Relative standard error of one variant's median CUDA-event time (NaN when not timed).

    From the spread of its timed calls: the IQR of a normal sample is 1.349 σ and the standard
    error of a median of n calls is 1.2533 σ / √n.
    """
    median = values.get(schema.EVENT_TIME, math.nan)
    iqr = values.get(schema.EVENT_TIME_IQR, math.nan)
    n = values.get(schema.EVENT_TIME_REPEATS, math.nan)
    if not (median > 0 and n >= 1 and iqr >= 0):
        return math.nan
    return 1.2533 * (iqr / 1.349) / math.sqrt(n) / median


def time_band(tolerance: float, noise: Sequence[float]) -> float:
    """The relative band a CUDA-event speedup may move within: the suite's tolerance, or
    :data:`NOISE_Z` standard errors of the change when the measured noise is larger.

    ``noise`` holds the relative standard errors of the four medians behind the change
    (unfused and fused, now and in the baseline); unknown ones (NaN) count as zero.
    """
    combined = math.sqrt(sum(x * x for x in noise if not math.isnan(x)))
    return max(tolerance, NOISE_Z * combined)


def _gain_check(
    case: Case,
    variant: Variant,
    quantity: str,
    current: float,
    base_gains: Mapping[str, float] | None,
    comparable: bool,
    why_incomparable: str,
    noise: Sequence[float] = (),
    remeasured: int = 0,
) -> MetricDelta | None:
    tol = case.gates[quantity]
    if not tol.enabled:
        return None
    if quantity == schema.EVENT_TIME and tol.relative:
        return _time_check(case, variant, current, base_gains, comparable, why_incomparable, noise, remeasured)
    name = f"{_label(quantity)} gain ({BASELINE_VARIANT} ÷ {variant.id})"
    d = MetricDelta(case.id, variant.id, "gain", quantity, Verdict.ERROR, "", current=current, tolerance=str(tol))
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


def _time_check(
    case: Case,
    variant: Variant,
    current: float,
    base_gains: Mapping[str, float] | None,
    comparable: bool,
    why_incomparable: str,
    noise: Sequence[float],
    remeasured: int,
) -> MetricDelta:
    """The CUDA-event speedup against its baseline, in a band widened by measured noise."""
    tol = case.gates[schema.EVENT_TIME]
    name = f"speedup in CUDA-event time ({BASELINE_VARIANT} ÷ {variant.id})"
    band = time_band(tol.relative or 0.0, noise)
    shown = f"±{band:.1%}" + ("" if band == tol.relative else f" (tolerance {tol}, widened by measured noise)")
    d = MetricDelta(case.id, variant.id, "gain", schema.EVENT_TIME, Verdict.ERROR, "", current=current, tolerance=shown)
    passes = f"; median of {remeasured + 1} timed passes" if remeasured else ""
    if math.isnan(current):
        return replace(d, message=f"{name} cannot be computed: a variant was not timed (see the timed run's log)")
    base = math.nan if base_gains is None else base_gains.get(schema.EVENT_TIME, math.nan)
    if not base > 0:  # NaN: no timing in the baseline
        why = (
            "no baseline yet (record one with `fuseci update-baselines`)"
            if base_gains is None
            else "the baseline has no timing for it"
        )
        return replace(d, verdict=Verdict.NEW, message=f"{name} is {_fmt_gain(current)}{passes}; {why}")
    change = (current - base) / base
    d = replace(d, baseline=base, change=change)
    seen = f"{_fmt_gain(current)}, baseline {_fmt_gain(base)} ({change:+.1%}){passes}; band {shown}"
    if not comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{name} {seen}; not compared: {why_incomparable}")
    if abs(change) <= band:
        return replace(d, verdict=Verdict.PASS, message=f"{name} {seen}")
    if change > 0:
        return replace(d, verdict=Verdict.IMPROVED, message=f"{name} rose: {seen} (update the baseline to keep it)")
    borderline = -change <= BORDERLINE_FACTOR * band and not remeasured and not variant.caught_by
    message = f"{name} fell: {seen}"
    if borderline:
        message += "; borderline: re-measure before believing it"
    return replace(d, verdict=Verdict.REGRESSED, message=message, retry=borderline)


def _baseline_values(baseline: Baseline | None, case: str, variant: str) -> Mapping[str, float] | None:
    if baseline is None or case not in baseline.cases or variant not in baseline.cases[case]:
        return None
    return baseline.cases[case][variant].values


def _baseline_gains(baseline: Baseline | None, case: str, variant: str) -> dict[str, float] | None:
    b = _baseline_values(baseline, case, BASELINE_VARIANT)
    v = _baseline_values(baseline, case, variant)
    if b is None or v is None:
        return None
    return {q: ratio(b.get(q, math.nan), v.get(q, math.nan)) for q in schema.GAIN_GATEABLE}


def _value_check(
    case: Case, variant: Variant, quantity: str, current: float, base: Mapping[str, float] | None, comparable: bool
) -> MetricDelta | None:
    """A fused variant's own value (occupancy) against its baseline; higher is better."""
    tol = case.gates[quantity]
    if not tol.enabled:
        return None
    name = f"{_label(quantity)} of {variant.id}"
    d = MetricDelta(case.id, variant.id, "value", quantity, Verdict.PASS, "", current=current, tolerance=str(tol))
    old = math.nan if base is None else base.get(quantity, math.nan)
    if math.isnan(old) or math.isnan(current):
        what = "no baseline yet" if base is None else "nothing to compare"
        return replace(d, verdict=Verdict.NEW, message=f"{name} is {current:.1f}%; {what}")
    change = (current - old) / old if old else None
    d = replace(d, baseline=old, change=change)
    pct = "n/a" if change is None else f"{change:+.1%}"
    seen = f"from {old:.1f}% to {current:.1f}% ({pct}); tolerance {tol}"
    if not comparable:
        return replace(
            d, verdict=Verdict.INCOMPARABLE, message=f"{name} {current:.1f}%, baseline {old:.1f}%; not compared"
        )
    match tol.classify(old, current, Direction.HIGHER_IS_BETTER):
        case Band.WORSE:
            return replace(d, verdict=Verdict.REGRESSED, message=f"{name} fell {seen}")
        case Band.BETTER:
            return replace(d, verdict=Verdict.IMPROVED, message=f"{name} rose {seen} (update the baseline to keep it)")
        case Band.WITHIN:
            return replace(d, message=f"{name} {current:.1f}%, baseline {old:.1f}% ({pct}); tolerance {tol}")


def _names(kernels: Sequence[KernelLaunch]) -> str:
    return " + ".join(k.name for k in kernels) or "nothing"


def inventory_diff(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch]) -> list[str]:
    """How a variant's ordered kernels changed, as phrases: splits, merges, new and vanished
    kernels, renames, and changed launch shapes (grid, block, registers) of kernels that stayed."""
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=[k.name for k in old], b=[k.name for k in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        a, b = old[i1:i2], new[j1:j2]
        match op:
            case "equal":
                for ka, kb in zip(a, b, strict=True):
                    shape = [
                        f"{what} {x} -> {y}"
                        for what, x, y in (
                            ("grid", ka.grid, kb.grid),
                            ("block", ka.block, kb.block),
                            ("registers", ka.registers, kb.registers),
                        )
                        if x != y
                    ]
                    if shape:
                        out.append(f"{ka.name}: {', '.join(shape)}")
            case "insert":
                same = [k for k in b if any(k.name == o.name for o in old)]
                what = "extra launch" if len(same) == len(b) else "new kernel"
                out.append(f"{what}{'s' if len(b) > 1 else ''}: {_names(b)}")
            case "delete":
                out.append(f"vanished kernel{'s' if len(a) > 1 else ''}: {_names(a)}")
            case "replace" if len(b) > len(a):
                out.append(f"split: {_names(a)} became {_names(b)}")
            case "replace" if len(b) < len(a):
                out.append(f"merged: {_names(a)} became {_names(b)}")
            case _:
                out.append(f"replaced: {_names(a)} by {_names(b)}")
    return out


def _inventory_check(
    case: Case, variant: Variant, kernels: tuple[KernelLaunch, ...], baseline: Baseline | None, comparable: bool
) -> MetricDelta | None:
    """The variant's kernels against its baseline's, while the launch count is gated."""
    launches = case.gates.get(schema.LAUNCHES)
    if launches is None or not launches.enabled or baseline is None or not kernels:
        return None
    entry = baseline.cases.get(case.id, {}).get(variant.judged_as)
    if entry is None or not entry.kernels:
        return None
    old = entry.kernels
    against = "the baseline" if variant.judged_as == variant.id else f"the baseline of {variant.judged_as}"
    d = MetricDelta(
        case.id, variant.id, "inventory", "kernels", Verdict.PASS, "", current=len(kernels), baseline=len(old)
    )
    if variant.judged_as != variant.id and len(old) == len(kernels):
        # Another variant's baseline: its kernels have other names; their number and launch
        # shapes are what must hold.
        old = tuple(replace(o, name=k.name) for o, k in zip(old, kernels, strict=True))
    changes = inventory_diff(old, kernels)
    names_changed = [k.name for k in old] != [k.name for k in kernels]
    count = f"{variant.id} launches {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}, {against} {len(old)}"
    if not names_changed:
        shape = f"; launch shape changed: {'; '.join(changes)}" if changes else ""
        return replace(d, message=f"{count}, the same: {_names(kernels)}{shape}")
    if not comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{count}: {'; '.join(changes)}; not compared")
    if variant.id != BASELINE_VARIANT:
        changes = [c.replace("split:", "the fusion split:", 1) if c.startswith("split:") else c for c in changes]
    said = f"{count}: {'; '.join(changes)}"
    if len(kernels) > len(old):  # a split, a new kernel or an extra launch
        return replace(
            d, verdict=Verdict.REGRESSED, message=f"{said} (if intended, record it with `fuseci update-baselines`)"
        )
    if len(kernels) < len(old):  # merged or vanished: fewer launches
        return replace(d, verdict=Verdict.IMPROVED, message=f"{said} (update the baseline to keep it)")
    return replace(d, message=f"{said}; as many launches as before (the gains judge the rest)")


def _bytes_check(case: Case, variant: Variant, values: Mapping[str, float]) -> MetricDelta | None:
    """A fused variant's DRAM bytes against the case's minimum, within the allowance."""
    tol = case.bytes_allowance
    minimum = values.get(schema.MIN_BYTES, math.nan)
    moved = values.get(schema.DRAM_BYTES, math.nan)
    if not tol.enabled or math.isnan(minimum) or math.isnan(moved) or minimum <= 0:
        return None
    over = moved / minimum
    allowed = 1.0 + (tol.relative or 0.0)
    seen = (
        f"{variant.id} moved {over:.2f}x the minimum DRAM bytes ({_mib(moved)} for a minimum of {_mib(minimum)}: "
        f"every input read once, every output written once); allowance +{(tol.relative or 0.0):.0%}"
    )
    d = MetricDelta(
        case.id,
        variant.id,
        "bytes",
        schema.BYTES_RATIO,
        Verdict.PASS,
        seen,
        current=over,
        tolerance=f"<= {allowed:.2f}x",
    )
    if over > allowed + 1e-9:
        return replace(
            d,
            verdict=Verdict.REGRESSED,
            message=seen + ": it re-reads an input or spills an intermediate to DRAM",
        )
    return d


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def _undercount_note(measurements: Sequence[VariantMeasurement]) -> str | None:
    """Say when DRAM writes read low because written data was still in L2 when a kernel ended."""
    parts = []
    for m in measurements:
        l2 = m.values.get(schema.L2_WRITE_BYTES, math.nan)
        dram = m.values.get(schema.DRAM_WRITE, math.nan)
        if l2 > 0 and l2 - dram > max(L2_UNDERCOUNT * l2, 2**20):
            parts.append(f"{m.variant} {_mib(l2 - dram)} of {_mib(l2)} ({(l2 - dram) / l2:.0%})")
    if not parts:
        return None
    return (
        "DRAM writes undercount (bytes written to L2 and still there when the kernel ended, where ncu stops "
        f"counting): {', '.join(parts)}; DRAM bytes and their gains read that much low"
    )


def _planted(case: Case, variant: Variant, checks: list[MetricDelta]) -> list[MetricDelta]:
    """A planted regression's checks: its expected failures pass as caught, and one more check
    says whether every check in ``caught_by`` caught it."""
    if any(c.check == "case" and c.verdict is Verdict.ERROR for c in checks):
        return checks  # not measured: nothing was caught or missed, and the error says why
    failing = [c for c in checks if c.variant == variant.id and c.verdict in (Verdict.REGRESSED, Verdict.WRONG)]

    def catches(name: str, c: MetricDelta) -> bool:
        return name in (c.check, c.quantity)

    missed = [n for n in variant.caught_by if not any(catches(n, c) for c in failing)]
    out = [
        replace(c, verdict=Verdict.PASS, message=f"caught as planted: {c.message}", retry=False) if c in failing else c
        for c in checks
    ]
    if missed:
        verdict, message = (
            Verdict.REGRESSED,
            f"planted regression NOT caught by {', '.join(missed)}: the check meant to catch {variant.id} passed",
        )
    else:
        verdict, message = Verdict.PASS, f"planted regression caught by {', '.join(variant.caught_by)}"
    return [
        *out,
        MetricDelta(case.id, variant.id, "planted", "", verdict, message, tolerance=", ".join(variant.caught_by)),
    ]


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
    remeasured = len(rec.retimings)
    unfused_values = results.variant_values(case.id, BASELINE_VARIANT) or {}
    base_unfused = _baseline_values(baseline, case.id, BASELINE_VARIANT) or {}
    for v in case.variants:
        values = results.variant_values(case.id, v.id) or {}
        kernels = inventory(results.kernels, case.id, v.id)
        gains = results.gain_values(case.id, v.id) if v.id != BASELINE_VARIANT else None
        measurements.append(VariantMeasurement(v.id, values, gains or {}, kernels))
        if (inv := _inventory_check(case, v, kernels, baseline, comparable)) is not None:
            checks.append(inv)
        if gains is None or v.id == BASELINE_VARIANT:
            continue
        base_values = _baseline_values(baseline, case.id, v.judged_as)
        base_gains = _baseline_gains(baseline, case.id, v.judged_as)
        noise = [time_noise(x) for x in (unfused_values, values, base_unfused, base_values or {})]
        for q in schema.GAIN_GATEABLE:
            if q == schema.EVENT_TIME and not results.record.profiler.get("timed"):
                continue  # compare() notes it
            if q in case.gates and (
                delta := _gain_check(case, v, q, gains[q], base_gains, comparable, why, noise, remeasured)
            ):
                checks.append(delta)
        for q in schema.VALUE_GATEABLE:
            if q in case.gates and (
                delta := _value_check(case, v, q, values.get(q, math.nan), base_values, comparable)
            ):
                checks.append(delta)
        if (over := _bytes_check(case, v, values)) is not None:
            checks.append(over)
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
        for v in case.variants:
            if v.caught_by:
                checks = _planted(case, v, checks)
        notes = [n for n in (_undercount_note(measurements),) if n]
        timing_gate = case.gates.get(schema.EVENT_TIME)
        if timing_gate and timing_gate.enabled and not results.record.profiler.get("timed") and measurements:
            notes.append(
                "not timed: this run's record has no CUDA-event timings (it was recorded without the timed "
                "pass), so the speedup gate was not applied"
            )
        cases.append(CaseResult(case.id, case.line, case.description, tuple(checks), tuple(measurements), tuple(notes)))
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
