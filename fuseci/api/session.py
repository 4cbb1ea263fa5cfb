"""One session schedules every measurement of ``fuseci run`` or ``fuseci ab``: its jobs (a suite on a GPU, with
any side it is judged against that is measured now), how many run at once per GPU, the latch that stops measuring
once ncu cannot profile here, the stop on Ctrl-C or a signal, progress, and the re-measurement of borderline
speedups. A command supplies only what a suite is judged against (:class:`Against`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fuseci.config.model import Suite
from fuseci.errors import FuseciError, MismatchError, NcuError
from fuseci.judge.verdict import Comparison, failed
from fuseci.measure import process
from fuseci.measure import profile as profiler
from fuseci.measure import run as measuring
from fuseci.measure.command import Mode, SuiteFiles
from fuseci.measure.run import RETIMES, MeasureOptions

if TYPE_CHECKING:  # pandas: loaded once the suites' processes are on their way
    from fuseci.frames.metrics import SuiteResults

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Progress(Protocol):
    """Hears what a long command is doing, as it does it (:class:`Silent` by default)."""

    def suite_started(self, suite: Suite, index: int, total: int) -> None:
        """Suite ``index`` (from 1) of ``total`` starts."""

    def stage(self, suite: Suite, what: str, watch: Path | None = None) -> None:
        """The suite entered a stage; ``watch`` is the harness record naming the case being worked on."""

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


class Measurer(Protocol):
    """How a suite is measured; tests stand in for the GPU with recorded reports (:func:`measurer`)."""

    def ready(self) -> None:
        """Raise :class:`~fuseci.errors.NcuError` when nothing can be measured here."""

    def measure(self, suite: Suite, options: MeasureOptions) -> SuiteResults:
        """Profile and time ``suite``, or re-analyse ``options.from_report`` (:func:`fuseci.measure.run.measure`)."""

    def retime(self, suite: Suite, options: MeasureOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
        """One more timed pass of ``cases``, in a fresh process; the results with it."""


class Profiler:
    """The real :class:`Measurer`: ncu, and the timed pass outside it."""

    def __init__(self, ncu: str | None = None) -> None:
        self.ncu = ncu

    def ready(self) -> None:
        """ncu is there and runs."""
        profiler.ncu_version(profiler.find_ncu(self.ncu))

    def measure(self, suite: Suite, options: MeasureOptions) -> SuiteResults:
        """:func:`fuseci.measure.run.measure`."""
        return measuring.measure(suite, options)

    def retime(self, suite: Suite, options: MeasureOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
        """:func:`fuseci.measure.run.retime`."""
        return measuring.retime(suite, options, results, cases)


def measurer(ncu: str | None = None) -> Measurer:
    """What measures every suite of every command: the seam where tests replace the GPU."""
    return Profiler(ncu)


def retry_cases(comparison: Comparison) -> list[str]:
    """The cases with a borderline CUDA-event speedup to re-measure."""
    return sorted({k.case for case in comparison.cases for k in case.checks if k.retry})


@dataclass(frozen=True, slots=True)
class Measurement:
    """One side of a job: the suite as that side has it, and how it is measured."""

    suite: Suite
    options: MeasureOptions
    label: str = ""
    """What its stages and, measured in a job of its own, its failure are said with (``base 1a2b3c4``)."""


class Against(Protocol):
    """What a job's suite is judged against: the one part a command supplies to the job body."""

    @property
    def base(self) -> Measurement | None:
        """A side measured now, in a job of its own ahead of the head; None: the reference is stored."""

    def check(self) -> None:
        """Raise before the head is measured when what it will be judged against is unusable."""

    def judge(self, results: SuiteResults, base: SuiteResults | None) -> Comparison:
        """The head's ``results`` judged (with the base's, when measured now)."""


@dataclass(frozen=True, slots=True)
class Job:
    """A suite to measure and judge: its head side and what it is judged against."""

    suite: Suite
    """The suite as reports name it (progress, its ``ERROR``)."""
    head: Measurement
    against: Against
    gpu: int = 0
    """Which of :attr:`Session.gpus` it runs on."""


