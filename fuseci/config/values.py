"""The values a suite file holds, each declared once as an annotated type with the validator
that says what is wrong and its JSON Schema; :mod:`fuseci.config.document` composes them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from re import _constants, _parser  # type: ignore[attr-defined]
from typing import Annotated, Any, TypeVar, Union

import yaml
from pydantic import Field, GetJsonSchemaHandler, PlainValidator
from pydantic_core import PydanticCustomError, core_schema

from fuseci import validation as v
from fuseci.config import names, quantities
from fuseci.config.dtypes import DTYPE_NAMES, FRAMEWORKS
from fuseci.config.model import CHECK_NAMES, DISTRIBUTIONS, KernelRule
from fuseci.config.policy import Expectation, Tolerance, brief_repr, parse_expectation, parse_tolerance
from fuseci.config.yaml_loader import kind
from fuseci.wording import did_you_mean

#: Most dimensions of an input tensor.
MAX_DIMS = 32
#: Most elements of an input tensor: more than any GPU holds.
MAX_ELEMENTS = 2**34


def shown(value: object) -> str:
    """A value in a suite's message: as YAML calls its type, and a short repr (``list ['a']``)."""
    return f"{kind(value)} {brief_repr(value)}"


@dataclass(frozen=True, slots=True)
class Schema:
    """The JSON Schema of a type whose validator is a function: ``make()``, called when generated (enums follow)."""

    make: Callable[[], dict[str, Any]]

    def __get_pydantic_json_schema__(self, core: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        return self.make()


@dataclass(frozen=True, slots=True)
class Keys:
    """A map's keys in its JSON Schema: ``enum()``, called when generated (pydantic gives keys a pattern only)."""

    enum: Callable[[], tuple[str, ...]]

    def __get_pydantic_json_schema__(self, core: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        schema = handler(core)
        schema["propertyNames"] = {"enum": list(self.enum())}
        return schema


def _id(value: object) -> str:
    if isinstance(value, str) and len(value) > v.MAX_ID_CHARS and v.ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"{brief_repr(value)} is {len(value)} characters long; an id has at most {v.MAX_ID_CHARS} "
            "(it names files and NVTX ranges): shorten it"
        )
    if not names.is_id(value):
        raise ValueError(
            f"{brief_repr(value)} is not a valid id: use letters, digits, '_' and '-' only "
            "(ncu's NVTX filter treats '/' and ':' specially)"
        )
    return value


_ID_SCHEMA = {
    "type": "string",
    "pattern": v.ID_PATTERN.pattern,
    "maxLength": v.MAX_ID_CHARS,
    "description": "Letters, digits, '_' and '-' only (ncu's NVTX filter treats '/' and ':' specially), at most "
    f"{v.MAX_ID_CHARS} of them. Ids that differ only in letter case are the same id.",
}
SuiteFileId = Annotated[str, PlainValidator(_id), Schema(lambda: dict(_ID_SCHEMA))]
"""A suite, case or variant id (:func:`fuseci.config.names.is_id`)."""


def _text(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        quote = "; quote it" if isinstance(value, (int, float)) else ""
        raise ValueError(f"expected a string, got {shown(value)}{quote}")
    return value


def json_schema(json_type: str, description: str, **more: Any) -> Schema:
    """The JSON Schema of a value of ``json_type`` (``string``, ``integer``...), with ``more`` rules."""
    return Schema(lambda: {"type": json_type, **more, "description": description})


Description = Annotated[
    str, PlainValidator(_text), Schema(lambda: {"type": ["string", "null"], "description": "One line for reports."})
]
"""One line for reports; empty when left out or null."""

_IDENT = r"(?:[A-Za-z_]|[^\x00-\x7F])(?:[A-Za-z0-9_]|[^\x00-\x7F])*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"


def _ref(value: object) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError("expected", "expected {what}", {"what": "a 'module:function' string"})
    if value.count(":") != 1 or not all(
        part and all(p.isidentifier() for p in part.split(".")) for part in value.split(":")
    ):
        raise ValueError(f"{brief_repr(value)} is not a 'module:function' reference (e.g. 'kernels.elementwise:fused')")
    return value


Ref = Annotated[
    str,
    PlainValidator(_ref),
    json_schema(
        "string",
        "A 'module:function' reference, e.g. 'kernels.elementwise:scale_relu_add_fused'.",
        pattern=f"^{_DOTTED}:{_DOTTED}$",
    ),
]
"""A ``module:function`` reference, checked as text (nothing is imported)."""


def _identifier(what: str, why: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if not isinstance(value, str) or not value.isidentifier():
            raise ValueError(f"{what} name {brief_repr(value)} must be a Python identifier{why}")
        return value

    return check


_IDENTIFIER_SCHEMA = {
    "type": "string",
    "pattern": f"^{_IDENT}$",
    "description": "A Python identifier: it is passed to the variant functions as a keyword argument.",
}
InputName = Annotated[
    str, PlainValidator(_identifier("input", " (it is passed as a keyword)")), Schema(lambda: dict(_IDENTIFIER_SCHEMA))
]
ParamName = Annotated[str, PlainValidator(_identifier("param", "")), Schema(lambda: dict(_IDENTIFIER_SCHEMA))]


def _param(value: object) -> int | float | str | bool:
    if not isinstance(value, (int, float, str, bool)):
        raise ValueError(f"expected a scalar (number, string or boolean), got {shown(value)}")
    return value


Param = Annotated[
    Union[int, float, str, bool],  # noqa: UP007 (evaluated at run time)
    PlainValidator(_param),
    Schema(lambda: {"type": ["string", "number", "boolean"]}),
]


def _non_negative_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {shown(value)}")
    return value


Seed = Annotated[
    int,
    PlainValidator(_non_negative_int),
    json_schema("integer", "Base seed; each tensor gets its own stream from it (default 0).", minimum=0),
]
Bytes = Annotated[
    int,
    PlainValidator(_non_negative_int),
    json_schema(
        "integer",
        "The case's minimum DRAM bytes, when fuseci's derivation (inputs + unfused outputs) does not fit.",
        minimum=0,
    ),
]


def yaml_number_hint(value: object) -> str:
    """``; YAML 1.1 reads 1e-5 as a string ...: write 1.0e-05`` when ``value`` is a string that is a number in
    Python but that YAML 1.1 (fuseci's) leaves a string: a float needs a dot, an exponent its sign. Else ``""``."""
    if not isinstance(value, str) or len(value) > 64:
        return ""
    try:
        number = float(value.replace("_", ""))
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    written = yaml.safe_dump(number, default_flow_style=True).split("\n", 1)[0]
    return (
        f"; YAML 1.1 reads {value} as a string, not a number (a float needs a dot, and an exponent its sign): "
        f"write {written}"
    )


def finite(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {shown(value)}{yaml_number_hint(value)}")
    return float(value)


def positive(value: object) -> float:
    number = finite(value)
    if number <= 0:
        raise ValueError(f"must be positive, got {brief_repr(value)}")
    return number


def non_negative(value: object) -> float:
    number = finite(value)
    if number < 0:
        raise ValueError(f"must be a non-negative number, got {number:g}")
    return number


def flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shown(value)}")
    return value


def _shape_hint(raw: object) -> str:
    """The fix for a shape written as text: YAML has no tuples, so ``(8192, 8192)`` is a string (or two keys)."""
    if not isinstance(raw, str) or not re.fullmatch(r"[\s(\[]*[0-9][0-9\s,]*[)\]]?\s*", raw):
        return ""
    dims = re.findall(r"[0-9]+", raw)
    whole = raw.strip().startswith(("(", "[")) == raw.strip().endswith((")", "]"))  # not cut by a {...} comma
    example = ", ".join(dims) if whole and len(dims) <= MAX_DIMS else "8192, 8192"
    return f"; YAML has no tuples: write the shape as a list in brackets, e.g. shape: [{example}]"


def _shape(raw: object) -> tuple[int, ...]:
    dims = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if (
        not isinstance(dims, list)
        or not dims
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
    ):
        raise ValueError(f"expected a list of positive integers (or one), got {shown(raw)}{_shape_hint(raw)}")
    if len(dims) > MAX_DIMS:
        raise ValueError(f"{len(dims)} dimensions; a tensor has at most {MAX_DIMS}")
    if math.prod(dims) > MAX_ELEMENTS:
        raise ValueError(f"{brief_repr(raw)} has more than {MAX_ELEMENTS} elements (2**34), more than any GPU holds")
    return tuple(dims)


Shape = Annotated[
    tuple[int, ...],
    PlainValidator(_shape),
    Schema(
        lambda: {
            "description": f"A list of positive integers (at most {MAX_DIMS}), or one integer.",
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_DIMS,
                    "items": {"type": "integer", "minimum": 1},
                },
            ],
        }
    ),
]


Dtype = Annotated[
    str,
    v.Choice(DTYPE_NAMES, what="unsupported dtype"),
    Field(description="Element type of the tensor (default float32); bfloat16 and float8 need framework: torch."),
]
Distribution = Annotated[
    str,
    v.Choice(DISTRIBUTIONS, what="unknown distribution"),
    Field(description="normal (mean, std), uniform (low, high) or randint (low, high exclusive); default normal."),
]
FrameworkName = Annotated[
    str,
    v.Choice(FRAMEWORKS, what="unknown array framework"),
    Field(
        description="The array framework a function takes its inputs in: cupy arrays (default) or torch tensors "
        "on the same memory."
    ),
]


# --- What a suite judges its variants by, parsed once into fuseci.config.policy's objects and KernelRule ---


_P = TypeVar("_P", Tolerance, Expectation)


def _policy(parse: Callable[[object], _P]) -> Callable[[object], _P]:
    def check(text: object) -> _P:
        try:
            return parse(text)
        except ValueError as exc:
            if isinstance(text, str) and not text.strip():
                raise ValueError(
                    f"{exc} (YAML reads a value that starts with '>' or '|' as a block of the lines below it: "
                    'quote it, e.g. ">= 2x")'
                ) from None
            raise ValueError(str(exc)) from None

    return check


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
    PlainValidator(_policy(parse_tolerance)),
    json_schema(
        "string",
        "How far a gain may move from its baseline: 'exact', 'off' (reported, never gated) or a percentage below "
        "100% like '3%' (also '±3%', '+-3%'). Quote 'off': a bare off is YAML's false.",
        pattern=_TOLERANCE_PATTERN,
    ),
]
ExpectationText = Annotated[
    Expectation,
    PlainValidator(_policy(parse_expectation)),
    json_schema(
        "string",
        "An absolute bound on a fusion gain, checked with or without a baseline: '>= 2.5x', '> 2', '<= 1.1x', "
        "'< 1', '== 3x'. Quote it: a bare '>' starts a YAML block scalar.",
        pattern=r"^\s*(?:>=|<=|==|>|<)\s*(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*(?:x\s*)?$",
    ),
]
Allowance = Annotated[
    Tolerance,
    PlainValidator(_allowance),
    json_schema(
        "string",
        "How far above the case's minimum DRAM bytes (every input read once, every output written once) a fused "
        "variant's DRAM bytes may be: a percentage like '10%', 'exact' or 'off'.",
        pattern=_TOLERANCE_PATTERN,
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
    """Whether a parsed pattern repeats (more than once) a part that holds a repeat or an alternation: exponential
    backtracking. A possessive repeat or an atomic group never backtracks into what it matched."""
    for op, av in items:
        if op in _REPEATS:
            _, most, sub = av
            many = most == _constants.MAXREPEAT or most > 1
            if (many and inside) or _ambiguous_repeat(list(sub), inside=inside or many):
                return True
            continue
        if op == _constants.BRANCH and inside:
            return True
        if any(_ambiguous_repeat(list(part), inside=inside) for part in _parts(op, av)):
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
