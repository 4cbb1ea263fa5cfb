"""Suite validation: a loaded YAML document → the frozen :mod:`fuseci.config.model`, or a one-line
:class:`~fuseci.errors.SuiteError` per problem, naming the file, the line and the field path. pydantic checks the
shape (:mod:`fuseci.config.document`); the rules that relate fields or inherit the suite's defaults are here."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import fuseci
from fuseci import validation as v
from fuseci.config import document as doc
from fuseci.config import names, quantities, values
from fuseci.config.dtypes import DEFAULT_FRAMEWORK, dtype
from fuseci.config.model import (
    DEFAULT_BYTES_ALLOWANCE,
    UNFUSED,
    Case,
    CompileOptions,
    Correctness,
    Factory,
    InputSpec,
    LedgerSpec,
    NcuSettings,
    Suite,
    Variant,
    randint_range,
)
from fuseci.config.policy import brief_repr, parse_tolerance
from fuseci.config.yaml_loader import load_yaml
from fuseci.errors import SuiteError

#: The JSON Schema of suite files, installed with the package (``python -m fuseci.config.schema`` writes it).
SCHEMA_FILE = Path(fuseci.__file__).with_name("suite.schema.json")

_SIMPLE_KEY = re.compile(r"\A[A-Za-z0-9_.\-]{1,80}\Z")


def _sub(where: str, key: object) -> str:
    """The field path of ``key`` under ``where``: ``a.b`` for plain keys, ``a[...]`` otherwise."""
    if isinstance(key, str) and _SIMPLE_KEY.match(key):
        return f"{where}.{key}" if where else key
    return f"{where}[{brief_repr(key)}]"


def seed_for(base: int, case_id: str, name: str) -> int:
    """A stable per-tensor seed, so that inputs of one case differ but never change run to run."""
    return (base * 1_000_003 + zlib.crc32(f"{case_id}/{name}".encode())) % 2**63


def _line_of(node: object, key: object) -> int:
    """The line of ``key`` in a mapping read from a file (0 when not known)."""
    line_of = getattr(node, "line_of", None)
    return int(line_of(key)) if line_of is not None and isinstance(node, dict) and key in node else 0


class _Where:
    """Builds messages that name the file, the line and the field path, and keeps the problems."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[SuiteError] = []
        """Every problem found so far."""

    def error(self, where: str, message: str, line: int) -> SuiteError:
        at = f"{self.path}:{line}" if line else str(self.path)
        return SuiteError(f"{at}: {where}: {message}", path=self.path, line=line)

    def add(self, where: str, message: str, node: object, key: object = None) -> None:
        """Keep a problem at the line of ``key`` in ``node`` (else the line ``node`` starts on)."""
        line = _line_of(node, key) if key is not None else 0
        self.problems.append(self.error(where, message, line or int(getattr(node, "line", 0) or 0)))


def _place(data: Any, loc: v.Loc) -> tuple[str, int]:
    """The field path and the line of ``loc`` in the loaded document: ``case 'c1'.inputs.x`` for
    ``('cases', 0, 'inputs', 'x')``; the line of its last key (or of the mapping it names)."""
    where, node, line = "", data, int(getattr(data, "line", 0) or 0)
    for i, step in enumerate(loc):
        if where == "cases" and isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node):
            case_id = node[step].get("id") if isinstance(node[step], dict) else None
            where = f"case {brief_repr(case_id)}" if names.is_id(case_id) else f"cases[{step}]"
        elif isinstance(step, int) and isinstance(node, list):
            where = f"{where}[{step}]"
        else:
            where = _sub(where, step)
        if isinstance(node, dict) and step in node:
            line = _line_of(node, step) or line
            node = node[step]
            if i == len(loc) - 1 and isinstance(node, dict):
                line = int(getattr(node, "line", 0) or 0) or line
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
            line = int(getattr(node, "line", 0) or 0) or line
        else:
            break
    return where or "top level", line


