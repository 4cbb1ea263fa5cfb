"""``fuseci run``: measure and judge suites, over every GPU asked for, and keep the run."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fuseci.api.session import Job, Measurement, Progress, Session
from fuseci.api.sharding import shard
from fuseci.config.model import Suite
from fuseci.errors import LedgerError, UsageError
from fuseci.judge.verdict import Comparison, Reference
from fuseci.measure import autotune, turn
from fuseci.measure.command import SuiteFiles
from fuseci.measure.run import MeasureOptions
from fuseci.records.harness import record_path_for

if TYPE_CHECKING:  # pandas: loaded once the suites' processes are on their way
    from fuseci.ab.reader import Tree
    from fuseci.frames.metrics import SuiteResults
    from fuseci.judge.baseline import Baseline, SourcePrint
    from fuseci.records.fusion import Ledger
    from fuseci.store.runs import Stamp

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
    """The GPUs to deal the suites out over (``CUDA_VISIBLE_DEVICES`` entries; None: as seen)."""
    in_flight: int = 2
    """Suites in flight at once per GPU (they take turns on the GPU through its lock file)."""
    device: str | None = None
    """The GPU this suite runs on (set per suite by :func:`run`)."""

    @property
    def measuring(self) -> MeasureOptions:
        """The part of these options that says how to measure."""
        return MeasureOptions(
            report_dir=self.report_dir,
            from_report=self.from_report,
            ncu=self.ncu,
            device=self.device,
            gpu_lock=None if self.from_report is not None else turn.lock_path(self.device),
            extra_env={autotune.ROOT_ENV: str(self.baselines.absolute())},
        )


def own_files(suites: Sequence[Suite], options: RunOptions, *, baselines: bool = True) -> list[tuple[Path, str]]:
    """Every file a run of ``suites`` reads or writes for itself, with what it is: suites, baselines, reports."""
    found: list[tuple[Path, str]] = []
    for suite in suites:
        found.append((suite.path, f"the suite file of {suite.name!r}"))
        for path in sorted(options.baselines.glob(f"*/{suite.name}.json")) if baselines else ():
            found.append((path, f"a baseline of suite {suite.name!r}"))  # ids hold no glob characters
        if options.from_report is None:
            found += SuiteFiles(options.report_dir, suite.name).written
    if options.from_report is not None:
        found.append((options.from_report, "the report being re-analysed"))
        found.append((record_path_for(options.from_report), "the harness record of the report being re-analysed"))
    return found


def reference(suite: Suite, options: RunOptions) -> Reference:
    """The baseline a run of ``suite`` is judged against, and the command that re-records it from the run's inputs."""
    words = ["fuseci", "update-baselines", str(suite.path)]
    if options.from_report is not None:
        words += ["--from-report", str(options.from_report)]
    if options.baselines != Path("baselines"):  # RunOptions' default, as --baselines' is
        words += ["--baselines", str(options.baselines)]
    return Reference(shlex.join(words))


def from_report_hint(suite: Suite, options: RunOptions) -> str:
    """The exact command that judges ``suite`` without ncu, from a report recorded where ncu runs."""
    report = SuiteFiles(options.report_dir, suite.name).report
    words = ["fuseci", "run", str(suite.path), "--from-report", str(report)]
    if options.baselines != Path("baselines"):
        words += ["--baselines", str(options.baselines)]
    command = shlex.join(words)
    if report.is_file():
        return f"; this machine has the report of an earlier run: `{command}`"
    return f"; to judge a report recorded on a machine with ncu (its .harness.json beside it): `{command}`"


def baseline_file(options: RunOptions, results: SuiteResults) -> Path:
    """Where this run's baseline lives."""
    from fuseci.store import baselines as bl

    return bl.baseline_path(options.baselines, str(results.env.get("gpu_name", "unknown")), results.suite)


def check(suite: Suite, options: RunOptions) -> Comparison:
    """Measure (or re-analyse) one suite and compare it with its baseline.

    Raises:
        FuseciError: anything that keeps the suite from being judged at all.
    """
    return check_results(suite, options)[0]


def check_autotune_records(suite: Suite, options: RunOptions) -> None:
    """Read every autotuning record beside the suite's baselines, so a bad one is said before anything is measured.

    Raises:
        BaselineError: a record that is not one, naming the file and the entry.
    """
    if options.from_report is not None:
        return
    for path in sorted(options.baselines.glob(f"*/{suite.name}.autotune.json")):
        autotune.load(path)


def case_sources(suite: Suite, tree: Path | Tree = Path(".")) -> dict[str, SourcePrint] | None:
    """Each case's source fingerprint of ``suite`` in ``tree``, by case id; None when its files cannot be read."""
    from fuseci.ab.cases import source_prints

    try:
        return source_prints(suite, tree)
    except OSError as exc:
        log.warning("%s: the source fingerprints of its cases cannot be taken: %s", suite.name, exc)
        return None


