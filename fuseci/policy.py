"""Comparison policies parsed from the short strings suites use.

A *tolerance* bounds how far a gated quantity may move from its baseline before the verdict
changes (``"exact"``, ``"3%"``, ``"off"``). An *expectation* is an absolute bound that holds
with or without a baseline (``">= 2.5x"``). Both are parsed once, when the suite loads, into
frozen objects; parse errors are raised as :class:`ValueError` for the loader to place.
"""

from __future__ import annotations

import enum
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass


class Direction(enum.Enum):
    """Which way a quantity should move to count as better."""

    HIGHER_IS_BETTER = "higher"
    LOWER_IS_BETTER = "lower"


class Band(enum.Enum):
    """Where a current value falls relative to its baseline and tolerance."""

    WITHIN = "within"
    BETTER = "better"
    WORSE = "worse"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far a quantity may move from its baseline, relative to the baseline value."""

    text: str
    """The string as written in the suite, kept for messages."""
    relative: float | None
    """Allowed relative change (0.03 for ``"3%"``); 0.0 for ``"exact"``; None for ``"off"``."""

    @property
    def enabled(self) -> bool:
        """False for ``"off"``: the quantity is reported but never gated."""
        return self.relative is not None

    def classify(self, baseline: float, current: float, direction: Direction) -> Band:
        """Place ``current`` against ``baseline``.

        ``exact`` compares with a relative slack of 1e-9 so that ratios of integers that went
        through JSON rounding still compare equal.
        """
        if self.relative is None:
            return Band.WITHIN
        slack = max(self.relative, 1e-9)
        if baseline == 0.0:
            change = 0.0 if current == 0.0 else math.copysign(math.inf, current)
        else:
            change = (current - baseline) / abs(baseline)
        if abs(change) <= slack:
            return Band.WITHIN
        improved = change > 0 if direction is Direction.HIGHER_IS_BETTER else change < 0
        return Band.BETTER if improved else Band.WORSE

    def __str__(self) -> str:
        if self.relative is None:
            return "off"
        if self.relative == 0.0:
            return "exact"
        return f"±{self.relative * 100:g}%"


_TOL_RE = re.compile(r"^\s*(?:±|\+/?-)?\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")


def parse_tolerance(text: object) -> Tolerance:
    """Parse ``"exact"``, ``"off"``, ``"3%"`` (also written ``"±3%"`` or ``"+-3%"``).

    Raises:
        ValueError: the text is none of those forms.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a string like 'exact', '3%' or 'off', got {text!r}")
    s = text.strip().lower()
    if s == "exact":
        return Tolerance(text=text, relative=0.0)
    if s == "off":
        return Tolerance(text=text, relative=None)
    m = _TOL_RE.match(s)
    if not m:
        raise ValueError(f"cannot parse tolerance {text!r}: write 'exact', 'off' or a percentage like '3%'")
    value = float(m.group(1)) / 100.0
    if value >= 1.0:
        raise ValueError(f"tolerance {text!r} is 100% or more: such a gate can never fail; use 'off'")
    return Tolerance(text=text, relative=value)


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9),
}
_EXPECT_RE = re.compile(r"^\s*(>=|<=|==|>|<)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*x?\s*$")


@dataclass(frozen=True, slots=True)
class Expectation:
    """An absolute bound on a quantity, e.g. a fusion gain of at least 2.5x."""

    text: str
    """The string as written in the suite."""
    op: str
    """One of ``>=``, ``>``, ``<=``, ``<``, ``==``."""
    bound: float
    """The number on the right-hand side."""

    def holds(self, value: float) -> bool:
        """True when ``value`` satisfies the bound (NaN never does)."""
        if math.isnan(value):
            return False
        return _OPS[self.op](value, self.bound)

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}x"


def parse_expectation(text: object) -> Expectation:
    """Parse ``">= 2.5x"``, ``"== 3"``, ``"< 1.1x"`` and the like.

    Raises:
        ValueError: the text is not a comparison with a number.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        raise ValueError(f"expected a comparison like '>= {text}x', got the bare number {text!r}")
    if not isinstance(text, str):
        raise ValueError(f"expected a comparison like '>= 2.5x', got {text!r}")
    m = _EXPECT_RE.match(text)
    if not m:
        raise ValueError(
            f"cannot parse expectation {text!r}: write an operator (>=, >, <=, <, ==) and a number, like '>= 2.5x'"
        )
    return Expectation(text=text, op=m.group(1), bound=float(m.group(2)))