def _shape_problems(w: _Where, exc: ValidationError, data: Any) -> None:
    for p in v.problems(exc, data, doc.SuiteDoc, show=values.shown, mapping="a mapping"):
        message = p.message
        if p.type == "missing" and p.key in doc.EXAMPLES:
            message += f" (e.g. {doc.EXAMPLES[str(p.key)]})"
        on_key = p.on_key or p.type == "extra_forbidden"
        where, line = _place(data, p.loc[:-1] if on_key else p.loc)
        if on_key:
            line = _line_of(_node(data, p.loc[:-1]), p.key) or line
        w.problems.append(w.error(where, message, line))


def _node(data: Any, loc: v.Loc) -> Any:
    for step in loc:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _unique_ids(w: _Where, kind: str, ids: list[tuple[str, str, int]]) -> None:
    """Keep a problem for each id repeating an earlier one, case ignored (``ids``: id, field path, line; in order)."""
    first: dict[str, tuple[str, int]] = {}
    for value, where, line in ids:
        key = names.id_key(value)
        if key not in first:
            first[key] = (value, line)
            continue
        other, other_line = first[key]
        if other == value:
            why = f"duplicate {kind} id (first defined on line {other_line}); rename one"
        else:
            why = (
                f"{kind} id {value!r} differs from {other!r} (line {other_line}) only in letter case; ids are "
                f"compared ignoring case, as macOS and Windows compare file names: rename one"
            )
        w.problems.append(w.error(where, why, line))


# --- building the model: the rules that relate fields -------------------------------------------


def _correctness(block: doc.CorrectnessDoc | None, base: Correctness | None) -> Correctness | None:
    """The stated tolerances (a key left out keeps ``base``'s, or the float32 default); None when
    neither this block nor ``base`` states any: each output's dtype sets them."""
    if block is None:
        return base
    start = base or Correctness()
    return Correctness(**{k: getattr(block if k in block.model_fields_set else start, k) for k in ("rtol", "atol")})


def _inputs(w: _Where, where: str, c: doc.CaseDoc, node: Any, d: doc.Defaults) -> tuple[InputSpec, ...]:
    found: list[InputSpec] = []
    inputs_node = node.get("inputs", {})
    for name, i in c.inputs.items():
        iwhere, inode = _sub(f"{where}.inputs", name), inputs_node.get(name)
        dist = i.distribution or d.distribution
        spec = InputSpec(
            name=name,
            shape=i.shape,
            dtype=i.dtype or d.dtype,
            distribution=dist,
            seed=seed_for(d.seed if i.seed is None else i.seed, c.id, name),
            low=i.low,
            high=i.high,
            mean=i.mean,
            std=i.std,
        )
        found.append(spec)
        if dist in ("uniform", "randint") and not spec.low < spec.high:
            w.add(iwhere, f"low ({spec.low:g}) must be below high ({spec.high:g}) for {dist}", inputs_node, name)
        elif dist == "randint":
            try:
                randint_range(spec.dtype, spec.low, spec.high)
            except ValueError as exc:
                w.add(iwhere, str(exc), inputs_node, name)
        if dist == "normal" and spec.std <= 0:
            w.add(f"{iwhere}.std", f"must be positive for a normal distribution, got {spec.std:g}", inode, "std")
    return tuple(found)


