"""Measuring one suite: the profiled run under ncu, the timed pass outside it, one more timed
pass of a borderline speedup (:func:`retime`), and the frames built from what they left. The
complete record is written once, beside the report, for the user and for ``--from-report``."""

from __future__ import annotations

import importlib
import logging
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fuseci.config.model import Suite
from fuseci.errors import BenchError, MismatchError, NcuError, ReportError
from fuseci.measure import autotune, caches, process
from fuseci.measure import profile as ncu
from fuseci.measure.command import HarnessFiles, Mode, SuiteFiles, harness_argv
from fuseci.measure.timed import finish_timed, run_timed, start_timed
from fuseci.measure.turn import AheadWatch, ahead_limit_s, waiting_file
from fuseci.records.fusion import KernelRow, Repeats
from fuseci.records.harness import HarnessRecord, ProfilerInfo, read_record, record_path_for, write_record

if TYPE_CHECKING:  # pandas and the report reader load once a run has started (see warm_imports)
    from fuseci.frames.metrics import SuiteResults

#: Extra timed passes of a case whose CUDA-event speedup fell borderline outside its band
#: (:meth:`fuseci.api.session.Session.judge`).
RETIMES = 2
#: Profiled passes of each variant when the measurement becomes a baseline (``update-baselines``),
#: and when it is ``fuseci ab``'s reference (its base): the passes tell which counters repeat
#: (:mod:`fuseci.judge.counters`); ``fuseci run`` profiles each variant once.
BASELINE_PASSES = 3
REFERENCE_PASSES = 2

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
    device: str | None = None
    """The GPU to use, as ``CUDA_VISIBLE_DEVICES`` names it; None: as this process sees them."""
    gpu_lock: Path | None = None
    """A lock file every harness process holds while it uses the GPU (:mod:`fuseci.measure.turn`); None: none."""
    on_stage: Callable[[str, Path | None], None] | None = None
    """Hears each stage as it starts, and the harness record naming the case in hand (progress displays)."""
    cwd: Path | None = None
    """Where the harness processes run, importing its modules first; None: here (``fuseci ab``: each side's tree)."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """What the harness processes' environment adds last (``fuseci ab``: keeps off the other side's modules)."""
    cache_root: Path | None = None
    """Where :attr:`compile_cache` lives; None: in :attr:`report_dir`."""
    cases: tuple[str, ...] | None = None
    """The cases the profiled run runs (``--case``), in suite order; None: every case."""
    passes: int = 1
    """Profiled passes of each variant (:data:`BASELINE_PASSES`), to learn which counters repeat."""

    def say(self, stage: str, watch: Path | None = None) -> None:
        """Tell :attr:`on_stage`, if anyone listens."""
        if self.on_stage is not None:
            self.on_stage(stage, watch)

    @property
    def compile_cache(self) -> Path:
        """Where the harness processes keep compiler caches and bytecode (:mod:`fuseci.measure.caches`)."""
        return caches.compile_cache(self.report_dir if self.cache_root is None else self.cache_root)

    @property
    def env(self) -> dict[str, str]:
        """What the harness processes' environment adds."""
        extra = {} if self.device is None else {"CUDA_VISIBLE_DEVICES": self.device}
        return {**extra, **caches.harness_env(self.compile_cache), **self.extra_env}


def _profiled(suite: Suite, options: MeasureOptions, files: SuiteFiles) -> tuple[HarnessRecord, str]:
    """Run the harness under ncu; the record it left, and ncu's version (else NcuError)."""
    exe = ncu.find_ncu(options.ncu)
    version = ncu.ncu_version(exe)
    try:
        with ncu.no_sections() as sections:
            argv = ncu.build_command(
                exe,
                suite.path,
                suite.ncu,
                files,
                gpu_lock=options.gpu_lock,
                cases=options.cases or (),
                sections=sections,
                passes=options.passes,
            )
            run = ncu.run_ncu(argv, files, suite.ncu.timeout_s, cwd=options.cwd, env=options.env, started=warm_imports)
        outcome, why = run.outcome, run.message(files)
    except subprocess.TimeoutExpired:
        outcome = ncu.ProfileOutcome.APP_FAILED
        why = (
            f"the profiled run did not finish within {suite.ncu.timeout_s:g} s (suite key ncu.timeout) and was "
            f"stopped; ncu log {files.ncu_log}, harness log {files.app_log}"
        )
    if outcome not in (ncu.ProfileOutcome.REPORT, ncu.ProfileOutcome.NOTHING_PROFILED, ncu.ProfileOutcome.APP_FAILED):
        raise NcuError(
            why, machine_wide=outcome in (ncu.ProfileOutcome.NO_PERMISSION, ncu.ProfileOutcome.COUNTERS_BUSY)
        )
    try:
        record = read_record(files.record)
    except ReportError as exc:
        if outcome is ncu.ProfileOutcome.APP_FAILED:
            raise NcuError(why) from None
        raise NcuError(f"the harness left no usable record ({exc}); see {files.app_log}") from None
    if outcome is ncu.ProfileOutcome.APP_FAILED:
        if not record.cases and record.running is None:
            raise NcuError(why)
        if not record.complete:
            record = replace(record, interrupted=why.partition("; last lines: ")[0])
        log.warning("%s: %s", suite.name, why)
    return record, version