@dataclass(slots=True)
class StoredBaseline:
    """What ``fuseci run`` judges a suite against: its stored baseline and ledgers, read once."""

    suite: Suite
    options: RunOptions
    base: None = None  # no side measured now
    _read: tuple[Path, Baseline | None, dict[str, Ledger], dict[str, SourcePrint] | None] | None = None
    _built: Mapping[tuple[str, str], Ledger | LedgerError] | None = None
    """The measured ledgers, built once: a re-measurement retimes a suite; its ledgers stay."""

    def check(self) -> None:
        """:func:`check_autotune_records`."""
        check_autotune_records(self.suite, self.options)

    def judge(self, results: SuiteResults, base: SuiteResults | None = None) -> Comparison:
        """``results`` compared with the stored baseline and ledgers of their card (read once).

        Raises:
            FuseciError: the baseline or ledgers cannot be read.
        """
        from fuseci.api import ledgers
        from fuseci.judge.compare import compare
        from fuseci.store import baselines as bl

        suite = self.suite
        if self._read is None:
            path = baseline_file(self.options, results)
            ledgered = any(v.ledger for c in suite.cases for v in c.variants)
            self._read = (path, bl.load_baseline(path), ledgers.stored(path) if ledgered else {}, case_sources(suite))
        path, baseline, stored, sources = self._read
        if self._built is None:
            self._built = ledgers.built(suite, results)
        against = reference(suite, self.options)
        return compare(
            results,
            suite,
            baseline,
            baseline_path=str(path),
            accept_env=self.options.accept_env,
            reference=against,
            ledgers=ledgers.judged(suite, self._built, stored, against),
            sources=sources,
        )


def _job(suite: Suite, options: RunOptions, gpu: int = 0) -> Job:
    """A suite of a run: measured as ``options`` say, judged against its stored baseline."""
    return Job(suite, Measurement(suite, options.measuring), StoredBaseline(suite, options), gpu)


def check_results(suite: Suite, options: RunOptions) -> tuple[Comparison, SuiteResults]:
    """:func:`check`, and the results it judged (re-measured ones included).

    Raises:
        FuseciError: anything that keeps the suite from being judged at all.
    """
    judged = Session(options.ncu).judge(_job(suite, options))
    if judged.error is not None:
        raise judged.error
    assert judged.results is not None  # judged: measured
    return judged.comparison, judged.results


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What ``fuseci run`` concluded for its suites."""

    comparisons: tuple[Comparison, ...]
    """One per suite, in order; a suite that could not be judged is one ``ERROR``."""
    measured: tuple[SuiteResults, ...]
    """The results of the suites that were measured, to keep in a run file."""
    from_report: Path | None = None
    """The recorded report they were re-analysed from, if they were."""


def run(suites: Sequence[Suite], options: RunOptions, progress: Progress | None = None) -> RunOutcome:
    """Measure and judge every suite, dealt out over the GPUs like shards, in order; a suite that fails stands as
    one ``ERROR`` and the others still run.

    Raises:
        UsageError: ``--from-report`` with more than one suite.
        MismatchError: a report and its record are not one run's (no suite is judged then).
    """
    if options.from_report is not None and len(suites) > 1:  # none: an empty shard
        raise UsageError("--from-report re-analyses one suite's report: pass exactly one suite")
    session = Session(options.ncu, progress, options.in_flight, options.gpus)
    if options.from_report is None and suites:  # ncu missing or broken: said once, for the first suite
        said = session.unready(suites, lambda: from_report_hint(suites[0], options))
        if said is not None:
            return RunOutcome(tuple(said), ())
    n = len(session.gpus)
    gpu = {id(s): k for k in range(n) for s in shard(list(suites), k + 1, n)}
    done = session.run([_job(s, replace(options, device=session.gpus[gpu[id(s)]]), gpu[id(s)]) for s in suites])
    measured = tuple(j.results for j in done if j.results is not None)
    return RunOutcome(tuple(j.comparison for j in done), measured, from_report=options.from_report)


def keep_run(outcome: RunOutcome, suites: Sequence[Suite], directory: Path, stamp: Stamp | None = None) -> Path | None:
    """Save the measured suites as a new run file in ``directory``; None when none was measured.
    Stamped with ``stamp``, else a re-analysed report's recording time, else now and the commit.

    Raises:
        ReportError: the run file cannot be written.
    """
    from fuseci.store import runs as run_files

    if not outcome.measured:
        return None
    if stamp is None and outcome.from_report is not None:
        stamp = run_files.recording_stamp(outcome.from_report)
    return run_files.save_run(outcome.measured, {s.name: s.path for s in suites}, directory, stamp)
