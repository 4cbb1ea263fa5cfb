"""The programmatic API: every ``fuseci`` command is one call here. Plain functions.

Everything the CLI does can be scripted (and tested) without the argument parser: load suites,
measure and judge them (:func:`run`), re-record baselines (:func:`update_baselines`), judge one
run against another (:func:`compare_runs`), merge results (:func:`merge`), time suites
(:func:`bench`), follow gains across runs (:func:`history`). A suite that cannot be measured becomes an ``ERROR`` comparison; only what
keeps the whole command from running raises.
"""

from __future__ import annotations

import heapq
import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from fuseci.config.check import SuiteCheck, check_files
from fuseci.config.model import Suite
from fuseci.config.names import ENV_FIELDS, gpu_slug
from fuseci.config.parse import load_suite
from fuseci.errors import (
    EXIT_REGRESSION,
    BaselineError,
    FuseciError,
    MismatchError,
    NcuError,
    ReportError,
    SuiteError,
    UsageError,
)
from fuseci.frames.metrics import SuiteResults
from fuseci.judge import history as judge_history
from fuseci.judge import update
from fuseci.judge.compare import compare
from fuseci.judge.runs import compare_runs, recorded_suites
from fuseci.judge.verdict import Comparison, failed, update_exit_code
from fuseci.measure import bench as bench_figures
from fuseci.measure import devices, process
from fuseci.measure import profile as profiler
from fuseci.measure.command import DEFAULT_REPEATS, Mode, SuiteFiles, harness_argv
from fuseci.measure.record import record_path_for
from fuseci.measure.run import MeasureOptions, measure, remeasure
from fuseci.measure.timed import run_timed
from fuseci.store import baselines as bl
from fuseci.store import runs as run_files
from fuseci.store.atomic import same_file
from fuseci.store.results import read_results

