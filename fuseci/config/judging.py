"""What a suite judges its variants by, as annotated types: tolerances against the baseline
(gates), absolute bounds on gains (expectations), the allowance over the minimum DRAM bytes, the
checks a planted regression must be caught by and the kernels a variant must launch.

Each is parsed once here, into :mod:`fuseci.config.policy`'s objects and
:class:`~fuseci.config.model.KernelRule`; :mod:`fuseci.config.document` composes them.
"""

from __future__ import annotations

import re
from re import _constants, _parser  # type: ignore[attr-defined]
from typing import Annotated, Any, Union

from pydantic import Field, PlainValidator

from fuseci.config import quantities
from fuseci.config.model import CHECK_NAMES, KernelRule
from fuseci.config.policy import Expectation, Tolerance, brief_repr, parse_expectation, parse_tolerance
from fuseci.config.values import Keys, Schema, shown
from fuseci.wording import did_you_mean


def _policy_message(exc: ValueError, text: object) -> str:
    """A tolerance's or expectation's parse error, with the YAML mistake behind an empty one."""
    if isinstance(text, str) and not text.strip():
        return (
            f"{exc} (YAML reads a value that starts with '>' or '|' as a block of the lines below it: "
            'quote it, e.g. ">= 2x")'
        )
    return str(exc)


def _tolerance(text: object) -> Tolerance:
    try:
        return parse_tolerance(text)
    except ValueError as exc:
        raise ValueError(_policy_message(exc, text)) from None


def _expectation(text: object) -> Expectation:
    try:
        return parse_expectation(text)
    except ValueError as exc:
        raise ValueError(_policy_message(exc, text)) from None


def _allowance(text: object) -> Tolerance:
    try:
        return parse_tolerance(text)
    except ValueError as exc:
        raise ValueError(f"{exc} (the allowance over the minimum DRAM bytes, e.g. '10%', or 'off')") from None


_TOLERANCE_PATTERN = (
    r"^\s*(?:[Ee][Xx][Aa][Cc][Tt]|[Oo][Ff][Ff]|(?:±|\+/?-)?\s*(?:0*[0-9]{1,2}(?:\.[0-9]*)?|\.[0-9]+)\s*%)\s*$"
)
ToleranceText = Annotated[
    Tolerance,
    PlainValidator(_tolerance),
    Schema(
        lambda: {
            "type": "string",
            "pattern": _TOLERANCE_PATTERN,
            "description": "How far a gain may move from its baseline: 'exact', 'off' (reported, never gated) or a "
            "percentage below 100% like '3%' (also '±3%', '+-3%'). Quote 'off': a bare off is YAML's false.",
        }
    ),
]
ExpectationText = Annotated[
    Expectation,
    PlainValidator(_expectation),
    Schema(
        lambda: {
            "type": "string",
            "pattern": r"^\s*(?:>=|<=|==|>|<)\s*(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*(?:x\s*)?$",
            "description": "An absolute bound on a fusion gain, checked with or without a baseline: '>= 2.5x', "
            "'> 2', '<= 1.1x', '< 1', '== 3x'. Quote it: a bare '>' starts a YAML block scalar.",
        }
    ),
]
Allowance = Annotated[
    Tolerance,
    PlainValidator(_allowance),
    Schema(
        lambda: {
            "type": "string",
            "pattern": _TOLERANCE_PATTERN,
            "description": "How far above the case's minimum DRAM bytes (every input read once, every output "
            "written once) a fused variant's DRAM bytes may be: a percentage like '10%', 'exact' or 'off'.",
        }
    ),
]


def _gate_key(key: object) -> str:
    gateable = quantities.gateable()
    if key not in gateable:
        raise ValueError(f"cannot gate {brief_repr(key)}; {did_you_mean(key, gateable)}gateable: {', '.join(gateable)}")
    return str(key)


def _gain_key(key: object) -> str:
    gains = quantities.gains()
    if key not in gains:
        raise ValueError(
            f"no gain named {brief_repr(key)}; {did_you_mean(key, gains)}expectations apply to: {', '.join(gains)}"
        )
    return str(key)


GateName = Annotated[str, PlainValidator(_gate_key), Schema(lambda: {"enum": list(quantities.gateable())})]
GainName = Annotated[str, PlainValidator(_gain_key), Schema(lambda: {"enum": list(quantities.gains())})]
Gates = Annotated[
    Union[Annotated[dict[GateName, ToleranceText], Keys(quantities.gateable)], None],  # noqa: UP007
    Field(
        description="Tolerance of each gated quantity against its baseline, by quantity: fusion gains (unfused ÷ "
        "variant; event_time's gain is the real-time speedup), a fused variant's occupancy (gated only where "
        "listed), and host_blocking ('exact': a fused call that now waits for the GPU fails; 'off': not checked)."
    ),
]
Expectations = Annotated[
    Union[Annotated[dict[GainName, ExpectationText], Keys(quantities.gains)], None],  # noqa: UP007
    Field(description="Absolute bounds on fusion gains (unfused ÷ variant), by quantity."),
]


def _checks(raw: object) -> tuple[str, ...]:
    picked = [raw] if isinstance(raw, str) else raw
    allowed = (*CHECK_NAMES, *quantities.gateable())
    if not isinstance(picked, list) or not picked or not all(isinstance(n, str) for n in picked):
        raise ValueError(f"expected a check name or a list of them, got {shown(raw)}")
    for n in picked:
        if n not in allowed:
            raise ValueError(f"no check named {brief_repr(n)}; {did_you_mean(n, allowed)}checks: {', '.join(allowed)}")
    return tuple(dict.fromkeys(picked))


