"""The programmatic API: profile a suite, judge it, update its baselines, time it. Plain functions.

Every CLI command is one call here, so everything the CLI does can be scripted (and tested)
without the argument parser.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from fuseci import baseline as bl
from fuseci import ncu, report
from fuseci.bench import DEFAULT_REPEATS, BenchFiles, BenchResult, build_command, result_from_record, run_harness
from fuseci.compare import Comparison, Verdict, compare
from fuseci.errors import BenchError, NcuError, ReportError, UsageError
from fuseci.metrics import SuiteResults, summarize
from fuseci.record import CaseStatus, HarnessRecord, read_record, record_path_for, write_record
from fuseci.suite import Suite

#: Timed calls per variant in the timed pass of ``fuseci run``.
TIMING_REPEATS = 30
#: Extra timed passes of a case whose CUDA-event speedup fell borderline outside its band.
RETIMES = 2

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to obtain and judge results."""

    baselines: Path = Path("baselines")
    """Root of the baseline tree (``<root>/<gpu-slug>/<suite>.json``)."""
    report_dir: Path = Path("fuseci-out")
    """Where profiled runs write their report, record and logs."""
    from_report: Path | None = None
    """Re-analyse this ``.ncu-rep``/``.ncu-rep.xz`` instead of profiling."""
    ncu: str | None = None
    """Explicit ncu executable."""
    accept_env: frozenset[str] = field(default_factory=frozenset)
    """Environment fields whose difference from the baseline is accepted."""


def profile(suite: Suite, options: RunOptions) -> tuple[Path | None, Path]:
    """Run the suite's harness under ncu.

    When the run dies part-way (a hang past ``ncu.timeout``, a crash) after the harness recorded
    some cases, the record keeps them and says why the run stopped (``interrupted``, and the
    case it was in): the comparison then shows every case's fate instead of one error.

    Returns:
        The report path (None when ncu wrote none) and the harness record path.

    Raises:
        NcuError: ncu is missing, refused the counters, or failed before the harness recorded
            anything; the message explains and names the logs.
    """
    exe = ncu.find_ncu(options.ncu)
    version = ncu.ncu_version(exe)
    files = ncu.ProfileFiles.in_dir(options.report_dir, suite.name)
    argv = ncu.build_command(exe, suite.name, suite.path, suite.ncu, files, python=sys.executable)
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
    s = suite.ncu
    profiler = {
        "ncu_version": version,
        "clock_control": s.clock_control,
        "cache_control": s.cache_control,
        "replay_mode": s.replay_mode,
        "logs": f"{files.app_log}, {files.ncu_log}",
        "timed": False,
    }
    if suite.timed and not record.interrupted:
        record = timed_pass(suite, options, record, [c for c, r in record.cases.items() if r.status == CaseStatus.OK])
        profiler["timed"] = True
    write_record(record.with_profiler(profiler), files.record)
    return (files.report if files.report.exists() else None), files.record


def timing_files(report_dir: Path, suite: str) -> BenchFiles:
    """Where the timed pass of ``fuseci run`` writes its record and log."""
    return BenchFiles(record=report_dir / f"{suite}.timing.json", log=report_dir / f"{suite}.timing.log")


def timed_pass(
    suite: Suite, options: RunOptions, record: HarnessRecord, cases: list[str], *, again: bool = False
) -> HarnessRecord:
    """Time ``cases`` with CUDA events in a fresh process without ncu, and put the timings into
    ``record``: as each case's timings, or with ``again`` as one more pass of a re-measured case.

    The timed process skips the correctness checks the profiled one made, and times each case's
    variants interleaved, over rotating input sets (:func:`fuseci.harness.time_case`).

    Raises:
        BenchError: the timed process failed, timed out, or left no complete record.
    """
    if not cases:
        return record
    files = timing_files(options.report_dir, suite.name)
    argv = [*build_command(suite.path, files, TIMING_REPEATS, python=sys.executable), "--no-checks"]
    for cid in cases:
        argv += ["--case", cid]
    log.info("%s: timing %d case(s) without ncu%s", suite.name, len(cases), " again" if again else "")
    timed = run_harness(argv, files, suite.ncu.timeout_s)
    updated = dict(record.cases)
    for cid in cases:
        got = timed.cases.get(cid)
        if got is None or got.status != CaseStatus.OK:
            raise BenchError(
                f"case {cid!r} passed its profiled run but failed its timed run: "
                f"{got.message if got else 'not recorded'}; see {files.log}"
            )
        case = updated[cid]
        updated[cid] = (
            replace(case, retimings=(*case.retimings, got.timings)) if again else replace(case, timings=got.timings)
        )
    return replace(record, cases=updated)


