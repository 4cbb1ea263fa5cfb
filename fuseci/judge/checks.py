"""The checks of one variant, each a pure function of a :class:`VariantContext`. A variant judged against another's
baseline (``baseline:`` in the suite) gets the figures of :attr:`~fuseci.config.model.Variant.judged_as`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from fuseci.config import names, quantities
from fuseci.config.model import UNFUSED, Case, Variant
from fuseci.config.policy import Band, Direction
from fuseci.frames.inventory import KernelLaunch, inventory_diff, kernel_names
from fuseci.frames.metrics import ratio
from fuseci.judge.baseline import Baseline, VariantBaseline
from fuseci.judge.verdict import CheckKind, MetricDelta, Reference, VariantMeasurement, Verdict

#: A CUDA-event speedup's band is at least this many standard errors of its change (less is noise).
NOISE_Z = 4.0
#: A speedup outside its band by at most this factor of it is borderline: ``fuseci run`` re-measures the case.
BORDERLINE_FACTOR = 3.0
#: DRAM writes count as undercounted (output still in L2) when L2 received this fraction more.
L2_UNDERCOUNT = 0.02


#: A baseline file (the suite's own command is not known here).
_STORED = Reference("fuseci update-baselines")


@dataclass(frozen=True, slots=True)
class VariantContext:
    """Everything the checks of one variant of one case need."""

    case: Case
    """The case, with its policies."""
    variant: Variant
    """The variant judged."""
    values: Mapping[str, float]
    """Its aggregated quantities in this run (empty when not measured)."""
    gains: Mapping[str, float] | None
    """Its fusion gains in this run; None for ``unfused`` or when either side is unmeasured."""
    kernels: tuple[KernelLaunch, ...]
    """Its kernel inventory in this run."""
    unfused: Mapping[str, float]
    """The ``unfused`` variant's quantities in this run (for the timing noise)."""
    baseline: Baseline | None
    """The suite's baseline, if any."""
    comparable: bool = True
    """False when an unaccepted environment difference blocks every baseline comparison."""
    remeasured: int = 0
    """Extra timed passes the case had (its speedups are medians over them)."""
    timed: bool = True
    """False when this run has no CUDA-event timings: the speedup is not judged."""
    sm_count: int = 0
    """Multiprocessors of the GPU the run measured on (0: unknown)."""
    dram_peak: float = 0.0
    """The card's peak DRAM bandwidth in bytes/s, as ncu's percentages imply it (0: unknown)."""
    reference: Reference = _STORED
    """What the baseline is, for the advice in messages."""

    def _entry(self, variant: str | None = None) -> VariantBaseline | None:
        if self.baseline is None:
            return None
        return self.baseline.cases.get(self.case.id, {}).get(variant or self.variant.judged_as)

    def baseline_values(self, variant: str | None = None) -> Mapping[str, float] | None:
        """The baseline's quantities of ``variant`` (default: the one this variant is judged as)."""
        entry = self._entry(variant)
        return None if entry is None else entry.values

    def baseline_gains(self) -> dict[str, float] | None:
        """The baseline's fusion gains of the variant this one is judged as."""
        b, v = self.baseline_values(UNFUSED), self.baseline_values()
        if b is None or v is None:
            return None
        return {q: ratio(b.get(q, math.nan), v.get(q, math.nan)) for q in quantities.gains()}

    def baseline_kernels(self) -> tuple[KernelLaunch, ...]:
        """The baseline's inventory of the variant this one is judged as (empty when none)."""
        entry = self._entry()
        return () if entry is None else entry.kernels

    def noise(self) -> tuple[float, ...]:
        """Relative standard errors of the four medians behind a speedup's change (unfused, variant; now, baseline)."""
        return tuple(
            time_noise(x)
            for x in (self.unfused, self.values, self.baseline_values(UNFUSED) or {}, self.baseline_values() or {})
        )

    @property
    def candidate(self) -> bool:
        """True when the variant is judged against another variant's baseline."""
        return self.variant.judged_as != self.variant.id

    @property
    def keep_advice(self) -> str:
        """What to do about an improvement, where re-recording helps."""
        return "" if self.candidate else self.reference.keep()

    def delta(self, check: CheckKind, quantity: str, verdict: Verdict, message: str = "", **kw: object) -> MetricDelta:
        """A check of this variant."""
        return MetricDelta(self.case.id, self.variant.id, check, quantity, verdict, message, **kw)  # type: ignore[arg-type]


