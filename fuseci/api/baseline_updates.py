"""``fuseci update-baselines``: re-record a suite's baseline, only what changed, never what fails."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from fuseci.api import ledgers, session
from fuseci.api.running import RunOptions, baseline_file, case_sources, check_autotune_records, own_files
from fuseci.config.model import Suite
from fuseci.errors import EXIT_REGRESSION, BaselineError
from fuseci.files.outputs import Output, check_outputs
from fuseci.frames.metrics import SuiteResults
from fuseci.judge import update
from fuseci.judge.baseline import Baseline, SourcePrint, normalized
from fuseci.judge.compare import compare
from fuseci.judge.verdict import Comparison, Reference, update_exit_code
from fuseci.ledger import store as ledger_store
from fuseci.measure import autotune
from fuseci.measure.run import BASELINE_PASSES
from fuseci.store import baselines as bl


@dataclass(frozen=True, slots=True)
class BaselineUpdate:
    """What ``update-baselines`` did to one suite's baseline file."""

    path: Path
    """The baseline file."""
    written: bool
    """True when the file was (re)written."""
    changes: tuple[str, ...]
    """One line per changed, added or removed case, or env field."""
    kept: tuple[str, ...]
    """Cases not updated because they are wrong or broken (old values kept)."""
    comparison: Comparison
    """The comparison against the old baseline, on which the update was based."""
    refused: tuple[update.Refusal, ...] = ()
    """Cases not recorded because an expectation, the bytes allowance or correctness fails."""
    overridden: tuple[update.Refusal, ...] = ()
    """Cases recorded with ``force`` although such a check fails."""
    empty: bool = False
    """True when nothing could be recorded, so no file was written."""


def update_baselines(
    suite: Suite, options: RunOptions, *, force: bool = False, lock_timeout_s: float = bl.LOCK_TIMEOUT_S
) -> BaselineUpdate:
    """Re-record one suite's baseline, changing only cases whose checks did not pass.

    A case whose every check passes keeps its old values byte for byte; ``force`` re-records every measured
    case; wrong or broken cases are never recorded. The file's update lock is held throughout (a concurrent
    update waits up to ``lock_timeout_s``, then builds on this one); on any failure the old file stays as it was.

    Raises:
        FuseciError: the suite could not be measured or the old baseline is corrupt.
        BaselineError: the lock was held for ``lock_timeout_s``, or the file cannot be written.
        OutputError: the baseline file is one of the update's inputs.
    """
    check_autotune_records(suite, options)
    results = session.measurer(options.ncu).measure(suite, replace(options.measuring, passes=BASELINE_PASSES))
    path = baseline_file(options, results)
    check_outputs([Output(path, "update-baselines", "baseline")], own_files([suite], options, baselines=False))
    with bl.locked(path, lock_timeout_s):
        return _rerecord(suite, results, path, force)


def _autotuning(results: SuiteResults, kept: Path) -> dict[str, autotune.Entry] | None:
    """The autotuning choices the run's kernels used, to write at ``kept``; None: none, or those kept."""
    entries = {key: dict(entry) for key, entry in results.record.autotune.items()}
    return None if not entries or autotune.load(kept) == entries else entries


def _refuse_links(*paths: Path) -> None:
    """Refuse (:class:`BaselineError`) to replace a file of a card's directory that is a symbolic link."""
    for path in paths:
        if path.is_symlink():
            raise BaselineError(
                f"{path}: is a symbolic link (to {os.readlink(path)}); update-baselines does not write through links, "
                "which could change another card's or suite's files: replace the link with a copy of its target and "
                "run again"
            )


def _with_sources(
    new: Baseline | None, old: Baseline | None, sources: dict[str, SourcePrint] | None, not_kept: set[str]
) -> Baseline | None:
    """The new baseline with each case's source fingerprint: this run's for a case it records, else the old one's."""
    if new is None:
        return None
    kept = old.sources if old is not None else {}
    now = sources or {}
    prints = {c: p for c in new.cases if (p := kept.get(c) if c in not_kept else now.get(c)) is not None}
    return replace(new, sources=prints)


def _rerecord(suite: Suite, results: SuiteResults, path: Path, force: bool) -> BaselineUpdate:
    """The read-compare-write of :func:`update_baselines`; the caller holds the lock."""
    old = bl.load_baseline(path)
    old_ledgers = ledgers.stored(path)
    built = ledgers.built(suite, results)
    judged = ledgers.judged(suite, built, old_ledgers, Reference(f"fuseci update-baselines {suite.path}"))
    sources = case_sources(suite)
    comparison = compare(
        results, suite, old, baseline_path=str(path), accept_env=frozenset(), ledgers=judged, sources=sources
    )
    decided = update.plan(suite, results, old, comparison, force=force, normalize=normalized)
    not_kept = {*decided.kept, *(r.case for r in decided.refused)}
    new = _with_sources(decided.baseline, old, sources, not_kept)
    if (
        not_kept
        and old is not None
        and new is not None
        and bl.dumps(replace(new, sources=old.sources, code=old.code)) == bl.dumps(old)
    ):
        new = old  # a case refused or kept: fingerprints and compiled code alone do not rewrite the file
    new_ledgers = ledgers.recorded(suite, built, old_ledgers, {c.id for c in suite.cases} - not_kept)
    ledgers_path = ledger_store.suite_path(path)
    tuning_path = path.with_name(f"{path.stem}.autotune.json")
    try:
        # Every input read and every output checked before anything is written.
        tuning = _autotuning(results, tuning_path)
        written = new is not None and (old is None or bl.dumps(old) != bl.dumps(new))
        _refuse_links(*([ledgers_path] if new_ledgers != old_ledgers else []), *([tuning_path] if tuning else []))
        if written and new is not None:
            bl.save_baseline(new, path)
        if new_ledgers != old_ledgers:
            try:
                ledger_store.save_suite(new_ledgers, ledgers_path)
            except OSError as exc:
                raise BaselineError(f"{ledgers_path}: cannot write the ledgers: {exc.strerror or exc}") from None
        if tuning is not None:
            autotune.save(tuning, tuning_path)
    except BaselineError as exc:  # the verdict stands: a wrong result found is still exit 1
        code = update_exit_code(comparison, decided.kept, bool(decided.refused))
        own = tuple(f"{p}: " for p in (path, ledgers_path, tuning_path))
        message = str(exc) if str(exc).startswith(own) else f"{path}: cannot write baseline: {exc}"
        raise BaselineError(message, exit_code=EXIT_REGRESSION if code == EXIT_REGRESSION else exc.exit_code) from None
    return BaselineUpdate(
        path=path,
        written=written,
        changes=decided.changes,
        kept=decided.kept,
        comparison=comparison,
        refused=decided.refused,
        overridden=decided.overridden,
        empty=new is None,
    )
