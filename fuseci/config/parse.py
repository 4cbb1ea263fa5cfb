"""Suite validation: a loaded YAML document → the frozen :mod:`fuseci.config.model`, or a
one-line :class:`~fuseci.errors.SuiteError` naming the file, the line and the field path.

docs/SUITES.md ("Writing a suite") documents the format with a complete example.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fuseci
from fuseci.config import fields as fl
from fuseci.config import names, quantities
from fuseci.config.dtypes import DEFAULT_FRAMEWORK, FRAMEWORKS, dtype
from fuseci.config.fields import MAX_DIMS  # noqa: F401  (re-exported: the schema test reads it here)
from fuseci.config.model import (
    CACHE_CONTROLS,
    CHECK_NAMES,
    CLOCK_CONTROLS,
    DEFAULT_BYTES_ALLOWANCE,
    DISTRIBUTIONS,
    DTYPES,
    REPLAY_MODES,
    UNFUSED,
    Case,
    Correctness,
    InputSpec,
    KernelRule,
    NcuSettings,
    Suite,
    Variant,
    randint_range,
)
from fuseci.config.policy import Expectation, Tolerance, brief_repr, parse_expectation, parse_tolerance
from fuseci.config.yaml_loader import kind as _kind
from fuseci.config.yaml_loader import load_yaml
from fuseci.errors import SuiteError

#: The JSON Schema of suite files, for editors and other tools (installed with the package).
SCHEMA_FILE = Path(fuseci.__file__).with_name("suite.schema.json")


_INPUT_KEYS = ("shape", "dtype", "distribution", "seed", "low", "high", "mean", "std")


def _parse_input(
    w: fl.Where, where: str, name: str, raw: object, defaults: Mapping[str, Any], case_id: str, parent: object
) -> InputSpec | None:
    """The input, or None when a problem was kept in ``w``.

    Raises:
        SuiteError: a problem that leaves nothing else to check.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise w.error(
            where, f"input name {brief_repr(name)} must be a Python identifier (it is passed as a keyword)", parent
        )
    node = fl.mapping(w, where, raw, parent)
    fl.check_keys(w, where, node, _INPUT_KEYS, ("shape",))
    found = len(w.problems)
    shape = w.attempt((1,), fl.shape, w, f"{where}.shape", node["shape"], node)
    dtype = w.attempt(
        "", fl.choice, w, f"{where}.dtype", node.get("dtype", defaults["dtype"]), DTYPES, node, "unsupported dtype"
    )
    dist = w.attempt(
        "",
        fl.choice,
        w,
        f"{where}.distribution",
        node.get("distribution", defaults["distribution"]),
        DISTRIBUTIONS,
        node,
        "unknown distribution",
    )
    seed = w.attempt(0, fl.seed, w, f"{where}.seed", node.get("seed", defaults["seed"]), node)
    nums = {
        k: w.attempt(0.0, fl.number, w, f"{where}.{k}", node[k], node)
        for k in ("low", "high", "mean", "std")
        if k in node
    }
    if len(w.problems) > found:  # the rules below relate fields: judge them once each is right
        return None
    spec = InputSpec(
        name=name, shape=shape, dtype=dtype, distribution=dist, seed=fl.seed_for(seed, case_id, name), **nums
    )
    if dist in ("uniform", "randint") and not spec.low < spec.high:
        raise w.error(where, f"low ({spec.low:g}) must be below high ({spec.high:g}) for {dist}", node)
    if dist == "randint":
        try:
            randint_range(dtype, spec.low, spec.high)
        except ValueError as exc:
            raise w.error(where, str(exc), node) from None
    if dist == "normal" and spec.std <= 0:
        raise w.error(f"{where}.std", f"must be positive for a normal distribution, got {spec.std:g}", node)
    return spec