def fmt_gain(value: float) -> str:
    """A gain for messages: ``2.32x``, or ``n/a``."""
    return "n/a" if math.isnan(value) else f"{value:.3g}x"


def time_noise(values: Mapping[str, float]) -> float:
    """Relative standard error of one variant's median CUDA-event time (NaN when not timed): a normal sample's
    IQR is 1.349 σ, and the standard error of a median of n calls is 1.2533 σ / √n."""
    median = values.get(names.EVENT_TIME, math.nan)
    iqr = values.get(names.EVENT_TIME_IQR, math.nan)
    n = values.get(names.EVENT_TIME_REPEATS, math.nan)
    if not (median > 0 and n >= 1 and iqr >= 0):
        return math.nan
    return 1.2533 * (iqr / 1.349) / math.sqrt(n) / median


def time_band(tolerance: float, noise: Sequence[float]) -> float:
    """The relative band a CUDA-event speedup may move within: the tolerance, or :data:`NOISE_Z`
    standard errors of the change (``noise``: :meth:`VariantContext.noise`, NaN as zero) if larger."""
    combined = math.sqrt(sum(x * x for x in noise if not math.isnan(x)))
    return max(tolerance, NOISE_Z * combined)


def gain_check(ctx: VariantContext, quantity: str) -> MetricDelta | None:
    """One gated gain against the baseline's; None when the gate is off."""
    tol = ctx.case.gates[quantity]
    if not tol.enabled:
        return None
    if quantity == names.EVENT_TIME and tol.relative:
        return time_check(ctx)
    current = (ctx.gains or {}).get(quantity, math.nan)
    name = f"{quantities.label(quantity)} gain ({UNFUSED} ÷ {ctx.variant.id})"
    d = ctx.delta(CheckKind.GAIN, quantity, Verdict.ERROR, current=current, tolerance=str(tol))
    if math.isnan(current):
        return replace(
            d,
            message=f"{name} cannot be computed: a side measured zero or nothing (tensors that fit in L2 hide DRAM traffic; size them at 4x L2 or more)",
        )
    base_gains = ctx.baseline_gains()
    base = math.nan if base_gains is None else base_gains.get(quantity, math.nan)
    if math.isnan(base):
        why = ctx.reference.missing() if base_gains is None else "the baseline has no value for it"
        return replace(d, verdict=Verdict.NEW, message=f"{name} is {fmt_gain(current)}; {why}")
    change = (current - base) / abs(base) if base else None  # no relative change from 0
    pct = "n/a" if change is None else f"{change:+.1%}"
    d = replace(d, baseline_value=base, change=change)
    both = f"{fmt_gain(current)}, baseline {fmt_gain(base)}"
    if not ctx.comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{name} is {both}, not compared")
    moved = f"{name} {'fell' if current < base else 'rose'} from {fmt_gain(base)} to {fmt_gain(current)} ({pct}); tolerance {tol}"
    match tol.classify(base, current, Direction.HIGHER_IS_BETTER):
        case Band.WORSE:
            return replace(d, verdict=Verdict.REGRESSED, message=moved)
        case Band.BETTER:
            return replace(d, verdict=Verdict.IMPROVED, message=moved + ctx.keep_advice)
        case Band.WITHIN:
            return replace(d, verdict=Verdict.PASS, message=f"{name} {both} ({pct}); tolerance {tol}")


