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
from pathlib import Path
from typing import Any

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

FORMAT = DocumentFormat(what="results file", version=1, fix="results files are written by `fuseci run --json FILE`")


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
            retry=bool(k.get("retry", False)),
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
    notes = tuple(str(n) for n in data.get("notes", ()))
    return CaseResult(cid, int(data["line"]), data["description"], checks, variants, notes)


def _comparison(data: dict[str, Any]) -> Comparison:
    return Comparison(
        suite=data["suite"],
        suite_path=data["suite_path"],
        env=data["env"],
        baseline_path=data["baseline_path"],
        has_baseline=bool(data["has_baseline"]),
        env_differences=tuple(
            EnvDifference(d["field"], d["baseline"], d["current"], bool(d["accepted"])) for d in data["env_differences"]
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
    if "suites" not in data:
        raise FORMAT.fail(path, "not a fuseci results file")
    try:
        return [_comparison(s) for s in data["suites"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{path}: malformed results ({type(exc).__name__}: {exc})") from None
