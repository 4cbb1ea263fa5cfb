"""Comparison policies parsed from the short strings suites use: a *tolerance* against the
baseline (``"3%"``) and an *expectation*, an absolute bound (``">= 2.5x"``).
"""

from __future__ import annotations

import enum
import math
import operator
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from fuseci.wording import did_you_mean


class _BriefRepr(reprlib.Repr):
    """:mod:`reprlib` with small limits that also covers dict and list subclasses and huge ints.

    Plain ``repr()`` (and ``f"{value!r:.60}"``, which builds the whole repr before cutting it)
    takes exponential time on a YAML alias bomb; this never looks past its limits.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = 80
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 6

    def repr1(self, x: Any, level: int) -> str:
        # reprlib dispatches on the type's name, so subclasses (the loader's line-tracking dict)
        # would fall through to the unbounded builtin repr.
        if isinstance(x, dict):
            return self.repr_dict(x, level)
        if isinstance(x, list):
            return self.repr_list(x, level)
        if isinstance(x, (bytes, bytearray)):
            cut = "..." if len(x) > self.maxother else ""
            return repr(bytes(x[: self.maxother])) + cut
        return super().repr1(x, level)

    def repr_int(self, x: int, level: int) -> str:
        # str() of an int over 4300 digits raises ValueError; never get near it.
        if x.bit_length() > 256:
            return f"<{x.bit_length()}-bit integer>"
        return super().repr_int(x, level)


_BRIEF = _BriefRepr()
#: Longest value shown in a message.
BRIEF_MAX = 160


def brief_repr(value: object) -> str:
    """A ``repr`` for messages: at most a few lines' worth of characters, in bounded time.

    Nested containers are cut after a few levels and items, long strings in the middle, and
    the whole at :data:`BRIEF_MAX` characters, so a message about a hostile value (an alias
    bomb, a megabyte string) stays short and one line.
    """
    shown = _BRIEF.repr(value)
    return shown if len(shown) <= BRIEF_MAX else shown[: BRIEF_MAX - 3] + "..."


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
        """Place ``current`` against ``baseline``: ``exact`` with a relative slack of 1e-9 (ratios of integers rounded
        through JSON still equal). Equal values (infinities included) are within; a change from or to an infinity,
        or from zero, is infinite; a NaN on either side is ``WORSE`` whichever the direction."""
        if self.relative is None or current == baseline:
            return Band.WITHIN
        if math.isnan(current) or math.isnan(baseline):
            return Band.WORSE
        slack = max(self.relative, 1e-9)
        if baseline == 0.0 or math.isinf(baseline) or math.isinf(current):
            change = math.copysign(math.inf, current - baseline)
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
        # Six significant digits like :g, but never in exponent form, which the parser (and the
        # suite schema) do not take: "±0.00001%", not "±1e-05%".
        digits = format(Decimal(f"{self.relative * 100:.6g}"), "f")
        return f"±{digits}%"


# Linear: every repetition is followed by something it cannot match (suite files are untrusted).
_TOL_RE = re.compile(r"^(?:±|\+/?-)?\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*%$")


def parse_tolerance(text: object) -> Tolerance:
    """Parse ``"exact"``, ``"off"``, ``"3%"`` (also written ``"±3%"`` or ``"+-3%"``).

    Raises:
        ValueError: the text is none of those forms.
    """
    if text is False:
        raise ValueError("got false: YAML reads a bare off, no or false as a boolean; write 'off' in quotes")
    if not isinstance(text, str):
        raise ValueError(f"expected a string like 'exact', '3%' or 'off', got {brief_repr(text)}")
    s = text.strip().lower()
    if s == "exact":
        return Tolerance(text=text, relative=0.0)
    if s == "off":
        return Tolerance(text=text, relative=None)
    m = _TOL_RE.match(s)
    if not m:
        raise ValueError(
            f"cannot parse tolerance {brief_repr(text)}: {did_you_mean(s, ('exact', 'off'))}write 'exact', 'off' or "
            "a percentage below 100% like '3%'"
        )
    value = float(m.group(1)) / 100.0
    if value >= 1.0:
        raise ValueError(f"tolerance {brief_repr(text)} is 100% or more: such a gate can never fail; use 'off'")
    return Tolerance(text=text, relative=value)


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9),
}
# Linear like _TOL_RE: the number is `12`, `1.5` or `.5` (never `1.`), then an optional exponent.
_EXPECT_RE = re.compile(r"^\s*(>=|<=|==|>|<)\s*((?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(?:x\s*)?$")


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
        shown = brief_repr(text)
        raise ValueError(f"expected a comparison like '>= {shown}x' (quoted), got the bare number {shown}")
    if not isinstance(text, str):
        raise ValueError(f"expected a comparison like '>= 2.5x', got {brief_repr(text)}")
    m = _EXPECT_RE.match(text)
    if not m:
        raise ValueError(
            f"cannot parse expectation {brief_repr(text)}: write an operator (>=, >, <=, <, ==) and a number, like '>= 2.5x'"
        )
    bound = float(m.group(2))
    if math.isinf(bound):
        raise ValueError(f"expectation {brief_repr(text)}: the bound is too large to be a number; write a finite one")
    return Expectation(text=text, op=m.group(1), bound=bound)
