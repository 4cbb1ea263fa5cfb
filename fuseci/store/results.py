"""Results files: the verdicts of ``fuseci run --json`` (and ``compare``, ``merge``), written
and read back here, so that the results of several runs (shards of one suite set, or runs on
several GPU models) can be merged into one report by ``fuseci merge``.

Numbers that are NaN or infinite are written as null and come back as None.

Format history (no ``format`` field):
    1: first version.
    1 (still): optional per-check ``retry`` (a borderline speedup that was re-measured);
       absent means false. Optional per-variant ``baseline_values`` and ``baseline_kernels``
       (what the variant was judged against); absent means none. Optional per-variant
       ``ledger`` and ``baseline_ledger`` (a ledger variant's fusion ledger and its baseline's,
       as :mod:`fuseci.records.fusion` declares them); absent means none. Optional per-variant
       ``cause`` (why its finding came about: ``kind``, ``evidence``, and ``also`` and
       ``missing`` where they say anything, as :class:`~fuseci.judge.verdict.FindingCause` declares
       them); absent means none said (a variant without a finding, or a file written before).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from fuseci import validation as v
from fuseci.errors import ReportError
from fuseci.files.versioned import DocumentFormat
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.verdict import (
    MAX_CASES,
    MAX_SUITES,
    Comparison,
    MetricDelta,
    VariantMeasurement,
    exit_code,
)
from fuseci.ledger.diff import diff

#: Largest results file read: a results file holds every check of every case (about 15 KB a case
#: with the exact counters), so a suite of 5,000 cases writes 73 MB; a merged file holds several.
MAX_BYTES = 256 << 20
FORMAT = DocumentFormat(
    what="results file", version=1, fix="results files are written by `fuseci run --json FILE`", max_bytes=MAX_BYTES
)


@dataclass(frozen=True, slots=True)
class Results(v.OpenDocument):
    """What a results file holds (after ``format_version``, checked by :data:`FORMAT`); its
    suites are :class:`~fuseci.judge.verdict.Comparison`, each object of the file declared by its
    dataclass there."""

    suites: Annotated[v.Items[Comparison], Field(max_length=MAX_SUITES)]
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
    if v.ledger is not None:
        doc["ledger"] = dataclasses.asdict(v.ledger)
    if v.baseline_ledger is not None:
        doc["baseline_ledger"] = dataclasses.asdict(v.baseline_ledger)
    if v.cause is not None:
        cause: dict[str, Any] = {"kind": v.cause.kind.value, "evidence": list(v.cause.evidence)}
        if v.cause.also:
            cause["also"] = list(v.cause.also)
        if v.cause.missing:
            cause["missing"] = v.cause.missing
        doc["cause"] = cause
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
    return from_json(data, path)


def from_json(data: dict[str, Any], path: Path | str) -> list[Comparison]:
    """The comparisons of a results document already parsed (:meth:`DocumentFormat.parse`).

    Raises:
        ReportError: not a fuseci results file, or malformed; the message names the file.
    """
    if "format" in data or "suites" not in data:
        other = f" (it is a {str(data['format'])[:40]!r} document)" if "format" in data else ""
        raise FORMAT.fail(path, f"not a fuseci results file{other}")
    try:
        suites = v.validate(Results, data).suites
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None
    return [_with_changes(c) for c in suites]


def _with_changes(c: Comparison) -> Comparison:
    """``c`` with what changed in each ledger since its baseline's, node by node, found again as
    the judge found it (a file holds the two ledgers, not their diff)."""
    if not any(m.ledger and m.baseline_ledger for case in c.cases for m in case.variants):
        return c

    def variant(m: VariantMeasurement) -> VariantMeasurement:
        if m.ledger is None or m.baseline_ledger is None:
            return m
        return dataclasses.replace(m, ledger_changes=tuple(diff(m.baseline_ledger, m.ledger)))

    cases = tuple(dataclasses.replace(case, variants=tuple(variant(m) for m in case.variants)) for case in c.cases)
    return dataclasses.replace(c, cases=cases)
