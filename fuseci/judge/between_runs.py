"""Judging one run against another: ``fuseci compare A B`` judges run B with run A's measurements
as its baseline, under the suite files' current policies."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.config.parse import load_suite
from fuseci.errors import BaselineError, ReportError
from fuseci.frames.metrics import SuiteResults
from fuseci.frames.run_file import Run
from fuseci.judge.baseline import Baseline, from_results, normalized
from fuseci.judge.compare import compare
from fuseci.judge.verdict import Comparison, Reference, failed

log = logging.getLogger(__name__)


#: Run B's reference: run A, which no command of B's re-records.
RUN_A = Reference("", name="run A")


def _opened_as_recorded(p: str) -> bool:
    """True for a relative path without ``..`` to a ``.yaml``/``.yml`` file inside the current directory, links
    resolved (a run file is data: it must not make ``fuseci compare`` read ``../../etc/passwd``)."""
    path = Path(p)
    if path.is_absolute() or ".." in path.parts or path.suffix not in (".yaml", ".yml") or not p.isprintable():
        return False
    here = Path.cwd().resolve()
    return path.resolve() == here or here in path.resolve().parents


def recorded_suites(a: Run, b: Run) -> list[Suite]:
    """The suite files the two runs recorded, loaded from paths relative to the current directory
    (only those :func:`_opened_as_recorded` allows): B's suites first (B's path wins), then A's.

    Raises:
        ReportError: a recorded suite path is not one fuseci opens, is not there, or now defines another suite.
        SuiteError: a suite file is malformed.
    """
    paths = {sid: (b, p) for sid, p in b.suite_paths.items()}
    for sid, p in a.suite_paths.items():
        paths.setdefault(sid, (a, p))
    loaded: list[Suite] = []
    for sid, (run, p) in paths.items():
        if not _opened_as_recorded(p):
            raise ReportError(
                f"{run.path}: suite {sid!r} was recorded from {p[:200]!r}, which fuseci does not open: it opens only "
                "a relative path without '..' to a .yaml or .yml file inside the current directory; pass the suite "
                "files after A and B"
            )
        if not Path(p).is_file():
            raise ReportError(
                f"{run.path}: suite {sid!r} was run from {p}, which is not in the current directory "
                f"({Path.cwd()}); run `fuseci compare` from the checkout the runs were made in, or pass "
                "the suite files after A and B"
            )
        suite = load_suite(p)
        if suite.name != sid:
            raise ReportError(
                f"{p}: now defines suite {suite.name!r}, but {run.path} recorded suite {sid!r} from it; "
                "pass the suite files after A and B"
            )
        loaded.append(suite)
    return loaded


def _one_sided(suite: Suite, a: Run, b: Run) -> Comparison:
    """An ERROR comparison for a suite that is not in both runs."""
    if suite.name in a.suites:
        why = (
            f"suite {suite.name!r} is in run A ({a.path}) but not in run B ({b.path}): B did not measure it "
            "(it failed to profile, was not run, or is in another shard's run)"
        )
    elif suite.name in b.suites:
        why = (
            f"suite {suite.name!r} is in run B ({b.path}) but not in run A ({a.path}): there is nothing to judge "
            "it against; compare with a run A that measured it, or pass the other suite files only"
        )
    else:
        why = f"suite {suite.name!r} ({suite.path}) is in neither run ({a.path}, {b.path})"
    comparison = failed(suite, why)
    results = b.suites.get(suite.name)
    return replace(
        comparison,
        env=dict(results.env) if results is not None else {},
        baseline_path=str(a.path),
        cases=tuple(replace(c, description="the suite is not in both runs") for c in comparison.cases),
    )


def baseline_of(results: SuiteResults) -> Baseline:
    """A run's results as a baseline: the cases the harness ran ok, rounded as a baseline file would hold them."""
    return normalized(from_results(results, cases=set(results.record.cases)))


def compare_runs(a: Run, b: Run, suites: Sequence[Suite], accept_env: frozenset[str] = frozenset()) -> list[Comparison]:
    """Judge each suite's results in run B with run A's as its baseline (:func:`baseline_of`), as ``fuseci run``
    would; a suite not in both runs is one ``ERROR``, those ``suites`` leave out are logged. Prints nothing.

    Raises:
        ReportError: A's results of a suite cannot be made into a baseline.
    """
    out: list[Comparison] = []
    for suite in suites:
        ours, reference = b.suites.get(suite.name), a.suites.get(suite.name)
        if ours is None or reference is None:
            out.append(_one_sided(suite, a, b))
            continue
        try:
            baseline = baseline_of(reference)
        except BaselineError as exc:  # its message names no file: the baseline lives in memory
            raise ReportError(
                f"{a.path}: the results of suite {suite.name!r} cannot serve as a baseline ({exc})"
            ) from None
        out.append(compare(ours, suite, baseline, baseline_path=str(a.path), accept_env=accept_env, reference=RUN_A))
    left_out = sorted((set(a.suites) | set(b.suites)) - {s.name for s in suites})
    if left_out:
        log.warning("not compared (no suite file given for them): %s", ", ".join(left_out))
    return out