def profile(suite: Suite, options: MeasureOptions) -> tuple[HarnessRecord, Path | None]:
    """Profile the suite under ncu, and time it outside ncu when a case gates the speedup.

    The timed process starts with the profiled one and times the right cases (``--after``; ahead
    where it may: :mod:`fuseci.measure.turn`). A run that dies part-way keeps its cases, says why
    (``interrupted``) and times nothing. The complete record is written beside the report.

    Returns:
        The record, and the report path (None when ncu wrote none).

    Raises:
        NcuError: profiling failed before anything was recorded.
        BenchError: the timed pass failed.
    """
    files = SuiteFiles(options.report_dir, suite.name)
    ncu.remove_stale(files)  # before the timed process looks for this run's record
    options.say("profiling under ncu", files.record)
    timed_files = files.harness(Mode.TIME)
    timer = None
    watch = None
    if suite.timed:
        argv = harness_argv(
            Mode.TIME,
            timed_files.record,
            suite.path,
            cases=options.cases or (),
            after=files.record,
            gpu_lock=options.gpu_lock,
        )
        timer = start_timed(argv, timed_files, options.env, options.cwd)
        if options.gpu_lock is not None:
            watch = AheadWatch(timer, timed_files.record, waiting_file(files.record), ahead_limit_s(suite))
    try:
        record, version = _profiled(suite, options, files)
    except BaseException:
        if timer is not None:
            process.stop(timer)
        raise
    finally:
        if watch is not None:
            watch.close()
    s = suite.ncu
    info = ProfilerInfo(
        ncu_version=version,
        clock_control=s.clock_control,
        cache_control=s.cache_control,
        replay_mode=s.replay_mode,
        logs=f"{files.app_log}, {files.ncu_log}",
    )
    record = replace(record, profiler=info)
    if timer is not None and not record.interrupted and record.ok_cases():
        options.say("timing outside ncu", timed_files.record)
        if watch is not None and watch.stopped:  # it held the GPU too long ahead of the profiled run
            timed = _fresh_timed(suite, options, record.ok_cases())
        else:
            timed = finish_timed(timer, timed_files, s.timeout_s)
        record = _with_timings(record, timed, record.ok_cases(), timed_files, again=False)
        pinned = autotune.pinned_note(record.pinned, timed.pinned)
        record = replace(record, profiler=replace(info, timed=True), copy_bandwidth=timed.copy_bandwidth, pinned=pinned)
    elif timer is not None:
        process.stop(timer)
    write_record(record, files.record)
    return record, (files.report if files.report.exists() else None)


def _with_timings(
    record: HarnessRecord, timed: HarnessRecord, cases: list[str], files: HarnessFiles, *, again: bool
) -> HarnessRecord:
    """``record`` with ``timed``'s timings for ``cases`` (with ``again``: as one more pass), else BenchError."""
    updated = {}
    for cid in cases:
        got = timed.cases.get(cid)
        if got is None or not got.ok:
            raise BenchError(
                f"case {cid!r} passed its profiled run but failed its timed run: "
                f"{got.message if got else 'not recorded'}; see {files.log}"
            )
        case = record.cases[cid]
        if again:
            updated[cid] = replace(case, retimings=(*case.retimings, got.timings))
        else:  # a case timed ahead of its profiled run paid its cold start there (the larger first call)
            first = {v: max(ns, got.first_call_ns.get(v, 0.0)) for v, ns in case.first_call_ns.items()}
            autotuned = {**got.autotuned, **case.autotuned}
            updated[cid] = replace(case, timings=got.timings, first_call_ns=first, autotuned=autotuned)
    return record.with_cases(updated)


def timed_pass(
    suite: Suite, options: MeasureOptions, record: HarnessRecord, cases: list[str], *, again: bool = False
) -> HarnessRecord:
    """Time ``cases`` in a fresh process without ncu, into ``record`` (with ``again``: as one more pass).

    Raises:
        BenchError: the timed process failed, timed out, or left no complete record.
    """
    if not cases:
        return record
    log.info("%s: timing %d case(s) without ncu%s", suite.name, len(cases), " again" if again else "")
    timed = _fresh_timed(suite, options, cases)
    return _with_timings(
        record, timed, cases, SuiteFiles(options.report_dir, suite.name).harness(Mode.TIME), again=again
    )


