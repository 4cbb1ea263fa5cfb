"""The values a suite file holds, each declared once as an annotated type: ids, names,
references, numbers, shapes and element types, with the validator that says what is wrong and
the JSON Schema written for it (:class:`Schema`, :class:`Keys`).

:mod:`fuseci.config.document` composes them (and :mod:`fuseci.config.judging`'s) into the
suite's models.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Union

import yaml
from pydantic import Field, GetJsonSchemaHandler, PlainValidator
from pydantic_core import PydanticCustomError, core_schema

from fuseci import validation as v
from fuseci.config import names
from fuseci.config.dtypes import FRAMEWORKS
from fuseci.config.model import DISTRIBUTIONS, DTYPES
from fuseci.config.policy import brief_repr
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


def yaml_number_hint(value: object) -> str:
    """``; YAML 1.1 reads 1e-5 as a string ...: write 1.0e-05`` when ``value`` is a string that
    reads as a number in Python (and YAML 1.2) but that YAML 1.1, which fuseci reads suites
    with, leaves a string: a float needs a dot, and an exponent its sign. Else ``""``."""
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


def number_schema(description: str) -> Schema:
    return Schema(lambda: {"type": "number", "description": description})


def flag(value: object) -> bool:
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
FrameworkName = Annotated[
    str,
    v.Choice(FRAMEWORKS, what="unknown array framework"),
    Field(
        description="The array framework a function takes its inputs in: cupy arrays (default) or torch tensors "
        "on the same memory."
    ),
]