__all__ = [
    "MAX_SHARDS",
    "BaselineUpdate",
    "BenchOptions",
    "RunOptions",
    "bench",
    "bench_own_files",
    "check",
    "check_results",
    "compare_runs",
    "history",
    "load_suites",
    "merge",
    "merge_results",
    "own_files",
    "parse_accept_env",
    "parse_shard",
    "recorded_suites",
    "run",
    "shard",
    "update_baselines",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to obtain results and what to judge them against."""

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
    gpus: tuple[str | None, ...] = (None,)
    """The GPUs to deal the suites out over (``CUDA_VISIBLE_DEVICES`` entries); ``(None,)``: the
    one GPU this process sees (see :func:`fuseci.measure.devices.select`)."""
    in_flight: int = 2
    """Suites in flight at once per GPU: while one uses the GPU, the next one starts its
    processes and the last one is judged. They take turns on the GPU through its lock file."""
    device: str | None = None
    """The GPU this suite runs on (set per suite by :func:`run`)."""
    on_stage: Callable[[str, Path | None], None] | None = None
    """Hears each stage of measuring and judging a suite (set per suite by :func:`run`)."""

    @property
    def measuring(self) -> MeasureOptions:
        """The part of these options that says how to measure."""
        return MeasureOptions(
            report_dir=self.report_dir,
            from_report=self.from_report,
            ncu=self.ncu,
            device=self.device,
            gpu_lock=None if self.from_report is not None else devices.lock_path(self.device),
            on_stage=self.on_stage,
        )


def suite_files(paths: Sequence[Path] | None, *, root: Path = Path(".")) -> list[Path]:
    """The suite files named, or every ``suites/*.yaml`` under ``root``.

    Raises:
        UsageError: none named and none found.
    """
    if paths:
        return list(paths)
    found = sorted((root / "suites").glob("*.yaml"))
    if not found:
        raise UsageError("no suite given and no suites/*.yaml in the current directory; pass a suite file")
    return found


def check_suites(paths: Sequence[Path] | None, *, root: Path = Path("."), resolve: bool = True) -> SuiteCheck:
    """Check the suite files named (default: every ``suites/*.yaml``, planted-regression suites
    included) on their own and together: see :mod:`fuseci.config.check`.

    Raises:
        UsageError: none named and none found.
    """
    return check_files(suite_files(paths, root=root), resolve=resolve)


def runnable(check: SuiteCheck, named: bool) -> list[Suite]:
    """The suites a command runs: all that loaded, but planted-regression suites only when the
    command line named them."""
    if named:
        return list(check.suites)
    planted = [s.name for s in check.suites if s.planted]
    if planted:
        log.info("skipping planted-regression suite(s) %s; name the file to run one", ", ".join(planted))
    return [s for s in check.suites if not s.planted]


def load_suites(paths: Sequence[Path] | None, *, root: Path = Path("."), resolve: bool = False) -> list[Suite]:
    """The suites named, or every ``suites/*.yaml`` under ``root`` except planted-regression
    suites (those run only when named), checked as :func:`check_suites` checks them.

    Raises:
        SuiteError: a suite file is missing or invalid, two share an id, or (``resolve``) a
            ``module:function`` does not exist; the message lists every problem.
        UsageError: none named and none found.
    """
    check = check_suites(paths, root=root, resolve=resolve)
    if check.problems:
        first = check.problems[0]
        more = (
            f" (and {len(check.problems) - 1} more problems: `fuseci check` lists them)"
            if len(check.problems) > 1
            else ""
        )
        raise SuiteError(first.message + more, path=first.path, line=first.line)
    return runnable(check, bool(paths))


def own_files(suites: Sequence[Suite], options: RunOptions) -> list[tuple[Path, str]]:
    """Every file a run of ``suites`` reads or writes for itself, with what it is: the suite
    files, each suite's baselines (on every card that has one), and the re-analysed report and
    its record or, when profiling, the files of the report directory. A report the user asks for
    must be none of these (:func:`fuseci.cli.output.check_outputs`)."""
    found: list[tuple[Path, str]] = []
    for suite in suites:
        found.append((suite.path, f"the suite file of {suite.name!r}"))
        for path in sorted(options.baselines.glob(f"*/{suite.name}.json")):  # ids hold no glob characters
            found.append((path, f"a baseline of suite {suite.name!r}"))
        if options.from_report is None:
            files = SuiteFiles(options.report_dir, suite.name)
            found.append((files.report, f"the report a profiled run of {suite.name!r} writes"))
            found.append((files.ncu_log, "ncu's log"))
            for mode in (Mode.PROFILE, Mode.TIME):
                harness = files.harness(mode)
                found += [(harness.record, f"a harness record of {suite.name!r}"), (harness.log, "a harness log")]
    if options.from_report is not None:
        found.append((options.from_report, "the report being re-analysed"))
        found.append((record_path_for(options.from_report), "the harness record of the report being re-analysed"))
    return found


def bench_own_files(suites: Sequence[Suite], options: BenchOptions) -> list[tuple[Path, str]]:
    """Every file ``fuseci bench`` reads or writes for itself (see :func:`own_files`)."""
    found: list[tuple[Path, str]] = []
    for suite in suites:
        harness = SuiteFiles(options.report_dir, suite.name).harness(Mode.BENCH)
        found += [(suite.path, f"the suite file of {suite.name!r}"), (harness.record, "a bench record")]
        found.append((harness.log, "a bench log"))
    return found


def parse_accept_env(items: Sequence[str] | None) -> frozenset[str]:
    """The ``--accept-env`` fields (comma-separated or repeated).

    Raises:
        UsageError: a field is not an environment fingerprint field or ``all``.
    """
    accepted = frozenset(f.strip() for item in items or () for f in item.split(",") if f.strip())
    unknown = accepted - set(ENV_FIELDS) - {"all"}
    if unknown:
        raise UsageError(
            f"--accept-env: unknown field(s) {sorted(unknown)}; choose from {', '.join(ENV_FIELDS)} or all"
        )
    return accepted


def baseline_file(options: RunOptions, results: SuiteResults) -> Path:
    """Where this run's baseline lives."""
    return bl.baseline_path(options.baselines, str(results.env.get("gpu_name", "unknown")), results.suite)


def check(suite: Suite, options: RunOptions) -> Comparison:
    """Measure (or re-analyse) one suite and compare it with its baseline.

    Raises:
        FuseciError: anything that keeps the suite from being judged at all.
    """
    return check_results(suite, options)[0]


def check_results(suite: Suite, options: RunOptions) -> tuple[Comparison, SuiteResults]:
    """:func:`check`, and the results it judged (re-measured ones included), e.g. to keep them.

    A CUDA-event speedup that fell borderline outside its band
    (:attr:`~fuseci.judge.verdict.MetricDelta.retry`) is re-measured and the suite judged again
    on all passes; a re-analysed report cannot be re-measured, so its first verdict stands.

    Raises:
        FuseciError: anything that keeps the suite from being judged at all.
    """
    results = measure(suite, options.measuring)
    path = baseline_file(options, results)
    baseline = bl.load_baseline(path)
    options.measuring.say("judging")
    comparison = compare(results, suite, baseline, baseline_path=str(path), accept_env=options.accept_env)
    retry = sorted({k.case for case in comparison.cases for k in case.checks if k.retry})
    if not retry or options.from_report is not None:
        return comparison, results
    results = remeasure(suite, options.measuring, results, retry)
    return compare(results, suite, baseline, baseline_path=str(path), accept_env=options.accept_env), results


class Progress(Protocol):
    """Hears what a long command is doing, as it does it (the CLI shows it; :class:`Silent` is
    the default). Its methods are called from the thread that runs the command.
    """

    def suite_started(self, suite: Suite, index: int, total: int) -> None:
        """Suite ``index`` (from 1) of ``total`` starts."""

    def stage(self, suite: Suite, what: str, watch: Path | None = None) -> None:
        """The suite entered a stage (``profiling under ncu``, ``judging``...); ``watch`` is the
        harness record that names the case being worked on, when there is one."""

    def suite_judged(self, comparison: Comparison) -> None:
        """A suite was judged (or failed: its comparison is then one ``ERROR``)."""

    def suite_failed(self, suite: Suite, error: FuseciError) -> None:
        """A suite could not be judged at all."""


class Silent:
    """A :class:`Progress` that hears nothing."""

    def suite_started(self, suite: Suite, index: int, total: int) -> None:
        """Ignored."""

    def stage(self, suite: Suite, what: str, watch: Path | None = None) -> None:
        """Ignored."""

    def suite_judged(self, comparison: Comparison) -> None:
        """Ignored."""

    def suite_failed(self, suite: Suite, error: FuseciError) -> None:
        """Ignored."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What ``fuseci run`` concluded for its suites."""

    comparisons: tuple[Comparison, ...]
    """One per suite, in order; a suite that could not be judged is one ``ERROR``."""
    measured: tuple[SuiteResults, ...]
    """The results of the suites that were measured, to keep in a run file."""


def run(suites: Sequence[Suite], options: RunOptions, progress: Progress | None = None) -> RunOutcome:
    """Measure and judge every suite; a suite that fails stands as one ``ERROR`` and the others
    still run. ``progress`` hears each suite start and end (from worker threads).

    The suites are dealt out over :attr:`RunOptions.gpus` like shards (:func:`shard`), and up to
    :attr:`RunOptions.in_flight` of each GPU's suites are in flight at once; each harness process
    holds its GPU's lock while it uses the GPU, so measurements never overlap on a GPU. The
    outcome lists the suites in the order given, whatever order they finished in.

    Raises:
        UsageError: ``--from-report`` with more than one suite.
        MismatchError: a report and its record are not one run's (no suite is judged then).
    """
    if options.from_report is not None and len(suites) > 1:  # none: an empty shard
        raise UsageError("--from-report re-analyses one suite's report: pass exactly one suite")
    listener = progress or Silent()
    order = {id(s): i for i, s in enumerate(suites, 1)}
    machine: list[str] = []  # the first suite's word that ncu cannot profile on this machine
    if options.from_report is None and suites:  # ncu missing or broken: said once, for the first suite
        try:
            profiler.ncu_version(profiler.find_ncu(options.ncu))
        except NcuError as exc:
            listener.suite_failed(suites[0], exc)
            first = failed(suites[0], str(exc))
            rest = [failed(s, f"not run: ncu cannot profile here ({suites[0].name} says why)") for s in suites[1:]]
            return RunOutcome((first, *rest), ())

    def one(suite: Suite, device: str | None) -> tuple[Comparison, SuiteResults | None]:
        if machine:
            return failed(suite, f"not run: ncu cannot profile on this machine ({machine[0]} says why)"), None
        listener.suite_started(suite, order[id(suite)], len(suites))

        def heard(what: str, watch: Path | None = None) -> None:
            listener.stage(suite, what, watch)

        try:
            comparison, results = check_results(suite, replace(options, device=device, on_stage=heard))
        except MismatchError:  # inputs that are not one run's: judge nothing, write nothing
            raise
        except NcuError as exc:
            if exc.machine_wide and machine:
                comparison = failed(suite, f"not run: ncu cannot profile on this machine ({machine[0]} says why)")
            else:
                machine.extend([suite.name] if exc.machine_wide else [])
                listener.suite_failed(suite, exc)
                comparison = failed(suite, str(exc))
            results = None
        except FuseciError as exc:
            listener.suite_failed(suite, exc)
            comparison, results = failed(suite, str(exc)), None
        listener.suite_judged(comparison)
        return comparison, results

    slots = options.gpus or (None,)
    pools = [ThreadPoolExecutor(max_workers=max(1, options.in_flight)) for _ in slots]
    futures = {}
    try:
        for k, (device, pool) in enumerate(zip(slots, pools, strict=True), 1):
            for suite in shard(list(suites), k, len(slots)):
                futures[id(suite)] = pool.submit(one, suite, device)
        done = [futures[id(s)].result() for s in suites]
    except BaseException:  # Ctrl-C or a bug: stop every child of every suite in flight
        for f in futures.values():
            f.cancel()
        process.stop_all()
        raise
    finally:
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)
    return RunOutcome(tuple(c for c, _ in done), tuple(r for _, r in done if r is not None))


