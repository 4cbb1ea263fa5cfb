"""Properties of ``compare`` and the verdict algebra, on synthetic suites (hypothesis).

Each example is one case with an ``unfused`` and a ``fused`` variant, built through the real
per-kernel frame and :func:`fuseci.frames.metrics.summarize`. The fused variant measures 1 of every
quantity and the unfused one ``g``, so that every gain but the launch count's (unfused ÷ fused)
is exactly ``g``; the baseline is built the same way from ``b``. Launch gains are ratios of kernel
counts and have a test of their own.
"""

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fuseci.config import names
from fuseci.config.model import Case, Correctness, Suite, Variant
from fuseci.config.names import ENV_FIELDS
from fuseci.config.policy import Tolerance, parse_tolerance
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP
from fuseci.frames.metrics import SuiteResults, summarize
from fuseci.frames.report import kernel_columns
from fuseci.judge import baseline as jb
from fuseci.judge.baseline import Baseline, VariantBaseline, normalized
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict, exit_code
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord

ENV = {f: "same" for f in ENV_FIELDS}
#: Gains that are exactly ``g`` by construction (launch counts are integers; see below).
FLOAT_GAINS = (names.DRAM_BYTES, names.DURATION, names.DRAM_READ, names.DRAM_WRITE)
SLACK = 1e-9  # what `exact` allows, for ratios that went through JSON rounding

# Each example builds pandas frames (~15 ms): few examples keep the file to seconds.
fast = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
algebra = settings(max_examples=200, deadline=None)

# --- building inputs ------------------------------------------------------------------------


def _kernel(variant: str, index: int, value: float) -> dict:
    row = dict.fromkeys(kernel_columns(), 0.0)
    row.update({names.SUITE: "s", names.CASE: "c", names.VARIANT: variant, names.KERNEL_INDEX: index})
    row.update({names.KERNEL: f"k_{variant}_{index}", names.DEVICE_NAME: "GPU"})
    # Read and write halves so that their sum, the DRAM bytes, is `value` too.
    row.update({names.DRAM_READ: value / 2, names.DRAM_WRITE: value / 2, names.DURATION: value})
    row.update({names.GRID_SIZE: 1, names.BLOCK_SIZE: 32, names.REGISTERS: 16, names.REPLAY_PASSES: 1})
    row.update({names.OCC_ACHIEVED: 90.0, names.OCC_THEORETICAL: 100.0})  # a healthy kernel's: no warning
    return row


def _results(unfused: float, fused: float = 1.0, launches: tuple[int, int] = (1, 1)) -> SuiteResults:
    """A run whose unfused kernels measure ``unfused`` in all, its fused ones ``fused``."""
    n_u, n_f = launches
    rows = [_kernel("unfused", i, unfused / n_u) for i in range(n_u)]
    rows += [_kernel("fused", i, fused / n_f) for i in range(n_f)]
    record = HarnessRecord(
        suite="s",
        env=ENV,
        cases={"c": CaseRecord("c", CaseStatus.OK, measured=("unfused", "fused"))},
        complete=True,
        profiler=None,
    )
    return summarize(pd.DataFrame.from_records(rows, columns=list(kernel_columns())), record)


def _baseline(unfused: float, fused: float = 1.0, launches: tuple[int, int] = (1, 1)) -> Baseline:
    def vb(value: float, n: int) -> VariantBaseline:
        values = {q: value for q in FLOAT_GAINS} | {names.DRAM_READ: value / 2, names.DRAM_WRITE: value / 2}
        return VariantBaseline(values={**values, names.LAUNCHES: float(n)}, kernels=())

    return Baseline(
        suite="s", env=ENV, cases={"c": {"unfused": vb(unfused, launches[0]), "fused": vb(fused, launches[1])}}
    )


def _suite(gates: dict[str, Tolerance]) -> Suite:
    variants = tuple(Variant(id=v, fn=f"m:{v}", expect={}) for v in ("unfused", "fused"))
    case = Case(
        id="c",
        description="",
        inputs=(),
        params={},
        variants=variants,
        reference=None,
        correctness=Correctness(),
        gates=gates,
        line=1,
    )
    return Suite(name="s", path=Path("s.yaml"), description="", cases=(case,))


