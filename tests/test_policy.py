import math

import pytest

from fuseci.config.policy import Band, Direction, parse_expectation, parse_tolerance


@pytest.mark.parametrize(
    ("text", "relative"),
    [("exact", 0.0), ("EXACT", 0.0), ("3%", 0.03), ("±2.5%", 0.025), ("+-10%", 0.10), ("+/-1%", 0.01), ("off", None)],
)
def test_parse_tolerance(text, relative):
    assert parse_tolerance(text).relative == relative


@pytest.mark.parametrize("text", ["3", "abc", "-5%", "100%", "", 3, None])
def test_parse_tolerance_rejects(text):
    with pytest.raises(ValueError):
        parse_tolerance(text)


def test_classify_higher_is_better():
    tol = parse_tolerance("5%")
    assert tol.classify(2.0, 1.85, Direction.HIGHER_IS_BETTER) is Band.WORSE
    assert tol.classify(2.0, 1.95, Direction.HIGHER_IS_BETTER) is Band.WITHIN
    assert tol.classify(2.0, 2.2, Direction.HIGHER_IS_BETTER) is Band.BETTER
    assert tol.classify(2.0, 2.2, Direction.LOWER_IS_BETTER) is Band.WORSE


def test_exact_tolerance_allows_only_rounding():
    tol = parse_tolerance("exact")
    assert tol.classify(3.0, 3.0, Direction.HIGHER_IS_BETTER) is Band.WITHIN
    assert tol.classify(3.0, 1.5, Direction.HIGHER_IS_BETTER) is Band.WORSE
    assert tol.classify(3.0, 3.0 + 1e-12, Direction.HIGHER_IS_BETTER) is Band.WITHIN


def test_off_tolerance_never_gates():
    tol = parse_tolerance("off")
    assert not tol.enabled
    assert tol.classify(3.0, 0.1, Direction.HIGHER_IS_BETTER) is Band.WITHIN


@pytest.mark.parametrize(
    ("text", "value", "holds"),
    [
        (">= 2.5x", 2.5, True),
        (">= 2.5x", 2.49, False),
        ("> 2", 2.0, False),
        ("<= 1.1x", 1.0, True),
        ("< 1", 1.0, False),
        ("== 3x", 3.0, True),
        ("== 3", 1.5, False),
        (">= 1e0", 1.0, True),
    ],
)
def test_expectation(text, value, holds):
    assert parse_expectation(text).holds(value) is holds


def test_expectation_never_holds_for_nan():
    assert not parse_expectation(">= 0").holds(math.nan)


@pytest.mark.parametrize("text", ["2.5x", ">=", "at least 2", 2.5, True, "=> 2"])
def test_parse_expectation_rejects(text):
    with pytest.raises(ValueError):
        parse_expectation(text)