def results_for(suite: Suite, options: RunOptions) -> SuiteResults:
    """Profile (or read ``options.from_report``) and aggregate.

    Raises:
        FuseciError: profiling or reading failed, or the report belongs to another suite.
    """
    if options.from_report is not None:
        report_path: Path | None = options.from_report
        record_path = record_path_for(options.from_report)
    else:
        report_path, record_path = profile(suite, options)
    record = read_record(record_path)
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
    other = set(kernels["suite"]) - {suite.name}
    if other:
        raise ReportError(
            f"{report_path}: holds suite(s) {sorted(other)}, not {suite.name!r}; pass the report of this suite"
        )
    return summarize(kernels, record)


def _unreadable(exc: ReportError, record: HarnessRecord) -> ReportError:
    """The reader's error, with the versions of the ncu that wrote the report and of the reader."""
    writer = record.profiler.get("ncu_version")
    if not writer:
        return exc
    return ReportError(
        f"{exc}; it was written by ncu {writer} and the reader is ncu_report {report.reader_version()}: "
        "a reader older than the ncu that wrote a report may not read it (`pip install -U ncu-report`)"
    )


def _check_record(record: HarnessRecord, suite: Suite, path: Path) -> None:
    if record.suite != suite.name:
        raise ReportError(f"{path}: record of suite {record.suite!r}, not {suite.name!r}")
    if not record.profiler:
        raise ReportError(f"{path}: the record has no profiler section: it was not written by `fuseci run`")


def baseline_file(options: RunOptions, results: SuiteResults) -> Path:
    """Where this run's baseline lives."""
    return bl.baseline_path(options.baselines, str(results.env.get("gpu_name", "unknown")), results.suite)


def check(suite: Suite, options: RunOptions) -> Comparison:
    """Profile (or re-analyse) one suite and compare it with its baseline.

    Raises:
        FuseciError: anything that keeps the suite from being judged at all.
    """
    return check_results(suite, options)[0]


def check_results(suite: Suite, options: RunOptions) -> tuple[Comparison, SuiteResults]:
    """:func:`check`, and the results it judged (re-measured ones included), e.g. to keep them.

    A CUDA-event speedup that fell borderline outside its band (:attr:`MetricDelta.retry`)
    is re-measured (:func:`remeasure`) and the suite judged again on all passes; a re-analysed
    report cannot be re-measured, so its first verdict stands.

    Raises:
        FuseciError: anything that keeps the suite from being judged at all.
    """
    results = results_for(suite, options)
    path = baseline_file(options, results)
    baseline = bl.load_baseline(path)
    comparison = compare(results, suite, baseline, baseline_path=str(path), accept_env=options.accept_env)
    retry = sorted({k.case for case in comparison.cases for k in case.checks if k.retry})
    if not retry or options.from_report is not None:
        return comparison, results
    results = remeasure(suite, options, results, retry)
    return compare(results, suite, baseline, baseline_path=str(path), accept_env=options.accept_env), results


def remeasure(suite: Suite, options: RunOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
    """Time ``cases`` :data:`RETIMES` more times, each pass in a fresh process, and rewrite the
    run's record with the extra passes; the comparison then uses the median of all passes.

    Raises:
        BenchError: a timed pass failed.
    """
    log.warning("%s: re-measuring borderline speedup(s) of %s", suite.name, ", ".join(cases))
    record = results.record
    for _ in range(RETIMES):
        record = timed_pass(suite, options, record, cases, again=True)
    write_record(record, ncu.ProfileFiles.in_dir(options.report_dir, suite.name).record)
    return summarize(results.kernels, record)


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


def _case_changes(old: bl.Baseline | None, new: bl.Baseline, comparison: Comparison) -> list[str]:
    lines: list[str] = []
    by_case = {c.case: c for c in comparison.cases}
    for cid in sorted(set(new.cases) | set(old.cases if old else ())):
        if old is None or cid not in old.cases:
            lines.append(f"+ {cid}: new")
        elif cid not in new.cases:
            lines.append(f"- {cid}: removed (no longer in the suite)")
        elif old.cases[cid] != new.cases[cid]:
            moved = [
                c.message
                for c in by_case[cid].checks
                if c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.NEW, Verdict.INCOMPARABLE)
                and c.check == "gain"
            ]
            lines.append(f"~ {cid}: " + ("; ".join(moved) if moved else "re-recorded"))
    return lines


def update_baselines(
    suite: Suite, options: RunOptions, *, force: bool = False, lock_timeout_s: float = bl.LOCK_TIMEOUT_S
) -> BaselineUpdate:
    """Re-record one suite's baseline, changing only cases whose checks did not pass.

    A case whose every check passes keeps its old values byte for byte, so a re-record after no
    real change produces no diff; ``force`` re-records every measured case. Wrong or broken cases
    are never recorded: their old values stay. A changed environment re-records everything.

    Profiling runs unlocked; reading the old baseline, comparing and writing the new one hold the
    file's update lock (:func:`fuseci.baseline.locked`), so a concurrent update of the same suite
    and GPU waits up to ``lock_timeout_s`` and then builds on this one's result. Nothing but
    ``<gpu-slug>/<suite>.json`` and its lock file is written; when anything fails, the old file
    stays byte for byte and no temporary file remains. A baseline file that is a symbolic link is
    read through the link, but an update that would change it is refused, not written through.

    Raises:
        FuseciError: the suite could not be profiled or the old baseline is corrupt.
        BaselineError: the lock was held by another update for ``lock_timeout_s``, the baseline
            directory is not writable, the disk is full, or the file is a symbolic link.
    """
    results = results_for(suite, options)
    path = baseline_file(options, results)
    with bl.locked(path, lock_timeout_s):
        return _rerecord(suite, results, path, force)