def time_check(ctx: VariantContext) -> MetricDelta:
    """The CUDA-event speedup against its baseline, in a band widened by measured noise."""
    tol = ctx.case.gates[names.EVENT_TIME]
    current = (ctx.gains or {}).get(names.EVENT_TIME, math.nan)
    name = f"speedup in CUDA-event time ({UNFUSED} ÷ {ctx.variant.id})"
    band = time_band(tol.relative or 0.0, ctx.noise())
    shown = f"±{band:.1%}" + ("" if band == tol.relative else f" (tolerance {tol}, widened by measured noise)")
    widened = None if band == tol.relative else band
    d = ctx.delta(
        CheckKind.GAIN, names.EVENT_TIME, Verdict.ERROR, current=current, tolerance=shown, band=widened,
        timed_passes=ctx.remeasured + 1 if ctx.remeasured else 0,
    )  # fmt: skip
    passes = f"; median of {d.timed_passes} timed passes" if d.timed_passes else ""
    if math.isnan(current):
        return replace(d, message=f"{name} cannot be computed: a variant was not timed (see the timed run's log)")
    base_gains = ctx.baseline_gains()
    base = math.nan if base_gains is None else base_gains.get(names.EVENT_TIME, math.nan)
    if not base > 0:  # NaN: no timing in the baseline
        why = ctx.reference.missing() if base_gains is None else "the baseline has no timing for it"
        return replace(d, verdict=Verdict.NEW, message=f"{name} is {fmt_gain(current)}{passes}; {why}")
    change = (current - base) / base
    d = replace(d, baseline_value=base, change=change)
    seen = f"{fmt_gain(current)}, baseline {fmt_gain(base)} ({change:+.1%}){passes}; band {shown}"
    if not ctx.comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{name} {seen}; not compared")
    if abs(change) <= band:
        return replace(d, verdict=Verdict.PASS, message=f"{name} {seen}")
    if change > 0:
        return replace(d, verdict=Verdict.IMPROVED, message=f"{name} rose: {seen}{ctx.keep_advice}")
    borderline = -change <= BORDERLINE_FACTOR * band and not ctx.remeasured and not ctx.variant.caught_by
    message = f"{name} fell: {seen}" + ("; borderline: re-measure before believing it" if borderline else "")
    return replace(d, verdict=Verdict.REGRESSED, message=message, retry=borderline)


def value_check(ctx: VariantContext, quantity: str) -> MetricDelta | None:
    """A variant's own value (occupancy) against its baseline's, in the catalogue's direction;
    counted quantities are :func:`fuseci.judge.counters.counted_check`'s."""
    tol = ctx.case.gates[quantity]
    if not tol.enabled:
        return None
    entry = quantities.get(quantity)
    direction = Direction.HIGHER_IS_BETTER if entry is None else entry.direction
    current = ctx.values.get(quantity, math.nan)
    base = ctx.baseline_values()
    name = f"{quantities.label(quantity)} of {ctx.variant.id}"
    d = ctx.delta(CheckKind.VALUE, quantity, Verdict.PASS, current=current, tolerance=str(tol))
    old = math.nan if base is None else base.get(quantity, math.nan)
    now = quantities.show(quantity, current)
    if math.isnan(old) or math.isnan(current):
        what = "no baseline yet" if base is None else "nothing to compare"
        return replace(d, verdict=Verdict.NEW, message=f"{name} is {now}; {what}")
    was = quantities.show(quantity, old)
    change = (current - old) / old if old else None
    d = replace(d, baseline_value=old, change=change)
    pct = "n/a" if change is None else f"{change:+.1%}"
    seen = f"from {was} to {now} ({pct}); tolerance {tol}"
    moved = "fell" if current < old else "rose"
    if not ctx.comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{name} {now}, baseline {was}; not compared")
    match tol.classify(old, current, direction):
        case Band.WORSE:
            return replace(d, verdict=Verdict.REGRESSED, message=f"{name} {moved} {seen}")
        case Band.BETTER:
            return replace(d, verdict=Verdict.IMPROVED, message=f"{name} {moved} {seen}{ctx.keep_advice}")
        case Band.WITHIN:
            return replace(d, message=f"{name} {now}, baseline {was} ({pct}); tolerance {tol}")


