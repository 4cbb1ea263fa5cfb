"""Property-based tests of the policy strings and of Tolerance.classify."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuseci.config.policy import Band, Direction, Expectation, Tolerance, parse_expectation, parse_tolerance

PROPERTY = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

anything = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.just(5000).map(lambda digits: 10**digits),  # repr() refuses ints this long
        st.floats(),
        st.text(),
        st.binary(max_size=20),
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=10,
)
_WS = st.sampled_from(["", " ", "\t", "  "])
tolerance_texts = st.one_of(
    st.text(max_size=16),
    st.builds(
        "".join,
        st.tuples(
            _WS,
            st.sampled_from(["", "±", "+-", "+/-", "-"]),
            _WS,
            st.from_regex(r"\A[0-9.]{0,8}\Z"),
            _WS,
            st.sampled_from(["%", ""]),
            _WS,
        ),
    ),
    st.sampled_from(["exact", "EXACT", " off ", "Off", "exat", "of"]),
)
expectation_texts = st.one_of(
    st.text(max_size=16),
    st.builds(
        "".join,
        st.tuples(
            _WS,
            st.sampled_from([">=", "<=", "==", ">", "<", "=>", "="]),
            _WS,
            st.from_regex(r"\A[0-9.]{0,8}([eE][-+]?[0-9]{0,4})?\Z"),
            _WS,
            st.sampled_from(["x", "", "X"]),
            _WS,
        ),
    ),
)


@PROPERTY
@given(st.one_of(tolerance_texts, anything))
def test_parse_tolerance_returns_a_tolerance_or_raises_value_error(text: object) -> None:
    try:
        tol = parse_tolerance(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    assert tol.relative is None or 0.0 <= tol.relative < 1.0


@PROPERTY
@given(st.one_of(expectation_texts, anything))
def test_parse_expectation_returns_an_expectation_or_raises_value_error(text: object) -> None:
    try:
        exp = parse_expectation(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    assert exp.op in (">=", ">", "<=", "<", "==") and math.isfinite(exp.bound) and exp.bound >= 0


@PROPERTY
@given(tolerance_texts)
def test_a_printed_tolerance_parses_back_to_itself(text: str) -> None:
    try:
        tol = parse_tolerance(text)
    except ValueError:
        return
    printed = str(tol)
    if tol.relative is not None and float(f"{tol.relative * 100:.6g}") >= 100:
        return  # 99.99999% prints as ±100%: six significant digits cannot say it
    again = parse_tolerance(printed)
    assert str(again) == printed
    assert again.enabled == tol.enabled
    if tol.relative is not None and again.relative is not None:
        assert again.relative == pytest.approx(tol.relative, rel=1e-5, abs=1e-12)


@PROPERTY
@given(st.floats(min_value=1e-12, max_value=0.9999, allow_subnormal=False))
def test_any_tolerance_prints_in_a_form_that_parses(relative: float) -> None:
    printed = str(Tolerance(text="", relative=relative))
    assert "e" not in printed  # never exponent form, which the parser and the schema do not take
    assert parse_tolerance(printed).relative == pytest.approx(relative, rel=1e-5)


@PROPERTY
@given(
    st.sampled_from([">=", ">", "<=", "<", "=="]),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False),
)
def test_a_printed_expectation_parses_back_to_itself(op: str, bound: float) -> None:
    printed = str(Expectation(text="", op=op, bound=bound))
    again = parse_expectation(printed)
    assert again.op == op
    assert str(again) == printed
    assert again.bound == pytest.approx(bound, rel=1e-5)


@PROPERTY
@given(expectation_texts)
def test_a_parsed_expectation_prints_and_parses_back(text: str) -> None:
    try:
        exp = parse_expectation(text)
    except ValueError:
        return
    again = parse_expectation(str(exp))
    assert (again.op, str(again)) == (exp.op, str(exp))


tolerances = st.one_of(
    st.just(Tolerance(text="exact", relative=0.0)),
    st.just(Tolerance(text="off", relative=None)),
    st.floats(min_value=0, max_value=0.99).map(lambda r: Tolerance(text="", relative=r)),
)
values = st.floats(allow_nan=False)


@PROPERTY
@given(tolerances, values, values)
def test_classify_is_antisymmetric_in_direction(tol: Tolerance, baseline: float, current: float) -> None:
    higher = tol.classify(baseline, current, Direction.HIGHER_IS_BETTER)
    lower = tol.classify(baseline, current, Direction.LOWER_IS_BETTER)
    assert (higher, lower) in {(Band.WITHIN, Band.WITHIN), (Band.BETTER, Band.WORSE), (Band.WORSE, Band.BETTER)}


@PROPERTY
@given(tolerances, values, st.sampled_from(Direction))
def test_classify_puts_equal_values_within(tol: Tolerance, value: float, direction: Direction) -> None:
    assert tol.classify(value, value, direction) is Band.WITHIN


@PROPERTY
@given(tolerances, values, values)
def test_classify_agrees_with_the_sign_of_the_change(tol: Tolerance, baseline: float, current: float) -> None:
    band = tol.classify(baseline, current, Direction.HIGHER_IS_BETTER)
    if band is Band.BETTER:
        assert current > baseline
    elif band is Band.WORSE:
        assert current < baseline


@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize(("baseline", "current"), [(math.nan, 1.0), (1.0, math.nan), (math.nan, math.nan)])
def test_classify_calls_a_nan_worse_whichever_the_direction(
    baseline: float, current: float, direction: Direction
) -> None:
    assert parse_tolerance("5%").classify(baseline, current, direction) is Band.WORSE
    assert parse_tolerance("off").classify(baseline, current, direction) is Band.WITHIN


def test_classify_with_infinities() -> None:
    tol = parse_tolerance("5%")
    assert tol.classify(math.inf, math.inf, Direction.HIGHER_IS_BETTER) is Band.WITHIN
    assert tol.classify(math.inf, 3.0, Direction.HIGHER_IS_BETTER) is Band.WORSE
    assert tol.classify(math.inf, 3.0, Direction.LOWER_IS_BETTER) is Band.BETTER
    assert tol.classify(3.0, math.inf, Direction.HIGHER_IS_BETTER) is Band.BETTER


@pytest.mark.parametrize(
    "text",
    [
        ">= " + "1" * 200_000 + "a",
        ">= 1" + " " * 200_000 + "a",
        " " * 200_000 + "a",
        ">= 1." + "1" * 200_000 + "x" + " " * 200_000 + "y",
        ">= 1e" + "1" * 200_000 + "a",
    ],
    ids=["digits", "trailing-spaces", "leading-spaces", "fraction", "exponent"],
)
def test_pathological_expectations_are_refused_in_linear_time(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError):
        parse_expectation(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    "text", ["1" * 200_000 + "a", "±" + " " * 200_000 + "a", "1" + " " * 200_000 + "a%", "1." + "1" * 200_000 + "a"]
)
def test_pathological_tolerances_are_refused_in_linear_time(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError):
        parse_tolerance(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("text", "relative", "printed"),
    [("0.00001%", 1e-7, "±0.00001%"), ("3%", 0.03, "±3%"), ("+-2.50%", 0.025, "±2.5%"), ("0%", 0.0, "exact")],
)
def test_tolerance_printing(text: str, relative: float, printed: str) -> None:
    tol = parse_tolerance(text)
    assert tol.relative == pytest.approx(relative)
    assert str(tol) == printed


def test_a_huge_number_in_a_message_is_summarised() -> None:
    with pytest.raises(ValueError, match=r"bare number <16610-bit integer>"):
        parse_expectation(10**5000)


def test_a_bound_too_large_for_a_float_is_refused() -> None:
    with pytest.raises(ValueError, match="too large"):
        parse_expectation(">= 1e999x")
