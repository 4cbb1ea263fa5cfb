"""The counted quantities of a variant against its baseline: bytes the SMs ask of memory and the instructions they
execute (:class:`fuseci.config.quantities.Counted`). A count is judged exactly, unless a kernel's count moved over
the baseline's profiled passes (a library kernel scheduled at run time): then within :data:`MOVING_FACTOR` times
that. Bytes are judged whatever the kernels became; instructions only on the same build of the same kernels."""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Sequence
from dataclasses import replace

from fuseci.config import quantities
from fuseci.config.policy import Band, Direction, Tolerance
from fuseci.config.quantities import Counted
from fuseci.frames.inventory import KernelLaunch, inventory_diff, same_build, spread_of
from fuseci.judge.checks import VariantContext
from fuseci.judge.verdict import CheckKind, Comparison, MetricDelta, Reference, Verdict

#: A count that moved between profiled passes gets a band this many times how far it moved (a few
#: passes see only part of how far it moves between runs).
MOVING_FACTOR = 8.0
#: A change smaller than this fraction of the value is shown as a number (``+32``), not a percentage.
_TINY = 0.001


def band(ctx: VariantContext, quantity: str, tolerance: Tolerance) -> tuple[float, str]:
    """The relative band a counted quantity may move within, and why it is wider than the tolerance
    (empty when it is not): each kernel that moved over a side's profiled passes may move
    :data:`MOVING_FACTOR` times as far (at least its kernel floor); the side that may move most
    gives the band, at least the quantity's moving floor."""
    entry = quantities.get(quantity)
    allowed = tolerance.relative or 0.0
    old = (ctx.baseline_values() or {}).get(quantity, math.nan)
    sides = [m for m in (_moving(ctx.baseline_kernels(), quantity), _moving(ctx.kernels, quantity)) if m and m[1]]
    if not sides or not old > 0:
        return allowed, ""
    slack, moved, count = max(sides)
    wide = slack / old
    if wide <= allowed:  # what it moved is well inside the tolerance: the tolerance holds
        return allowed, ""
    wide = max(wide, entry.moving_floor if entry else 0.0)
    shown = quantities.show(quantity, moved, exact=True)
    floor = entry.kernel_floor if entry else 0.0
    each = f", in {count} kernel(s), each allowed {floor:.0%} of its own count at least" if floor else ""
    return wide, f" (it moved by up to {shown} over the profiled passes{each}: band ±{_pct(wide)})"


def _moving(kernels: Sequence[KernelLaunch], quantity: str) -> tuple[float, float, int] | None:
    """How far one side's moving kernels may move together, how far they moved, and how many they
    are; None when a kernel was profiled once."""
    if spread_of(kernels, quantity) is None:
        return None
    entry = quantities.get(quantity)
    floor = entry.kernel_floor if entry else 0.0
    moving = [k for k in kernels if k.spread[quantity] > 0]
    slack = sum(max(MOVING_FACTOR * k.spread[quantity], floor * k.counts.get(quantity, 0.0)) for k in moving)
    return slack, float(sum(k.spread[quantity] for k in moving)), len(moving)


def repeating_rise(ctx: VariantContext, quantity: str, tolerance: Tolerance) -> str:
    """Where the kernels are the same build as the baseline's: how those whose count repeated over
    every profiled pass rose beyond ``tolerance`` together (``from 12 to 14 (+2); in k +2``), or
    ``""``: a moving library kernel's band is not theirs to spend."""
    old_kernels, new_kernels = ctx.baseline_kernels(), ctx.kernels
    if not same_build(old_kernels, new_kernels):
        return ""
    pairs = [
        (a, b)
        for a, b in zip(old_kernels, new_kernels, strict=True)
        if a.spread.get(quantity, 0.0) == 0.0
        and b.spread.get(quantity, 0.0) == 0.0
        and quantity in a.counts
        and quantity in b.counts
    ]
    old = sum(a.counts[quantity] for a, _ in pairs)
    new = sum(b.counts[quantity] for _, b in pairs)
    if not pairs or tolerance.classify(old, new, Direction.LOWER_IS_BETTER) is not Band.WORSE:
        return ""
    where = [
        f"{b.name} {_delta(quantity, a.counts[quantity], b.counts[quantity])}"
        for a, b in pairs
        if b.counts[quantity] != a.counts[quantity]
    ]
    was, now = (quantities.show(quantity, x, exact=True) for x in (old, new))
    return f"from {was} to {now} ({_delta(quantity, old, new)}); in {', '.join(where)}"


