"""Suite files: YAML → frozen dataclasses, validated once, with errors that point at the line.

A suite names a set of cases; each case builds its inputs, runs an ``unfused`` variant and one
or more fused variants (``module:function`` references), checks them against each other and
an optional float64 reference, and states which fusion gains are gated and how tightly.
README.md documents the format with a complete example.
"""

from __future__ import annotations

import difflib
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fuseci import schema
from fuseci.errors import SuiteError
from fuseci.policy import Expectation, Tolerance, parse_expectation, parse_tolerance

#: The variant every gain is measured against.
BASELINE_VARIANT = "unfused"

DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
DISTRIBUTIONS = ("normal", "uniform", "randint")
CLOCK_CONTROLS = ("none", "base")
CACHE_CONTROLS = ("all", "none")
REPLAY_MODES = ("kernel", "application")

#: Default gates: launch counts exact, byte counts tight, times loose.
DEFAULT_GATES: dict[str, str] = {
    schema.LAUNCHES: "exact",
    schema.DRAM_BYTES: "3%",
    schema.DURATION: "15%",
}

_MAX_ELEMENTS = 2**34


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input tensor, built on the GPU from a seeded generator."""

    name: str
    """Keyword the variant functions receive it as."""
    shape: tuple[int, ...]
    """Tensor shape."""
    dtype: str
    """NumPy dtype name, one of :data:`DTYPES`."""
    distribution: str
    """``normal`` (mean, std), ``uniform`` (low, high) or ``randint`` (low, high exclusive)."""
    seed: int
    """Generator seed; identical seeds give identical tensors on every run."""
    low: float = 0.0
    """Lower bound for ``uniform`` and ``randint``."""
    high: float = 1.0
    """Upper bound for ``uniform`` and ``randint``."""
    mean: float = 0.0
    """Mean for ``normal``."""
    std: float = 1.0
    """Standard deviation for ``normal``."""

    @property
    def nbytes(self) -> int:
        """Size of the tensor in bytes."""
        import numpy as np

        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True, slots=True)
class Correctness:
    """How close a variant's output must be to the unfused output and to the reference."""

    rtol: float = 1e-5
    """Relative tolerance, elementwise: ``|out - ref| <= atol + rtol * |ref|``."""
    atol: float = 1e-6
    """Absolute tolerance."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One implementation of a case."""

    id: str
    """Variant id, used in the NVTX range name."""
    fn: str
    """``module:function`` reference; called with the inputs and params as keyword arguments."""
    expect: Mapping[str, Expectation]
    """Absolute bounds on this variant's fusion gains, by quantity."""


@dataclass(frozen=True, slots=True)
class Case:
    """One fusion pattern: inputs, variants and the policies that judge them."""

    id: str
    """Case id, used in the NVTX range name."""
    description: str
    """One line for reports."""
    inputs: tuple[InputSpec, ...]
    """Tensors passed to every variant (and the reference)."""
    params: Mapping[str, Any]
    """Scalars passed to every variant as keyword arguments."""
    variants: tuple[Variant, ...]
    """``unfused`` first, then the fused variants in file order."""
    reference: str | None
    """Optional ``module:function`` float64 reference (NumPy in, NumPy out)."""
    correctness: Correctness
    """Output tolerances."""
    gates: Mapping[str, Tolerance]
    """Tolerance of each gated fusion gain against its baseline, by quantity."""
    line: int
    """Line of the case in the suite file (1-based), for messages and annotations."""

    def variant(self, variant_id: str) -> Variant:
        """The variant with this id.

        Raises:
            KeyError: no such variant.
        """
        for v in self.variants:
            if v.id == variant_id:
                return v
        raise KeyError(variant_id)

    @property
    def fused_variants(self) -> tuple[Variant, ...]:
        """Every variant except ``unfused``."""
        return tuple(v for v in self.variants if v.id != BASELINE_VARIANT)


@dataclass(frozen=True, slots=True)
class NcuSettings:
    """How ncu profiles the suite; recorded in the environment fingerprint."""

    clock_control: str = "none"
    """``none``: clocks as the card runs them; ``base``: ncu locks base clocks while profiling."""
    cache_control: str = "all"
    """``all``: flush caches before every kernel (reproducible bytes); ``none``: keep them."""
    replay_mode: str = "kernel"
    """``kernel`` or ``application`` replay."""
    timeout_s: float = 1800.0
    """Wall-clock limit for the whole profiled run."""


