"""The suite file's shape, declared once: pydantic models of the YAML document.

:mod:`fuseci.config.parse` validates a loaded document with :class:`SuiteDoc` (pydantic finds
every problem of the file in one pass, each with its place) and builds the frozen
:mod:`fuseci.config.model` from it; :mod:`fuseci.config.schema` generates the suite's JSON Schema
for editors (``fuseci/suite.schema.json``) from the same models. A value's own rules (an id, a
tolerance, a shape) are its type's validator, which says what is wrong in the words of the old
loader; rules that relate fields or depend on the suite's defaults (a ``randint`` range and the
dtype, frameworks and dtypes, the variants of a case) are checked in :mod:`fuseci.config.parse`.

docs/SUITES.md ("Writing a suite") documents the format with a complete example.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import AfterValidator, BeforeValidator, Field, GetJsonSchemaHandler, PlainValidator
from pydantic_core import PydanticCustomError, core_schema

from fuseci import validation as v
from fuseci.config import names, quantities
from fuseci.config.dtypes import FRAMEWORKS
from fuseci.config.model import (
    CACHE_CONTROLS,
    CHECK_NAMES,
    CLOCK_CONTROLS,
    DISTRIBUTIONS,
    DTYPES,
    REPLAY_MODES,
    UNFUSED,
    KernelRule,
)
from fuseci.config.policy import Expectation, Tolerance, brief_repr, parse_expectation, parse_tolerance
from fuseci.config.yaml_loader import kind

#: Most dimensions of an input tensor.
MAX_DIMS = 32
#: Most elements of an input tensor: more than any GPU holds.
MAX_ELEMENTS = 2**34


def shown(value: object) -> str:
    """A value in a suite's message: as YAML calls its type, and a short repr (``list ['a']``)."""
    return f"{kind(value)} {brief_repr(value)}"


