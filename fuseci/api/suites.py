"""Which suites a command runs: the files named (or every ``suites/*.yaml``), checked on
their own and together, and the ``--accept-env`` fields."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from fuseci.config.check import FileCheck, SuiteCheck, check_files
from fuseci.config.model import Suite
from fuseci.config.names import ENV_FIELDS
from fuseci.errors import SuiteError, UsageError
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict, failed_file

log = logging.getLogger("fuseci.api")


def suite_files(paths: Sequence[Path] | None, *, root: Path = Path(".")) -> list[Path]:
    """The suite files named, or every ``suites/*.yaml`` under ``root``.

    Raises:
        UsageError: none named and none found.
    """
    if paths:
        return list(paths)
    found = sorted((root / "suites").glob("*.yaml"))
    if not found:
        raise UsageError("no suite given and no suites/*.yaml in the current directory; pass a suite file")
    return found


def check_suites(paths: Sequence[Path] | None, *, root: Path = Path("."), resolve: bool = True) -> SuiteCheck:
    """Check the suite files named (default: every ``suites/*.yaml``, planted ones too): :mod:`fuseci.config.check`.

    Raises:
        UsageError: none named and none found.
    """
    return check_files(suite_files(paths, root=root), resolve=resolve)


def runnable(check: SuiteCheck, named: bool) -> list[Suite]:
    """The suites a command runs: planted-regression suites only when the command line named them."""
    if named:
        return list(check.suites)
    planted = [s.name for s in check.suites if s.planted]
    if planted:
        log.info("skipping planted-regression suite(s) %s; name the file to run one", ", ".join(planted))
    return [s for s in check.suites if not s.planted]


def load_suites(paths: Sequence[Path] | None, *, root: Path = Path("."), resolve: bool = False) -> list[Suite]:
    """The suites named, or every ``suites/*.yaml`` under ``root`` but planted ones, checked by :func:`check_suites`.

    Raises:
        SuiteError: a suite file is missing or invalid, two share an id, or a function is missing.
        UsageError: none named and none found.
    """
    check = check_suites(paths, root=root, resolve=resolve)
    if check.problems:
        first, others = check.problems[0], check.problem_count - 1
        more = f" (and {others} more problems: `fuseci check` lists them)" if others > 0 else ""
        raise SuiteError(first.message + more, path=first.path, line=first.line)
    return runnable(check, bool(paths))


def _checked_file(f: FileCheck, suite: Suite) -> Comparison:
    """A file without problems, for the report files: a pass, and each unverified reference and warning."""
    said = [(suite.line, Verdict.PASS, f.summary())]
    said += [(note.line, Verdict.WARN, note.message) for note in (*f.unverified_notes, *f.warnings)]
    results = [
        CaseResult("(suite)", line, "the suite file", (MetricDelta("(suite)", "", CheckKind.CASE, "", v, m),), ())
        for line, v, m in said
    ]
    return Comparison(
        suite=suite.name,
        suite_path=str(f.path),
        env={},
        baseline_path=None,
        has_baseline=False,
        env_differences=(),
        cases=tuple(results),
    )


def check_report(check: SuiteCheck, *, every_file: bool = True) -> list[Comparison]:
    """What the report files say about a check: each problem as an error at its file and line; with
    ``every_file``, each file without problems as a pass."""
    out: list[Comparison] = []
    for f in check.files:
        if f.problem_count:
            out += [failed_file(p.suite, str(p.path), p.message, p.line) for p in f.reported]
        elif every_file and f.suite is not None:
            out.append(_checked_file(f, f.suite))
    return out


def parse_accept_env(items: Sequence[str] | None) -> frozenset[str]:
    """The ``--accept-env`` fields (comma-separated or repeated).

    Raises:
        UsageError: a field is not an environment fingerprint field or ``all``.
    """
    accepted = frozenset(f.strip() for item in items or () for f in item.split(",") if f.strip())
    unknown = accepted - set(ENV_FIELDS) - {"all"}
    if unknown:
        raise UsageError(
            f"--accept-env: unknown field(s) {sorted(unknown)}; choose from {', '.join(ENV_FIELDS)} or all"
        )
    return accepted