@dataclass(frozen=True, slots=True)
class JudgedSuite:
    """What a job concluded."""

    comparison: Comparison
    """Its suite's comparison; one ``ERROR`` when it could not be judged."""
    results: SuiteResults | None = None
    """The head's results, every timed pass included, when it was measured."""
    error: FuseciError | None = None
    """What kept the suite from being judged, when something did."""


class _Blocked(NcuError):
    """A side not measured because another job found ncu unable to profile on this machine."""


class Session:
    """The jobs of one command. As a context manager, however the block ends the pools are shut
    down, and an exception (Ctrl-C, a signal, a bug) first stops every child process in flight."""

    def __init__(
        self,
        ncu: str | None = None,
        progress: Progress | None = None,
        in_flight: int = 2,
        gpus: Sequence[str | None] = (None,),
    ) -> None:
        self.tool = measurer(ncu)
        """What measures (:func:`measurer`)."""
        self.progress: Progress = progress or Silent()
        """What hears each suite start, fail and be judged."""
        self.gpus: tuple[str | None, ...] = tuple(gpus) or (None,)
        """The GPUs jobs are submitted to, by index (``CUDA_VISIBLE_DEVICES`` entries; None: as seen)."""
        self._in_flight = max(1, in_flight)
        self._lock = threading.Lock()
        self._machine: str | None = None
        self._started: set[tuple[str, Path]] = set()
        self._pools: list[ThreadPoolExecutor] = []
        self._futures: list[Future[Any]] = []

    def unready(self, suites: Sequence[Suite], hint: Callable[[], str] | None = None) -> list[Comparison] | None:
        """None when ncu runs; else a comparison per suite, none measured: the first says why (with
        ``hint()`` after it) and progress hears it, the others point at it."""
        try:
            self.tool.ready()
        except NcuError as exc:
            first = suites[0]
            if hint is not None:
                exc = NcuError(f"{str(exc).rstrip('.')}{hint()}", machine_wide=exc.machine_wide)
            self.progress.suite_failed(first, exc)
            rest = [failed(s, f"not run: ncu cannot profile here ({first.name} says why)") for s in suites[1:]]
            return [failed(first, str(exc)), *rest]
        return None

    def blocked(self) -> NcuError | None:
        """What a side raises instead of measuring once a job found ncu unable to profile here."""
        with self._lock:
            name = self._machine
        return None if name is None else _Blocked(f"not run: ncu cannot profile on this machine ({name} says why)")

    def latch(self, name: str, exc: NcuError) -> NcuError:
        """What a job fails with once measuring suite ``name`` failed with ``exc`` (machine-wide: blocks the rest)."""
        with self._lock:
            first = exc.machine_wide and self._machine is None
            if first:
                self._machine = name
        return exc if first or not exc.machine_wide else self.blocked() or exc

    def __enter__(self) -> Session:
        self._pools = [ThreadPoolExecutor(max_workers=self._in_flight) for _ in self.gpus]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if kind is not None:  # Ctrl-C, SIGTERM or a bug: stop every child of every job in flight
                for f in self._futures:
                    f.cancel()
                process.stop_all()
        finally:
            for pool in self._pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def _submit(self, gpu: int, job: Callable[..., _T], *args: Any) -> Future[_T]:
        future = self._pools[gpu].submit(job, *args)
        self._futures.append(future)
        return future

    def run(self, jobs: Sequence[Job | JudgedSuite]) -> list[JudgedSuite]:
        """Every job measured and judged, in order; a :class:`JudgedSuite` (not measured) stands as it is.

        Raises:
            MismatchError: a report and its record are not one run's (nothing is judged then).
        """
        numbered = [j for j in jobs if isinstance(j, Job)]
        futures: dict[int, Future[JudgedSuite]] = {}
        with self:
            for k, job in enumerate(numbered, 1):
                place, base = (k, len(numbered)), job.against.base
                ahead = None if base is None else self._submit(job.gpu, self._measure, job, base, place)
                futures[id(job)] = self._submit(job.gpu, self.judge, job, ahead, place)
            done = []
            for j in jobs:
                done.append(futures[id(j)].result() if isinstance(j, Job) else j)
                self.progress.suite_judged(done[-1].comparison)
        return done

    def _heard(self, job: Job, side: Measurement) -> MeasureOptions:
        """How ``side`` is measured, its stages heard as ``job``'s suite's."""

        def stage(what: str, watch: Path | None = None) -> None:
            self.progress.stage(job.suite, f"{side.label}: {what}" if side.label else what, watch)

        return replace(side.options, on_stage=stage)

    def _measure(self, job: Job, side: Measurement, place: tuple[int, int]) -> SuiteResults:
        """One side of ``job`` measured (the head once what it is judged against is checked)."""
        if (blocked := self.blocked()) is not None:
            raise blocked
        with self._lock:  # progress hears a suite start with its first job only (``fuseci ab`` has two)
            first = (job.suite.name, job.suite.path) not in self._started
            self._started.add((job.suite.name, job.suite.path))
        if first:
            self.progress.suite_started(job.suite, *place)
        try:
            if side is job.head:
                job.against.check()
            return self.tool.measure(side.suite, self._heard(job, side))
        except NcuError as exc:
            raise self.latch(job.suite.name, exc) from None

    def judge(self, job: Job, base: Future[SuiteResults] | None = None, place: tuple[int, int] = (1, 1)) -> JudgedSuite:
        """The job body: the head measured (and ``base`` awaited) and judged; a borderline speedup re-measured on
        every side and judged again (not a re-analysed report's). A failure stands as the suite's one ``ERROR``.

        Raises:
            MismatchError: a report and its record are not one run's.
        """
        got: list[SuiteResults] = []  # the head's, then the base's: with every timed pass so far

        def latest() -> tuple[SuiteResults, SuiteResults | None]:
            return got[0], got[1] if len(got) > 1 else None

        try:
            try:
                measured = self._measure(job, job.head, place)
            finally:  # the base's failure is said first: it was measured first
                reference = None if base is None or job.against.base is None else self._awaited(job.against.base, base)
            got = [measured, *([reference] if reference is not None else [])]
            self._heard(job, job.head).say("judging")
            comparison = job.against.judge(*latest())
            cases = retry_cases(comparison)
            if cases and job.head.options.from_report is None:
                self._remeasure(job, got, cases)
                comparison = job.against.judge(*latest())
        except MismatchError:
            raise
        except FuseciError as exc:
            return self._failed(job, exc, got[0] if got else None)
        return JudgedSuite(comparison, got[0])

    @staticmethod
    def _awaited(side: Measurement, measured: Future[SuiteResults]) -> SuiteResults:
        """The results of a side measured in a job of its own; its failure said as that side's."""
        try:
            return measured.result()
        except (MismatchError, _Blocked):
            raise
        except FuseciError as exc:
            raise FuseciError(f"{side.label} could not be measured: {exc}") from None

    def _remeasure(self, job: Job, got: list[SuiteResults], cases: list[str]) -> None:
        """``cases`` timed :data:`~fuseci.measure.run.RETIMES` more times on each side, pass for pass (a base that
        measured fast by chance must not stand while only the head gets more passes), into ``got`` as they come."""
        both = " on both sides" if len(got) > 1 else ""
        log.info("%s: re-measuring borderline speedup(s) of %s%s", job.suite.name, ", ".join(cases), both)
        watch = SuiteFiles(job.head.options.report_dir, job.head.suite.name).harness(Mode.TIME).record
        self._heard(job, job.head).say(f"re-measuring {', '.join(cases)}", watch)
        sides = [(0, job.head, cases)]
        if len(got) > 1 and job.against.base is not None:
            sides.insert(0, (1, job.against.base, [c for c in cases if c in got[1].record.ok_cases()]))
        try:
            for _ in range(RETIMES):
                for k, side, asked in sides:
                    if asked:
                        got[k] = self.tool.retime(side.suite, self._heard(job, side), got[k], asked)
        except NcuError as exc:
            raise self.latch(job.suite.name, exc) from None

    def _failed(self, job: Job, exc: FuseciError, results: SuiteResults | None) -> JudgedSuite:
        """``job``'s suite as one ``ERROR``; progress hears it unless another job's failure said it."""
        if not isinstance(exc, _Blocked):
            self.progress.suite_failed(job.suite, exc)
        return JudgedSuite(failed(job.suite, str(exc)), results, exc)