def _policy_message(exc: ValueError, text: object) -> str:
    """A tolerance's or expectation's parse error, with the YAML mistake behind an empty one."""
    if isinstance(text, str) and not text.strip():
        return (
            f"{exc} (YAML reads a value that starts with '>' or '|' as a block of the lines below it: "
            'quote it, e.g. ">= 2x")'
        )
    return str(exc)


def _parse_gates(
    w: fl.Where, where: str, raw: object, parent: object, base: Mapping[str, Tolerance]
) -> dict[str, Tolerance]:
    gates = dict(base)
    if raw is None:
        return gates
    node = fl.mapping(w, where, raw, parent)
    for key, text in node.items():
        gateable = quantities.gateable()
        if key not in gateable:
            hint = fl.did_you_mean(key, gateable)
            w.problems.append(
                w.error(where, f"cannot gate {brief_repr(key)}; {hint}gateable: {', '.join(gateable)}", node, key=key)
            )
            continue
        try:
            gates[key] = parse_tolerance(text)
        except ValueError as exc:
            w.problems.append(w.error(f"{where}.{key}", _policy_message(exc, text), node))
    return gates


def _parse_expect(w: fl.Where, where: str, raw: object, parent: object) -> dict[str, Expectation]:
    if raw is None:
        return {}
    node = fl.mapping(w, where, raw, parent)
    out: dict[str, Expectation] = {}
    for key, text in node.items():
        gained = quantities.gains()
        if key not in gained:
            hint = fl.did_you_mean(key, gained)
            w.problems.append(
                w.error(
                    where,
                    f"no gain named {brief_repr(key)}; {hint}expectations apply to: {', '.join(gained)}",
                    node,
                    key=key,
                )
            )
            continue
        try:
            out[key] = parse_expectation(text)
        except ValueError as exc:
            w.problems.append(w.error(f"{where}.{key}", _policy_message(exc, text), node))
    return out


def _parse_correctness(
    w: fl.Where, where: str, raw: object, parent: object, base: Correctness | None
) -> Correctness | None:
    """The stated tolerances (a key left out keeps ``base``'s, or the float32 default); None when
    neither this block nor ``base`` states any: each output's dtype sets them."""
    if raw is None:
        return base
    node = fl.mapping(w, where, raw, parent)
    fl.check_keys(w, where, node, ("rtol", "atol"))
    start = base or Correctness()
    tols = {
        k: w.attempt(0.0, fl.number, w, f"{where}.{k}", node.get(k, getattr(start, k)), node) for k in ("rtol", "atol")
    }
    for key, value in tols.items():
        if value < 0:
            w.problems.append(w.error(f"{where}.{key}", f"must be a non-negative number, got {value:g}", node))
    return Correctness(**tols)


_VARIANT_KEYS = ("fn", "expect", "baseline", "caught_by", "framework", "kernels")


