"""The suite file's shape, declared once: pydantic models of the YAML document, which
:mod:`fuseci.config.parse` validates with and :mod:`fuseci.config.schema` writes the JSON Schema
of. A value's own rules are its type's, in :mod:`fuseci.config.values`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Union

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, PlainValidator

from fuseci import validation as v
from fuseci.config.model import CACHE_CONTROLS, CLOCK_CONTROLS, COMPILE_MODES, LEDGER_REPEATS, REPLAY_MODES, UNFUSED
from fuseci.config.values import (
    Allowance,
    Bytes,
    CaughtBy,
    Description,
    Distribution,
    Dtype,
    Expectations,
    FrameworkName,
    Gates,
    InputName,
    KernelPattern,
    KernelRules,
    Param,
    ParamName,
    Ref,
    Schema,
    Seed,
    Shape,
    SuiteFileId,
    finite,
    flag,
    json_schema,
    non_negative,
    pattern_schema,
    positive,
    shown,
)


def _tolerance_schema(which: str, default: str) -> Schema:
    return json_schema(
        "number", f"{which} tolerance (default: by the output's dtype, {default} for float32).", minimum=0
    )


class CorrectnessDoc(v.Model):
    """An output passes when every element satisfies |out - expected| <= atol + rtol * |expected|."""

    rtol: Annotated[float, PlainValidator(non_negative), _tolerance_schema("Relative", "1e-5")] = math.nan
    atol: Annotated[float, PlainValidator(non_negative), _tolerance_schema("Absolute", "1e-6")] = math.nan


class Defaults(v.Model):
    """Apply to every case unless it overrides them."""

    dtype: Dtype = "float32"
    distribution: Distribution = "normal"
    seed: Seed = 0
    correctness: CorrectnessDoc | None = None
    gates: Gates = None
    expect: Expectations = None
    bytes_allowance: Allowance | None = None
    framework: FrameworkName | None = None


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
        PlainValidator(positive),
        json_schema("number", "Seconds for the whole profiled run.", exclusiveMinimum=0, default=1800),
    ] = 1800.0


Finite = Annotated[float, PlainValidator(finite)]


class Input(v.Model):
    """One input tensor, built on the GPU from a seeded generator."""

    shape: Shape
    dtype: Dtype | None = None
    distribution: Distribution | None = None
    seed: Seed | None = None
    low: Annotated[Finite, json_schema("number", "Lower bound for uniform and randint (default 0).")] = 0.0
    high: Annotated[Finite, json_schema("number", "Upper bound for uniform and randint (default 1).")] = 1.0
    mean: Annotated[Finite, json_schema("number", "Mean for normal (default 0).")] = 0.0
    std: Annotated[Finite, json_schema("number", "Standard deviation for normal (default 1; must be positive).")] = 1.0


#: Most ``allow_new`` patterns of one ledger.
MAX_ALLOW_NEW = 1000


def _allow_new(value: object) -> object:
    """One pattern, written without a list, is a list of one."""
    return [value] if isinstance(value, str) else value


def _graphs(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < v.INT_LIMIT:
        raise ValueError(
            f"expected a positive whole number of compiled graphs (1: no graph break allowed), got {shown(value)}"
        )
    return value


class LedgerDoc(v.Model):
    """Audit the variant's compiled forward kernel by kernel (the fusion ledger), against the
    baseline's ledger."""

    allow_new: Annotated[
        v.Items[KernelPattern],
        BeforeValidator(_allow_new),
        Field(max_length=MAX_ALLOW_NEW),
        Schema(
            lambda: {
                "description": "Regular expressions of kernel names (each matched against the whole name) that may "
                "run with no counterpart in the baseline's ledger without failing: a note instead of a regression.",
                "anyOf": [pattern_schema(), {"type": "array", "maxItems": MAX_ALLOW_NEW, "items": pattern_schema()}],
            }
        ),
    ] = ()
    graphs: Annotated[
        Union[int, None],  # noqa: UP007
        PlainValidator(_graphs),
        json_schema(
            "integer",
            "How many graphs the compiled forward must be (1: no graph break allowed); another count is a broken "
            "case. Default: any.",
            minimum=1,
        ),
    ] = None
    repeats: Annotated[
        str,
        v.Choice(LEDGER_REPEATS, what="unknown setting"),
        Field(
            description="once (the default): a launch that repeats an earlier launch of the same forward and graph "
            "with the same kernel, argument shapes, strides, alignment and scalars is not profiled again but counted "
            "with the first one's measurement; every: profile each launch (kernels whose work depends on the data, "
            "such as a mixture of experts' routed GEMMs)."
        ),
    ] = "once"


def _ledger(value: object) -> object:
    """The mistakes a ledger's value shows before its form is known."""
    if value is None:
        raise ValueError(
            "expected true or a mapping {allow_new: [...], graphs: N}, got null (YAML reads an empty value as null): "
            "write `ledger: true`"
        )
    if not isinstance(value, (bool, dict)):
        raise ValueError(f"expected true or a mapping {{allow_new: [...], graphs: N}}, got {shown(value)}")
    return value