@dataclass(frozen=True, slots=True)
class Suite:
    """A parsed, validated suite file."""

    name: str
    """Suite id, used in range names and baseline file names."""
    path: Path
    """The file it was loaded from."""
    description: str
    """One line for reports."""
    cases: tuple[Case, ...]
    """Cases in file order."""
    ncu: NcuSettings = field(default_factory=NcuSettings)
    """Profiler settings."""

    def case(self, case_id: str) -> Case:
        """The case with this id.

        Raises:
            KeyError: no such case.
        """
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)


# --- loading -------------------------------------------------------------------------------


class _LineDict(dict[str, Any]):
    """A mapping that remembers the line it started on."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    """SafeLoader that records the line of every mapping (safe: constructs no Python objects)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    out = _LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise SuiteError(f"{key_node.start_mark.line + 1}: key {key!r} appears twice in one mapping")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Where:
    """Builds messages that name the file, the line and the field path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, where: str, message: str, node: object = None) -> SuiteError:
        line = getattr(node, "line", 0)
        at = f"{self.path}:{line}" if line else str(self.path)
        return SuiteError(f"{at}: {where}: {message}")


def _check_keys(
    w: _Where, where: str, node: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> None:
    for key in node:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(allowed)}"
            raise w.error(where, f"unknown key {key!r}; {hint}", node)
    for key in required:
        if key not in node:
            raise w.error(where, f"missing required key {key!r}", node)


def _mapping(w: _Where, where: str, value: object, parent: object = None) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise w.error(where, f"expected a mapping, got {type(value).__name__} {value!r:.60}", parent)
    return value


def _check_id(w: _Where, where: str, value: object, node: object) -> str:
    if not isinstance(value, str) or not schema.ID_PATTERN.match(value):
        raise w.error(
            where,
            f"{value!r} is not a valid id: use letters, digits, '_' and '-' only "
            "(ncu's NVTX filter treats '/' and ':' specially)",
            node,
        )
    return value


def _check_ref(w: _Where, where: str, value: object, node: object) -> str:
    if (
        not isinstance(value, str)
        or value.count(":") != 1
        or not all(part and all(p.isidentifier() for p in part.split(".")) for part in value.split(":"))
    ):
        raise w.error(where, f"{value!r} is not a 'module:function' reference (e.g. 'kernels.elementwise:fused')", node)
    return value


def _number(w: _Where, where: str, value: object, node: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise w.error(where, f"expected a number, got {value!r}", node)
    if positive and value <= 0:
        raise w.error(where, f"must be positive, got {value!r}", node)
    return float(value)


def _seed_for(base: int, case_id: str, name: str) -> int:
    """A stable per-tensor seed, so that inputs of one case differ but never change run to run."""
    return (base * 1_000_003 + zlib.crc32(f"{case_id}/{name}".encode())) % 2**63


def _parse_input(
    w: _Where, where: str, name: str, raw: object, defaults: Mapping[str, Any], case_id: str, parent: object
) -> InputSpec:
    if not isinstance(name, str) or not name.isidentifier():
        raise w.error(where, f"input name {name!r} must be a Python identifier (it is passed as a keyword)", parent)
    node = _mapping(w, where, raw, parent)
    _check_keys(w, where, node, ("shape", "dtype", "distribution", "seed", "low", "high", "mean", "std"), ("shape",))
    shape_raw = node["shape"]
    if isinstance(shape_raw, int) and not isinstance(shape_raw, bool):
        shape_raw = [shape_raw]
    if (
        not isinstance(shape_raw, list)
        or not shape_raw
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape_raw)
    ):
        raise w.error(f"{where}.shape", f"expected a list of positive integers, got {node['shape']!r}", node)
    shape = tuple(shape_raw)
    if math.prod(shape) > _MAX_ELEMENTS:
        raise w.error(f"{where}.shape", f"{shape} has {math.prod(shape)} elements, more than any GPU holds", node)
    dtype = node.get("dtype", defaults.get("dtype", "float32"))
    if dtype not in DTYPES:
        raise w.error(f"{where}.dtype", f"unsupported dtype {dtype!r}; choose one of {', '.join(DTYPES)}", node)
    dist = node.get("distribution", defaults.get("distribution", "normal"))
    if dist not in DISTRIBUTIONS:
        raise w.error(
            f"{where}.distribution", f"unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}", node
        )
    seed = node.get("seed", defaults.get("seed", 0))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise w.error(f"{where}.seed", f"expected a non-negative integer, got {seed!r}", node)
    nums = {k: _number(w, f"{where}.{k}", node[k], node) for k in ("low", "high", "mean", "std") if k in node}
    spec = InputSpec(
        name=name, shape=shape, dtype=dtype, distribution=dist, seed=_seed_for(seed, case_id, name), **nums
    )
    if dist in ("uniform", "randint") and not spec.low < spec.high:
        raise w.error(where, f"low ({spec.low:g}) must be below high ({spec.high:g})", node)
    if dist == "normal" and spec.std <= 0:
        raise w.error(f"{where}.std", f"must be positive, got {spec.std:g}", node)
    return spec


def _parse_gates(
    w: _Where, where: str, raw: object, parent: object, base: Mapping[str, Tolerance]
) -> dict[str, Tolerance]:
    gates = dict(base)
    if raw is None:
        return gates
    node = _mapping(w, where, raw, parent)
    for key, text in node.items():
        if key not in schema.GATEABLE:
            close = difflib.get_close_matches(str(key), schema.GATEABLE, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"gateable: {', '.join(schema.GATEABLE)}"
            raise w.error(where, f"cannot gate {key!r}; {hint}", node)
        try:
            gates[key] = parse_tolerance(text)
        except ValueError as exc:
            raise w.error(f"{where}.{key}", str(exc), node) from None
    return gates


def _parse_expect(w: _Where, where: str, raw: object, parent: object) -> dict[str, Expectation]:
    if raw is None:
        return {}
    node = _mapping(w, where, raw, parent)
    out: dict[str, Expectation] = {}
    for key, text in node.items():
        if key not in schema.GATEABLE:
            close = difflib.get_close_matches(str(key), schema.GATEABLE, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"expectations apply to: {', '.join(schema.GATEABLE)}"
            raise w.error(where, f"no gain named {key!r}; {hint}", node)
        try:
            out[key] = parse_expectation(text)
        except ValueError as exc:
            raise w.error(f"{where}.{key}", str(exc), node) from None
    return out


def _parse_correctness(w: _Where, where: str, raw: object, parent: object, base: Correctness) -> Correctness:
    if raw is None:
        return base
    node = _mapping(w, where, raw, parent)
    _check_keys(w, where, node, ("rtol", "atol"))
    rtol = _number(w, f"{where}.rtol", node.get("rtol", base.rtol), node)
    atol = _number(w, f"{where}.atol", node.get("atol", base.atol), node)
    if rtol < 0 or atol < 0:
        raise w.error(where, "rtol and atol must be non-negative", node)
    return Correctness(rtol=rtol, atol=atol)


def _parse_variants(
    w: _Where, where: str, raw: object, parent: object, case_expect: Mapping[str, Expectation]
) -> tuple[Variant, ...]:
    node = _mapping(w, where, raw, parent)
    variants: list[Variant] = []
    for vid, spec in node.items():
        vwhere = f"{where}.{vid}"
        _check_id(w, vwhere, vid, node)
        if isinstance(spec, str):
            fn, expect = _check_ref(w, vwhere, spec, node), {}
        else:
            vnode = _mapping(w, vwhere, spec, node)
            _check_keys(w, vwhere, vnode, ("fn", "expect"), ("fn",))
            fn = _check_ref(w, f"{vwhere}.fn", vnode["fn"], vnode)
            expect = _parse_expect(w, f"{vwhere}.expect", vnode.get("expect"), vnode)
        if vid != BASELINE_VARIANT:
            expect = {**case_expect, **expect}
        elif expect:
            raise w.error(vwhere, "the unfused variant has no fusion gain to expect anything of", node)
        variants.append(Variant(id=vid, fn=fn, expect=expect))
    if BASELINE_VARIANT not in node:
        raise w.error(
            where, f"missing the {BASELINE_VARIANT!r} variant that every fusion gain is measured against", node
        )
    if len(variants) < 2:
        raise w.error(where, f"needs at least one fused variant besides {BASELINE_VARIANT!r}", node)
    variants.sort(key=lambda v: v.id != BASELINE_VARIANT)
    return tuple(variants)


_CASE_KEYS = ("id", "description", "inputs", "params", "reference", "variants", "correctness", "gates", "expect")


def _parse_case(
    w: _Where,
    index: int,
    raw: object,
    parent: object,
    defaults: Mapping[str, Any],
    default_gates: Mapping[str, Tolerance],
    default_corr: Correctness,
    default_expect: Mapping[str, Expectation],
) -> Case:
    where = f"cases[{index}]"
    node = _mapping(w, where, raw, parent)
    _check_keys(w, where, node, _CASE_KEYS, ("id", "inputs", "variants"))
    case_id = _check_id(w, f"{where}.id", node["id"], node)
    where = f"case {case_id!r}"
    inputs_node = _mapping(w, f"{where}.inputs", node["inputs"], node)
    if not inputs_node:
        raise w.error(f"{where}.inputs", "a case needs at least one input", node)
    inputs = tuple(
        _parse_input(w, f"{where}.inputs.{n}", n, spec, defaults, case_id, inputs_node)
        for n, spec in inputs_node.items()
    )
    params = dict(_mapping(w, f"{where}.params", node.get("params") or {}, node))
    clash = set(params) & set(inputs_node)
    if clash:
        raise w.error(f"{where}.params", f"{sorted(clash)} also named as inputs", node)
    for key, value in params.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise w.error(f"{where}.params", f"param name {key!r} must be a Python identifier", node)
        if not isinstance(value, (int, float, str, bool)):
            raise w.error(
                f"{where}.params.{key}", f"expected a scalar (number, string or boolean), got {value!r:.60}", node
            )
    reference = node.get("reference")
    if reference is not None:
        reference = _check_ref(w, f"{where}.reference", reference, node)
    expect = {**default_expect, **_parse_expect(w, f"{where}.expect", node.get("expect"), node)}
    return Case(
        id=case_id,
        description=str(node.get("description", "")),
        inputs=inputs,
        params=params,
        variants=_parse_variants(w, f"{where}.variants", node["variants"], node, expect),
        reference=reference,
        correctness=_parse_correctness(w, f"{where}.correctness", node.get("correctness"), node, default_corr),
        gates=_parse_gates(w, f"{where}.gates", node.get("gates"), node, default_gates),
        line=getattr(node, "line", 0),
    )


def _parse_ncu(w: _Where, raw: object, parent: object) -> NcuSettings:
    if raw is None:
        return NcuSettings()
    node = _mapping(w, "ncu", raw, parent)
    _check_keys(w, "ncu", node, ("clock_control", "cache_control", "replay_mode", "timeout"))
    base = NcuSettings()
    for key, choices in (
        ("clock_control", CLOCK_CONTROLS),
        ("cache_control", CACHE_CONTROLS),
        ("replay_mode", REPLAY_MODES),
    ):
        if key in node and node[key] not in choices:
            raise w.error(f"ncu.{key}", f"{node[key]!r} is not one of {', '.join(choices)}", node)
    return NcuSettings(
        clock_control=node.get("clock_control", base.clock_control),
        cache_control=node.get("cache_control", base.cache_control),
        replay_mode=node.get("replay_mode", base.replay_mode),
        timeout_s=_number(w, "ncu.timeout", node.get("timeout", base.timeout_s), node, positive=True),
    )


def parse_suite(data: object, path: Path) -> Suite:
    """Validate an already-loaded YAML document.

    Raises:
        SuiteError: with the file, line and field path of the first problem.
    """
    w = _Where(path)
    root = _mapping(w, "top level", data)
    _check_keys(w, "top level", root, ("suite", "description", "defaults", "ncu", "cases"), ("suite", "cases"))
    name = _check_id(w, "suite", root["suite"], root)
    defaults = _mapping(w, "defaults", root.get("defaults") or {}, root)
    _check_keys(w, "defaults", defaults, ("dtype", "distribution", "seed", "correctness", "gates", "expect"))
    default_gates = _parse_gates(
        w, "defaults.gates", defaults.get("gates"), defaults, {k: parse_tolerance(v) for k, v in DEFAULT_GATES.items()}
    )
    default_corr = _parse_correctness(w, "defaults.correctness", defaults.get("correctness"), defaults, Correctness())
    default_expect = _parse_expect(w, "defaults.expect", defaults.get("expect"), defaults)
    cases_raw = root["cases"]
    if not isinstance(cases_raw, list) or not cases_raw:
        raise w.error("cases", "expected a non-empty list of cases", root)
    cases = [
        _parse_case(w, i, c, root, defaults, default_gates, default_corr, default_expect)
        for i, c in enumerate(cases_raw)
    ]
    seen: dict[str, int] = {}
    for c in cases:
        if c.id in seen:
            raise w.error(f"case {c.id!r}", f"duplicate case id (first defined on line {seen[c.id]})", c)
        seen[c.id] = c.line
    return Suite(
        name=name,
        path=path,
        description=str(root.get("description", "")),
        cases=tuple(cases),
        ncu=_parse_ncu(w, root.get("ncu"), root),
    )


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file.

    Raises:
        SuiteError: the file is missing, unreadable, not YAML, or fails validation; the message
            names the file and line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=_Loader)
    except SuiteError as exc:
        raise SuiteError(f"{path}:{exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise SuiteError(f"{path}{line}: invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: invalid YAML: {exc}") from None
    if data is None:
        raise SuiteError(f"{path}: the suite file is empty; see README.md for the format")
    return parse_suite(data, path)