def _pct(fraction: float) -> str:
    return f"{fraction:.2%}" if fraction < 0.01 else f"{fraction:.1%}"


def repeats_known(ctx: VariantContext, quantity: str) -> bool:
    """True when either side's profiled passes say how far ``quantity`` moves."""
    return spread_of(ctx.baseline_kernels(), quantity) is not None or spread_of(ctx.kernels, quantity) is not None


def moved_kernels(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch], quantity: str) -> list[str]:
    """The kernels whose count of ``quantity`` changed, where the baseline's and this run's names
    pair up (``bias_gelu_residual_kernel +128 bytes``)."""
    out = []
    matcher = difflib.SequenceMatcher(a=[k.name for k in old], b=[k.name for k in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            continue
        for a, b in zip(old[i1:i2], new[j1:j2], strict=True):
            x, y = a.counts.get(quantity), b.counts.get(quantity)
            if x is not None and y is not None and x != y:
                out.append(f"{b.name} {_delta(quantity, x, y, unit=True)}")
    return out


def _delta(quantity: str, old: float, new: float, *, unit: bool = False) -> str:
    """A change of a counted quantity for messages: ``+128`` (``+128 bytes`` with ``unit``), ``-3.1%``."""
    if old and abs(new - old) / old >= _TINY:
        return f"{(new - old) / old:+.1%}"
    bytes_ = unit and (q := quantities.get(quantity)) is not None and q.unit is quantities.Unit.BYTES
    return f"{new - old:+,.0f}{' bytes' if bytes_ else ''}"


def _rebuilt(old: Sequence[KernelLaunch], new: Sequence[KernelLaunch]) -> str:
    """How the kernels changed since the baseline, as context (empty when they are the same build)."""
    if same_build(old, new):
        return ""
    changes = inventory_diff(old, new)
    return "; ".join(changes) if changes else "their launches changed"


def counted_check(ctx: VariantContext, quantity: str) -> MetricDelta | None:
    """One counted quantity of a variant against its baseline; None when its gate is off or a side
    lacks the count (:func:`legacy_note` says so once)."""
    entry = quantities.get(quantity)
    tol = ctx.case.gates[quantity]
    if entry is None or entry.counted is None or not tol.enabled:
        return None
    current = ctx.values.get(quantity, math.nan)
    if math.isnan(current):
        return None
    name = f"{quantities.label(quantity)} of {ctx.variant.id}"
    now = quantities.show(quantity, current, exact=True)
    d = ctx.delta(CheckKind.VALUE, quantity, Verdict.PASS, current=current, tolerance=str(tol))
    base = ctx.baseline_values()
    if base is None:
        return replace(d, verdict=Verdict.NEW, message=f"{name} is {now}; {ctx.reference.missing()}")
    old = base.get(quantity, math.nan)
    if math.isnan(old):
        return None
    was = quantities.show(quantity, old, exact=True)
    change = (current - old) / old if old else None
    pct = _delta(quantity, old, current)
    d = replace(d, baseline_value=old, change=change)
    rebuilt = _rebuilt(ctx.baseline_kernels(), ctx.kernels)
    stated = quantity in ctx.case.stated_gates
    if not stated and (why := _not_gated(ctx, entry.counted, quantity, rebuilt)):
        return replace(
            d, tolerance="", not_gated=why, message=f"{name} is {now}, baseline {was} ({pct}); not gated: {why}"
        )
    if not ctx.comparable:
        return replace(d, verdict=Verdict.INCOMPARABLE, message=f"{name} {now}, baseline {was}; not compared")
    allowed, why_wide = band(ctx, quantity, tol)
    d = replace(d, band=allowed if why_wide else None)
    # A finding's cause says how the kernels changed; a check that holds says it beside its numbers.
    context = f"; its kernels changed ({rebuilt})" if rebuilt else ""
    seen = f"from {was} to {now} ({pct}); tolerance {tol}{why_wide}"
    verdict = Tolerance(str(tol), allowed).classify(old, current, Direction.LOWER_IS_BETTER)
    repeating = verdict is not Band.WORSE and why_wide and entry.counted is Counted.WORK
    if repeating and (rise := repeating_rise(ctx, quantity, tol)):
        return replace(
            d,
            verdict=Verdict.REGRESSED,
            message=f"{name} rose in the kernels whose count repeats: {rise}; tolerance {tol} (the whole "
            f"variant's, {was} to {now} ({pct}), is within the band of the kernels that move{why_wide})",
        )
    match verdict:
        case Band.WORSE:
            where = moved_kernels(ctx.baseline_kernels(), ctx.kernels, quantity)
            by = f"; in {', '.join(where)}" if where else ""
            return replace(d, verdict=Verdict.REGRESSED, message=f"{name} rose {seen}{by}")
        case Band.BETTER:
            return replace(d, verdict=Verdict.IMPROVED, message=f"{name} fell {seen}{ctx.keep_advice}")
        case Band.WITHIN:
            return replace(d, message=f"{name} {now}, baseline {was} ({pct}); tolerance {tol}{why_wide}{context}")


def _not_gated(ctx: VariantContext, kind: Counted, quantity: str, rebuilt: str) -> str:
    """Why a counted quantity the suite does not gate itself is shown, not gated (empty when gated)."""
    if kind is Counted.WORK and rebuilt:
        return (
            f"its kernels changed ({rebuilt}), and another build executes other instructions; state "
            f"`{quantity}: <tolerance>` under gates: to gate it anyway"
        )
    if kind is not Counted.BYTES and not repeats_known(ctx, quantity):
        return (
            f"{ctx.reference.name} was profiled once, which cannot tell whether this count repeats (library "
            f"kernels' do not){_remedy(ctx.reference)}"
        )
    return ""


def legacy_note(comparison: Comparison, left_out: Collection[str] = ()) -> str | None:
    """Said once per suite: the counted quantities (but ``left_out``) that the baseline or this
    run's report lacks, and that the baseline was profiled once; None when neither."""
    order = [q.name for q in quantities.counted() if q.name not in left_out]
    reference = comparison.reference or Reference("fuseci update-baselines")
    lacking: dict[str, set[str]] = {f"{reference.name} was": set(), "this run's report was": set()}
    single = False
    for case in comparison.cases:
        for v in case.variants:
            if not v.baseline_values:
                continue
            for q in order:
                now, then = math.isnan(v.values.get(q, math.nan)), math.isnan(v.baseline_values.get(q, math.nan))
                if now != then:
                    lacking["this run's report was" if now else f"{reference.name} was"].add(q)
            single = single or (any(not k.spread for k in v.baseline_kernels) and any(not k.spread for k in v.kernels))
    parts = [
        f"{who} recorded before fuseci counted {', '.join(quantities.label(q) for q in sorted(qs, key=order.index))}: "
        "judged without them"
        for who, qs in lacking.items()
        if qs
    ]
    if single:
        parts.append(f"{reference.name} was profiled once, so L2 sectors and instructions are shown, not gated")
    if not parts:
        return None
    return "; ".join(parts) + _remedy(reference)


def _remedy(reference: Reference) -> str:
    """How to get a reference that judges every count (none for a run)."""
    return f"; re-record it (`{reference.command}`) to gate them" if reference.command else ""