def _parse_variant(
    w: fl.Where,
    where: str,
    vid: object,
    spec: object,
    node: Mapping[str, Any],
    case_expect: Mapping[str, Expectation],
    framework: str,
) -> Variant | None:
    """One variant, or None when a problem was kept in ``w``.

    Raises:
        SuiteError: a problem that leaves nothing else of the variant to check.
    """
    found = len(w.problems)
    vwhere = fl.sub(where, vid)
    example = vid if names.is_id(vid) else "fused"
    vid = w.attempt("", fl.check_id, w, vwhere, vid, node)
    judged_as: str | None = None
    caught_by: tuple[str, ...] = ()
    kernels: tuple[KernelRule, ...] = ()
    if isinstance(spec, str):
        fn, expect = fl.check_ref(w, vwhere, spec, node), {}
    elif isinstance(spec, dict):
        fl.check_keys(w, vwhere, spec, _VARIANT_KEYS, ("fn",))
        fn = w.attempt("", fl.check_ref, w, f"{vwhere}.fn", spec["fn"], spec)
        expect = _parse_expect(w, f"{vwhere}.expect", spec.get("expect"), spec)
        if "baseline" in spec:
            judged_as = w.attempt(None, _parse_judged_as, w, f"{vwhere}.baseline", spec["baseline"], spec, vid, node)
        if "caught_by" in spec:
            caught_by = w.attempt((), _parse_caught_by, w, f"{vwhere}.caught_by", spec["caught_by"], spec)
        if "framework" in spec:
            framework = w.attempt(framework, _parse_framework, w, f"{vwhere}.framework", spec["framework"], spec)
        if "kernels" in spec:
            kernels = w.attempt((), _parse_kernels, w, f"{vwhere}.kernels", spec["kernels"], spec)
    elif spec is None:
        raise w.error(
            vwhere,
            f"has no function: write its 'module:function' after the colon on the same line "
            f"(e.g. {example}: mylib.ops:f); YAML reads an empty value as null",
            node,
        )
    else:
        raise w.error(
            vwhere,
            f"expected a 'module:function' string or a mapping {{fn: ..., expect: ...}}, "
            f"got {_kind(spec)} {brief_repr(spec)}",
            node,
        )
    if vid != UNFUSED:
        expect = {**case_expect, **expect}
    elif expect:
        raise w.error(vwhere, "the unfused variant has no fusion gain to expect anything of", node)
    elif judged_as or caught_by:
        raise w.error(
            vwhere,
            "the unfused variant is what every gain is measured against: it takes no baseline or caught_by",
            node,
        )
    if len(w.problems) > found:
        return None
    fn_line = _line_of(spec, "fn") if isinstance(spec, dict) else _line_of(node, vid)
    return Variant(
        id=vid,
        fn=fn,
        expect=expect,
        candidate_for=judged_as,
        caught_by=caught_by,
        line=fn_line,
        framework=framework,
        kernels=kernels,
    )


def _parse_variants(
    w: fl.Where, where: str, raw: object, parent: object, case_expect: Mapping[str, Expectation], framework: str
) -> tuple[Variant, ...]:
    node = fl.mapping(w, where, raw, parent)
    variants: list[Variant] = []
    for vid, spec in node.items():
        variant = w.attempt(None, _parse_variant, w, where, vid, spec, node, case_expect, framework)
        if variant is not None:
            variants.append(variant)
    if UNFUSED not in node:
        raise w.error(where, f"missing the {UNFUSED!r} variant that every fusion gain is measured against", node)
    if len(node) < 2:
        raise w.error(where, f"needs at least one fused variant besides {UNFUSED!r}", node)
    for v in variants:
        target = node.get(v.candidate_for) if v.candidate_for is not None else None
        if v.candidate_for is not None and (target is None or (isinstance(target, dict) and "baseline" in target)):
            why = "is not a variant of this case" if target is None else "is itself judged against another's baseline"
            w.problems.append(
                w.error(
                    fl.sub(fl.sub(where, v.id), "baseline"),
                    f"{brief_repr(v.candidate_for)} {why}; name a variant of this case that has its own baseline",
                    node,
                )
            )
    fl.unique_ids(w, "variant", [(v.id, fl.sub(where, v.id), _line_of(node, v.id)) for v in variants])
    variants.sort(key=lambda v: v.id != UNFUSED)
    return tuple(variants)


def _parse_framework(w: fl.Where, where: str, raw: object, parent: object) -> str:
    return fl.choice(w, where, raw, FRAMEWORKS, parent, "unknown array framework")


#: A kernel count: a whole number (exactly), or ``>= n``, ``<= n``, ``n..m``.
_COUNT = re.compile(r"\A\s*(?:(?P<op>>=|<=|==)?\s*(?P<n>\d{1,6})|(?P<lo>\d{1,6})\s*\.\.\s*(?P<hi>\d{1,6}))\s*\Z")


