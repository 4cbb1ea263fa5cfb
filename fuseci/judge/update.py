"""What ``update-baselines`` records: a pure decision over a comparison with the old baseline. A case whose every
check passes keeps its old values byte for byte; ``force`` or a changed environment re-records every measured case.
A case that misses an expectation, its bytes allowance or correctness is refused (its old values stay) unless
``force`` records it anyway."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fuseci.config import quantities
from fuseci.config.model import Suite
from fuseci.frames.metrics import SuiteResults
from fuseci.judge.baseline import Baseline, VariantBaseline, from_results
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict
from fuseci.records.sass import KernelCode

#: Checks that re-recording cannot make pass: they compare with the suite, not the baseline.
PROMISES = (CheckKind.EXPECT, CheckKind.BYTES, CheckKind.CORRECTNESS)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A case ``update-baselines`` would not record, and why."""

    case: str
    """Case id."""
    checks: tuple[MetricDelta, ...]
    """The failing checks that recording cannot fix (expectations, bytes allowance, correctness)."""

    def describe(self) -> str:
        """One line per reason, joined: ``case: variant check: message``."""
        return "; ".join(f"{k.variant} {k.check.value}: {k.message}" for k in self.checks)


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """The baseline to write and what changed, for one suite."""

    baseline: Baseline | None
    """The new baseline (values rounded as the file holds them); None when it would hold no case."""
    changes: tuple[str, ...]
    """One line per changed, added or removed case, or the environment."""
    kept: tuple[str, ...]
    """Cases not recorded because they are wrong or broken (old values kept)."""
    refused: tuple[Refusal, ...]
    """Cases not recorded because a check that recording cannot fix fails (old values kept)."""
    overridden: tuple[Refusal, ...]
    """Cases recorded although such a check fails (``force``)."""


def broken_promises(result: CaseResult) -> tuple[MetricDelta, ...]:
    """The case's failing expectation, bytes allowance and correctness checks."""
    return tuple(k for k in result.checks if k.check in PROMISES and k.verdict in (Verdict.REGRESSED, Verdict.WRONG))


def unchanged(result: CaseResult) -> bool:
    """Every check passed, or warned without comparing anything with the baseline."""
    return all(k.verdict is Verdict.PASS or (k.verdict is Verdict.WARN and k.change is None) for k in result.checks)


def outdated(old: Mapping[str, VariantBaseline], fresh: Mapping[str, VariantBaseline]) -> bool:
    """The recorded case lacks what this fuseci keeps and has just measured (a counted quantity,
    its kernels' counts or their spread): it is re-recorded even when every check passed."""
    for vid, new in fresh.items():
        was = old.get(vid)
        if was is None:
            continue
        if any(q.name in new.values and q.name not in was.values for q in quantities.counted()):
            return True
        if any(k.counts for k in new.kernels) and not any(k.counts for k in was.kernels):
            return True
        if any(k.spread for k in new.kernels) and not any(k.spread for k in was.kernels):
            return True
    return False


def _case_changes(old: Baseline | None, new: Baseline, comparison: Comparison) -> list[str]:
    lines: list[str] = []
    by_case = {c.case: c for c in comparison.cases}
    for cid in sorted(set(new.cases) | set(old.cases if old else ())):
        if old is None or cid not in old.cases:
            lines.append(f"+ {cid}: new")
        elif cid not in new.cases:
            lines.append(f"- {cid}: removed (no longer in the suite)")
        elif old.cases[cid] != new.cases[cid]:
            lines.append(f"~ {cid}: " + _what_moved(old.cases[cid], new.cases[cid], by_case[cid]))
    return lines


def _what_moved(old: Mapping[str, VariantBaseline], new: Mapping[str, VariantBaseline], result: CaseResult) -> str:
    """What changed in a re-recorded case: its new and removed variants, then the checks that moved."""
    added, gone = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    parts = [f"new variant{'s' if len(added) > 1 else ''} {', '.join(added)}"] if added else []
    parts += [f"variant{'s' if len(gone) > 1 else ''} {', '.join(gone)} removed"] if gone else []
    parts += [
        c.message
        for c in result.checks
        if c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.INCOMPARABLE, Verdict.WARN)
        and c.check in (CheckKind.GAIN, CheckKind.VALUE, CheckKind.ASYNCHRONY, CheckKind.INVENTORY)
        and c.variant not in added
    ]
    return "; ".join(parts) if parts else "re-recorded"


def plan(
    suite: Suite,
    results: SuiteResults,
    old: Baseline | None,
    comparison: Comparison,
    *,
    force: bool,
    normalize: Callable[[Baseline], Baseline] = lambda b: b,
) -> UpdatePlan:
    """Decide the new baseline of ``suite`` from ``results``, compared with ``old`` in ``comparison``;
    ``normalize`` (the store's rounding) is applied to the fresh values."""
    env_changed = old is not None and not comparison.comparable
    by_case = {c.case: c for c in comparison.cases}
    good = {c.case for c in comparison.cases if c.verdict not in (Verdict.WRONG, Verdict.ERROR, Verdict.MISSING)}
    kept = tuple(sorted({c.id for c in suite.cases} - good))
    refusals = {
        cid: Refusal(cid, promises)
        for cid in sorted(good)
        if cid in by_case and (promises := broken_promises(by_case[cid]))
    }
    recordable = good - (set() if force else set(refusals))
    # Only cases the harness ran ok: a planted wrong result passes but has nothing measured.
    fresh: Baseline = normalize(from_results(results, recordable))
    cases: dict[str, dict[str, VariantBaseline]] = {}
    code: dict[str, Mapping[str, KernelCode]] = {}
    for case in suite.cases:
        cid = case.id
        same = old is not None and cid in old.cases and unchanged(by_case[cid])
        if same and old is not None and cid in fresh.cases and outdated(old.cases[cid], fresh.cases[cid]):
            same = False
        if cid in fresh.cases and (force or env_changed or not same):
            cases[cid] = dict(fresh.cases[cid])
            if cid in fresh.code:
                code[cid] = fresh.code[cid]
        elif old is not None and cid in old.cases:
            cases[cid] = dict(old.cases[cid])
            # The code recorded with the values kept, else this run's (its checks passed).
            if kept_code := old.code.get(cid) or fresh.code.get(cid):
                code[cid] = kept_code
    env = fresh.env if (old is None or env_changed or force) else old.env
    new = normalize(Baseline(suite=suite.name, env=env, cases=cases, code=code)) if cases else None
    changes = _case_changes(old, new, comparison) if new is not None else []
    if env_changed and old is not None and new is not None:
        changes.insert(
            0,
            "environment: "
            + ", ".join(f"{d.field} {d.baseline_value!r} -> {d.current!r}" for d in comparison.env_differences),
        )
    refused = () if force else tuple(refusals.values())
    overridden = tuple(refusals.values()) if force else ()
    return UpdatePlan(new, tuple(changes), kept, refused, overridden)
