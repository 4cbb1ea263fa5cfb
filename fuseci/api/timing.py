"""``fuseci bench``: time every variant outside ncu."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.measure import bench as bench_figures
from fuseci.measure.command import DEFAULT_REPEATS, Mode, SuiteFiles, harness_argv
from fuseci.measure.timed import run_timed


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """How ``fuseci bench`` times a suite outside ncu."""

    report_dir: Path = Path("fuseci-out")
    """Where the timed run writes ``<suite>.bench.json`` and ``<suite>.bench.log``."""
    repeats: int = DEFAULT_REPEATS
    """Timed calls per variant (after warm-up); the median is reported."""


def bench(suite: Suite, options: BenchOptions) -> bench_figures.BenchResult:
    """Time every variant with CUDA events outside ncu, and derive the figures (wrong and broken cases too).

    Raises:
        BenchError: the harness could not run, crashed, timed out or left no complete record.
    """
    files = SuiteFiles(options.report_dir, suite.name).harness(Mode.BENCH)
    argv = harness_argv(Mode.BENCH, files.record, suite.path, repeats=options.repeats)
    record = run_timed(argv, files, suite.ncu.timeout_s)
    return bench_figures.result_from_record(record, suite, files.record)


def bench_own_files(suites: Sequence[Suite], options: BenchOptions) -> list[tuple[Path, str]]:
    """Every file ``fuseci bench`` reads or writes for itself (see :func:`own_files`)."""
    found: list[tuple[Path, str]] = []
    for suite in suites:
        harness = SuiteFiles(options.report_dir, suite.name).harness(Mode.BENCH)
        found += [(suite.path, f"the suite file of {suite.name!r}"), (harness.record, "a bench record")]
        found.append((harness.log, "a bench log"))
    return found
