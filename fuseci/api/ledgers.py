"""The fusion ledgers of a suite's ledger variants: built once from the provenance and the
kernels profiled, judged against the baseline's ledgers, and recorded on an update."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fuseci.config.model import Case, Suite, Variant
from fuseci.errors import LedgerError
from fuseci.frames.metrics import SuiteResults
from fuseci.judge.compare import LedgerJudged
from fuseci.judge.verdict import CheckKind, MetricDelta, Reference, Verdict
from fuseci.ledger import artifacts, build, diff, gate, store
from fuseci.records.fusion import Ledger, Provenance

LedgerKey = tuple[str, str]


def _ledger_variants(suite: Suite) -> list[tuple[Case, Variant]]:
    return [(c, v) for c in suite.cases for v in c.variants if v.ledger is not None]


def built(suite: Suite, results: SuiteResults) -> dict[LedgerKey, Ledger | LedgerError]:
    """Each measured ledger variant's ledger (or why it could not be built), by (case, variant)."""
    out: dict[LedgerKey, Ledger | LedgerError] = {}
    for case, v in _ledger_variants(suite):
        rec = results.record.cases.get(case.id)
        if rec is None or not rec.ok or v.id not in rec.measured:
            continue
        try:
            capture = artifacts.capture(rec.provenance.get(v.id, Provenance()))
            out[(case.id, v.id)] = build.build(capture, results.ledger_rows.get((case.id, v.id), ()))
        except LedgerError as exc:
            out[(case.id, v.id)] = exc
    return out


def _delta(case: Case, v: Variant, verdict: Verdict, quantity: str, message: str) -> MetricDelta:
    return MetricDelta(case.id, v.id, CheckKind.LEDGER, quantity, verdict, message)


def _graphs_check(case: Case, v: Variant, ledger: Ledger) -> MetricDelta | None:
    """A forward of another number of graphs than the suite demands: a broken case (exit 3)."""
    want = v.ledger.graphs if v.ledger is not None else None
    if want is None or len(ledger.graphs) == want:
        return None
    why = "; ".join(ledger.break_reasons[:3]) or "Dynamo logged no reason"
    message = f"the compiled forward is {len(ledger.graphs)} graph(s), the suite demands {want} (ledger.graphs): "
    return _delta(case, v, Verdict.ERROR, "graphs", f"{message}graph break: {why}")


def judged(
    suite: Suite,
    ledgers: Mapping[LedgerKey, Ledger | LedgerError],
    baselines: Mapping[str, Ledger],
    reference: Reference,
) -> dict[LedgerKey, LedgerJudged]:
    """Each ledger variant's ledger judged against ``baselines``, with what changed, by (case, variant)."""
    out: dict[LedgerKey, LedgerJudged] = {}
    for case, v in _ledger_variants(suite):
        got = ledgers.get((case.id, v.id))
        if got is None:
            continue
        if isinstance(got, LedgerError):
            message = f"its ledger could not be built: {got}"
            out[(case.id, v.id)] = LedgerJudged(None, None, (_delta(case, v, Verdict.ERROR, "ledger", message),))
            continue
        assert v.ledger is not None
        checks: list[MetricDelta] = [c for c in (_graphs_check(case, v, got),) if c]
        base = baselines.get(store.key(case.id, v.judged_as))
        if base is None:
            message = f"no ledger of {v.judged_as} to compare with yet ({len(got.rows)} kernel calls recorded)"
            advice = f"; record one with `{reference.command}`" if reference.command else f" in {reference.name}"
            checks.append(_delta(case, v, Verdict.NEW, "ledger", message + advice))
        else:
            verdict = gate.judge(base, got, allow_new=v.ledger.allow_new)
            checks += [_delta(case, v, f.verdict, f.kind.value, f.message) for f in verdict.findings]
            if not verdict.findings:
                checks.append(
                    _delta(case, v, Verdict.PASS, "ledger", f"{len(got.rows)} kernel calls as in the baseline's ledger")
                )
        changes = tuple(diff.diff(base, got)) if base is not None else ()
        out[(case.id, v.id)] = LedgerJudged(got, base, tuple(checks), changes)
    return out


def stored(baseline_path: Path) -> dict[str, Ledger]:
    """The ledgers stored beside a baseline file (none: empty).

    Raises:
        LedgerError: the file is there but unreadable or not a suite's ledgers.
    """
    return store.load_suite(store.suite_path(baseline_path))


def recorded(
    suite: Suite, ledgers: Mapping[LedgerKey, Ledger | LedgerError], old: Mapping[str, Ledger], keep: set[str]
) -> dict[str, Ledger]:
    """The ledgers to store after an update: this run's for the cases in ``keep`` (not planted), else the old."""
    new = dict(old)
    for key, got in ledgers.items():
        case = next(c for c in suite.cases if c.id == key[0])
        v = next(x for x in case.variants if x.id == key[1])
        if isinstance(got, Ledger) and case.id in keep and v.candidate_for is None:
            new[store.key(*key)] = got
    return new