def _rerecord(suite: Suite, results: SuiteResults, path: Path, force: bool) -> BaselineUpdate:
    """The read-compare-write of :func:`update_baselines`; the caller holds the lock."""
    old = bl.load_baseline(path)
    comparison = compare(results, suite, old, baseline_path=str(path), accept_env=frozenset())
    env_changed = old is not None and not comparison.comparable
    good = {c.case for c in comparison.cases if c.verdict not in (Verdict.WRONG, Verdict.ERROR, Verdict.MISSING)}
    kept = tuple(sorted({c.id for c in suite.cases} - good))
    # Only cases the harness ran ok are in it: a planted wrong result passes (it was caught) but
    # has nothing measured to record.
    fresh = bl.normalized(bl.from_results(results, good))
    cases: dict[str, dict[str, bl.VariantBaseline]] = {}
    for case in suite.cases:
        cid = case.id
        result = next(c for c in comparison.cases if c.case == cid)
        unchanged = old is not None and cid in old.cases and result.verdict is Verdict.PASS
        if cid in fresh.cases and (force or env_changed or not unchanged):
            cases[cid] = dict(fresh.cases[cid])
        elif old is not None and cid in old.cases:
            cases[cid] = dict(old.cases[cid])
    env = fresh.env if (old is None or env_changed or force) else old.env
    new = bl.normalized(bl.Baseline(suite=suite.name, env=env, cases=cases))
    changes = _case_changes(old, new, comparison)
    if env_changed and old is not None:
        changes.insert(
            0,
            "environment: "
            + ", ".join(f"{d.field} {d.baseline!r} -> {d.current!r}" for d in comparison.env_differences),
        )
    written = old is None or bl.dumps(old) != bl.dumps(new)
    if written:
        bl.save_baseline(new, path)
    return BaselineUpdate(path=path, written=written, changes=tuple(changes), kept=kept, comparison=comparison)


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """How ``fuseci bench`` times a suite outside ncu."""

    report_dir: Path = Path("fuseci-out")
    """Where the timed run writes ``<suite>.bench.json`` and ``<suite>.bench.log``."""
    repeats: int = DEFAULT_REPEATS
    """Timed calls per variant (after warm-up); the median is reported."""


def bench(suite: Suite, options: BenchOptions) -> BenchResult:
    """Time every variant of a suite with CUDA events, without ncu, and derive the figures.

    The harness runs as a subprocess under the suite's ``ncu.timeout``. Wrong and broken cases
    are in the result, not raised.

    Raises:
        BenchError: the harness could not run, crashed, timed out or left no complete record.
    """
    files = BenchFiles.in_dir(options.report_dir, suite.name)
    argv = build_command(suite.path, files, options.repeats, python=sys.executable)
    record = run_harness(argv, files, suite.ncu.timeout_s)
    return result_from_record(record, suite, files.record)


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → (2, 4).

    Raises:
        UsageError: not ``K/N`` with 1 <= K <= N.
    """
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text!r}: write K/N, e.g. 2/4 (shard K of N, counting from 1)") from None
    if not 1 <= k <= n:
        raise UsageError(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def shard(suites: list[Suite], k: int, n: int) -> list[Suite]:
    """The suites that shard ``k`` of ``n`` runs: whole suites (one ncu process each), dealt out
    by weight so that shards get similar numbers of cases.

    Deterministic: every shard computes the same assignment from the same suite files, sorted
    by name, the largest suite first to the lightest shard (ties to the lowest shard number).
    """
    loads = [0] * n
    owner: dict[str, int] = {}
    for suite in sorted(suites, key=lambda s: (-len(s.cases), s.name)):
        lightest = min(range(n), key=lambda i: (loads[i], i))
        owner[suite.name] = lightest
        loads[lightest] += len(suite.cases)
    return [s for s in suites if owner[s.name] == k - 1]


def merge(comparisons: list[Comparison]) -> list[Comparison]:
    """Comparisons of several runs as one list; a suite met more than once (one per GPU model)
    is renamed ``suite@gpu-slug`` so that reports keep them apart."""
    counts: dict[str, int] = {}
    for c in comparisons:
        counts[c.suite] = counts.get(c.suite, 0) + 1
    return [
        replace(c, suite=f"{c.suite}@{bl.gpu_slug(str(c.env.get('gpu_name', 'unknown')))}")
        if counts[c.suite] > 1
        else c
        for c in comparisons
    ]