LedgerValue = Annotated[
    Union[bool, LedgerDoc],  # noqa: UP007
    BeforeValidator(_ledger),
    Field(
        description="Audit the compiled forward kernel by kernel, against the baseline's ledger (framework: torch "
        "only): true, or a mapping of allow_new, graphs and repeats; false: no ledger (the default)."
    ),
]


class Compile(v.Model):
    """``torch.compile``'s options for a factory's module."""

    mode: Annotated[
        str,
        v.Choice(COMPILE_MODES, what="unknown compile mode"),
        Field(description="torch.compile's mode (default: default)."),
    ] = "default"
    fullgraph: Annotated[
        bool, Field(description="true: a graph break fails the first call instead of splitting the graph.")
    ] = False
    dynamic: Annotated[
        Union[bool, None],  # noqa: UP007
        Field(description="true: compile for any shape; false: for the case's shapes; null (default): torch decides."),
    ] = None


def _compile(value: object) -> object:
    """The mistakes a compile's value shows before its form is known."""
    if not isinstance(value, (bool, dict)):
        raise ValueError(
            f"expected true, false or a mapping {{mode: ..., fullgraph: ..., dynamic: ...}}, got {shown(value)}"
            + (" (YAML reads an empty value as null): write `compile: true`" if value is None else "")
        )
    return value


CompileValue = Annotated[
    Union[bool, Compile],  # noqa: UP007
    BeforeValidator(_compile),
    Field(
        description="Only with factory: run the module through torch.compile: true (its defaults), or a mapping "
        "of mode, fullgraph and dynamic; false (the default): the module runs eagerly."
    ),
]


class LongVariant(v.Model):
    """A variant written as a mapping: its function (or its model's factory) and what it is judged by."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["fn"]}, {"required": ["factory"]}],
            "dependencies": {"compile": ["factory"]},
        }
    )

    fn: Annotated[
        Ref, Field(description="The function called with the case's inputs and params as keyword arguments.")
    ] = ""
    expect: Expectations = None
    baseline: Annotated[
        SuiteFileId,
        Field(description="Judge this variant against the baseline recorded for that other fused variant of the case."),
    ] = ""
    caught_by: CaughtBy = ()
    framework: FrameworkName | None = None
    kernels: KernelRules = ()
    ledger: LedgerValue = False
    factory: Annotated[
        Ref,
        Field(
            description="Instead of fn (framework torch): a function called once with the case's params that returns "
            "a torch.nn.Module; its forward is called with the case's inputs, positionally, in the order declared."
        ),
    ] = ""
    compile: CompileValue = False


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


VariantDoc = Annotated[
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


class CaseDoc(v.Model):
    """One fusion pattern: inputs, variants and the policies that judge them."""

    id: SuiteFileId
    description: Description = ""
    inputs: Annotated[
        dict[InputName, Input],
        AfterValidator(_inputs),
        Field(
            description="Tensors passed to every variant (and the reference) as keyword arguments; to a factory's "
            "module, positionally, in this order.",
            json_schema_extra={"minProperties": 1},
        ),
    ]
    params: Annotated[
        Union[dict[ParamName, Param], None],  # noqa: UP007
        Field(description="Scalars passed to every variant as keyword arguments."),
    ] = None
    reference: Annotated[
        Union[Ref, None],  # noqa: UP007
        Field(
            description="Optional float64 NumPy reference: 'module:function'. Without one, a case whose variants "
            "name a factory is checked against a float64 copy of the factory's module."
        ),
    ] = None
    variants: Annotated[
        dict[SuiteFileId, VariantDoc],
        AfterValidator(_variants),
        Field(description="'unfused' and at least one fused variant, by id.", json_schema_extra={"minProperties": 2}),
    ]
    correctness: CorrectnessDoc | None = None
    gates: Gates = None
    expect: Expectations = None
    bytes_allowance: Allowance | None = None
    min_bytes: Bytes | None = None
    framework: FrameworkName | None = None


def _cases(value: object) -> object:
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty list of cases, got {shown(value)}")
    return value


class SuiteDoc(v.Model):
    """A fuseci suite file: fused and unfused variants of GPU kernels, their inputs, and the
    fusion gains gated against baselines. See docs/SUITES.md, 'Writing a suite'."""

    suite: Annotated[
        SuiteFileId,
        Field(description="Suite id: letters, digits, '_' and '-'. Names the baseline file and the NVTX ranges."),
    ]
    description: Description = ""
    defaults: Defaults | None = None
    ncu: Ncu | None = None
    cases: Annotated[
        list[CaseDoc],
        BeforeValidator(_cases),
        Field(description="The cases of the suite, in the order they run.", min_length=1),
    ]
    planted: Annotated[
        bool,
        PlainValidator(flag),
        json_schema(
            "boolean",
            "A suite of planted regressions (variants with caught_by); `fuseci run` without suite arguments skips it.",
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
