"""Results files: the verdicts of ``fuseci run --json`` (and ``compare``, ``merge``), written and
read back so that the results of several runs can be merged (``fuseci merge``). Each object is
declared by its dataclass in :mod:`fuseci.judge.verdict`; NaN and infinities are written as null."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from fuseci import validation as v
from fuseci.errors import ReportError
from fuseci.files.versioned import DocumentFormat
from fuseci.judge.verdict import MAX_CASES, MAX_SUITES, Comparison, VariantMeasurement, exit_code
from fuseci.ledger.diff import diff

#: Largest results file read (it holds every check of every case, of several suites when merged).
MAX_BYTES = 256 << 20
FORMAT = DocumentFormat(
    what="results file", version=1, fix="results files are written by `fuseci run --json FILE`", max_bytes=MAX_BYTES
)


@dataclass(frozen=True, slots=True)
class Results(v.OpenDocument):
    """What a results file holds (after ``format_version``, checked by :data:`FORMAT`)."""

    suites: Annotated[v.Items[Comparison], Field(max_length=MAX_SUITES)]
    exit_code: Annotated[int, Field(ge=0, lt=4)] = 0

    __always__ = frozenset({"exit_code"})


def dumps(comparisons: list[Comparison]) -> str:
    """The results document (sorted keys, trailing newline).

    Raises:
        ReportError: fuseci would not read it back: more suites, cases or bytes than a results file may hold.
    """
    crowded = next((c for c in comparisons if len(c.cases) > MAX_CASES), None)
    if len(comparisons) > MAX_SUITES or crowded is not None:
        what = f"{len(comparisons):,} suites"
        if crowded is not None:
            what = f"{len(crowded.cases):,} cases in suite {crowded.suite!r}"
        raise ReportError(
            f"a results file of {what} is more than fuseci reads back ({MAX_SUITES:,} suites of at most "
            f"{MAX_CASES:,} cases), so it is not written: split what it holds over several files"
        )
    return FORMAT.dumps(v.dump(Results, Results(tuple(comparisons), exit_code(comparisons))))


def read_results(path: Path) -> list[Comparison]:
    """The comparisons in one results file.

    Raises:
        ReportError: the file is missing, not JSON, not a fuseci results file, newer, or malformed.
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
    """``c`` with what changed in each ledger since its baseline's, node by node (a file holds both, not the diff)."""
    if not any(m.ledger and m.baseline_ledger for case in c.cases for m in case.variants):
        return c

    def variant(m: VariantMeasurement) -> VariantMeasurement:
        if m.ledger is None or m.baseline_ledger is None:
            return m
        return dataclasses.replace(m, ledger_changes=tuple(diff(m.baseline_ledger, m.ledger)))

    cases = tuple(dataclasses.replace(case, variants=tuple(variant(m) for m in case.variants)) for case in c.cases)
    return dataclasses.replace(c, cases=cases)
