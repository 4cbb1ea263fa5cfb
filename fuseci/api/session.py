"""One session schedules every measurement: ``fuseci run`` and ``fuseci ab`` are each a session.

A session owns what runs when: its jobs (a suite, on a side, on a GPU), how many are in flight
on each GPU, the latch that stops measuring once ncu is found unable to profile on this machine,
the stop on Ctrl-C or a signal, what progress hears, and the re-measurement of borderline
speedups. The commands compose it, as asv's ``continuous`` is its ``run`` then its ``compare``:

* ``fuseci run`` (:func:`fuseci.api.running.run`): a job per suite, dealt over the GPUs, each
  judged against its stored baseline in the job that measured it;
* ``fuseci ab`` (:func:`fuseci.api.ab.run_ab`): each suite's base job, then its head job, on
  one GPU, judged in suite order against the measured base;
* ``fuseci compare``: no job, a run file judged against another.

Every measurement of every command goes through the :class:`Measurer` that :func:`measurer`
returns: the one seam where tests stand in for the GPU with recorded reports.

A job's states, and what moves it on:

==============  =====================================================================================
submitted       queued on its GPU's pool (:meth:`Session.submit`); at most ``in_flight`` run at once
                per GPU, their harness processes taking turns on the GPU through its lock file
blocked         a job that starts once another found ncu unable to profile on this machine
                (:meth:`Session.latch`): not measured, it says so (:meth:`Session.blocked`)
measuring       :meth:`Measurer.measure`: the profiled run and the timed pass
judged          its comparison made; a borderline speedup re-measured first (:meth:`Session.remeasure`)
failed          an error that stands as its suite's one ``ERROR``; a report and record that are not
                one run's (:class:`~fuseci.errors.MismatchError`) end the session instead
cancelled       Ctrl-C, a signal or a bug: queued jobs dropped, every child process stopped
==============  =====================================================================================

When ncu cannot run at all (:meth:`Session.unready`), no job is submitted: the first suite says why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fuseci.config.model import Suite
from fuseci.errors import FuseciError, NcuError
from fuseci.judge.verdict import Comparison, failed
from fuseci.measure import process
from fuseci.measure import profile as profiler
from fuseci.measure import run as measuring
from fuseci.measure.run import RETIMES, MeasureOptions

if TYPE_CHECKING:  # pandas: loaded once the suites' processes are on their way
    from fuseci.frames.metrics import SuiteResults

_T = TypeVar("_T")


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
    """What measures every suite of every command (``run``, ``ab``, ``update-baselines``): the
    seam where tests replace the GPU (``monkeypatch.setattr(session, "measurer", ...)``)."""
    return Profiler(ncu)


@dataclass(slots=True)
class Retime:
    """One side's part in a re-measurement (:meth:`Session.remeasure`): its suite, how it is
    measured, its results and the cases to time again. Not frozen: :attr:`results` takes each
    pass as it lands, so that a pass that fails leaves the side with those before it."""

    suite: Suite
    options: MeasureOptions
    results: SuiteResults
    """The side's results, with every timed pass so far."""
    cases: list[str]


def retry_cases(comparison: Comparison) -> list[str]:
    """The cases with a borderline CUDA-event speedup to re-measure
    (:attr:`~fuseci.judge.verdict.MetricDelta.retry`)."""
    return sorted({k.case for case in comparison.cases for k in case.checks if k.retry})


class Session:
    """The jobs of one command: a pool per GPU, the ncu latch, the stop, progress and
    re-measurement (see the module docstring). Used as a context manager around the jobs' submission
    and the waiting for them: however the block ends, the pools are shut down, and an exception
    (Ctrl-C, a signal, a bug) first stops every child process of every job in flight."""

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

    def started(self, suite: Suite, index: int, total: int) -> None:
        """Progress hears that ``suite`` (``index`` of ``total``, from 1) starts, with its first
        job only (``fuseci ab`` measures each suite in two)."""
        with self._lock:
            first = (suite.name, suite.path) not in self._started
            self._started.add((suite.name, suite.path))
        if first:
            self.progress.suite_started(suite, index, total)

    # --- ncu: not there at all, or found unable to profile on this machine by a job ---------------

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

    def blocked(self) -> str | None:
        """What a job says instead of measuring once another found that ncu cannot profile on this
        machine; None until then."""
        with self._lock:
            name = self._machine
        return None if name is None else f"not run: ncu cannot profile on this machine ({name} says why)"

    def latch(self, name: str, exc: NcuError) -> str | None:
        """Note that measuring suite ``name`` failed with ``exc``: the first machine-wide failure
        blocks every later job. What this job says instead of ``exc`` when an earlier one had
        already found it (:meth:`blocked`); None when ``exc`` stands."""
        if not exc.machine_wide:
            return None
        with self._lock:
            if self._machine is None:
                self._machine = name
                return None
        return self.blocked()

    # --- the jobs ------------------------------------------------------------------------------

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

    def submit(self, gpu: int, job: Callable[..., _T], *args: Any) -> Future[_T]:
        """Queue ``job(*args)`` on GPU ``gpu`` (an index into :attr:`gpus`)."""
        future = self._pools[gpu].submit(job, *args)
        self._futures.append(future)
        return future

    # --- re-measurement --------------------------------------------------------------------------

    def remeasure(self, sides: Sequence[Retime]) -> list[SuiteResults]:
        """Time each side's cases :data:`~fuseci.measure.run.RETIMES` more times, each pass in a
        fresh process, the sides pass for pass (base, head, base, head: a base that happened to
        measure fast must not stand as the reference while only the head gets more passes); each
        side's results with every pass (also in :attr:`Retime.results`), which the judge then
        takes the median of. A side with no case to time again keeps its results.

        Raises:
            BenchError: a timed pass failed.
        """
        for _ in range(RETIMES):
            for side in sides:
                if side.cases:
                    side.results = self.tool.retime(side.suite, side.options, side.results, side.cases)
        return [side.results for side in sides]
