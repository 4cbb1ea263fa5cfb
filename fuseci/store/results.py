"""Results files: the verdicts of ``fuseci run --json`` (and ``compare``, ``merge``), written
and read back here, so that the results of several runs (shards of one suite set, or runs on
several GPU models) can be merged into one report by ``fuseci merge``.

Numbers that are NaN or infinite are written as null and come back as None.

Format history (no ``format`` field):
    1: first version.
    1 (still): optional per-check ``retry`` (a borderline speedup that was re-measured);
       absent means false. Optional per-variant ``baseline_values`` and ``baseline_kernels``
       (what the variant was judged against); absent means none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from fuseci import validation as v
from fuseci.config import names
from fuseci.errors import ReportError
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.verdict import (
    CaseResult,
    CheckKind,
    Comparison,
    EnvDifference,
    MetricDelta,
    VariantMeasurement,
    Verdict,
    exit_code,
)
from fuseci.store.versioned import DocumentFormat

#: Largest results file read: a results file holds every check of every case (about 15 KB a case
#: with the exact counters), so a suite of 5,000 cases writes 73 MB; a merged file holds several.
MAX_BYTES = 256 << 20
FORMAT = DocumentFormat(
    what="results file", version=1, fix="results files are written by `fuseci run --json FILE`", max_bytes=MAX_BYTES
)
#: Most suites in a results file (a merged one holds those of every part), and cases in a suite.
MAX_SUITES = 10_000
MAX_CASES = 10_000

#: A suite's name in results: its id, or ``id@gpu-slug`` once ``fuseci merge`` met it on several cards.
SuiteName = Annotated[str, Field(max_length=300, pattern=r"^[A-Za-z0-9_-]+(?:@[a-z0-9-]+)?$"), v.Expect("a suite id")]
CaseId = Annotated[
    str, Field(max_length=names.MAX_ID_CHARS, pattern=r"^(?:[A-Za-z0-9_-]+|\(suite\))$"), v.Expect("a case id")
]
"""A case id, or ``(suite)`` for the checks of a whole suite."""
VerdictName = Annotated[Verdict, v.Choice(tuple(x.value for x in Verdict))]
Values = Annotated[dict[v.QuantityName, float | None], Field(max_length=1000)]
"""Quantities by name; null: NaN or infinite."""
Kernels = Annotated[v.Items[KernelLaunch], Field(max_length=100_000)]
Figure = Annotated[float, v.AsWritten]
"""A finite number, kept as the file wrote it (an integer stays one)."""

# Every object of a results file leaves out members a newer fuseci may add (v.OpenModel).


class CheckDoc(v.OpenModel):
    """A check, as :class:`~fuseci.judge.verdict.MetricDelta` (``baseline`` is its ``baseline_value``)."""

    variant: Annotated[
        str, Field(max_length=names.MAX_ID_CHARS, pattern=r"^[A-Za-z0-9_-]*$"), v.Expect("a variant id (or empty)")
    ]
    check: Annotated[CheckKind, v.Choice(tuple(k.value for k in CheckKind))]
    quantity: Annotated[str, Field(max_length=200)]
    verdict: VerdictName
    message: v.Text
    current: Figure | None
    baseline: Figure | None
    change: Figure | None
    tolerance: Annotated[str, Field(max_length=1000)]
    retry: bool = False


class VariantDoc(v.OpenModel):
    """A variant's measurements, as :class:`~fuseci.judge.verdict.VariantMeasurement`."""

    variant: v.Id
    values: Values
    gains: Values
    kernels: Kernels
    baseline_values: Values = Field(default_factory=dict)
    baseline_kernels: Kernels = ()