def _parse_count(w: fl.Where, where: str, raw: object, parent: object, pattern: str) -> tuple[int, int | None]:
    text = str(raw) if isinstance(raw, (int, str)) and not isinstance(raw, bool) else None
    m = _COUNT.match(text) if text is not None else None
    if m is None:
        raise w.error(
            where,
            f"expected a kernel count for {brief_repr(pattern)}: a whole number (exactly that many), '>= n', "
            f"'<= n' or 'n..m', got {_kind(raw)} {brief_repr(raw)}",
            parent,
            key=pattern,
        )
    if m["lo"] is not None:
        low, high = int(m["lo"]), int(m["hi"])
        if low > high:
            raise w.error(where, f"count {text!r} of {brief_repr(pattern)}: {low} is above {high}", parent, key=pattern)
        return low, high
    n = int(m["n"])
    return {">=": (n, None), "<=": (0, n)}.get(m["op"] or "==", (n, n))


def _parse_kernels(w: fl.Where, where: str, raw: object, parent: object) -> tuple[KernelRule, ...]:
    node = fl.mapping(w, where, raw, parent)
    if not node:
        raise w.error(where, "names no kernel; e.g. `kernels: {'triton_.*fused.*': 1}`", parent)
    rules = []
    for pattern, count in node.items():
        if not isinstance(pattern, str) or not pattern or len(pattern) > 500:
            raise w.error(where, f"expected a regular expression of a kernel name, got {brief_repr(pattern)}", node)
        try:
            re.compile(pattern)
        except re.error as exc:
            raise w.error(
                where, f"{brief_repr(pattern)} is not a regular expression ({exc}); quote it in YAML", node, key=pattern
            ) from None
        low, high = _parse_count(w, where, count, node, pattern)
        rules.append(KernelRule(pattern, low, high, text=str(count)))
    return tuple(rules)


def _parse_judged_as(w: fl.Where, where: str, raw: object, parent: object, vid: str, variants: object) -> str:
    if not names.is_id(raw) or raw in (vid, UNFUSED):
        raise w.error(
            where,
            f"expected the id of another fused variant of this case, got {_kind(raw)} {brief_repr(raw)}",
            parent,
        )
    return raw


def _parse_caught_by(w: fl.Where, where: str, raw: object, parent: object) -> tuple[str, ...]:
    picked = [raw] if isinstance(raw, str) else raw
    allowed = (*CHECK_NAMES, *quantities.gateable())
    if not isinstance(picked, list) or not picked or not all(isinstance(n, str) for n in picked):
        raise w.error(where, f"expected a check name or a list of them, got {_kind(raw)} {brief_repr(raw)}", parent)
    for n in picked:
        if n not in allowed:
            hint = fl.did_you_mean(n, allowed)
            raise w.error(where, f"no check named {brief_repr(n)}; {hint}checks: {', '.join(allowed)}", parent)
    return tuple(dict.fromkeys(picked))


def _parse_params(w: fl.Where, where: str, raw: object, node: object, inputs: Mapping[str, Any]) -> dict[str, Any]:
    block = fl.optional_mapping(w, where, raw, node)
    params = dict(block)
    for key, value in params.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise w.error(where, f"param name {brief_repr(key)} must be a Python identifier", block, key=key)
        if not isinstance(value, (int, float, str, bool)):
            raise w.error(
                fl.sub(where, key),
                f"expected a scalar (number, string or boolean), got {_kind(value)} {brief_repr(value)}",
                block,
                key=key,
            )
    clash = sorted(set(params) & set(inputs))
    if clash:
        raise w.error(where, f"{clash} also named as inputs; rename the param or the input", node)
    return params


