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
import re
from pathlib import Path
from typing import Any

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
from fuseci.store import schema as sc
from fuseci.store.versioned import DocumentFormat

FORMAT = DocumentFormat(what="results file", version=1, fix="results files are written by `fuseci run --json FILE`")

#: A suite's name in results: its id, or ``id@gpu-slug`` once ``fuseci merge`` met it on several cards.
SUITE_NAME = sc.Str(max_len=300, pattern=re.compile(r"[A-Za-z0-9_-]+(?:@[a-z0-9-]+)?"), what="a suite id")
_CASE_ID = sc.Str(max_len=names.MAX_ID_CHARS, pattern=re.compile(r"[A-Za-z0-9_-]+|\(suite\)"), what="a case id")
_VERDICT = sc.Str(max_len=20, choices=tuple(v.value for v in Verdict), what="a verdict")
_VALUES = sc.Map(sc.Nullable(sc.Num()), key=sc.QUANTITY, max_len=1000)  # null: NaN or infinite
_KERNEL = sc.Obj(
    sc.members(name=sc.NAME, grid=sc.COUNT, block=sc.COUNT, registers=sc.COUNT, shared_mem=(sc.COUNT, False))
)
_CHECK = sc.Obj(
    sc.members(
        variant=sc.Str(
            max_len=names.MAX_ID_CHARS, pattern=re.compile(r"[A-Za-z0-9_-]*"), what="a variant id (or empty)"
        ),
        check=sc.Str(max_len=20, choices=tuple(k.value for k in CheckKind), what="a check kind"),
        quantity=sc.Str(max_len=200),
        verdict=_VERDICT,
        message=sc.TEXT,
        current=sc.Nullable(sc.Num()),
        baseline=sc.Nullable(sc.Num()),
        change=sc.Nullable(sc.Num()),
        tolerance=sc.Str(max_len=1000),
        retry=(sc.Bool(), False),
    )
)
_VARIANT = sc.Obj(
    sc.members(
        variant=sc.ID,
        values=_VALUES,
        gains=_VALUES,
        kernels=sc.List(_KERNEL, max_len=100_000),
        baseline_values=(_VALUES, False),
        baseline_kernels=(sc.List(_KERNEL, max_len=100_000), False),
    )
)
_CASE = sc.Obj(
    sc.members(
        case=_CASE_ID,
        line=sc.Int(0, 10**9),
        description=sc.TEXT,
        verdict=(_VERDICT, False),  # derived from the checks when read back
        notes=(sc.List(sc.TEXT, max_len=1000), False),
        checks=sc.List(_CHECK, max_len=100_000),
        variants=sc.List(_VARIANT, max_len=1000),
    )
)
_SUITE = sc.Obj(
    sc.members(
        suite=SUITE_NAME,
        suite_path=sc.PATH,
        verdict=(_VERDICT, False),  # derived from the cases when read back
        baseline_path=sc.Nullable(sc.PATH),
        has_baseline=sc.Bool(),
        env=sc.ENV,
        env_differences=sc.List(
            sc.Obj(sc.members(field=sc.Str(max_len=200), baseline=sc.SCALAR, current=sc.SCALAR, accepted=sc.Bool())),
            max_len=1000,
        ),
        cases=sc.List(_CASE, max_len=10_000),
    )
)
#: What a results file holds (after ``format_version``, checked by :data:`FORMAT`).
SCHEMA = sc.Obj(sc.members(suites=sc.List(_SUITE, max_len=10_000), exit_code=(sc.Int(0, 4), False)))


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
    """The results document (sorted keys, trailing newline)."""
    return FORMAT.dumps({"exit_code": exit_code(comparisons), "suites": [_suite_json(c) for c in comparisons]})


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _kernels(data: Any) -> tuple[KernelLaunch, ...]:
    return tuple(KernelLaunch(k["name"], k["grid"], k["block"], k["registers"], k.get("shared_mem", 0)) for k in data)


def _case(data: dict[str, Any]) -> CaseResult:
    cid = data["case"]
    checks = tuple(
        MetricDelta(
            case=cid,
            variant=k["variant"],
            check=CheckKind(k["check"]),
            quantity=k["quantity"],
            verdict=Verdict(k["verdict"]),
            message=k["message"],
            current=k["current"],
            baseline_value=k["baseline"],
            change=k["change"],
            tolerance=k["tolerance"],
            retry=k.get("retry", False),
        )
        for k in data["checks"]
    )
    variants = tuple(
        VariantMeasurement(
            variant=v["variant"],
            values={q: _float(x) for q, x in v["values"].items()},
            gains={q: _float(x) for q, x in v["gains"].items()},
            kernels=_kernels(v["kernels"]),
            baseline_values={q: _float(x) for q, x in v.get("baseline_values", {}).items()},
            baseline_kernels=_kernels(v.get("baseline_kernels", ())),
        )
        for v in data["variants"]
    )
    notes = tuple(data.get("notes", ()))
    return CaseResult(cid, data["line"], data["description"], checks, variants, notes)


def _comparison(data: dict[str, Any]) -> Comparison:
    return Comparison(
        suite=data["suite"],
        suite_path=data["suite_path"],
        env=data["env"],
        baseline_path=data["baseline_path"],
        has_baseline=data["has_baseline"],
        env_differences=tuple(
            EnvDifference(d["field"], d["baseline"], d["current"], d["accepted"]) for d in data["env_differences"]
        ),
        cases=tuple(_case(c) for c in data["cases"]),
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
        sc.validate(SCHEMA, data)
    except sc.SchemaError as exc:
        raise FORMAT.invalid(path, exc) from None
    return [_comparison(s) for s in data["suites"]]