def _variants(w: _Where, where: str, c: doc.CaseDoc, node: Any, d: doc.Defaults, framework: str) -> tuple[Variant, ...]:
    vnode, expect = node.get("variants", {}), {**(d.expect or {}), **(c.expect or {})}
    variants: list[Variant] = []
    for vid, spec in c.variants.items():
        vwhere, raw = _sub(f"{where}.variants", vid), vnode.get(vid)
        long = spec if isinstance(spec, doc.LongVariant) else doc.LongVariant(fn=spec)
        own = dict(long.expect or {})
        if vid == UNFUSED and own:
            w.add(vwhere, "the unfused variant has no fusion gain to expect anything of", vnode, vid)
        elif vid == UNFUSED and (long.baseline or long.caught_by):
            why = "the unfused variant is what every gain is measured against: it takes no baseline or caught_by"
            w.add(vwhere, why, vnode, vid)
        fw = long.framework or framework
        variants.append(
            Variant(
                id=vid,
                fn=long.fn or long.factory,
                expect=own if vid == UNFUSED else {**expect, **own},
                candidate_for=long.baseline or None,
                caught_by=long.caught_by,
                line=_line_of(raw, "factory" if long.factory else "fn") if long is spec else _line_of(vnode, vid),
                framework=fw,
                kernels=long.kernels,
                ledger=_ledger(long),
                factory=_factory(w, vwhere, long, raw, fw, seed_for(d.seed, c.id, long.factory)),
            )
        )
    by_id = {x.id: x for x in variants}
    for var in variants:
        bwhere, target = _sub(f"{where}.variants", var.id) + ".baseline", by_id.get(var.candidate_for or "")
        if var.candidate_for in (var.id, UNFUSED):
            why = f"expected the id of another fused variant of this case, got {values.shown(var.candidate_for)}"
            w.add(bwhere, why, vnode.get(var.id), "baseline")
        elif var.candidate_for is not None and (target is None or target.candidate_for is not None):
            what = "is not a variant of this case" if target is None else "is itself judged against another's baseline"
            why = f"{brief_repr(var.candidate_for)} {what}; name a variant of this case that has its own baseline"
            w.add(bwhere, why, vnode, var.id)
    _check_ledgers(w, where, variants, vnode)
    _unique_ids(w, "variant", [(x.id, _sub(f"{where}.variants", x.id), _line_of(vnode, x.id)) for x in variants])
    variants.sort(key=lambda x: x.id != UNFUSED)
    return tuple(variants)


def _factory(w: _Where, where: str, long: doc.LongVariant, raw: Any, framework: str, seed: int) -> Factory | None:
    """The variant's factory (None for a function), and the problems of its form: one of ``fn`` and ``factory``;
    ``compile`` only with a factory; a factory's module takes torch tensors; a ledger audits a compiled one."""
    if bool(long.fn) == bool(long.factory):
        why = "names both fn and factory: keep one" if long.fn else "names neither fn nor factory: add one"
        w.add(where, f"{why} (fn: a function called with the inputs; factory: one that returns a torch.nn.Module)", raw)
        return None
    if not long.factory:
        if "compile" in long.model_fields_set:
            why = "compiles a factory's module; with fn, call torch.compile inside the function, or name a factory"
            w.add(f"{where}.compile", why, raw, "compile")
        return None
    if framework != "torch":
        why = f"returns a torch.nn.Module, but the variant takes {framework} arrays; set `framework: torch`"
        w.add(f"{where}.factory", f"{why} (in defaults, the case or the variant)", raw, "factory")
    if long.ledger is not False and long.compile is False:
        why = "audits a torch.compile'd forward, but the factory's module runs eagerly: add `compile: true`"
        w.add(f"{where}.ledger", why, raw, "ledger")
    options = long.compile if isinstance(long.compile, doc.Compile) else doc.Compile()
    compiled = CompileOptions(options.mode, options.fullgraph, options.dynamic) if long.compile is not False else None
    return Factory(seed=seed, compile=compiled)


def _ledger(long: doc.LongVariant) -> LedgerSpec | None:
    """The variant's own ``ledger:`` (inherited from neither its case nor the variant it is judged as)."""
    if long.ledger is False:
        return None
    if long.ledger is True:
        return LedgerSpec()
    return LedgerSpec(allow_new=long.ledger.allow_new, graphs=long.ledger.graphs, repeats=long.ledger.repeats)


