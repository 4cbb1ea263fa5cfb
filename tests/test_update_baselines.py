"""Which cases update-baselines keeps byte for byte (fuseci.judge.update.unchanged)."""

from fuseci.judge.update import unchanged
from fuseci.judge.verdict import CaseResult, CheckKind, MetricDelta, Verdict


def _case(*checks: MetricDelta) -> CaseResult:
    return CaseResult("c", 1, "", checks, ())


def _check(verdict: Verdict, change: float | None, kind: CheckKind = CheckKind.VALUE) -> MetricDelta:
    return MetricDelta("c", "fused", kind, "q", verdict, "m", change=change)


def test_a_warning_that_compares_nothing_leaves_the_case_unchanged() -> None:
    # A fused kernel under half occupancy warns whatever the baseline says: nothing to re-record.
    assert unchanged(_case(_check(Verdict.PASS, 0.0), _check(Verdict.WARN, None)))


def test_a_warning_about_a_change_is_a_change() -> None:
    # Theoretical occupancy fell and the times did not feel it: re-recording takes the new value.
    assert not unchanged(_case(_check(Verdict.PASS, 0.0), _check(Verdict.WARN, -0.5)))


def test_anything_else_but_pass_is_a_change() -> None:
    for verdict in (Verdict.IMPROVED, Verdict.NEW, Verdict.REGRESSED, Verdict.MISSING):
        assert not unchanged(_case(_check(verdict, 0.1, CheckKind.GAIN))), verdict
    assert unchanged(_case(_check(Verdict.PASS, 0.01, CheckKind.GAIN)))