def inventory_check(ctx: VariantContext) -> MetricDelta | None:
    """The variant's kernels against its baseline's, while the launch count is gated."""
    launches = ctx.case.gates.get(names.LAUNCHES)
    old, kernels, variant = ctx.baseline_kernels(), ctx.kernels, ctx.variant
    if launches is None or not launches.enabled or not kernels or not old:
        return None
    against = f"the baseline of {variant.judged_as}" if ctx.candidate else "the baseline"
    d = ctx.delta(CheckKind.INVENTORY, "kernels", Verdict.PASS, current=len(kernels), baseline_value=len(old))
    if ctx.candidate and len(old) == len(kernels):
        # Another variant's baseline: other kernel names; their number and launch shapes must hold.
        old = tuple(replace(o, name=k.name) for o, k in zip(old, kernels, strict=True))
    changes = inventory_diff(old, kernels)
    names_changed = [k.name for k in old] != [k.name for k in kernels]
    count = f"{variant.id} launches {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}, {against} {len(old)}"
    if not names_changed:
        shape = f"; launch shape changed: {'; '.join(changes)}" if changes else ""
        return replace(d, message=f"{count}, the same: {kernel_names(kernels)}{shape}")
    if not ctx.comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{count}: {'; '.join(changes)}; not compared")
    if variant.id != UNFUSED:
        changes = [c.replace("split:", "the fusion split:", 1) if c.startswith("split:") else c for c in changes]
    said = f"{count}: {'; '.join(changes)}"
    if len(kernels) > len(old):  # a split, a new kernel or an extra launch
        advice = "" if ctx.candidate else ctx.reference.if_intended()
        return replace(d, verdict=Verdict.REGRESSED, message=f"{said}{advice}")
    if len(kernels) < len(old):  # merged or vanished: fewer launches
        return replace(d, verdict=Verdict.IMPROVED, message=f"{said}{ctx.keep_advice}")
    return replace(d, message=f"{said}; as many launches as before (the gains judge the rest)")


def kernels_check(ctx: VariantContext) -> MetricDelta | None:
    """The variant's kernels against the patterns it declares (``kernels:``, whole names); None without any."""
    rules = ctx.variant.kernels
    if not rules or not ctx.kernels:
        return None
    launched = [k.name for k in ctx.kernels]
    broken = []
    for rule in rules:
        pattern = re.compile(rule.pattern)
        matched = [n for n in launched if pattern.fullmatch(n)]
        if not rule.holds(len(matched)):
            got = f"{len(matched)}: {', '.join(matched)}" if matched else "none"
            broken.append(f"{rule.describe()} matching {rule.pattern!r} declared, {got}")
    seen = f"{ctx.variant.id} launched {len(launched)} kernel{'s' if len(launched) != 1 else ''}: {kernel_names(ctx.kernels)}"
    d = ctx.delta(CheckKind.KERNELS, "kernels", Verdict.PASS, current=len(launched))
    if not broken:
        return replace(d, message=f"{seen}; as declared ({'; '.join(f'{r.describe()} {r.pattern!r}' for r in rules)})")
    return replace(
        d,
        verdict=Verdict.REGRESSED,
        message=f"{seen}; {'; '.join(broken)}: the fusion the suite declares did not happen (a graph break splits a "
        "compiled function; an op that fell back to eager launches library kernels instead)",
    )


def compile_check(case: Case, variant: Variant, compiled: Sequence[str]) -> MetricDelta:
    """A variant that compiled or autotuned inside its measured range: an error, naming what."""
    message = (
        f"{variant.id} compiled inside its measured range ({'; '.join(compiled)}): its launches there include "
        "compilation or autotuning, not only its kernel's; the warm-up calls before the range should have done "
        "it: does each call compile anew (a new torch.compile, a changing constexpr or autotuning key)?"
    )
    return MetricDelta(case.id, variant.id, CheckKind.COMPILE, "", Verdict.ERROR, message)


def megabytes(value: float) -> str:
    """Bytes as decimal megabytes, the unit of every table and message (ncu's own)."""
    return f"{value / 1e6:,.1f} MB"