def _once(kind: str, key: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A check that each item of a list names its ``key`` (a case or variant id) once, letter case
    ignored (:func:`~fuseci.config.names.id_key`): an item listed twice would be counted twice."""

    def check(items: tuple[Any, ...]) -> tuple[Any, ...]:
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            name = getattr(item, key)
            j = first.setdefault(names.id_key(name), i)
            if j == i:
                continue
            earlier = getattr(items[j], key)
            if earlier == name:
                raise ValueError(f"{kind} {name!r} is listed twice ([{j}] and [{i}]); each {kind} is judged once")
            raise ValueError(
                f"{kind} {name!r} ([{i}]) differs from {earlier!r} ([{j}]) only in letter case; ids are compared "
                "ignoring case, as macOS and Windows compare file names"
            )
        return items

    return check


class CaseDoc(v.OpenModel):
    """A case, as :class:`~fuseci.judge.verdict.CaseResult`."""

    case: CaseId
    line: Annotated[int, Field(ge=0, lt=10**9)]
    description: v.Text
    verdict: VerdictName | None = None
    """Derived from the checks when read back."""
    notes: Annotated[v.Items[v.Text], Field(max_length=1000)] = ()
    checks: Annotated[v.Items[CheckDoc], Field(max_length=100_000)]
    variants: Annotated[v.Items[VariantDoc], Field(max_length=1000), AfterValidator(_once("variant", "variant"))]


class EnvDifferenceDoc(v.OpenModel):
    """An environment field that differs from the baseline's."""

    field: Annotated[str, Field(max_length=200)]
    baseline: v.Scalar
    current: v.Scalar
    accepted: bool


class SuiteDoc(v.OpenModel):
    """A suite's comparison, as :class:`~fuseci.judge.verdict.Comparison`."""

    suite: SuiteName
    suite_path: v.PathText
    verdict: VerdictName | None = None
    """Derived from the cases when read back."""
    baseline_path: v.PathText | None
    has_baseline: bool
    env: v.Env
    env_differences: Annotated[v.Items[EnvDifferenceDoc], Field(max_length=1000)]
    cases: Annotated[v.Items[CaseDoc], Field(max_length=MAX_CASES), AfterValidator(_once("case", "case"))]
    notes: Annotated[v.Items[v.Text], Field(max_length=100)] = ()
    """What the whole suite's reader should know (absent in files written before: none)."""


class ResultsDoc(v.OpenModel):
    """What a results file holds (after ``format_version``, checked by :data:`FORMAT`)."""

    suites: Annotated[v.Items[SuiteDoc], Field(max_length=MAX_SUITES)]
    exit_code: Annotated[int, Field(ge=0, lt=4)] = 0


def _num(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return None
    return value


def _check_json(k: MetricDelta) -> dict[str, Any]:
    doc = {
        "variant": k.variant,
        "check": k.check.value,
        "quantity": k.quantity,
        "verdict": k.verdict.value,
        "message": k.message,
        "current": _num(k.current),
        "baseline": _num(k.baseline_value),
        "change": _num(k.change),
        "tolerance": k.tolerance,
    }
    if k.retry:
        doc["retry"] = True
    return doc


def _kernels_json(kernels: tuple[KernelLaunch, ...]) -> list[dict[str, Any]]:
    out = []
    for k in kernels:
        doc: dict[str, Any] = {"name": k.name, "grid": k.grid, "block": k.block, "registers": k.registers}
        if k.shared_mem:
            doc["shared_mem"] = k.shared_mem
        if k.counts:
            doc["counts"] = dict(sorted(k.counts.items()))
        if k.spread:
            doc["spread"] = dict(sorted(k.spread.items()))
        out.append(doc)
    return out


def _variant_json(v: VariantMeasurement) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "variant": v.variant,
        "values": {q: _num(x) for q, x in v.values.items()},
        "gains": {q: _num(x) for q, x in v.gains.items()},
        "kernels": _kernels_json(v.kernels),
    }
    if v.baseline_values:
        doc["baseline_values"] = {q: _num(x) for q, x in v.baseline_values.items()}
    if v.baseline_kernels:
        doc["baseline_kernels"] = _kernels_json(v.baseline_kernels)
    return doc


def _suite_json(c: Comparison) -> dict[str, Any]:
    return {
        "suite": c.suite,
        "suite_path": c.suite_path,
        "verdict": c.verdict.value,
        "baseline_path": c.baseline_path,
        "has_baseline": c.has_baseline,
        "env": dict(c.env),
        "env_differences": [
            {"field": d.field, "baseline": d.baseline_value, "current": d.current, "accepted": d.accepted}
            for d in c.env_differences
        ],
        **({"notes": list(c.notes)} if c.notes else {}),
        "cases": [
            {
                "case": case.case,
                "line": case.line,
                "description": case.description,
                "verdict": case.verdict.value,
                "notes": list(case.notes),
                "checks": [_check_json(k) for k in case.checks],
                "variants": [_variant_json(v) for v in case.variants],
            }
            for case in c.cases
        ],
    }


def dumps(comparisons: list[Comparison]) -> str:
    """The results document (sorted keys, trailing newline).

    Raises:
        ReportError: fuseci would not read it back: more suites (merged from many results), cases
            or bytes than a results file may hold.
    """
    crowded = next((c for c in comparisons if len(c.cases) > MAX_CASES), None)
    if len(comparisons) > MAX_SUITES or crowded is not None:
        what = (
            f"{len(comparisons):,} suites"
            if crowded is None
            else f"{len(crowded.cases):,} cases in suite {crowded.suite!r}"
        )
        raise ReportError(
            f"a results file of {what} is more than fuseci reads back ({MAX_SUITES:,} suites of at most "
            f"{MAX_CASES:,} cases), so it is not written: split what it holds over several files"
        )
    return FORMAT.dumps({"exit_code": exit_code(comparisons), "suites": [_suite_json(c) for c in comparisons]})


def _float(value: float | None) -> float:
    return math.nan if value is None else value


def _case(doc: CaseDoc) -> CaseResult:
    checks = tuple(
        MetricDelta(
            case=doc.case,
            variant=k.variant,
            check=k.check,
            quantity=k.quantity,
            verdict=k.verdict,
            message=k.message,
            current=k.current,
            baseline_value=k.baseline,
            change=k.change,
            tolerance=k.tolerance,
            retry=k.retry,
        )
        for k in doc.checks
    )
    variants = tuple(
        VariantMeasurement(
            variant=x.variant,
            values={q: _float(n) for q, n in x.values.items()},
            gains={q: _float(n) for q, n in x.gains.items()},
            kernels=x.kernels,
            baseline_values={q: _float(n) for q, n in x.baseline_values.items()},
            baseline_kernels=x.baseline_kernels,
        )
        for x in doc.variants
    )
    return CaseResult(doc.case, doc.line, doc.description, checks, variants, doc.notes)


def _comparison(doc: SuiteDoc) -> Comparison:
    return Comparison(
        suite=doc.suite,
        suite_path=doc.suite_path,
        env=doc.env,
        baseline_path=doc.baseline_path,
        has_baseline=doc.has_baseline,
        env_differences=tuple(EnvDifference(d.field, d.baseline, d.current, d.accepted) for d in doc.env_differences),
        cases=tuple(_case(c) for c in doc.cases),
        notes=tuple(doc.notes),
    )


def read_results(path: Path) -> list[Comparison]:
    """The comparisons in one results file.

    Raises:
        ReportError: the file is missing, not JSON, not a fuseci results file, from a newer
            fuseci, or malformed; the message names the file.
    """
    try:
        data = FORMAT.load(path)
    except FileNotFoundError:
        raise ReportError(f"{path}: results file not found (written by `fuseci run --json`)") from None
    if "format" in data or "suites" not in data:
        other = f" (it is a {str(data['format'])[:40]!r} document)" if "format" in data else ""
        raise FORMAT.fail(path, f"not a fuseci results file{other}")
    try:
        doc = v.validate(ResultsDoc, data)
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None
    return [_comparison(s) for s in doc.suites]
