"""Checking suite files as a whole, on any machine, before a GPU is involved (``fuseci check``,
and ``fuseci run`` before it measures anything).

Each file is loaded and validated (:func:`fuseci.config.parse.load_suite`); then the files are
checked together: two files with one ``suite:`` id would share, and delete each other's cases
from, one baseline file; and every ``module:function`` must resolve
(:mod:`fuseci.config.resolve`). Every problem is kept, with the file and the line of the
offending key, so that one pass shows them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.config.parse import load_suite
from fuseci.config.resolve import unresolved
from fuseci.errors import SuiteError


@dataclass(frozen=True, slots=True)
class SuiteProblem:
    """One thing wrong with a suite file."""

    path: Path
    """The suite file."""
    line: int
    """Line of the offending key (0 when unknown)."""
    message: str
    """One line: the file, the line, the field, what is wrong and the fix."""
    suite: str
    """The suite's id, or the file's stem when it could not be read."""


@dataclass(frozen=True, slots=True)
class SuiteCheck:
    """The suites that loaded, and every problem found in the files."""

    suites: tuple[Suite, ...]
    """Suites that loaded and validated (possibly with problems found across files)."""
    problems: tuple[SuiteProblem, ...]
    """Every problem, file by file."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def check_files(paths: Sequence[Path], *, resolve: bool = True) -> SuiteCheck:
    """Load every file and check them together (see the module docstring); ``resolve`` also
    checks that every ``module:function`` exists (skip it when nothing will be imported, as in
    re-analysing a report)."""
    suites: list[Suite] = []
    problems: list[SuiteProblem] = []
    for path in paths:
        try:
            suites.append(load_suite(path))
        except SuiteError as exc:
            problems.append(SuiteProblem(Path(path), exc.line, str(exc), Path(path).stem))
    by_id: dict[str, list[Suite]] = {}
    for suite in suites:
        by_id.setdefault(suite.name, []).append(suite)
    for sid, same in by_id.items():
        if len(same) < 2:
            continue
        for suite in same:
            others = ", ".join(f"{o.path}:{o.line}" for o in same if o is not suite)
            problems.append(
                SuiteProblem(
                    suite.path,
                    suite.line,
                    f"{suite.path}:{suite.line}: suite: duplicate suite id {sid!r} (also {others}); suites of one id "
                    "share one baseline file and would delete each other's cases from it: give each file its own id",
                    sid,
                )
            )
    if resolve:
        for suite in suites:
            for line, field, why in unresolved(suite):
                problems.append(
                    SuiteProblem(
                        suite.path,
                        line,
                        f"{suite.path}:{line}: {field}: {why}; fix the reference (module:function) or the module",
                        suite.name,
                    )
                )
    return SuiteCheck(tuple(suites), tuple(problems))
