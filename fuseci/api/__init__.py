"""The programmatic API: every ``fuseci`` command is one call here. A suite that cannot be
measured becomes an ``ERROR`` comparison; only what keeps the whole command from running raises."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuseci.api.baseline_updates import BaselineUpdate, update_baselines
    from fuseci.api.running import (
        RunOptions,
        RunOutcome,
        baseline_file,
        check,
        check_results,
        keep_run,
        own_files,
        run,
    )
    from fuseci.api.session import Progress, Silent
    from fuseci.api.sharding import MAX_SHARDS, merge, merge_results, parse_shard, shard
    from fuseci.api.suites import check_suites, load_suites, parse_accept_env, runnable, suite_files
    from fuseci.api.timing import BenchOptions, bench, bench_own_files
    from fuseci.api.trends import history, run_files_in
    from fuseci.judge.between_runs import compare_runs, recorded_suites

#: The API's names by their module, imported when one of its names is first used.
_MODULES: dict[str, tuple[str, ...]] = {
    "fuseci.api.baseline_updates": ("BaselineUpdate", "update_baselines"),
    "fuseci.api.running": (
        *("RunOptions", "RunOutcome", "baseline_file", "check", "check_results", "keep_run", "own_files", "run"),
    ),
    "fuseci.api.session": ("Progress", "Silent"),
    "fuseci.api.sharding": ("MAX_SHARDS", "merge", "merge_results", "parse_shard", "shard"),
    "fuseci.api.suites": ("check_suites", "load_suites", "parse_accept_env", "runnable", "suite_files"),
    "fuseci.api.timing": ("BenchOptions", "bench", "bench_own_files"),
    "fuseci.api.trends": ("history", "run_files_in"),
    "fuseci.judge.between_runs": ("compare_runs", "recorded_suites"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


__all__ = [
    "MAX_SHARDS",
    "BaselineUpdate",
    "BenchOptions",
    "Progress",
    "RunOptions",
    "RunOutcome",
    "Silent",
    "baseline_file",
    "bench",
    "bench_own_files",
    "check",
    "check_results",
    "check_suites",
    "compare_runs",
    "history",
    "keep_run",
    "load_suites",
    "merge",
    "merge_results",
    "own_files",
    "parse_accept_env",
    "parse_shard",
    "recorded_suites",
    "run",
    "run_files_in",
    "runnable",
    "shard",
    "suite_files",
    "update_baselines",
]