def bytes_check(ctx: VariantContext) -> MetricDelta | None:
    """A fused variant's DRAM bytes against the case's minimum, within the allowance."""
    tol = ctx.case.bytes_allowance
    minimum = ctx.values.get(names.MIN_BYTES, math.nan)
    moved = ctx.values.get(names.DRAM_BYTES, math.nan)
    if not tol.enabled or math.isnan(minimum) or math.isnan(moved) or minimum <= 0:
        return None
    over = moved / minimum
    allowed = 1.0 + (tol.relative or 0.0)
    seen = (
        f"{ctx.variant.id} moved {over:.2f}x the minimum DRAM bytes ({megabytes(moved)} for a minimum of {megabytes(minimum)}: "
        f"every input read once, every output written once); allowance +{(tol.relative or 0.0):.0%}"
    )
    d = ctx.delta(CheckKind.BYTES, names.BYTES_RATIO, Verdict.PASS, seen, current=over, tolerance=f"<= {allowed:.2f}x")
    if over > allowed + 1e-9:
        return replace(
            d, verdict=Verdict.REGRESSED, message=seen + ": it re-reads an input or spills an intermediate to DRAM"
        )
    return d


def expect_checks(ctx: VariantContext) -> list[MetricDelta]:
    """Each of the variant's expectations against its gains, with or without a baseline."""
    gains = ctx.gains or {}
    return [
        ctx.delta(
            CheckKind.EXPECT,
            q,
            Verdict.PASS if exp.holds(value) else Verdict.REGRESSED,
            f"{quantities.label(q)} gain ({UNFUSED} ÷ {ctx.variant.id}) is {fmt_gain(value)}; expected {exp}",
            current=value,
            tolerance=str(exp),
        )
        for q, exp in ctx.variant.expect.items()
        for value in (gains.get(q, math.nan),)
    ]


def undercount_note(measurements: Sequence[VariantMeasurement]) -> str | None:
    """Say when DRAM writes read low because written data was still in L2 when a kernel ended."""
    parts = []
    for m in measurements:
        l2 = m.values.get(names.L2_WRITE_BYTES, math.nan)
        dram = m.values.get(names.DRAM_WRITE, math.nan)
        if l2 > 0 and l2 - dram > max(L2_UNDERCOUNT * l2, 1e6):
            parts.append(f"{m.variant} {megabytes(l2 - dram)} of {megabytes(l2)} ({(l2 - dram) / l2:.0%})")
    if not parts:
        return None
    return (
        "DRAM writes undercount (bytes written to L2 and still there when the kernel ended, where ncu stops "
        f"counting): {', '.join(parts)}; DRAM bytes and their gains read that much low"
    )


def planted(case: Case, variant: Variant, checks: list[MetricDelta]) -> list[MetricDelta]:
    """A planted regression's checks: expected failures pass as caught, plus one: did all of ``caught_by`` catch it."""
    if any(c.check is CheckKind.CASE and c.verdict is Verdict.ERROR for c in checks):
        return checks  # not measured: nothing was caught or missed, and the error says why
    failing = [
        c
        for c in checks
        if c.variant == variant.id
        and (
            c.verdict in (Verdict.REGRESSED, Verdict.WRONG)
            or (c.check is CheckKind.COMPILE and c.verdict is Verdict.ERROR)
        )
    ]

    def catches(name: str, c: MetricDelta) -> bool:
        return name in (c.check.value, c.quantity)

    missed = [n for n in variant.caught_by if not any(catches(n, c) for c in failing)]
    # A check with nothing to compare with yet neither caught nor missed: the gate was never put to the test.
    unjudged = [
        n for n in missed if any(catches(n, c) and c.variant == variant.id and c.verdict is Verdict.NEW for c in checks)
    ]
    out = [
        replace(c, verdict=Verdict.PASS, message=f"caught as planted: {c.message}", retry=False) if c in failing else c
        for c in checks
    ]
    caught_by = ", ".join(variant.caught_by)
    if missed and len(unjudged) < len(missed):
        passed = [n for n in missed if n not in unjudged]
        verdict, message = (
            Verdict.REGRESSED,
            f"planted regression NOT caught by {', '.join(passed)}: the check meant to catch {variant.id} passed",
        )
    elif missed:
        verdict, message = (
            Verdict.NEW,
            f"planted regression not judged by {', '.join(unjudged)}: nothing to compare {variant.id} with yet "
            f"(no baseline value of {variant.judged_as}: record one, then it must be caught)",
        )
    else:
        verdict, message = Verdict.PASS, f"planted regression caught by {caught_by}"
    return [*out, MetricDelta(case.id, variant.id, CheckKind.PLANTED, "", verdict, message, tolerance=caught_by)]


