"""The audit of ``fuseci ab``'s case fingerprints against what the harness saw each measured case
run and read in its side's tree (``ran``, ``read``: :mod:`fuseci.harness.watch`): what a
fingerprint does not cover is an ``ERROR`` check of the case, so that a miss of the static reader
is found on the first run that exercises it (docs/CI.md, "The audit of what ran")."""

from __future__ import annotations

import ast
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fuseci.ab.cases import CasePrint
from fuseci.judge.verdict import CheckKind, Comparison, MetricDelta, Verdict
from fuseci.records.harness import CaseRecord, HarnessRecord

log = logging.getLogger(__name__)

#: Misses named in one check; the rest are counted.
MAX_NAMED = 5


@dataclass(frozen=True, slots=True)
class Ran:
    """One side's measurement of a suite, as the audit needs it."""

    cases: Mapping[str, CasePrint]
    """The side's case fingerprints taken before it was measured (:attr:`fuseci.ab.fingerprint.Fingerprint.cases`)."""
    root: Path
    """The side's tree's root."""
    record: HarnessRecord
    """The side's harness record."""
    label: str
    """What reports call the side: ``base 1a2b3c4``, ``the working tree``."""


def _spans(path: Path) -> list[tuple[int, int, str]] | None:
    """Each top-level definition of a module file as (first line with decorators, last line, name); None: unread."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    defs = (s for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))
    return [(min([s.lineno, *(d.lineno for d in s.decorator_list)]), s.end_lineno or s.lineno, s.name) for s in defs]


def misses(case: CaseRecord, covered: CasePrint, root: Path) -> list[str]:
    """What ``case`` ran or read of the tree at ``root`` that ``covered`` does not cover, each
    ``ran kernels/x.py`` / ``ran helper (kernels/mod.py:12)`` / ``read kernels/k.cu``."""
    out: list[str] = []
    for path, lines in sorted(case.ran.items()):
        if path in covered.files:
            continue
        if path not in covered.functions:
            out.append(f"ran {path}")
            continue
        spans = _spans(root / path)
        if spans is None:
            out.append(f"ran {path} (unreadable now)")
            continue
        first_lines = {name: first for first, _, name in spans}
        ran = {name for line in lines if line for first, last, name in spans if first <= line <= last}
        out += [f"ran {name} ({path}:{first_lines[name]})" for name in sorted(ran - covered.functions[path])]
    out += [f"read {p}" for p in case.read if p not in covered.files and p not in covered.functions]
    return out


def _message(label: str, case: str, missed: list[str]) -> str:
    named = ", ".join(missed[:MAX_NAMED]) + (f" and {len(missed) - MAX_NAMED} more" if len(missed) > MAX_NAMED else "")
    return (
        f"{label} {named}, which the fingerprint of case {case!r} does not cover: a later change there would leave "
        "the case `unchanged, not measured`; make the case's module reach it as the reader follows code (an import "
        "with a literal name, a call by name, a path built from __file__), or run fuseci ab with --all"
    )


def side_checks(side: Ran) -> dict[str, MetricDelta]:
    """An ``ERROR`` check per case of ``side`` that ran or read what its fingerprint does not cover, by case
    id; a case not watched, or that its fingerprint cannot prove unchanged, is not audited."""
    watched = {cid: rec for cid, rec in side.record.cases.items() if rec.ran or rec.read}
    out: dict[str, MetricDelta] = {}
    for cid, rec in sorted(watched.items()):
        covered = side.cases.get(cid)
        if covered is None or covered.unproven:
            continue
        missed = misses(rec, covered, side.root)
        if missed:
            log.warning("case %s: %s", cid, "; ".join(missed))
            out[cid] = MetricDelta(cid, "", CheckKind.CASE, "", Verdict.ERROR, _message(side.label, cid, missed))
    return out


def audited(comparison: Comparison, sides: Sequence[Ran]) -> Comparison:
    """``comparison`` with an ``ERROR`` check on each case a side's harness found uncovered (:func:`side_checks`)."""
    found: dict[str, list[MetricDelta]] = {}
    for side in sides:
        for cid, check in side_checks(side).items():
            found.setdefault(cid, []).append(check)
    if not found:
        return comparison
    cases = tuple(replace(c, checks=(*c.checks, *found[c.case])) if c.case in found else c for c in comparison.cases)
    return replace(comparison, cases=cases)