def _fresh_timed(suite: Suite, options: MeasureOptions, cases: list[str]) -> HarnessRecord:
    """The record of a fresh timed process that times ``cases`` (BenchError when it failed)."""
    files = SuiteFiles(options.report_dir, suite.name).harness(Mode.TIME)
    argv = harness_argv(Mode.TIME, files.record, suite.path, cases=cases, gpu_lock=options.gpu_lock)
    return run_timed(argv, files, suite.ncu.timeout_s, options.env, options.cwd)


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
    from fuseci.frames import report

    writer = record.profiler.ncu_version if record.profiler else ""
    if not writer or not exc.by_reader:
        return exc
    return ReportError(
        f"{exc}; it was written by ncu {writer} and the reader is ncu_report {report.reader_version()}: "
        "a reader older than the ncu that wrote a report may not read it (`pip install -U ncu-report`)"
    )


def measure(suite: Suite, options: MeasureOptions) -> SuiteResults:
    """Profile (or read ``options.from_report`` and its record) and aggregate.

    Raises:
        MismatchError: the report and its record are not one run's (:func:`fuseci.frames.report.mismatch`).
        FuseciError: profiling or reading failed, or the record belongs to another suite.
    """
    if options.from_report is not None:
        report_path: Path | None = options.from_report
        if not options.from_report.exists():  # before its record, which would be missing too
            raise ReportError(
                f"{options.from_report}: report not found; pass the .ncu-rep (or .ncu-rep.xz) that `fuseci run` "
                f"wrote, with the .harness.json beside it (by default in fuseci-out/{suite.name}.ncu-rep)"
            )
        record_path = record_path_for(options.from_report)
        record = read_record(record_path)
    else:
        record, report_path = profile(suite, options)
        record_path = SuiteFiles(options.report_dir, suite.name).record
    _check_record(record, suite, record_path)
    from fuseci.frames import report  # pandas: once the profiled run is over (see warm_imports)
    from fuseci.frames.metrics import summarize

    options.say("reading the report")
    ledger_rows: dict[tuple[str, str], list[KernelRow]] = {
        (c.id, v.id): [] for c in suite.cases for v in c.variants if v.ledger is not None
    }
    # the launches ncu left out as repeats (a ledger's ``repeats: once``), by (case, variant)
    left_out: dict[tuple[str, str], dict[int, Repeats]] = {
        (case_id, variant): p.left_out()
        for case_id, rec in record.cases.items()
        for variant, p in rec.provenance.items()
        if p.repeats
    }
    if report_path is None:
        if any(c.measured for c in record.cases.values()) and not record.interrupted:
            raise NcuError(
                f"ncu profiled no kernels although the harness ran variants in their NVTX ranges; see {record_path.parent}"
            )
        kernels = report.read_report_empty()
    else:
        try:
            kernels = report.read_report(report_path, ledger_rows, left_out, ncu=ncu.find_ncu_or_none())
        except ReportError as exc:
            if record.interrupted:  # a stopped run may leave half a report: nothing in it counts
                log.warning("%s: %s; its cases count as not measured", suite.name, exc)
                kernels = report.read_report_empty()
            else:
                raise _unreadable(exc, record) from None
    problem = report.mismatch(kernels, record)
    if problem:
        raise MismatchError(
            f"{report_path} and {record_path} are not one run's: {problem}; judge a report only with the "
            ".harness.json that `fuseci run` wrote beside it (copy the two together), or profile the suite again"
        )
    results = summarize(kernels, record)
    if not ledger_rows:
        return results
    return replace(results, ledger_rows={k: tuple(rows) for k, rows in ledger_rows.items()})


def retime(suite: Suite, options: MeasureOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
    """One more timed pass of ``cases`` (the judge takes the median of all), rewriting the run's record;
    :meth:`fuseci.api.session.Session.judge` decides how many and in what order.

    Raises:
        BenchError: the timed pass failed.
    """
    from fuseci.frames.metrics import summarize

    record = timed_pass(suite, options, results.record, cases, again=True)
    write_record(record, SuiteFiles(options.report_dir, suite.name).record)
    return summarize(results.kernels, record)


#: What judging a suite imports (pandas, NVIDIA's report reader, the frames and the judge), which
#: :func:`warm_imports` loads while the harness processes start.
JUDGING_MODULES = ("fuseci.frames.metrics", "fuseci.frames.report", "fuseci.judge.compare")

_warming: list[threading.Thread] = []
_warming_lock = threading.Lock()


def warm_imports() -> threading.Thread:
    """Import :data:`JUDGING_MODULES` in a thread, once per process, once the first profiled run is on its way
    (earlier, they would hold the interpreter during the spawn); a failing import is left to its user."""

    def load() -> None:
        for name in JUDGING_MODULES:
            try:
                importlib.import_module(name)
            except Exception as exc:  # reported by whoever needs it, where it is needed
                log.debug("warming %s failed: %s", name, exc)
        try:
            from fuseci.frames import report

            report.load_reader(ncu.find_ncu_or_none())
        except Exception as exc:
            log.debug("warming the report reader failed: %s", exc)

    with _warming_lock:
        if not _warming:
            thread = threading.Thread(target=load, name="fuseci-warm-imports", daemon=True)
            thread.start()
            _warming.append(thread)
        return _warming[0]
