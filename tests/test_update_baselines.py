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


def test_a_re_recorded_case_names_its_new_variants_instead_of_their_no_baseline_checks() -> None:
    """A planted variant added to a recorded case: the summary names it, and never tells the user
    to record a baseline with the very command that is recording it."""
    from fuseci.judge.baseline import VariantBaseline
    from fuseci.judge.update import _what_moved

    old = {"fused": VariantBaseline({"q": 1.0}, ())}
    new = {"fused": VariantBaseline({"q": 1.2}, ()), "sector": VariantBaseline({"q": 1.0}, ())}
    result = _case(
        MetricDelta("c", "fused", CheckKind.VALUE, "q", Verdict.IMPROVED, "q of fused rose", change=0.2),
        MetricDelta("c", "sector", CheckKind.VALUE, "q", Verdict.NEW, "no baseline yet (record one with ...)"),
    )
    assert _what_moved(old, new, result) == "new variant sector; q of fused rose"
    assert _what_moved(new, old, _case()) == "variant sector removed"
    assert _what_moved(old, old, _case()) == "re-recorded"