def _gain_verdicts(results: SuiteResults, suite: Suite, baseline: Baseline | None) -> dict[str, Verdict]:
    comparison = compare(results, suite, baseline)
    return {k.quantity: k.verdict for c in comparison.cases for k in c.checks if k.check is CheckKind.GAIN}


# --- strategies -----------------------------------------------------------------------------

gains = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
percent = st.decimals(min_value="0.001", max_value="99.999", places=3).map(lambda d: parse_tolerance(f"{d}%"))
tolerances = st.one_of(st.just(parse_tolerance("exact")), percent)
gated = st.dictionaries(st.sampled_from(FLOAT_GAINS), tolerances, min_size=1)
verdicts = st.sampled_from(list(Verdict))


def _slack(tol: Tolerance) -> float:
    assert tol.relative is not None
    return max(tol.relative, SLACK)


# --- compare --------------------------------------------------------------------------------


@fast
@given(unfused=gains, fused=gains, gates=gated, launches=st.tuples(st.integers(1, 4), st.integers(1, 4)))
def test_equal_values_pass(
    unfused: float, fused: float, gates: dict[str, Tolerance], launches: tuple[int, int]
) -> None:
    """The same measurements as the baseline pass every gate, `exact` included."""
    results = _results(unfused, fused, launches)
    suite = _suite({**gates, names.LAUNCHES: parse_tolerance("exact")})
    comparison = compare(results, suite, jb.from_results(results, {"c"}))
    assert {k.verdict for c in comparison.cases for k in c.checks} == {Verdict.PASS}
    assert comparison.verdict is Verdict.PASS and exit_code([comparison]) == EXIT_PASS


@fast
@given(unfused=st.integers(1, 2**40), fused=st.integers(1, 2**40), gates=gated)
def test_integer_counts_pass_against_their_own_file(unfused: int, fused: int, gates: dict[str, Tolerance]) -> None:
    """Integer quantities (bytes, launches, nanoseconds) survive the file's rounding exactly."""
    results = _results(2.0 * unfused, 2.0 * fused)  # even, so that the read and write halves are integers too
    baseline = normalized(jb.from_results(results, {"c"}))
    assert set(_gain_verdicts(results, _suite(gates), baseline).values()) == {Verdict.PASS}


@fast
@given(
    base=gains,
    change=st.floats(min_value=-0.999, max_value=10.0),
    tol=tolerances,
    quantity=st.sampled_from(FLOAT_GAINS),
)
def test_gain_verdict_follows_the_tolerance(base: float, change: float, tol: Tolerance, quantity: str) -> None:
    """Higher is better for gains: a drop beyond the tolerance regresses, a rise beyond improves."""
    slack = _slack(tol)
    assume(abs(abs(change) - slack) > 1e-6)  # clear of the boundary, where float rounding decides
    current = base * (1 + change)
    verdict = _gain_verdicts(_results(current), _suite({quantity: tol}), _baseline(base))[quantity]
    if abs(change) < slack:
        assert verdict is Verdict.PASS
    elif change < 0:
        assert verdict is Verdict.REGRESSED
    else:
        assert verdict is Verdict.IMPROVED


@fast
@given(base=gains, change=st.one_of(st.just(0.0), st.floats(min_value=-1e-6, max_value=1e-6)))
def test_exact_passes_only_equal_gains(base: float, change: float) -> None:
    """`exact` is PASS only for equal gains, up to its relative slack of 1e-9."""
    assume(change == 0.0 or abs(abs(change) - SLACK) > 1e-12)
    current = base * (1 + change)
    verdict = _gain_verdicts(_results(current), _suite({names.DURATION: parse_tolerance("exact")}), _baseline(base))
    assert (verdict[names.DURATION] is Verdict.PASS) == (abs(change) < SLACK)


@fast
@given(now=st.tuples(st.integers(1, 6), st.integers(1, 6)), then=st.tuples(st.integers(1, 6), st.integers(1, 6)))
def test_exact_launch_gate(now: tuple[int, int], then: tuple[int, int]) -> None:
    """Launch gains are ratios of counts: `exact` passes iff the ratios are equal."""
    verdict = _gain_verdicts(
        _results(1.0, 1.0, now), _suite({names.LAUNCHES: parse_tolerance("exact")}), _baseline(1.0, 1.0, then)
    )[names.LAUNCHES]
    lhs, rhs = now[0] * then[1], then[0] * now[1]  # now_u / now_f against then_u / then_f
    assert verdict is (Verdict.PASS if lhs == rhs else Verdict.REGRESSED if lhs < rhs else Verdict.IMPROVED)