@dataclass(frozen=True, slots=True)
class Schema:
    """The JSON Schema of a type whose validator is a function: ``make()`` when the schema is
    generated (so that enums follow the quantity catalogue)."""

    make: Callable[[], dict[str, Any]]

    def __get_pydantic_json_schema__(self, core: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        """pydantic's hook."""
        return self.make()


@dataclass(frozen=True, slots=True)
class Keys:
    """The keys a map may have, in its JSON Schema: ``enum()`` when the schema is generated
    (pydantic writes no rule for a map's keys but a pattern)."""

    enum: Callable[[], tuple[str, ...]]

    def __get_pydantic_json_schema__(self, core: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        """pydantic's hook."""
        schema = handler(core)
        schema["propertyNames"] = {"enum": list(self.enum())}
        return schema


def _did_you_mean(value: object, options: tuple[str, ...]) -> str:
    return v.did_you_mean(value, options)


# --- values ---------------------------------------------------------------------------------------


def _id(value: object) -> str:
    if isinstance(value, str) and len(value) > names.MAX_ID_CHARS and names.ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"{brief_repr(value)} is {len(value)} characters long; an id has at most {names.MAX_ID_CHARS} "
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
    "pattern": names.ID_PATTERN.pattern,
    "maxLength": names.MAX_ID_CHARS,
    "description": "Letters, digits, '_' and '-' only (ncu's NVTX filter treats '/' and ':' specially), at most "
    f"{names.MAX_ID_CHARS} of them. Ids that differ only in letter case are the same id.",
}
Id = Annotated[str, PlainValidator(_id), Schema(lambda: dict(_ID_SCHEMA))]
"""A suite, case or variant id (:func:`fuseci.config.names.is_id`)."""


def _text(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        quote = "; quote it" if isinstance(value, (int, float)) else ""
        raise ValueError(f"expected a string, got {shown(value)}{quote}")
    return value


Text = Annotated[
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
    Schema(
        lambda: {
            "type": "string",
            "pattern": f"^{_DOTTED}:{_DOTTED}$",
            "description": "A 'module:function' reference, e.g. 'kernels.elementwise:scale_relu_add_fused'.",
        }
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
    Schema(
        lambda: {
            "type": "integer",
            "minimum": 0,
            "description": "Base seed; each tensor gets its own stream from it (default 0).",
        }
    ),
]
Bytes = Annotated[
    int,
    PlainValidator(_non_negative_int),
    Schema(
        lambda: {
            "type": "integer",
            "minimum": 0,
            "description": "The case's minimum DRAM bytes, when fuseci's derivation (inputs + unfused outputs) "
            "does not fit.",
        }
    ),
]


def _finite(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {shown(value)}")
    return float(value)


def _positive(value: object) -> float:
    number = _finite(value)
    if number <= 0:
        raise ValueError(f"must be positive, got {brief_repr(value)}")
    return number


def _non_negative(value: object) -> float:
    number = _finite(value)
    if number < 0:
        raise ValueError(f"must be a non-negative number, got {number:g}")
    return number


def _number(description: str) -> Schema:
    return Schema(lambda: {"type": "number", "description": description})


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shown(value)}")
    return value


def _shape_hint(raw: object) -> str:
    """The fix for a shape written as text: YAML has no tuples, so ``(8192, 8192)`` is a string
    (and inside ``{...}`` its comma even splits it into two keys)."""
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
    elements = 1
    for d in dims:
        elements *= d
        if elements > MAX_ELEMENTS:
            raise ValueError(
                f"{brief_repr(raw)} has more than {MAX_ELEMENTS} elements (2**34), more than any GPU holds"
            )
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
        raise ValueError(
            f"cannot gate {brief_repr(key)}; {_did_you_mean(key, gateable)}gateable: {', '.join(gateable)}"
        )
    return str(key)


def _gain_key(key: object) -> str:
    gains = quantities.gains()
    if key not in gains:
        raise ValueError(
            f"no gain named {brief_repr(key)}; {_did_you_mean(key, gains)}expectations apply to: {', '.join(gains)}"
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
Expect = Annotated[
    Union[Annotated[dict[GainName, ExpectationText], Keys(quantities.gains)], None],  # noqa: UP007
    Field(description="Absolute bounds on fusion gains (unfused ÷ variant), by quantity."),
]

Dtype = Annotated[
    str,
    v.Choice(DTYPES, what="unsupported dtype"),
    Field(description="Element type of the tensor (default float32); bfloat16 and float8 need framework: torch."),
]
Distribution = Annotated[
    str,
    v.Choice(DISTRIBUTIONS, what="unknown distribution"),
    Field(description="normal (mean, std), uniform (low, high) or randint (low, high exclusive); default normal."),
]
Framework = Annotated[
    str,
    v.Choice(FRAMEWORKS, what="unknown array framework"),
    Field(
        description="The array framework a function takes its inputs in: cupy arrays (default) or torch tensors "
        "on the same memory."
    ),
]


def _checks(raw: object) -> tuple[str, ...]:
    picked = [raw] if isinstance(raw, str) else raw
    allowed = (*CHECK_NAMES, *quantities.gateable())
    if not isinstance(picked, list) or not picked or not all(isinstance(n, str) for n in picked):
        raise ValueError(f"expected a check name or a list of them, got {shown(raw)}")
    for n in picked:
        if n not in allowed:
            raise ValueError(f"no check named {brief_repr(n)}; {_did_you_mean(n, allowed)}checks: {', '.join(allowed)}")
    return tuple(dict.fromkeys(picked))


def _check_name_schema() -> dict[str, Any]:
    return {
        "enum": [*CHECK_NAMES, *quantities.gateable()],
        "description": "A check: correctness, inventory (kernel list), bytes (DRAM bytes over the minimum), kernels "
        "(the declared kernels), compile (compilation or autotuning inside the measured range) or a gated quantity.",
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


def _kernels(raw: object) -> tuple[KernelRule, ...]:
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping, got {shown(raw)}")
    if not raw:
        raise ValueError("names no kernel; e.g. `kernels: {'triton_.*fused.*': 1}`")
    rules = []
    for pattern, count in raw.items():
        if not isinstance(pattern, str) or not pattern or len(pattern) > 500:
            raise ValueError(f"expected a regular expression of a kernel name, got {brief_repr(pattern)}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{brief_repr(pattern)} is not a regular expression ({exc}); quote it in YAML") from None
        low, high = _count(count, pattern)
        rules.append(KernelRule(pattern, low, high, text=str(count)))
    return tuple(rules)


Kernels = Annotated[
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


# --- the document ---------------------------------------------------------------------------------


class Correctness(v.Model):
    """An output passes when every element satisfies |out - expected| <= atol + rtol * |expected|."""

    rtol: Annotated[
        float,
        PlainValidator(_non_negative),
        Schema(
            lambda: {
                "type": "number",
                "minimum": 0,
                "description": "Relative tolerance (default: by the output's dtype, 1e-5 for float32).",
            }
        ),
    ] = math.nan
    atol: Annotated[
        float,
        PlainValidator(_non_negative),
        Schema(
            lambda: {
                "type": "number",
                "minimum": 0,
                "description": "Absolute tolerance (default: by the output's dtype, 1e-6 for float32).",
            }
        ),
    ] = math.nan


class Defaults(v.Model):
    """Apply to every case unless it overrides them."""

    dtype: Dtype = "float32"
    distribution: Distribution = "normal"
    seed: Seed = 0
    correctness: Correctness | None = None
    gates: Gates = None
    expect: Expect = None
    bytes_allowance: Allowance | None = None
    framework: Framework | None = None


class Ncu(v.Model):
    """How Nsight Compute profiles the suite; part of the environment fingerprint."""

    clock_control: Annotated[
        str,
        v.Choice(CLOCK_CONTROLS, what="unknown setting"),
        Field(description="none: clocks as the card runs them; base: ncu locks base clocks while profiling."),
    ] = "none"
    cache_control: Annotated[
        str,
        v.Choice(CACHE_CONTROLS, what="unknown setting"),
        Field(description="all: flush caches before every kernel (reproducible bytes); none: keep them."),
    ] = "all"
    replay_mode: Annotated[
        str, v.Choice(REPLAY_MODES, what="unknown setting"), Field(description="ncu's replay mode.")
    ] = "kernel"
    tma: Annotated[
        bool,
        Field(
            description="Count the bytes Hopper's TMA loads and stores (cuBLAS's GEMMs, cuDNN's attention load "
            "through it): two more replay passes per kernel; false where no kernel of the suite uses the TMA."
        ),
    ] = True
    timeout: Annotated[
        float,
        PlainValidator(_positive),
        Schema(
            lambda: {
                "type": "number",
                "exclusiveMinimum": 0,
                "default": 1800,
                "description": "Seconds for the whole profiled run.",
            }
        ),
    ] = 1800.0


class Input(v.Model):
    """One input tensor, built on the GPU from a seeded generator."""

    shape: Shape
    dtype: Dtype | None = None
    distribution: Distribution | None = None
    seed: Seed | None = None
    low: Annotated[float, PlainValidator(_finite), _number("Lower bound for uniform and randint (default 0).")] = 0.0
    high: Annotated[float, PlainValidator(_finite), _number("Upper bound for uniform and randint (default 1).")] = 1.0
    mean: Annotated[float, PlainValidator(_finite), _number("Mean for normal (default 0).")] = 0.0
    std: Annotated[
        float, PlainValidator(_finite), _number("Standard deviation for normal (default 1; must be positive).")
    ] = 1.0


class LongVariant(v.Model):
    """A variant written as a mapping: its function and what it is judged by."""

    fn: Ref
    expect: Expect = None
    baseline: Annotated[
        Id,
        Field(description="Judge this variant against the baseline recorded for that other fused variant of the case."),
    ] = ""
    caught_by: CaughtBy = ()
    framework: Framework | None = None
    kernels: Kernels = ()


def _variant(value: object) -> object:
    """The mistakes a variant's value shows before its form is known."""
    if value is None:
        raise ValueError(
            "has no function: write its 'module:function' after the colon on the same line "
            "(e.g. fused: mylib.ops:f); YAML reads an empty value as null"
        )
    if not isinstance(value, (str, dict)):
        raise ValueError(
            f"expected a 'module:function' string or a mapping {{fn: ..., expect: ...}}, got {shown(value)}"
        )
    return value


Variant = Annotated[
    Union[Ref, LongVariant],  # noqa: UP007
    BeforeValidator(_variant),
    Field(description="A 'module:function' reference, or the long form with per-variant expectations."),
]


def _variants(node: Mapping[str, object]) -> Mapping[str, object]:
    if UNFUSED not in node:
        raise ValueError(f"missing the {UNFUSED!r} variant that every fusion gain is measured against")
    if len(node) < 2:
        raise ValueError(f"needs at least one fused variant besides {UNFUSED!r}")
    return node


def _inputs(node: Mapping[str, object]) -> Mapping[str, object]:
    if not node:
        raise ValueError("a case needs at least one input")
    return node


class Case(v.Model):
    """One fusion pattern: inputs, variants and the policies that judge them."""

    id: Id
    description: Text = ""
    inputs: Annotated[
        dict[InputName, Input],
        AfterValidator(_inputs),
        Field(
            description="Tensors passed to every variant (and the reference) as keyword arguments.",
            json_schema_extra={"minProperties": 1},
        ),
    ]
    params: Annotated[
        Union[dict[ParamName, Param], None],  # noqa: UP007
        Field(description="Scalars passed to every variant as keyword arguments."),
    ] = None
    reference: Annotated[
        Union[Ref, None],  # noqa: UP007
        Field(description="Optional float64 NumPy reference: 'module:function'."),
    ] = None
    variants: Annotated[
        dict[Id, Variant],
        AfterValidator(_variants),
        Field(description="'unfused' and at least one fused variant, by id.", json_schema_extra={"minProperties": 2}),
    ]
    correctness: Correctness | None = None
    gates: Gates = None
    expect: Expect = None
    bytes_allowance: Allowance | None = None
    min_bytes: Bytes | None = None
    framework: Framework | None = None


def _cases(value: object) -> object:
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty list of cases, got {shown(value)}")
    return value


class SuiteDoc(v.Model):
    """A fuseci suite file: fused and unfused variants of GPU kernels, their inputs, and the
    fusion gains gated against baselines. See docs/SUITES.md, 'Writing a suite'."""

    suite: Annotated[
        Id, Field(description="Suite id: letters, digits, '_' and '-'. Names the baseline file and the NVTX ranges.")
    ]
    description: Text = ""
    defaults: Defaults | None = None
    ncu: Ncu | None = None
    cases: Annotated[
        list[Case],
        BeforeValidator(_cases),
        Field(description="The cases of the suite, in the order they run.", min_length=1),
    ]
    planted: Annotated[
        bool,
        PlainValidator(_flag),
        Schema(
            lambda: {
                "type": "boolean",
                "description": "A suite of planted regressions (variants with caught_by); `fuseci run` without "
                "suite arguments skips it.",
            }
        ),
    ] = False


#: What each required key looks like, for "missing required key" messages.
EXAMPLES = {
    "suite": "suite: mylib",
    "cases": "cases: [{id: ..., inputs: ..., variants: ...}]",
    "id": "id: my_case",
    "inputs": "inputs: {x: {shape: [67108864]}}",
    "variants": "variants: {unfused: mylib.ops:f_unfused, fused: mylib.fused:f}",
    "shape": "shape: [67108864]",
    "fn": "fn: mylib.fused:f",
}