_CASE_KEYS = (
    "id", "description", "inputs", "params", "reference", "variants", "correctness", "gates", "expect",
    "bytes_allowance", "min_bytes", "framework",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Defaults:
    """The suite's ``defaults:``, validated, for its cases to inherit."""

    inputs: Mapping[str, Any]
    gates: Mapping[str, Tolerance]
    correctness: Correctness | None
    expect: Mapping[str, Expectation]
    bytes_allowance: Tolerance
    framework: str


def _parse_allowance(w: fl.Where, where: str, raw: object, parent: object) -> Tolerance:
    try:
        return parse_tolerance(raw)
    except ValueError as exc:
        raise w.error(
            where, f"{exc} (the allowance over the minimum DRAM bytes, e.g. '10%', or 'off')", parent
        ) from None


def _parse_defaults(w: fl.Where, raw: object, parent: object) -> _Defaults:
    """The suite's defaults; a default with a problem is kept in ``w`` and replaced by the built-in
    one, so that the cases that inherit it are not each blamed for it again."""
    node = w.attempt({}, fl.optional_mapping, w, "defaults", raw, parent)
    fl.check_keys(
        w,
        "defaults",
        node,
        ("dtype", "distribution", "seed", "correctness", "gates", "expect", "bytes_allowance", "framework"),
    )
    inputs = {
        "dtype": w.attempt(
            "float32", fl.choice, w, "defaults.dtype", node.get("dtype", "float32"), DTYPES, node, "unsupported dtype"
        ),
        "distribution": w.attempt(
            "normal",
            fl.choice,
            w,
            "defaults.distribution",
            node.get("distribution", "normal"),
            DISTRIBUTIONS,
            node,
            "unknown distribution",
        ),
        "seed": w.attempt(0, fl.seed, w, "defaults.seed", node.get("seed", 0), node),
    }
    builtin_gates = {k: parse_tolerance(v) for k, v in quantities.default_gates().items()}
    builtin_allowance = parse_tolerance(DEFAULT_BYTES_ALLOWANCE)
    return _Defaults(
        inputs=inputs,
        gates=w.attempt(builtin_gates, _parse_gates, w, "defaults.gates", node.get("gates"), node, builtin_gates),
        correctness=w.attempt(None, _parse_correctness, w, "defaults.correctness", node.get("correctness"), node, None),
        expect=w.attempt({}, _parse_expect, w, "defaults.expect", node.get("expect"), node),
        bytes_allowance=w.attempt(
            builtin_allowance,
            _parse_allowance,
            w,
            "defaults.bytes_allowance",
            node.get("bytes_allowance", DEFAULT_BYTES_ALLOWANCE),
            node,
        ),
        framework=w.attempt(DEFAULT_FRAMEWORK, _parse_framework, w, "defaults.framework", node["framework"], node)
        if "framework" in node
        else DEFAULT_FRAMEWORK,
    )


def _parse_inputs(
    w: fl.Where, where: str, raw: object, parent: object, defaults: _Defaults, case_id: str
) -> tuple[InputSpec, ...]:
    node = fl.mapping(w, where, raw, parent)
    if not node:
        raise w.error(where, "a case needs at least one input", parent)
    found = (
        w.attempt(None, _parse_input, w, fl.sub(where, n), n, spec, defaults.inputs, case_id, node)
        for n, spec in node.items()
    )
    return tuple(i for i in found if i is not None)


def _parse_case(w: fl.Where, index: int, raw: object, parent: object, defaults: _Defaults) -> Case | None:
    """One case, or None when a problem was kept in ``w``; each of its fields is checked.

    Raises:
        SuiteError: a problem that leaves nothing else of the case to check.
    """
    found = len(w.problems)
    where = f"cases[{index}]"
    node = fl.mapping(w, where, raw, parent)
    fl.check_keys(w, where, node, _CASE_KEYS, ("id", "inputs", "variants"))
    case_id = w.attempt(None, fl.check_id, w, f"{where}.id", node["id"], node)
    if case_id is not None:
        where = f"case {brief_repr(case_id)}"
    inputs = w.attempt((), _parse_inputs, w, f"{where}.inputs", node["inputs"], node, defaults, case_id or "")
    inputs_node = node["inputs"] if isinstance(node["inputs"], dict) else {}
    params = w.attempt({}, _parse_params, w, f"{where}.params", node.get("params"), node, inputs_node)
    reference = node.get("reference")
    if reference is not None:
        reference = w.attempt(None, fl.check_ref, w, f"{where}.reference", reference, node)
    expect = {**defaults.expect, **w.attempt({}, _parse_expect, w, f"{where}.expect", node.get("expect"), node)}
    description = w.attempt("", fl.text, w, f"{where}.description", node.get("description"), node)
    framework = defaults.framework
    if "framework" in node:
        framework = w.attempt(framework, _parse_framework, w, f"{where}.framework", node["framework"], node)
    variants = w.attempt((), _parse_variants, w, f"{where}.variants", node["variants"], node, expect, framework)
    w.attempt(None, _check_frameworks, w, where, inputs, inputs_node, variants, framework if reference else None)
    correctness = w.attempt(
        defaults.correctness,
        _parse_correctness,
        w,
        f"{where}.correctness",
        node.get("correctness"),
        node,
        defaults.correctness,
    )
    gates = w.attempt(defaults.gates, _parse_gates, w, f"{where}.gates", node.get("gates"), node, defaults.gates)
    allowance = defaults.bytes_allowance
    if "bytes_allowance" in node:
        allowance = w.attempt(allowance, _parse_allowance, w, f"{where}.bytes_allowance", node["bytes_allowance"], node)
    min_bytes = (
        w.attempt(None, fl.seed, w, f"{where}.min_bytes", node["min_bytes"], node) if "min_bytes" in node else None
    )
    if case_id is None or len(w.problems) > found:
        return None
    return Case(
        id=case_id,
        description=description,
        inputs=inputs,
        params=params,
        variants=variants,
        reference=reference,
        framework=framework,
        correctness=correctness,
        gates=gates,
        line=getattr(node, "line", 0),
        reference_line=_line_of(node, "reference"),
        bytes_allowance=allowance,
        min_bytes=min_bytes,
    )


def _check_frameworks(
    w: fl.Where,
    where: str,
    inputs: tuple[InputSpec, ...],
    inputs_node: Mapping[str, Any],
    variants: tuple[Variant, ...],
    reference_framework: str | None,
) -> None:
    """Every function must get its inputs in a framework that has their dtype (CuPy has no
    bfloat16 or float8)."""
    takers = [(f"variant {v.id!r}", v.framework) for v in variants]
    if reference_framework is not None:
        takers.append(("the reference", reference_framework))
    for spec in inputs:
        kind = dtype(spec.dtype)
        for who, fw in takers:
            if fw not in kind.frameworks:
                raise w.error(
                    fl.sub(f"{where}.inputs", spec.name),
                    f"{spec.dtype} input, but {who} takes {fw} arrays, which cannot hold {spec.dtype}; "
                    f"set `framework: {kind.frameworks[0]}` (in defaults, the case or the variant)",
                    inputs_node,
                    key=spec.name,
                )


def _parse_ncu(w: fl.Where, raw: object, parent: object) -> NcuSettings:
    node = fl.optional_mapping(w, "ncu", raw, parent)
    fl.check_keys(w, "ncu", node, ("clock_control", "cache_control", "replay_mode", "timeout"))
    base = NcuSettings()
    chosen = {
        key: w.attempt(
            getattr(base, key),
            fl.choice,
            w,
            f"ncu.{key}",
            node.get(key, getattr(base, key)),
            choices,
            node,
            "unknown setting",
        )
        for key, choices in (
            ("clock_control", CLOCK_CONTROLS),
            ("cache_control", CACHE_CONTROLS),
            ("replay_mode", REPLAY_MODES),
        )
    }
    return NcuSettings(
        **chosen,
        timeout_s=w.attempt(
            base.timeout_s, fl.number, w, "ncu.timeout", node.get("timeout", base.timeout_s), node, positive=True
        ),
    )


_TOP_KEYS = ("suite", "description", "defaults", "ncu", "cases", "planted")


@dataclass(frozen=True, slots=True)
class SuiteRead:
    """What reading a suite file found: the suite, or every problem of the file."""

    suite: Suite | None
    """The validated suite; None when the file has a problem."""
    problems: tuple[SuiteError, ...]
    """Every problem, in the order the file was read (empty when :attr:`suite` is set)."""


def _parse(w: fl.Where, data: object, path: Path) -> Suite | None:
    if not isinstance(data, dict):
        raise w.error(
            "top level",
            f"expected a mapping with the keys 'suite' and 'cases', got {_kind(data)} {brief_repr(data)}; "
            "see docs/SUITES.md, 'Writing a suite'",
        )
    root: Mapping[str, Any] = data
    fl.check_keys(w, "top level", root, _TOP_KEYS, ("suite", "cases"))
    name = w.attempt("", fl.check_id, w, "suite", root["suite"], root)
    defaults = _parse_defaults(w, root.get("defaults"), root)
    cases_raw = root["cases"]
    cases: list[Case] = []
    cases_raw_ok = isinstance(cases_raw, list) and bool(cases_raw)
    if not cases_raw_ok:
        w.problems.append(
            w.error(
                "cases", f"expected a non-empty list of cases, got {_kind(cases_raw)} {brief_repr(cases_raw)}", root
            )
        )
    else:
        for i, c in enumerate(cases_raw):
            case = w.attempt(None, _parse_case, w, i, c, root, defaults)
            if case is not None:
                cases.append(case)
    # Every case with a valid id counts, valid or not: a duplicate is a problem of its own.
    listed = [c for c in cases_raw if isinstance(c, dict) and names.is_id(c.get("id"))] if cases_raw_ok else []
    fl.unique_ids(w, "case", [(c["id"], f"case {brief_repr(c['id'])}", getattr(c, "line", 0)) for c in listed])
    description = w.attempt("", fl.text, w, "description", root.get("description"), root)
    ncu = w.attempt(NcuSettings(), _parse_ncu, w, root.get("ncu"), root)
    planted = w.attempt(False, fl.flag, w, "planted", root.get("planted", False), root)
    if w.problems:
        return None
    return Suite(
        name=name,
        path=path,
        line=_line_of(root, "suite"),
        description=description,
        cases=tuple(cases),
        ncu=ncu,
        planted=planted,
    )


def read_suite(data: object, path: Path) -> SuiteRead:
    """Validate an already-loaded YAML document, finding every problem of it in one pass."""
    w = fl.Where(path)
    suite = w.attempt(None, _parse, w, data, path)
    return SuiteRead(suite if not w.problems else None, tuple(w.problems))


def parse_suite(data: object, path: Path) -> Suite:
    """Validate an already-loaded YAML document.

    Raises:
        SuiteError: with the file, line and field path of the first problem.
    """
    read = read_suite(data, path)
    if read.suite is None:
        raise read.problems[0]
    return read.suite


def _line_of(node: object, key: str) -> int:
    """The line of ``key`` in a mapping read from a file (0 when not known)."""
    line_of = getattr(node, "line_of", None)
    return int(line_of(key)) if line_of is not None and isinstance(node, dict) and key in node else 0


def check_suite(path: str | Path) -> SuiteRead:
    """Read and validate a suite file, finding every problem of it (see :func:`load_suite`); a
    file that cannot be read as YAML has that one problem."""
    path = Path(path)
    try:
        data = load_yaml(path)
    except SuiteError as exc:
        return SuiteRead(None, (exc,))
    if data is None:
        return SuiteRead(None, (SuiteError(f"{path}: the suite file is empty; see docs/SUITES.md for the format"),))
    return read_suite(data, path)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file.

    Reading is bounded (:data:`MAX_FILE_BYTES`, :data:`MAX_NODES`, :data:`MAX_DEPTH`) and safe:
    no Python objects are constructed and no function the suite names is imported.

    Raises:
        SuiteError: the file is missing, unreadable, too large, not UTF-8 YAML, or fails
            validation; the one-line message names the file, the line where known, and the fix
            (of the first problem: :func:`check_suite` finds them all).
    """
    read = check_suite(path)
    if read.suite is None:
        raise read.problems[0]
    return read.suite