def _check_ledgers(w: _Where, where: str, variants: list[Variant], vnode: Any) -> None:
    """A ledger audits a ``torch.compile``'d forward, so its variant takes torch tensors; a
    planted variant caught by the ledger states its own, as does the variant it is judged as."""
    by_id = {x.id: x for x in variants}
    for var in variants:
        vwhere, raw = _sub(f"{where}.variants", var.id), vnode.get(var.id)
        if var.ledger is not None and var.framework != "torch":
            why = (
                f"audits a torch.compile'd forward, but variant {var.id!r} takes {var.framework} arrays; set "
                "`framework: torch` (in defaults, the case or the variant), or remove `ledger:`"
            )
            w.add(f"{vwhere}.ledger", why, raw, "ledger")
        if "ledger" not in var.caught_by:
            continue
        if var.ledger is None:
            why = (
                "names 'ledger', but the variant has no ledger (a planted variant inherits none): "
                "add `ledger: true` to it"
            )
            w.add(f"{vwhere}.caught_by", why, raw, "caught_by")
        target = by_id.get(var.candidate_for or "")
        if target is not None and target.candidate_for is None and target.ledger is None:
            why = (
                f"names 'ledger', but {target.id!r}, whose baseline it is judged against, has no ledger to judge it "
                f"by: add `ledger: true` to {target.id!r}"
            )
            w.add(f"{vwhere}.caught_by", why, raw, "caught_by")


def _check_frameworks(
    w: _Where,
    where: str,
    inputs: tuple[InputSpec, ...],
    inputs_node: Any,
    variants: tuple[Variant, ...],
    reference_framework: str | None,
) -> None:
    """Every function must get its inputs in a framework that has their dtype (CuPy has no bfloat16 or float8)."""
    takers = [(f"variant {x.id!r}", x.framework) for x in variants]
    if reference_framework is not None:
        takers.append(("the reference", reference_framework))
    for spec in inputs:
        kind = dtype(spec.dtype)
        for who, fw in takers:
            if fw not in kind.frameworks:
                why = (
                    f"{spec.dtype} input, but {who} takes {fw} arrays, which cannot hold {spec.dtype}; "
                    f"set `framework: {kind.frameworks[0]}` (in defaults, the case or the variant)"
                )
                w.add(_sub(f"{where}.inputs", spec.name), why, inputs_node, spec.name)
                break


def _case(w: _Where, c: doc.CaseDoc, node: Any, d: doc.Defaults) -> Case:
    where = f"case {brief_repr(c.id)}"
    inputs = _inputs(w, where, c, node, d)
    params = dict(c.params or {})
    clash = sorted(set(params) & set(c.inputs))
    if clash:
        w.add(f"{where}.params", f"{clash} also named as inputs; rename the param or the input", node, "params")
    framework = c.framework or d.framework or DEFAULT_FRAMEWORK
    variants = _variants(w, where, c, node, d, framework)
    _check_frameworks(w, where, inputs, node.get("inputs", {}), variants, framework if c.reference else None)
    builtin_gates = {k: parse_tolerance(t) for k, t in quantities.default_gates().items()}
    return Case(
        id=c.id,
        description=c.description,
        inputs=inputs,
        params=params,
        variants=variants,
        reference=c.reference,
        framework=framework,
        correctness=_correctness(c.correctness, _correctness(d.correctness, None)),
        gates={**builtin_gates, **(d.gates or {}), **(c.gates or {})},
        stated_gates=frozenset(d.gates or {}) | frozenset(c.gates or {}),
        line=int(getattr(node, "line", 0) or 0),
        reference_line=_line_of(node, "reference"),
        bytes_allowance=c.bytes_allowance or d.bytes_allowance or parse_tolerance(DEFAULT_BYTES_ALLOWANCE),
        min_bytes=c.min_bytes,
    )


def _ncu(n: doc.Ncu | None) -> NcuSettings:
    n = n or doc.Ncu()
    return NcuSettings(
        clock_control=n.clock_control,
        cache_control=n.cache_control,
        replay_mode=n.replay_mode,
        timeout_s=n.timeout,
        tma=n.tma,
    )


@dataclass(frozen=True, slots=True)
class SuiteRead:
    """What reading a suite file found: the suite, or every problem of the file."""

    suite: Suite | None
    """The validated suite; None when the file has a problem."""
    problems: tuple[SuiteError, ...]
    """Every problem, in the order the file was read (empty when :attr:`suite` is set)."""
    partial: Suite | None = None
    """Where the file's shape is wrong: the suite of the cases right on their own, for the checks beyond the file."""


