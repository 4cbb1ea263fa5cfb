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
from fuseci.config.parse import load_suite
from fuseci.errors import FuseciError, ReportError, UsageError
from fuseci.judge import history as judge_history
from fuseci.store import runs as run_files

log = logging.getLogger("fuseci.api")

#: Run files per worker process: fewer are read faster by one process than by starting workers
#: (a run file of every shipped suite takes about 20 ms to read).
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


def history(directory: Path, suites: Sequence[str] = (), last: int | None = None) -> judge_history.History:
    """Every gain of the runs in ``directory`` across them, with the runs where it changed level
    (:mod:`fuseci.judge.history`).

    The tolerances come from the suite files the newest run of each suite recorded, relative to
    the current directory; a suite file that cannot be read leaves its gains without tolerance
    (said in the history's notes).

    Args:
        directory: A results directory of ``fuseci run --results-dir``.
        suites: Only these suite ids (default: every suite of the runs).
        last: Only the newest ``last`` runs.

    Raises:
        ReportError: the directory is missing or holds no run file, or a run file is unreadable.
        UsageError: a suite of ``suites`` is in none of the runs.
    """
    loaded = _gains(run_files_in(directory, last))
    measured = {sid: run for run in loaded for sid in run.suite_paths}  # the newest run of each suite wins
    unknown = sorted(set(suites) - set(measured))
    if unknown:
        raise UsageError(
            f"--suite {', '.join(unknown)}: no run in {directory} measured it; "
            f"the runs measured {', '.join(sorted(measured)) or 'no suite'}"
        )
    gates: dict[str, Suite | None] = {}
    notes: list[str] = []
    for sid in suites or sorted(measured):
        path = Path(measured[sid].suite_paths[sid])
        try:
            gates[sid] = load_suite(path)
        except FuseciError as exc:
            log.info("suite %s: %s", sid, exc)
            notes.append(
                f"suite {sid}: {exc}; its gains are followed without their gates' tolerances "
                "(run fuseci history from the directory the runs were made in)"
            )
            gates[sid] = None
    return judge_history.build(loaded, gates, notes)


def _run_gains(path: Path) -> judge_history.RunGains:
    return judge_history.gains_of(run_files.load_run(path))


def _gains(paths: Sequence[Path]) -> list[judge_history.RunGains]:
    """Each run file read back and reduced to its gains (:func:`fuseci.judge.history.gains_of`),
    in order. Only the gains are kept, so memory does not grow with the run files' frames.

    Reading is most of a long history's time, so it is spread over the machine's cores when
    there are enough runs to pay for the workers. They are forked (they start at once and import
    nothing again; a spawned worker would import the caller's main module, which a script
    without a main guard cannot survive), so only from a process with no other thread, where
    forking is safe, and on Linux; elsewhere one process reads them all.

    Raises:
        ReportError: a run file is unreadable (the first such in order, as one process would say).
    """
    workers = min(os.cpu_count() or 1, len(paths) // _RUNS_PER_WORKER)
    # Reading a run file allocates thousands of objects, so the collector runs often, and each of
    # its full passes walked every object the imports made (pandas' among them): a third of the
    # time. Frozen, they are left out of its passes (and a forked worker's pages stay shared).
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