def _check_name_schema() -> dict[str, Any]:
    return {
        "enum": [*CHECK_NAMES, *quantities.gateable()],
        "description": "A check: correctness, inventory (kernel list), bytes (DRAM bytes over the minimum), kernels "
        "(the declared kernels), compile (compilation or autotuning inside the measured range), ledger (the fusion "
        "ledger of a compiled forward) or a gated quantity.",
    }


CaughtBy = Annotated[
    tuple[str, ...],
    PlainValidator(_checks),
    Schema(
        lambda: {
            "description": "A planted regression: the checks that must catch it.",
            "anyOf": [_check_name_schema(), {"type": "array", "minItems": 1, "items": _check_name_schema()}],
        }
    ),
]

#: A kernel count: a whole number (exactly), or ``>= n``, ``<= n``, ``n..m``.
_COUNT = re.compile(r"\A\s*(?:(?P<op>>=|<=|==)?\s*(?P<n>\d{1,6})|(?P<lo>\d{1,6})\s*\.\.\s*(?P<hi>\d{1,6}))\s*\Z")


def _count(raw: object, pattern: str) -> tuple[int, int | None]:
    text = str(raw) if isinstance(raw, (int, str)) and not isinstance(raw, bool) else None
    m = _COUNT.match(text) if text is not None else None
    if m is None:
        raise ValueError(
            f"expected a kernel count for {brief_repr(pattern)}: a whole number (exactly that many), '>= n', "
            f"'<= n' or 'n..m', got {shown(raw)}"
        )
    if m["lo"] is not None:
        low, high = int(m["lo"]), int(m["hi"])
        if low > high:
            raise ValueError(f"count {text!r} of {brief_repr(pattern)}: {low} is above {high}")
        return low, high
    n = int(m["n"])
    return {">=": (n, None), "<=": (0, n)}.get(m["op"] or "==", (n, n))


def kernel_pattern(raw: object) -> str:
    """``raw`` when it is a regular expression of a kernel name (at most 500 characters).

    Raises:
        ValueError: it is not a string, is empty or too long, or does not compile; says why.
    """
    if not isinstance(raw, str) or not raw or len(raw) > 500:
        raise ValueError(f"expected a regular expression of a kernel name, got {brief_repr(raw)}")
    try:
        re.compile(raw)
        parsed = _parser.parse(raw)
    except re.error as exc:
        raise ValueError(f"{brief_repr(raw)} is not a regular expression ({exc}); quote it in YAML") from None
    if _ambiguous_repeat(list(parsed), inside=False):
        raise ValueError(
            f"{brief_repr(raw)} repeats what can itself match in more than one way (a quantifier or an alternation "
            "under a quantifier), which can take exponential time on a long kernel name; write it without the nesting "
            "(`(a|b)*` as `[ab]*`, `(x+)*` as `x*`)"
        )
    return raw


_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT)


def _parts(op: Any, av: Any) -> list[Any]:
    """The sub-patterns of one parsed item that are not a repeat."""
    if op == _constants.BRANCH:
        return list(av[1])
    if op == _constants.SUBPATTERN:
        return [av[-1]]
    if op == _constants.ATOMIC_GROUP:
        return [av]
    if op in (_constants.ASSERT, _constants.ASSERT_NOT):
        return [av[1]]
    return []


def _ambiguous_repeat(items: list[Any], *, inside: bool) -> bool:
    """Whether a parsed pattern repeats (more than once) a part that holds a repeat or an
    alternation: the backtracking that can take exponential time. A possessive repeat or an
    atomic group never backtracks into what it matched."""
    for op, av in items:
        if op in _REPEATS:
            _, most, sub = av
            many = most == _constants.MAXREPEAT or most > 1
            if (many and inside) or _ambiguous_repeat(list(sub), inside=inside or many):
                return True
            continue
        if op == _constants.BRANCH and inside:
            return True
        parts = _parts(op, av)
        if any(_ambiguous_repeat(list(part), inside=inside) for part in parts):
            return True
    return False


def pattern_schema() -> dict[str, Any]:
    """The JSON Schema of :data:`KernelPattern`."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 500,
        "description": "A regular expression, matched against the whole kernel name as ncu reports it.",
    }


KernelPattern = Annotated[str, PlainValidator(kernel_pattern), Schema(pattern_schema)]


def _kernels(raw: object) -> tuple[KernelRule, ...]:
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping, got {shown(raw)}")
    if not raw:
        raise ValueError("names no kernel; e.g. `kernels: {'triton_.*fused.*': 1}`")
    rules = []
    for pattern, count in raw.items():
        kernel_pattern(pattern)
        low, high = _count(count, pattern)
        rules.append(KernelRule(pattern, low, high, text=str(count)))
    return tuple(rules)


KernelRules = Annotated[
    tuple[KernelRule, ...],
    PlainValidator(_kernels),
    Schema(
        lambda: {
            "type": "object",
            "description": "Kernels the variant must launch: a regular expression of the kernel name (whole name) and "
            "how many launches match it: a whole number (exactly), or '>= n', '<= n', 'n..m'.",
            "minProperties": 1,
            "propertyNames": {"minLength": 1, "maxLength": 500},
            "additionalProperties": {
                "anyOf": [
                    {"type": "integer", "minimum": 0, "maximum": 999999},
                    {"type": "string", "pattern": r"^\s*((>=|<=|==)?\s*\d{1,6}|\d{1,6}\s*\.\.\s*\d{1,6})\s*$"},
                ]
            },
        }
    ),
]