def keep_run(outcome: RunOutcome, suites: Sequence[Suite], directory: Path) -> Path | None:
    """Save the measured suites as a new run file in ``directory``; None when none was measured.

    Raises:
        ReportError: the run file cannot be written.
    """
    if not outcome.measured:
        return None
    return run_files.save_run(outcome.measured, {s.name: s.path for s in suites}, directory)


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

    A case whose every check passes keeps its old values byte for byte, so a re-record after no
    real change produces no diff; ``force`` re-records every measured case. Wrong or broken cases
    are never recorded: their old values stay. A changed environment re-records everything.

    Measuring runs unlocked; reading the old baseline, comparing and writing the new one hold the
    file's update lock (:func:`fuseci.store.baselines.locked`), so a concurrent update of the same
    suite and GPU waits up to ``lock_timeout_s`` and then builds on this one's result. Nothing but
    ``<gpu-slug>/<suite>.json`` and its lock file is written; when anything fails, the old file
    stays byte for byte and no temporary file remains. A baseline file that is a symbolic link is
    read through the link, but an update that would change it is refused, not written through.

    Raises:
        FuseciError: the suite could not be measured or the old baseline is corrupt.
        BaselineError: the lock was held by another update for ``lock_timeout_s``, the baseline
            directory is not writable, the disk is full, or the file is a symbolic link.
    """
    results = measure(suite, options.measuring)
    path = baseline_file(options, results)
    with bl.locked(path, lock_timeout_s):
        return _rerecord(suite, results, path, force)


def _rerecord(suite: Suite, results: SuiteResults, path: Path, force: bool) -> BaselineUpdate:
    """The read-compare-write of :func:`update_baselines`; the caller holds the lock."""
    old = bl.load_baseline(path)
    comparison = compare(results, suite, old, baseline_path=str(path), accept_env=frozenset())
    decided = update.plan(suite, results, old, comparison, force=force, normalize=bl.normalized)
    new = decided.baseline
    written = new is not None and (old is None or bl.dumps(old) != bl.dumps(new))
    if written and new is not None:
        try:
            bl.save_baseline(new, path)
        except BaselineError as exc:  # the verdict stands: a wrong result found is still exit 1
            code = update_exit_code(comparison, decided.kept, bool(decided.refused))
            raise BaselineError(
                str(exc), exit_code=EXIT_REGRESSION if code == EXIT_REGRESSION else exc.exit_code
            ) from None
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


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """How ``fuseci bench`` times a suite outside ncu."""

    report_dir: Path = Path("fuseci-out")
    """Where the timed run writes ``<suite>.bench.json`` and ``<suite>.bench.log``."""
    repeats: int = DEFAULT_REPEATS
    """Timed calls per variant (after warm-up); the median is reported."""


def bench(suite: Suite, options: BenchOptions) -> bench_figures.BenchResult:
    """Time every variant of a suite with CUDA events, without ncu, and derive the figures.

    The harness runs as a subprocess under the suite's ``ncu.timeout``. Wrong and broken cases
    are in the result, not raised.

    Raises:
        BenchError: the harness could not run, crashed, timed out or left no complete record.
    """
    files = SuiteFiles(options.report_dir, suite.name).harness(Mode.BENCH)
    argv = harness_argv(Mode.BENCH, files.record, suite.path, repeats=options.repeats)
    record = run_timed(argv, files, suite.ncu.timeout_s)
    return bench_figures.result_from_record(record, suite, files.record)


#: Most shards ``--shard K/N`` may name: far more than any CI matrix, few enough to check at once.
MAX_SHARDS = 10_000

_SHARD = re.compile(r"\A([0-9]{1,6})/([0-9]{1,6})\Z")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → (2, 4).

    Raises:
        UsageError: not ``K/N`` with 1 <= K <= N <= :data:`MAX_SHARDS`.
    """
    m = _SHARD.fullmatch(text)
    if m is None:
        raise UsageError(
            f"--shard {text[:40]!r}: write K/N with whole numbers, e.g. 2/4 (shard K of N, counting from 1; "
            f"N at most {MAX_SHARDS})"
        )
    k, n = int(m.group(1)), int(m.group(2))
    if n > MAX_SHARDS:
        raise UsageError(f"--shard {text!r}: N is at most {MAX_SHARDS}; use fewer shards")
    if not 1 <= k <= n:
        raise UsageError(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def shard(suites: list[Suite], k: int, n: int) -> list[Suite]:
    """The suites that shard ``k`` of ``n`` runs: whole suites (one ncu process each), dealt out
    by weight so that shards get similar numbers of cases.

    Deterministic: every shard computes the same assignment from the same suite files, sorted
    by name, the largest suite first to the lightest shard (ties to the lowest shard number).
    Only the first ``len(suites)`` shards can receive a suite (a later one is picked only once
    every earlier one holds a suite), so the work is O(suites · log suites) whatever ``n`` is.
    """
    heap = [(0, i) for i in range(min(n, len(suites)))]  # (load, shard index): already a heap
    owner: dict[str, int] = {}
    for suite in sorted(suites, key=lambda s: (-len(s.cases), s.name)):
        load, lightest = heapq.heappop(heap)
        owner[suite.name] = lightest
        heapq.heappush(heap, (load + len(suite.cases), lightest))
    return [s for s in suites if owner[s.name] == k - 1]


def _base_name(suite: str) -> str:
    """A suite's id without the ``@gpu-slug`` an earlier merge gave it."""
    return suite.split("@", 1)[0]


def _card(c: Comparison) -> str:
    return gpu_slug(str(c.env.get("gpu_name", "unknown")))


def merge(comparisons: list[Comparison]) -> list[Comparison]:
    """Comparisons of several runs as one list; a suite met more than once (one per GPU model)
    is renamed ``suite@gpu-slug`` so that reports keep them apart. Suites that could not be run
    know no card: two of those of one name are ``suite@unknown-gpu`` and ``suite@unknown-gpu-2``.
    (:func:`merge_results` refuses two results of one suite on one card before this.)"""
    counts = Counter(_base_name(c.suite) for c in comparisons)
    used: set[str] = set()
    out: list[Comparison] = []
    for c in comparisons:
        base = _base_name(c.suite)
        name = c.suite if counts[base] == 1 else f"{base}@{_card(c) if c.env else 'unknown-gpu'}"
        n, unique = 1, name
        while unique in used:
            n += 1
            unique = f"{name}-{n}"
        used.add(unique)
        out.append(c if unique == c.suite else replace(c, suite=unique))
    return out


def merge_results(paths: Sequence[Path]) -> list[Comparison]:
    """Read results files (``fuseci run --json``) and merge them (:func:`merge`).

    Two results of one suite on one card (the same file named twice, two runs of a suite on one
    GPU model, or a merged file and one of its parts) are refused rather than merged silently or
    one of them picked: which one counts is the user's decision.

    Raises:
        ReportError: a file is unreadable or malformed, named twice, or holds a suite on a card
            that another file (or the same one) also holds.
    """
    for i, path in enumerate(paths):
        for earlier in paths[:i]:
            if same_file(path, earlier):
                raise ReportError(f"{path}: named twice (also as {earlier}); pass each results file once")
    seen: dict[tuple[str, str], Path] = {}
    comparisons: list[Comparison] = []
    for path in paths:
        for c in read_results(path):
            key = (_base_name(c.suite), _card(c))
            if c.env and key in seen:
                where = "earlier in the same file" if seen[key] == path else f"in {seen[key]}"
                raise ReportError(
                    f"{path}: suite {key[0]!r} on {key[1]} is also {where}: two results of one suite on one card "
                    "cannot be merged (which should count?); pass one results file per suite and card, the run "
                    "you want judged"
                )
            seen.setdefault(key, path)
            comparisons.append(c)
    return merge(comparisons)


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
