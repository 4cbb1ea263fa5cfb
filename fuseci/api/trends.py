"""``fuseci history``: every gain across the run files of a results directory."""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.errors import ReportError, UsageError
from fuseci.judge import history as judge_history
from fuseci.store import runs as run_files

log = logging.getLogger("fuseci.api")

#: Run files per worker process: fewer are read faster by one process than by starting workers.
_RUNS_PER_WORKER = 100


def run_files_in(directory: Path, last: int | None = None) -> list[Path]:
    """The run files in ``directory``, oldest first by the time in their names (then ``_N``);
    only the newest ``last`` when given.

    Raises:
        ReportError: ``directory`` is not a directory or holds no run file.
    """
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ReportError(
            f"{directory}: {what}; pass the results directory that `fuseci run --results-dir DIR` writes run files into"
        )
    found: list[tuple[str, int, str, Path]] = []
    for path in directory.iterdir():
        m = run_files.NAME_PATTERN.match(path.name)
        if m is not None and path.is_file():
            found.append((m.group(1), int(m.group(2) or 1), path.name, path))
    if not found:
        raise ReportError(
            f"{directory}: holds no run file (<YYYYmmddTHHMMSSZ>-<gpu>.json); write some with "
            f"`fuseci run --results-dir {directory}`"
        )
    paths = [p for *_, p in sorted(found)]
    return paths[-last:] if last else paths


def history(
    directory: Path, suites: Sequence[str] = (), last: int | None = None, gates: Sequence[Suite] = ()
) -> judge_history.History:
    """Every gain of the runs in ``directory`` (only ``suites``, of the ``last`` runs), with the runs where it
    changed level; tolerances from ``gates`` alone (a run file is data: the suite path it records is never opened).

    Raises:
        ReportError: the directory is missing or holds no run file, or a run file is unreadable.
        UsageError: a suite of ``suites``, or every one of ``gates``, in no run; two of ``gates`` one suite's.
    """
    loaded = _gains(run_files_in(directory, last))
    measured = {sid for run in loaded for sid in run.suite_paths}
    unknown = sorted(set(suites) - measured)
    if unknown:
        raise UsageError(
            f"--suite {', '.join(unknown)}: no run in {directory} measured it; "
            f"the runs measured {', '.join(sorted(measured)) or 'no suite'}"
        )
    given: dict[str, Suite] = {}
    absent = [suite for suite in gates if suite.name not in measured]
    if absent and len(absent) == len(gates):
        raise UsageError(
            f"{absent[0].path}: suite {absent[0].name!r} is in no run in {directory}; the runs measured "
            f"{', '.join(sorted(measured)) or 'no suite'}: pass their suite files"
        )
    notes = [
        f"{suite.path}: suite {suite.name!r} is in no run in {directory}: left out (a suite added since, "
        "or one the runs skipped)"
        for suite in absent
    ]
    for suite in [s for s in gates if s.name in measured]:
        if suite.name in given:
            raise UsageError(
                f"{suite.path}: suite {suite.name!r} is also {given[suite.name].path}: pass one suite file per suite"
            )
        given[suite.name] = suite
    chosen = {sid: given.get(sid) for sid in (suites or sorted(measured))}
    return judge_history.build(loaded, chosen, [*notes, _gates_note(chosen, directory)])


def _gates_note(chosen: dict[str, Suite | None], directory: Path) -> str:
    """One line: where the tolerances came from, and which suites have none."""
    gated = [f"{sid} ({suite.path})" for sid, suite in chosen.items() if suite is not None]
    ungated = [sid for sid, suite in chosen.items() if suite is None]
    why = (
        "fuseci history opens no path a run file names: pass the suite files after the results directory "
        f"(fuseci history {directory} suites/*.yaml)"
    )
    if not gated:
        return f"no suite file given, so every gain is followed without its gate's tolerance; {why}"
    note = f"gates from the suite files given: {', '.join(gated)}"
    if ungated:
        note += f"; {', '.join(ungated)} followed without gates (no suite file given; {why})"
    return note


def _run_gains(path: Path) -> judge_history.RunGains:
    return judge_history.gains_of(run_files.load_run(path))


def _gains(paths: Sequence[Path]) -> list[judge_history.RunGains]:
    """Each run file reduced to its gains, in order; over forked workers when there are enough runs (a spawned
    one would import the caller's main module), only on Linux from a process with no other thread (fork-safe)."""
    workers = min(os.cpu_count() or 1, len(paths) // _RUNS_PER_WORKER)
    # Frozen, the imports' objects are left out of the collector's passes, and a forked worker's pages stay shared.
    gc.freeze()
    try:
        if workers < 2 or sys.platform != "linux" or threading.active_count() > 1:
            return [_run_gains(p) for p in paths]
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            # Small chunks: a worker left with the last big one would work alone for seconds.
            return list(pool.map(_run_gains, paths, chunksize=max(1, len(paths) // (workers * 128))))
    finally:
        gc.unfreeze()
