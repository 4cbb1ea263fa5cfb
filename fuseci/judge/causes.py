"""Why: each variant's finding given one cause (:func:`decide`), and which environment fields an
upgrade compares across (the others are ``INCOMPARABLE`` unless accepted with ``--accept-env``):

======================  =============  ==================================================
field                   judged         why
======================  =============  ==================================================
``gpu_name``            INCOMPARABLE   another card: other bandwidth, SMs and caches (each
                                       card has its own baseline directory too)
``compute_capability``  INCOMPARABLE   another architecture: other instructions, counters
``driver_version``      compared       an upgrade: the same counters, clocks and replay
``cuda_runtime``        compared       an upgrade of what the kernels run on
``cupy_version``        compared       an upgrade of what the kernels are built with
``torch_version``       compared       PyTorch: an upgrade, as CuPy (only where used)
``triton_version``      compared       Triton: an upgrade, as CuPy (only where used)
``ncu_version``         compared       within a release (``2025.3.0`` -> ``2025.3.1``:
                        within a       the same metrics); another release (``2025.2`` ->
                        release        ``2025.3``) or year is INCOMPARABLE: its counters
                                       may differ
``clock_control``       INCOMPARABLE   locked or free clocks: another meaning of a time
``cache_control``       INCOMPARABLE   flushed or warm caches: another meaning of DRAM bytes
``replay_mode``         INCOMPARABLE   kernel or application replay: other counter values
======================  =============  ==================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fuseci.config import names
from fuseci.frames.inventory import KernelLaunch, inventory_diff
from fuseci.judge.baseline import SourcePart, SourcePrint, code_of
from fuseci.judge.verdict import FINDINGS, CauseKind, CheckKind, EnvDifference, FindingCause, MetricDelta
from fuseci.records.sass import KernelCode, code_changes

#: The fingerprint fields compared across an upgrade, with their names for people (``ncu_version``
#: only within a release).
UPGRADES: Mapping[str, str] = {
    "driver_version": "driver",
    "cuda_runtime": "CUDA runtime",
    "cupy_version": "CuPy",
    "torch_version": "PyTorch",
    "triton_version": "Triton",
    "ncu_version": "ncu",
}


def _ncu_release(version: object) -> tuple[str, ...] | None:
    """``2025.3`` of ``2025.3.1.0``: the release whose metrics a patch keeps; None when unknown."""
    parts = str(version).split(".") if isinstance(version, str) else []
    return tuple(parts[:2]) if len(parts) >= 2 else None


def is_upgrade(d: EnvDifference) -> bool:
    """True when the difference leaves the numbers meaning what they meant (the module's table)."""
    if d.field == "ncu_version":
        old = _ncu_release(d.baseline_value)
        return old is not None and old == _ncu_release(d.current)
    return d.field in UPGRADES


def upgrade_said(upgrades: Sequence[EnvDifference]) -> str:
    """``PyTorch 2.11.0 -> 2.12.0, driver 580.65 -> 580.159``; ``""`` when nothing changed."""
    return ", ".join(map(env_said, upgrades))


def _said(value: object) -> str:
    return "none" if value is None else str(value)


#: The environment fields whose change rebuilds compiled code: a ``compiler`` cause's evidence.
COMPILERS = frozenset({"cuda_runtime", "cupy_version", "torch_version", "triton_version"})


def env_said(d: EnvDifference) -> str:
    """``PyTorch 2.11.0 -> 2.12.0``; a field without a name for people as itself (``gpu_name``)."""
    return f"{UPGRADES.get(d.field, d.field)} {_said(d.baseline_value)} -> {_said(d.current)}"


def source_changes(old: SourcePrint, new: SourcePrint) -> list[str]:
    """What differs between a case's source fingerprints, a part a line, in file order:
    ``kernels/x.py:12-30 (scale_add) changed``, ``... added``, ``... removed``."""
    before: dict[tuple[str, str], SourcePart] = {p.key: p for p in old.parts}
    after: dict[tuple[str, str], SourcePart] = {p.key: p for p in new.parts}
    out = []
    for key in sorted(before.keys() | after.keys()):
        if key not in before:
            out.append(f"{after[key].said()} added")
        elif key not in after:
            out.append(f"{before[key].said()} removed")
        elif before[key].digest != after[key].digest:
            out.append(f"{after[key].said()} changed")
    return out


@dataclass(frozen=True, slots=True)
class CauseEvidence:
    """What one variant's cause is decided from."""

    checks: tuple[MetricDelta, ...]
    """Its checks."""
    kernels: tuple[KernelLaunch, ...]
    """Its kernels now."""
    baseline_kernels: tuple[KernelLaunch, ...]
    """Those of the baseline it is judged against (empty: none)."""
    spread: float
    """The widest relative spread (IQR ÷ median) of the CUDA-event times behind its speedup."""
    has_baseline: bool
    """Whether the baseline holds this variant (values or kernels) to compare with."""
    source: SourcePrint | None
    """The case's source fingerprint now (None: not taken)."""
    baseline_source: SourcePrint | None
    """The case's when the baseline was recorded (None: recorded before fuseci kept them)."""
    environment: tuple[EnvDifference, ...] = ()
    """Environment fields that differ from the baseline's and were compared across."""
    autotuned: tuple[str, ...] = ()
    """What the variant autotuned at its first call in this run (empty: nothing)."""
    reference: str = "the baseline"
    """What the baseline is called in messages."""
    code_changes: tuple[str, ...] = ()
    """What differs in its kernels' compiled code from the baseline's, a kernel a line (:func:`evidence`)."""
    code_notes: tuple[str, ...] = ()
    """Its kernels whose compiled code could not be read in this run, with why."""


def _unproven_source(seen: CauseEvidence) -> str:
    """Why the case's source cannot be said unchanged, for a cause's ``missing``; ``""`` when it can."""
    if seen.baseline_source is None:
        return (
            f"the case's source fingerprint at {seen.reference} (recorded before fuseci kept one: record the "
            "baseline again to tell a change of code from one of its compiled code)"
        )
    if seen.source is None:
        return "the case's source fingerprint in this run (its suite's source could not be read)"
    unproven = sorted({*seen.baseline_source.unproven, *seen.source.unproven})
    if unproven:
        return f"what the case's code reads or imports at run time, which its fingerprint cannot follow ({'; '.join(unproven[:3])})"
    return ""


def _within_spread(seen: CauseEvidence, findings: list[MetricDelta]) -> str:
    """The evidence that a timing-only finding is noise (each moved within the variant's own spread), or ``""``."""
    if not all(k.check is CheckKind.GAIN and k.quantity == names.EVENT_TIME for k in findings):
        return ""
    if not (seen.spread > 0) or any(k.change is None or abs(k.change) > seen.spread for k in findings):
        return ""
    moved = max(abs(k.change or 0.0) for k in findings)
    return (
        f"only its CUDA-event time moved ({moved:.1%}), within its own spread of calls (interquartile range "
        f"{seen.spread:.1%} of the median): the same source, kernels and environment"
    )


def decide(seen: CauseEvidence) -> FindingCause | None:
    """The cause of a variant's finding (a check in :data:`FINDINGS`); ``code`` for a variant
    without one whose case's source changed; else None. The first that applies:

    1. ``code``: the case's source fingerprint differs from the baseline's;
    2. ``compiler``: the same source, other compiled kernels (other names; any change across an
       upgrade of what builds them; other registers, shared memory or code, nothing autotuned);
    3. ``autotune``: the same kernels in another launch shape, or rebuilt after autotuning;
    4. ``environment``: the same kernels, and an environment field that differs;
    5. ``measurement``: only CUDA-event speedups moved, each within the variant's own spread;
    6. ``undetermined``, naming what was seen and what is missing.

    A cause below ``code`` needs the source proven unchanged, else it is ``undetermined``.
    """
    findings = [k for k in seen.checks if k.verdict in FINDINGS]
    code = source_changes(seen.baseline_source, seen.source) if seen.baseline_source and seen.source else []
    if not findings:
        return FindingCause(CauseKind.CODE, tuple(code)) if code and seen.has_baseline else None
    env = [env_said(d) for d in seen.environment]
    compilers = [env_said(d) for d in seen.environment if d.field in COMPILERS]
    others = [env_said(d) for d in seen.environment if d.field not in COMPILERS]
    if not seen.has_baseline:
        return FindingCause(
            CauseKind.UNDETERMINED,
            (f"{seen.reference} has nothing of this variant",),
            missing=f"a measurement of it at {seen.reference}",
        )
    compiled = (*seen.code_changes, *seen.code_notes)
    if code:
        return FindingCause(CauseKind.CODE, (*code, *compiled), also=tuple(env))
    unknown = _unproven_source(seen)
    old, new = seen.baseline_kernels, seen.kernels
    renamed = [k.name for k in old] != [k.name for k in new]
    reshaped = not renamed and any((a.grid, a.block) != (b.grid, b.block) for a, b in zip(old, new, strict=True))
    rebuilt = not renamed and (
        bool(seen.code_changes)
        or any((a.registers, a.shared_mem) != (b.registers, b.shared_mem) for a, b in zip(old, new, strict=True))
    )
    changes = "; ".join(inventory_diff(old, new)) if old and new else ""
    tuned = f"it autotuned at its first call in this run ({'; '.join(seen.autotuned)})" if seen.autotuned else ""
    differ = bool(old and new) and (renamed or reshaped or rebuilt)
    # Another name is other generated code; a compiler's upgrade may change a kernel's build and
    # launch shape alike; registers or shared memory alone, without autotuning, are another build.
    if differ and (renamed or compilers or (rebuilt and not reshaped and not tuned)):
        what = f" ({changes})" if changes else ""
        if unknown:
            said = [f"its kernels changed{what}", *compiled, *compilers]
            return FindingCause(CauseKind.UNDETERMINED, tuple(said), also=tuple(others), missing=unknown)
        how = "generated anew" if renamed else "built anew"
        said = [f"the case's source is as at {seen.reference}", f"its kernels were {how}{what}", *compiled, *compilers]
        return FindingCause(CauseKind.COMPILER, tuple(said), also=tuple(others))
    if differ:
        said = [f"the same kernels in another configuration than at {seen.reference} ({changes})", *compiled]
        said.append(tuned or "the configuration came from the compile cache, not from autotuning in this run")
        if unknown:
            return FindingCause(CauseKind.UNDETERMINED, tuple(said), also=tuple(others), missing=unknown)
        return FindingCause(CauseKind.AUTOTUNE, tuple(said), also=tuple(env))
    if unknown:
        seen_ = env or [_within_spread(seen, findings) or "the same kernels in the same launch shapes"]
        return FindingCause(CauseKind.UNDETERMINED, tuple(seen_), missing=unknown)
    if env:
        return FindingCause(CauseKind.ENVIRONMENT, ("the same source and kernels", *env))
    if noise := _within_spread(seen, findings):
        return FindingCause(CauseKind.MEASUREMENT, (noise,))
    return FindingCause(
        CauseKind.UNDETERMINED,
        (f"the same source, kernels, launch shapes and environment as at {seen.reference}",),
        missing="what else moved: nothing fuseci fingerprints differs (inputs made at run time, the GPU's state)",
    )


def relative_spread(values: Mapping[str, float]) -> float:
    """Interquartile range ÷ median of a variant's CUDA-event times (NaN: not timed)."""
    median = values.get(names.EVENT_TIME, math.nan)
    iqr = values.get(names.EVENT_TIME_IQR, math.nan)
    return iqr / median if median > 0 and iqr >= 0 else math.nan


#: Kernels a cause names the compiled code of at most (the rest are counted).
MAX_KERNELS = 8


def evidence(
    kernels: Sequence[KernelLaunch],
    now: Mapping[str, Sequence[KernelCode]],
    before: Mapping[str, KernelCode],
    notes: Mapping[str, str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What differs in the compiled code of ``kernels`` (``now`` against ``before``), a line per kernel, and a note per
    kernel whose code could not be read (``notes``); at most :data:`MAX_KERNELS` lines each, the last counting on."""
    code = code_of(kernels, now)
    changes, unread = [], []
    for name in dict.fromkeys(k.name for k in kernels):
        if name in code and name in before and (said := code_changes(before[name], code[name])):
            changes.append(f"{name}: {'; '.join(said)}")
        elif name not in code and name in notes:
            unread.append(f"{name}: compiled code not compared ({notes[name]})")
    return _few(changes, "kernels' code changed too"), _few(unread, "kernels' code could not be read either")


def _few(lines: list[str], more: str) -> tuple[str, ...]:
    if len(lines) <= MAX_KERNELS:
        return tuple(lines)
    return (*lines[: MAX_KERNELS - 1], f"{len(lines) - MAX_KERNELS + 1} more {more}")
