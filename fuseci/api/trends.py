"""``fuseci history``: every gain across the run files of a results directory."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.config.parse import load_suite
from fuseci.errors import FuseciError, ReportError, UsageError
from fuseci.judge import history as judge_history
from fuseci.store import runs as run_files

log = logging.getLogger("fuseci.api")


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
    loaded = [run_files.load_run(p) for p in run_files_in(directory, last)]
    measured = {sid: run for run in loaded for sid in run.suites}  # the newest run of each suite wins
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