#: A theoretical occupancy lower than the baseline's by more than this fraction is worth naming.
OCCUPANCY_DROP = 0.05
#: A fused kernel under this achieved occupancy (percent) gets a warning...
LOW_ACHIEVED_OCCUPANCY = 50.0
#: ... unless it moves DRAM at this fraction of the card's peak or more (at the roof, more warps cannot help).
AT_THE_ROOF = 0.75
#: A variant whose probe calls waited for the GPU in at least this fraction of tries blocks.
BLOCKS_AT = 0.5


def occupancy_limiter(values: Mapping[str, float]) -> str:
    """What limits the occupancy of a variant's longest kernel (``registers``...), or ``""``."""
    known = {q: values[q] for q in names.OCCUPANCY_LIMITERS if q in values and not math.isnan(values[q])}
    return names.OCCUPANCY_LIMITERS[min(known, key=known.__getitem__)] if known else ""


def _resource_changes(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch]) -> list[str]:
    """Registers, block size and shared memory of the kernels that changed them."""
    return [
        f"{b.name} {what} {x} -> {y}"
        for a, b in zip(old, new, strict=False)
        for what, x, y in (
            ("registers per thread", a.registers, b.registers),
            ("block size", a.block, b.block),
            ("shared memory per block", a.shared_mem, b.shared_mem),
        )
        if x != y
    ]


def occupancy_drop(ctx: VariantContext) -> str:
    """How theoretical occupancy fell over :data:`OCCUPANCY_DROP` from the baseline, with its limiter, or ``""``."""
    base = ctx.baseline_values()
    now = ctx.values.get(names.OCC_THEORETICAL, math.nan)
    old = math.nan if base is None else base.get(names.OCC_THEORETICAL, math.nan)
    if not (old > 0 and now < old * (1 - OCCUPANCY_DROP)):
        return ""
    why = [f"limited by {limiter}"] if (limiter := occupancy_limiter(ctx.values)) else []
    why += _resource_changes(ctx.baseline_kernels(), ctx.kernels)
    detail = f" ({'; '.join(why)})" if why else ""
    return f"theoretical occupancy of {ctx.variant.id} fell from {old:.1f}% to {now:.1f}%{detail}"


#: Threads an SM holds at most (sm_86/sm_89 hold 1536: there a grid fills the GPU a little early).
_THREADS_PER_SM = 2048


def _fills_the_gpu(ctx: VariantContext) -> bool:
    """Whether the longest kernel's threads fill every SM at its theoretical occupancy; unknown: yes."""
    if not ctx.kernels or ctx.sm_count <= 0:
        return True
    longest = max(ctx.kernels, key=lambda k: k.grid * k.block)
    theoretical = ctx.values.get(names.OCC_THEORETICAL, 100.0)
    resident = ctx.sm_count * _THREADS_PER_SM * (theoretical if theoretical > 0 else 100.0) / 100.0
    return longest.grid * longest.block >= resident


def _at_the_roof(ctx: VariantContext) -> bool:
    rate = ctx.values.get(names.DRAM_READ_RATE, math.nan) + ctx.values.get(names.DRAM_WRITE_RATE, math.nan)
    return ctx.dram_peak > 0 and math.isfinite(rate) and rate >= AT_THE_ROOF * ctx.dram_peak


