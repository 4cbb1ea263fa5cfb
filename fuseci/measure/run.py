"""Measuring one suite for ``fuseci run``: the profiled run under ncu, the timed pass outside it,
re-measurement of borderline speedups, and the frames built from what they left.

The harness record comes back from each harness process once, as a typed value, and travels in
memory from here on; the complete record (profiler facts and timings included) is written once
beside the report for the user and for ``--from-report``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.errors import BenchError, MismatchError, NcuError, ReportError
from fuseci.frames import pairing, report
from fuseci.frames.metrics import SuiteResults, summarize
from fuseci.measure import profile as ncu
from fuseci.measure.command import Mode, SuiteFiles, harness_argv
from fuseci.measure.record import HarnessRecord, ProfilerInfo, read_record, record_path_for, write_record
from fuseci.measure.timed import run_timed

#: Extra timed passes of a case whose CUDA-event speedup fell borderline outside its band.
RETIMES = 2

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MeasureOptions:
    """Where and how to measure, or what to re-analyse instead."""

    report_dir: Path = Path("fuseci-out")
    """Where profiled runs write their report, record and logs."""
    from_report: Path | None = None
    """Re-analyse this ``.ncu-rep``/``.ncu-rep.xz`` (its record beside it) instead of profiling."""
    ncu: str | None = None
    """Explicit ncu executable."""


def _profiled(suite: Suite, options: MeasureOptions, files: SuiteFiles) -> tuple[HarnessRecord, str]:
    """Run the harness under ncu; the record it left, and ncu's version.

    Raises:
        NcuError: ncu is missing, refused the counters, or failed before the harness recorded
            anything; the message explains and names the logs.
    """
    exe = ncu.find_ncu(options.ncu)
    version = ncu.ncu_version(exe)
    argv = ncu.build_command(exe, suite.path, suite.ncu, files, python=sys.executable)
    try:
        run = ncu.run_ncu(argv, files, suite.ncu.timeout_s)
        outcome, why = run.outcome, run.message(files)
    except subprocess.TimeoutExpired:
        outcome = ncu.Outcome.APP_FAILED
        why = (
            f"the profiled run did not finish within {suite.ncu.timeout_s:g} s (suite key ncu.timeout) and was "
            f"stopped; ncu log {files.ncu_log}, harness log {files.app_log}"
        )
    if outcome not in (ncu.Outcome.REPORT, ncu.Outcome.NOTHING_PROFILED, ncu.Outcome.APP_FAILED):
        raise NcuError(why)
    try:
        record = read_record(files.record)
    except ReportError as exc:
        if outcome is ncu.Outcome.APP_FAILED:
            raise NcuError(why) from None
        raise NcuError(f"the harness left no usable record ({exc}); see {files.app_log}") from None
    if outcome is ncu.Outcome.APP_FAILED:
        if not record.cases and record.running is None:
            raise NcuError(why)
        if not record.complete:
            record = replace(record, interrupted=why.splitlines()[0])
        log.warning("%s: %s", suite.name, why)
    return record, version


def profile(suite: Suite, options: MeasureOptions) -> tuple[HarnessRecord, Path | None]:
    """Profile the suite under ncu, then time it outside ncu when a case gates the speedup.

    When the profiled run dies part-way (a hang past ``ncu.timeout``, a crash) after the harness
    recorded some cases, the record keeps them and says why the run stopped (``interrupted``,
    and the case it was in): the comparison then shows every case's fate instead of one error.
    The complete record is written beside the report.

    Returns:
        The record, and the report path (None when ncu wrote none).

    Raises:
        NcuError: profiling failed before anything was recorded.
        BenchError: the timed pass failed.
    """
    files = SuiteFiles(options.report_dir, suite.name)
    record, version = _profiled(suite, options, files)
    s = suite.ncu
    info = ProfilerInfo(
        ncu_version=version,
        clock_control=s.clock_control,
        cache_control=s.cache_control,
        replay_mode=s.replay_mode,
        logs=f"{files.app_log}, {files.ncu_log}",
    )
    record = replace(record, profiler=info)
    if suite.timed and not record.interrupted:
        record = timed_pass(suite, options, record, record.ok_cases())
        record = replace(record, profiler=replace(info, timed=True))
    write_record(record, files.record)
    return record, (files.report if files.report.exists() else None)


def timed_pass(
    suite: Suite, options: MeasureOptions, record: HarnessRecord, cases: list[str], *, again: bool = False
) -> HarnessRecord:
    """Time ``cases`` with CUDA events in a fresh process without ncu, and put the timings into
    ``record``: as each case's timings, or with ``again`` as one more pass of a re-measured case.

    The timed process skips the correctness checks the profiled one made, and times each case's
    variants interleaved, over rotating input sets (:func:`fuseci.harness.timing.time_case`).

    Raises:
        BenchError: the timed process failed, timed out, or left no complete record.
    """
    if not cases:
        return record
    files = SuiteFiles(options.report_dir, suite.name).harness(Mode.TIME)
    argv = harness_argv(Mode.TIME, files.record, suite.path, cases=cases)
    log.info("%s: timing %d case(s) without ncu%s", suite.name, len(cases), " again" if again else "")
    timed = run_timed(argv, files, suite.ncu.timeout_s)
    updated = {}
    for cid in cases:
        got = timed.cases.get(cid)
        if got is None or not got.ok:
            raise BenchError(
                f"case {cid!r} passed its profiled run but failed its timed run: "
                f"{got.message if got else 'not recorded'}; see {files.log}"
            )
        case = record.cases[cid]
        updated[cid] = (
            replace(case, retimings=(*case.retimings, got.timings)) if again else replace(case, timings=got.timings)
        )
    return record.with_cases(updated)


def _check_record(record: HarnessRecord, suite: Suite, path: Path) -> None:
    if record.suite != suite.name:
        raise MismatchError(
            f"{path}: record of suite {record.suite!r}, not {suite.name!r} ({suite.path}); pass the report of this "
            "suite, or the suite file of this report"
        )
    if record.profiler is None:
        raise ReportError(f"{path}: the record has no profiler section: it was not written by `fuseci run`")


def _unreadable(exc: ReportError, record: HarnessRecord) -> ReportError:
    """The reader's error, with the versions of the ncu that wrote the report and of the reader."""
    writer = record.profiler.ncu_version if record.profiler else ""
    if not writer:
        return exc
    return ReportError(
        f"{exc}; it was written by ncu {writer} and the reader is ncu_report {report.reader_version()}: "
        "a reader older than the ncu that wrote a report may not read it (`pip install -U ncu-report`)"
    )