def read_suite(data: object, path: Path) -> SuiteRead:
    """Validate an already-loaded YAML document, finding every problem of it in one pass."""
    w = _Where(path)
    if not isinstance(data, dict):
        problem = w.error(
            "top level",
            f"expected a mapping with the keys 'suite' and 'cases', got {values.shown(data)}; "
            "see docs/SUITES.md, 'Writing a suite'",
            0,
        )
        return SuiteRead(None, (problem,))
    try:
        suite_doc: doc.SuiteDoc | None = doc.SuiteDoc.model_validate(data)
    except ValidationError as exc:
        suite_doc = None
        _shape_problems(w, exc, data)
    cases_raw = data.get("cases")
    listed = (
        [c for c in cases_raw if isinstance(c, dict) and names.is_id(c.get("id"))]
        if isinstance(cases_raw, list)
        else []
    )
    # Every case with a valid id counts, valid or not: a duplicate is a problem of its own.
    _unique_ids(w, "case", [(c["id"], f"case {brief_repr(c['id'])}", int(getattr(c, "line", 0) or 0)) for c in listed])
    suite = None
    if suite_doc is not None:
        d = suite_doc.defaults or doc.Defaults()
        cases = tuple(_case(w, c, node, d) for c, node in zip(suite_doc.cases, data["cases"], strict=True))
        suite = Suite(
            name=suite_doc.suite,
            path=path,
            line=_line_of(data, "suite"),
            description=suite_doc.description,
            cases=cases,
            ncu=_ncu(suite_doc.ncu),
            planted=suite_doc.planted,
        )
        if suite.planted and not any(v.caught_by for c in cases for v in c.variants):
            why = (
                "true, but no variant has caught_by: a planted suite holds planted regressions (variants with "
                "caught_by), and planted: true leaves it out of `fuseci run` and `fuseci ab` without suite arguments; "
                "plant one (docs/SUITES.md, 'Writing a suite'), or remove planted: true"
            )
            w.add("planted", why, data, "planted")
    elif isinstance(cases_raw, list):
        suite = _partial(w, data, cases_raw, path)
    # In the order the file reads; on one line, a missing key after the unknown one that may be it, misspelt.
    problems = sorted(w.problems, key=lambda e: (e.line or 0, "missing required key" in str(e)))
    if suite_doc is None:
        return SuiteRead(None, tuple(problems), suite)
    return SuiteRead(suite if not problems else None, tuple(problems))


def _partial(w: _Where, data: dict[str, Any], cases_raw: list[Any], path: Path) -> Suite | None:
    """The suite of the cases right on their own in a file whose shape is wrong elsewhere: their own rules are
    checked, and they are returned for the checks beyond the file, so that one pass says every problem."""
    try:
        defaults = doc.Defaults.model_validate(data.get("defaults") or {})
    except ValidationError:
        return None
    cases = []
    for node in cases_raw:
        try:
            one = doc.CaseDoc.model_validate(node)
        except ValidationError:
            continue
        cases.append(_case(w, one, node, defaults))
    if not cases:
        return None
    name = data.get("suite")
    stem = name if names.is_id(name) else path.stem
    return Suite(name=stem, path=path, line=_line_of(data, "suite"), description="", cases=tuple(cases))


def check_suite(path: str | Path) -> SuiteRead:
    """Read and validate a suite file, finding every problem (see :func:`load_suite`); unreadable YAML is the one."""
    path = Path(path)
    try:
        data = load_yaml(path)
    except SuiteError as exc:
        return SuiteRead(None, (exc,))
    if data is None:
        return SuiteRead(None, (SuiteError(f"{path}: the suite file is empty; see docs/SUITES.md for the format"),))
    return read_suite(data, path)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file, safely and within bounds (nothing it names is imported).

    Raises:
        SuiteError: the file is missing, unreadable, too large, not UTF-8 YAML, or fails validation (first problem).
    """
    read = check_suite(path)
    if read.suite is None:
        raise read.problems[0]
    return read.suite