ORDER = {Verdict.REGRESSED: 0, Verdict.PASS: 1, Verdict.IMPROVED: 2}


@fast
@given(base=gains, lower=gains, higher=gains, tol=tolerances)
def test_a_higher_gain_never_judges_worse(base: float, lower: float, higher: float, tol: Tolerance) -> None:
    lower, higher = sorted((lower, higher))
    suite, baseline = _suite({names.DURATION: tol}), _baseline(base)
    v_low = _gain_verdicts(_results(lower), suite, baseline)[names.DURATION]
    v_high = _gain_verdicts(_results(higher), suite, baseline)[names.DURATION]
    assert ORDER[v_low] <= ORDER[v_high]


@fast
@given(current=st.one_of(st.just(0.0), gains), tol=tolerances)
def test_zero_baseline_gain(current: float, tol: Tolerance) -> None:
    """A baseline gain of 0 (the unfused side moved no bytes then) is judged, not a crash."""
    comparison = compare(_results(current), _suite({names.DRAM_BYTES: tol}), _baseline(0.0))
    (check,) = (k for c in comparison.cases for k in c.checks if k.check is CheckKind.GAIN)
    assert check.verdict is (Verdict.PASS if current == 0.0 else Verdict.IMPROVED)
    assert check.baseline_value == 0.0 and check.change is None and "(n/a)" in check.message


@fast
@given(current=gains, gates=gated)
def test_no_baseline_is_new(current: float, gates: dict[str, Tolerance]) -> None:
    assert set(_gain_verdicts(_results(current), _suite(gates), None).values()) == {Verdict.NEW}


# --- the verdict algebra --------------------------------------------------------------------


def _case(name: str, vs: list[Verdict]) -> CaseResult:
    checks = tuple(MetricDelta(name, "fused", CheckKind.GAIN, "launches", v, "") for v in vs)
    return CaseResult(name, 0, "", checks, ())


def _comparison(cases: list[list[Verdict]]) -> Comparison:
    return Comparison("s", "s.yaml", {}, None, False, (), tuple(_case(f"c{i}", vs) for i, vs in enumerate(cases)))


def test_verdict_ranks_are_a_total_order() -> None:
    ranks = [v.rank for v in Verdict]
    assert sorted(ranks) == list(range(len(Verdict)))  # distinct, so any two verdicts compare
    worst_first = sorted(Verdict, key=lambda v: v.rank)
    assert worst_first[:2] == [Verdict.WRONG, Verdict.REGRESSED] and worst_first[-1] is Verdict.PASS


@algebra
@given(st.lists(st.lists(verdicts, max_size=5), max_size=4))
def test_worst_verdict_and_exit_code(cases: list[list[Verdict]]) -> None:
    comparison = _comparison(cases)
    for case, vs in zip(comparison.cases, cases, strict=True):
        assert case.verdict is min(vs, key=lambda v: v.rank, default=Verdict.PASS)
        assert all(case.verdict.rank <= v.rank for v in vs)
    assert comparison.verdict is min((c.verdict for c in comparison.cases), key=lambda v: v.rank, default=Verdict.PASS)
    every = {v for vs in cases for v in vs}
    expected = (
        EXIT_REGRESSION
        if every & {Verdict.WRONG, Verdict.REGRESSED}
        else EXIT_SETUP
        if every & {Verdict.ERROR, Verdict.INCOMPARABLE}
        else EXIT_PASS
    )
    assert exit_code([comparison]) == expected


@algebra
@given(st.lists(st.lists(st.lists(verdicts, max_size=4), max_size=3), max_size=3))
def test_exit_code_of_several_suites_is_the_worst(suites: list[list[list[Verdict]]]) -> None:
    comparisons = [_comparison(cases) for cases in suites]
    codes = [exit_code([c]) for c in comparisons]
    worst = EXIT_REGRESSION if EXIT_REGRESSION in codes else EXIT_SETUP if EXIT_SETUP in codes else EXIT_PASS
    assert exit_code(comparisons) == worst


@pytest.mark.parametrize("verdict", list(Verdict))
def test_each_verdict_alone(verdict: Verdict) -> None:
    assert exit_code([_comparison([[verdict]])]) == verdict.exit_code
