"""Machine-readable results: every number, every check, the environment."""

from __future__ import annotations

import json
import math
from typing import Any

from fuseci.compare import Comparison, exit_code

FORMAT_VERSION = 1


def _num(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return None
    return value


def _suite(c: Comparison) -> dict[str, Any]:
    return {
        "suite": c.suite,
        "suite_path": c.suite_path,
        "verdict": c.verdict.value,
        "baseline_path": c.baseline_path,
        "has_baseline": c.has_baseline,
        "env": dict(c.env),
        "env_differences": [
            {"field": d.field, "baseline": d.baseline, "current": d.current, "accepted": d.accepted}
            for d in c.env_differences
        ],
        "cases": [
            {
                "case": case.case,
                "line": case.line,
                "description": case.description,
                "verdict": case.verdict.value,
                "notes": list(case.notes),
                "checks": [
                    {
                        "variant": k.variant,
                        "check": k.check,
                        "quantity": k.quantity,
                        "verdict": k.verdict.value,
                        "message": k.message,
                        "current": _num(k.current),
                        "baseline": _num(k.baseline),
                        "change": _num(k.change),
                        "tolerance": k.tolerance,
                    }
                    for k in case.checks
                ],
                "variants": [
                    {
                        "variant": v.variant,
                        "values": {q: _num(x) for q, x in v.values.items()},
                        "gains": {q: _num(x) for q, x in v.gains.items()},
                        "kernels": [
                            {"name": k.name, "grid": k.grid, "block": k.block, "registers": k.registers}
                            for k in v.kernels
                        ],
                    }
                    for v in case.variants
                ],
            }
            for case in c.cases
        ],
    }


def render(comparisons: list[Comparison]) -> str:
    """The JSON document (sorted keys, trailing newline)."""
    doc = {
        "format_version": FORMAT_VERSION,
        "exit_code": exit_code(comparisons),
        "suites": [_suite(c) for c in comparisons],
    }
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