def occupancy_checks(ctx: VariantContext, checks: list[MetricDelta]) -> list[MetricDelta]:
    """``checks`` with a fall in theoretical occupancy named as the likely why of each regressed time gain, else
    warned of (not for a candidate); a low achieved occupancy that fills the GPU, off the memory roof and not
    through the TMA (few warps by design), is a warning too. A gated occupancy is :func:`value_check`'s."""
    out = list(checks)
    drop = "" if names.OCC_THEORETICAL in ctx.case.gates else occupancy_drop(ctx)
    now = ctx.values.get(names.OCC_THEORETICAL, math.nan)
    old = (ctx.baseline_values() or {}).get(names.OCC_THEORETICAL, math.nan)
    slower = [
        i
        for i, c in enumerate(out)
        if c.check is CheckKind.GAIN
        and c.quantity in (names.DURATION, names.EVENT_TIME)
        and c.verdict is Verdict.REGRESSED
    ]
    for i in slower if drop else ():
        out[i] = replace(out[i], message=f"{out[i].message}; likely why: {drop}")
    if drop and not slower and not ctx.candidate:
        out.append(
            ctx.delta(
                CheckKind.VALUE,
                names.OCC_THEORETICAL,
                Verdict.WARN,
                f"{drop}; no time regressed, so this is a warning (gate it under gates: to make it fail)",
                current=now,
                baseline_value=old,
                change=(now - old) / old,
            )
        )
    achieved = ctx.values.get(names.OCC_ACHIEVED, math.nan)
    if (
        names.OCC_ACHIEVED not in ctx.case.gates
        and achieved < LOW_ACHIEVED_OCCUPANCY
        and _fills_the_gpu(ctx)
        and not _at_the_roof(ctx)
        and not ctx.values.get(names.TMA_LOAD_BYTES, 0.0) > 0
    ):
        limiter = occupancy_limiter(ctx.values)
        out.append(
            ctx.delta(
                CheckKind.VALUE,
                names.OCC_ACHIEVED,
                Verdict.WARN,
                f"{ctx.variant.id} keeps only {achieved:.1f}% of the warps an SM can hold busy (achieved occupancy "
                f"under {LOW_ACHIEVED_OCCUPANCY:.0f}%{f'; theoretical occupancy is limited by {limiter}' if limiter else ''}): "
                "too few warps in flight to hide memory latency",
                current=achieved,
            )
        )
    return out


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.0f} us" if ns >= 10_000 else f"{ns / 1e3:,.1f} us"


def asynchrony_check(ctx: VariantContext) -> MetricDelta | None:
    """Whether a fused variant's call now waits for the GPU before it returns, where at baseline it did not."""
    tol = ctx.case.gates.get(names.HOST_BLOCKING)
    blocking = ctx.values.get(names.HOST_BLOCKING, math.nan)
    if tol is None or not tol.enabled or math.isnan(blocking):
        return None
    host, gpu = ctx.values.get(names.HOST_TIME, math.nan), ctx.values.get(names.EVENT_TIME, math.nan)
    base = ctx.baseline_values() or {}
    old, old_host = base.get(names.HOST_BLOCKING, math.nan), base.get(names.HOST_TIME, math.nan)
    call = f"the call returns after {_us(host)}, its kernels take {_us(gpu)}"
    d = ctx.delta(
        CheckKind.ASYNCHRONY, names.HOST_BLOCKING, Verdict.PASS, current=blocking, baseline_value=None if math.isnan(old) else old,
        tolerance=str(tol),
    )  # fmt: skip
    if blocking < BLOCKS_AT:
        return replace(d, message=f"{ctx.variant.id} returns before its GPU work ends ({call})")
    waits = f"{ctx.variant.id} waits for the GPU inside each call: {call}"
    if math.isnan(old):
        what = "no baseline yet" if not base else "the baseline did not measure it"
        return replace(d, verdict=Verdict.WARN, message=f"{waits} ({what}); a read-back or a sync in the call?")
    if old >= BLOCKS_AT:
        return replace(d, verdict=Verdict.WARN, message=f"{waits}, as at baseline")
    return replace(
        d,
        verdict=Verdict.REGRESSED if ctx.comparable else Verdict.INCOMPARABLE,
        message=f"{ctx.variant.id} now waits for the GPU inside each call: {call}; at baseline it returned after "
        f"{_us(old_host)} (a result read back, a stream or device synchronisation, or a copy to the host in the call?)",
    )