def measure(suite: Suite, options: MeasureOptions) -> SuiteResults:
    """Profile (or read ``options.from_report`` and its record) and aggregate.

    Raises:
        MismatchError: the report and its record are not one run's (:func:`fuseci.frames.pairing.mismatch`).
        FuseciError: profiling or reading failed, or the record belongs to another suite.
    """
    if options.from_report is not None:
        report_path: Path | None = options.from_report
        record_path = record_path_for(options.from_report)
        record = read_record(record_path)
    else:
        record, report_path = profile(suite, options)
        record_path = SuiteFiles(options.report_dir, suite.name).record
    _check_record(record, suite, record_path)
    if report_path is None:
        if any(c.measured for c in record.cases.values()) and not record.interrupted:
            raise NcuError(
                f"ncu profiled no kernels although the harness ran variants in their NVTX ranges; see {record_path.parent}"
            )
        kernels = report.read_report_empty()
    else:
        try:
            kernels = report.read_report(report_path)
        except ReportError as exc:
            if record.interrupted:  # a stopped run may leave half a report: nothing in it counts
                log.warning("%s: %s; its cases count as not measured", suite.name, exc)
                kernels = report.read_report_empty()
            else:
                raise _unreadable(exc, record) from None
    problem = pairing.mismatch(kernels, record)
    if problem:
        raise MismatchError(
            f"{report_path} and {record_path} are not one run's: {problem}; judge a report only with the "
            ".harness.json that `fuseci run` wrote beside it (copy the two together), or profile the suite again"
        )
    return summarize(kernels, record)


def remeasure(suite: Suite, options: MeasureOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
    """Time ``cases`` :data:`RETIMES` more times, each pass in a fresh process, and rewrite the
    run's record with the extra passes; the comparison then uses the median of all passes.

    Raises:
        BenchError: a timed pass failed.
    """
    log.warning("%s: re-measuring borderline speedup(s) of %s", suite.name, ", ".join(cases))
    record = results.record
    for _ in range(RETIMES):
        record = timed_pass(suite, options, record, cases, again=True)
    write_record(record, SuiteFiles(options.report_dir, suite.name).record)
    return summarize(results.kernels, record)
