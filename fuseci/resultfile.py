"""Read the JSON results that ``fuseci run --json`` writes back into comparisons.

The inverse of :mod:`fuseci.reporters.json`, so that results of several runs (shards of one
suite set, or runs on several GPU models) can be merged into one JUnit file and one summary by
``fuseci merge``. Numbers written as null (NaN or infinity) come back as None.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fuseci.compare import CaseResult, Comparison, EnvDifference, MetricDelta, VariantMeasurement, Verdict
from fuseci.errors import ReportError
from fuseci.metrics import KernelLaunch
from fuseci.reporters.json import FORMAT_VERSION


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _case(data: dict[str, Any]) -> CaseResult:
    cid = data["case"]
    checks = tuple(
        MetricDelta(
            case=cid,
            variant=k["variant"],
            check=k["check"],
            quantity=k["quantity"],
            verdict=Verdict(k["verdict"]),
            message=k["message"],
            current=k["current"],
            baseline=k["baseline"],
            change=k["change"],
            tolerance=k["tolerance"],
        )
        for k in data["checks"]
    )
    variants = tuple(
        VariantMeasurement(
            variant=v["variant"],
            values={q: _num(x) for q, x in v["values"].items()},
            gains={q: _num(x) for q, x in v["gains"].items()},
            kernels=tuple(KernelLaunch(k["name"], k["grid"], k["block"], k["registers"]) for k in v["kernels"]),
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
    """The comparisons in one ``--json`` results file.

    Raises:
        ReportError: the file is missing, not JSON, not a fuseci results file, from a newer
            fuseci, or malformed; the message names the file.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: results file not found (written by `fuseci run --json`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: cannot read results: {exc}") from None
    if not isinstance(data, dict) or "suites" not in data or "format_version" not in data:
        raise ReportError(f"{path}: not a fuseci results file (written by `fuseci run --json`)")
    if not isinstance(data["format_version"], int) or data["format_version"] > FORMAT_VERSION:
        raise ReportError(
            f"{path}: results format {data['format_version']!r} is newer than this fuseci reads; upgrade fuseci"
        )
    try:
        return [_comparison(s) for s in data["suites"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{path}: malformed results ({type(exc).__name__}: {exc})") from None
