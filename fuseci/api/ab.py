"""``fuseci ab``: a pull request judged against its base on the same runner.

The base's suite files and kernel modules come from a temporary git worktree of the base commit
(:mod:`fuseci.ab.git`); the head is the working tree as it is, or a second worktree. Per suite,
both sides are measured on the same GPU in one job, the base first, then the head (A B A B ...,
never all of A then all of B), each in its own processes run in its own tree
(:func:`side_options`). The base's results become, in memory, the baseline the head is judged
against (:func:`fuseci.judge.between_runs.baseline_of`, as ``fuseci compare`` makes one of a run), with
the head's suite file giving the gates, tolerances and expectations; the verdicts are those of
``fuseci run``. A borderline CUDA-event speedup is re-measured on both sides, pass for pass
(:meth:`fuseci.api.session.Session.remeasure`). No stored baseline is read or written.

:func:`run_ab` is a :class:`~fuseci.api.session.Session` whose jobs are each suite's base, then
its head; which suites, on which side, and what one not measured says are :mod:`fuseci.api.pairs`'.

A suite whose fingerprint (:mod:`fuseci.ab.fingerprint`) is the same on both sides is not
measured (``unchanged, not measured``) unless ``every``. When only module files differ (the
suite file and fuseci are the same on both sides), only the cases whose own fingerprint
(:mod:`fuseci.ab.cases`) differs are measured, on both sides; the others stand as ``unchanged,
not measured`` cases among the judged ones; what the fingerprints cannot follow is always
measured, and what each measured case ran is audited against its fingerprint
(:mod:`fuseci.ab.audit`). A suite file on one side only is
``added`` (measured and judged without a reference: correctness, expectations, the bytes
allowance, planted regressions) or ``removed`` (said, not measured)."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path

from fuseci.ab.audit import SideMeasurement, audited
from fuseci.api import ledgers
from fuseci.api.pairs import BASE, HEAD, Side, SuitePair, reference_label, skipped, with_unchanged
from fuseci.api.pairs import pair_state as pair_state
from fuseci.api.pairs import pair_suites as pair_suites
from fuseci.api.pairs import shard_pairs as shard_pairs
from fuseci.api.pairs import trees as trees
from fuseci.api.running import case_sources
from fuseci.api.session import Progress, Retime, Session, retry_cases
from fuseci.config.model import Suite
from fuseci.errors import BaselineError, FuseciError, MismatchError, NcuError
from fuseci.frames.metrics import SuiteResults
from fuseci.judge.between_runs import baseline_of
from fuseci.judge.compare import LedgerJudged, compare
from fuseci.judge.verdict import Comparison, Reference, failed
from fuseci.ledger import store
from fuseci.measure import turn
from fuseci.measure.command import AUDIT_TREE_ENV, FOREIGN_TREE_ENV, SuiteFiles
from fuseci.measure.run import REFERENCE_PASSES, MeasureOptions
from fuseci.records.fusion import Ledger
from fuseci.store import runs as run_files

log = logging.getLogger("fuseci.api")


@dataclass(frozen=True, slots=True)
class AbOptions:
    """How to measure and judge."""

    report_dir: Path = Path("fuseci-out")
    """Each side's reports, records and logs go to ``<report_dir>/base`` and ``<report_dir>/head``."""
    ncu: str | None = None
    """Explicit ncu executable."""
    accept_env: frozenset[str] = frozenset()
    """Environment fields whose difference between the sides is accepted (both sides run in one
    job, so only the suites' ncu settings can differ)."""
    every: bool = False
    """Measure unchanged suites too (``--all``)."""
    in_flight: int = 2
    """Measurements in flight at once: while one side uses the GPU, the next starts its processes."""


@dataclass(frozen=True, slots=True)
class AbOutcome:
    """What ``fuseci ab`` concluded."""

    comparisons: tuple[Comparison, ...]
    """One per suite file, in order: judged, unchanged, added or removed."""
    measured: tuple[SuiteResults, ...]
    """The head's results of the suites measured, to keep in a run file."""
    base_measured: tuple[SuiteResults, ...] = ()
    """The base's results of the suites measured."""
    unchanged: tuple[str, ...] = field(default_factory=tuple)
    """Suite ids not measured because nothing they depend on changed (the suite's fingerprint, or
    each of its cases')."""


# --- measuring ---------------------------------------------------------------------------------


def side_env(side: Side, other: Side) -> dict[str, str]:
    """What a side's harness processes' environment adds: no current directory at the front of
    ``sys.path`` (so that a tree holding a ``fuseci`` package does not replace the fuseci that
    measures), the other side's tree named as foreign (the harness refuses to measure a module
    imported from there), ``PYTHONPATH`` without entries inside the other side's tree and led
    by this side's own directories that the environment imports from (``src/`` of a tree found
    through ``PYTHONPATH``, a ``.pth`` file or an editable install), and this side's tree named
    for the audit of what ran (:data:`fuseci.measure.command.AUDIT_TREE_ENV`)."""
    env = {"PYTHONSAFEPATH": "1", FOREIGN_TREE_ENV: str(other.root), AUDIT_TREE_ENV: str(side.root)}
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    roots = [str(r) for r in side.tree.roots]
    if roots:
        entries = [*roots, *(e for e in entries if e not in roots)]
    if entries:
        mine, theirs = Path(os.path.realpath(side.root)), Path(os.path.realpath(other.root))
        kept = [
            e
            for e in entries
            if not (
                Path(os.path.realpath(e)).is_relative_to(theirs) and not Path(os.path.realpath(e)).is_relative_to(mine)
            )
        ]
        env["PYTHONPATH"] = os.pathsep.join(kept)
    return env


def side_options(
    side: Side, other: Side, options: AbOptions, on_stage: Callable[[str, Path | None], None] | None = None
) -> MeasureOptions:
    """How one side is measured: in its own tree (the harness's working directory, so its
    modules come first on ``sys.path``), into ``<report_dir>/<side>``, holding the GPU's lock,
    with one compile cache for both sides (compiled code is keyed by its source). The base,
    being the reference, is profiled :data:`~fuseci.measure.run.REFERENCE_PASSES` times, to
    learn which counters repeat (:mod:`fuseci.judge.counters`)."""
    report_dir = options.report_dir.absolute()
    return MeasureOptions(
        report_dir=report_dir / side.name,
        ncu=options.ncu,
        gpu_lock=turn.lock_path(None),
        on_stage=on_stage,
        cwd=side.root,
        extra_env=side_env(side, other),
        cache_root=report_dir,
        passes=REFERENCE_PASSES if side.name == BASE else 1,
    )


def own_files(pairs: Sequence[SuitePair], options: AbOptions) -> list[tuple[Path, str]]:
    """Every file measuring either side of ``pairs`` writes (``<report-dir>/<side>``), with what
    it is: no report may be one of them."""
    report_dir = options.report_dir.absolute()
    return [f for p in pairs for side in (BASE, HEAD) for f in SuiteFiles(report_dir / side, p.name).written]


def judge(
    pair: SuitePair,
    head_results: SuiteResults,
    base_results: SuiteResults | None,
    base: Side,
    accept_env: frozenset[str],
    only: tuple[str, ...] | None = None,
    head: Side | None = None,
    judged_ledgers: Mapping[ledgers.LedgerKey, LedgerJudged] | None = None,
) -> Comparison:
    """The head's results judged against the base's, as ``fuseci run`` judges against a stored
    baseline: the base's results made the baseline in memory; without them (an added suite, or a
    base suite file that could not be read) with no reference. With ``only``, the suite's other
    cases are left out (they were not measured). The causes of findings are decided from each
    side's case source fingerprints (the base's in its tree, the head's in ``head``'s); the
    head's ledgers are ``judged_ledgers`` (:func:`judge_ledgers`).

    Raises:
        BaselineError: the base's results cannot serve as a baseline.
    """
    shown = pair.shown()
    assert shown is not None  # a pair is judged only when the head has the suite
    if only is not None:
        shown = replace(shown, cases=tuple(c for c in shown.cases if c.id in only))
    rel = pair.rel.as_posix()
    if base_results is None:
        why = "added: not there" if not pair.base_problem else f"unreadable there: {pair.base_problem}"
        return compare(
            head_results,
            shown,
            None,
            baseline_path=f"{rel} of {base.label} ({why})",
            accept_env=accept_env,
            reference=Reference(shlex.join(["fuseci", "update-baselines", rel]), name=base.label),
        )
    reference = Reference("", name=base.label)
    against = baseline_of(base_results)
    if pair.base is not None and head is not None:
        against = replace(against, sources=case_sources(pair.base, base.tree) or {})
    return compare(
        head_results,
        shown,
        against,
        baseline_path=reference_label(base),
        accept_env=accept_env,
        reference=reference,
        ledgers=judged_ledgers,
        sources=case_sources(pair.head, head.tree) if head is not None and pair.head is not None else None,
    )


def judge_ledgers(
    pair: SuitePair, head_results: SuiteResults, base_results: SuiteResults | None, base: Side
) -> dict[ledgers.LedgerKey, LedgerJudged]:
    """The head's ledgers judged against the base's, each side's built once (a re-measurement
    retimes a pair; its ledgers stay)."""
    shown = pair.shown()
    if base_results is None or shown is None or not any(v.ledger for c in shown.cases for v in c.variants):
        return {}
    base_ledgers = {}
    if pair.base is not None:
        base_ledgers = {
            store.key(*k): x for k, x in ledgers.built(pair.base, base_results).items() if isinstance(x, Ledger)
        }
    return ledgers.judged(shown, ledgers.built(shown, head_results), base_ledgers, Reference("", name=base.label))


def measured_cases(pair: SuitePair, options: AbOptions) -> tuple[str, ...] | None:
    """The cases of ``pair`` to measure on both sides; None: every case."""
    return None if options.every else pair.cases


def run_ab(
    pairs: Sequence[SuitePair], base: Side, head: Side, options: AbOptions, progress: Progress | None = None
) -> AbOutcome:
    """Measure and judge every pair; a suite that fails stands as one ``ERROR``, the others
    still run. The comparisons are in the order of ``pairs``.

    A :class:`~fuseci.api.session.Session` whose jobs are submitted in order, the base's before
    the head's of each suite, at most :attr:`AbOptions.in_flight` at once; the harness processes
    take turns on the GPU through its lock. Each suite is judged as soon as both its sides are
    measured, while later ones are measured.

    Raises:
        MismatchError: a report and its record are not one run's (nothing is judged then).
    """
    session = Session(options.ncu, progress, options.in_flight)
    todo = [p for p in pairs if p.head is not None and (options.every or p.cases != ())]
    if todo:
        said = session.unready([_shown(p) for p in todo])
        if said is not None:
            by_pair = {id(p): c for p, c in zip(todo, said, strict=True)}
            return AbOutcome(tuple(by_pair[id(p)] if id(p) in by_pair else skipped(p, base, head) for p in pairs), ())
    jobs = _Jobs(session, base, head, options, {id(p): i for i, p in enumerate(todo, 1)})
    comparisons: list[Comparison] = []
    measured: list[SuiteResults] = []
    base_measured: list[SuiteResults] = []
    with session:
        futures: dict[tuple[int, str], Future[SuiteResults]] = {}
        for p in todo:
            for side in (BASE, HEAD) if p.base is not None else (HEAD,):
                futures[(id(p), side)] = session.submit(0, jobs.measure, p, side)
        for p in pairs:
            if id(p) not in jobs.order:
                comparisons.append(skipped(p, base, head))
            else:
                comparison, (head_results, base_results) = jobs.judged(p, futures)
                comparisons.append(comparison)
                measured += [head_results] if head_results is not None else []
                base_measured += [base_results] if base_results is not None else []
            session.progress.suite_judged(comparisons[-1])
    unchanged = tuple(p.name for p in pairs if id(p) not in jobs.order and p.head is not None)
    return AbOutcome(tuple(comparisons), tuple(measured), tuple(base_measured), unchanged)


def _shown(pair: SuitePair) -> Suite:
    """The head's suite of a pair that is measured, as reports name it."""
    shown = pair.shown()
    assert shown is not None  # a pair is measured only when the head has the suite
    return shown


@dataclass(frozen=True, slots=True)
class _Jobs:
    """The jobs of one :func:`run_ab`: each side of a pair measured, then the pair judged."""

    session: Session
    base: Side
    head: Side
    options: AbOptions
    order: dict[int, int]
    """The pairs measured (by ``id``), each with its number from 1."""

    def side_options(self, pair: SuitePair, side: str) -> MeasureOptions:
        """How ``side`` of ``pair`` is measured, its stages heard as that suite's, named by the side."""
        mine, other = (self.base, self.head) if side == BASE else (self.head, self.base)
        shown = _shown(pair)

        def stage(what: str, watch: Path | None = None) -> None:
            self.session.progress.stage(shown, f"{mine.label}: {what}", watch)

        return side_options(mine, other, self.options, stage)

    def measure(self, pair: SuitePair, side: str) -> SuiteResults:
        """A job: one side of a pair measured (the pair starts with its first side's job)."""
        self.session.started(_shown(pair), self.order[id(pair)], len(self.order))
        blocked = self.session.blocked()
        if blocked:
            raise NcuError(blocked)
        suite = pair.base if side == BASE else pair.head
        assert suite is not None
        chosen = replace(self.side_options(pair, side), cases=measured_cases(pair, self.options))
        try:
            return self.session.tool.measure(suite, chosen)
        except NcuError as exc:
            self.session.latch(pair.name, exc)
            raise

    def judged(
        self, pair: SuitePair, futures: dict[tuple[int, str], Future[SuiteResults]]
    ) -> tuple[Comparison, tuple[SuiteResults | None, SuiteResults | None]]:
        """Wait for a pair's measurements and judge it; an ``ERROR`` when a side could not be measured."""
        shown = _shown(pair)
        got: dict[str, SuiteResults | None] = {BASE: None, HEAD: None}
        for side in (BASE, HEAD):
            future = futures.get((id(pair), side))
            if future is None:
                continue
            try:
                got[side] = future.result()
            except MismatchError:
                raise
            except FuseciError as exc:
                who = self.base.label if side == BASE else self.head.label
                said = str(exc)
                message = said if side == HEAD or said.startswith("not run") else f"{who} could not be measured: {exc}"
                self.session.progress.suite_failed(shown, FuseciError(message))
                return failed(shown, message), (got[HEAD], got[BASE])
        return self.compared(pair, got[HEAD], got[BASE])

    def compared(
        self, pair: SuitePair, head_results: SuiteResults | None, base_results: SuiteResults | None
    ) -> tuple[Comparison, tuple[SuiteResults | None, SuiteResults | None]]:
        """A measured pair judged, a borderline speedup re-measured on both sides first, then
        audited; its results, re-measured passes included."""
        base, head, shown = self.base, self.head, _shown(pair)
        assert head_results is not None
        only = measured_cases(pair, self.options)
        try:
            judged = judge_ledgers(pair, head_results, base_results, base)
            comparison = judge(pair, head_results, base_results, base, self.options.accept_env, only, head, judged)
            cases = retry_cases(comparison)
            if cases and base_results is not None and pair.base is not None and pair.head is not None:
                ok_base = [c for c in cases if c in base_results.record.ok_cases()]
                log.info("%s: re-measuring borderline speedup(s) of %s on both sides", pair.name, ", ".join(cases))
                sides = [
                    Retime(pair.base, self.side_options(pair, BASE), base_results, ok_base),
                    Retime(pair.head, self.side_options(pair, HEAD), head_results, cases),
                ]
                try:
                    self.session.remeasure(sides)
                finally:
                    base_results, head_results = sides[0].results, sides[1].results
                comparison = judge(pair, head_results, base_results, base, self.options.accept_env, only, head, judged)
        except BaselineError as exc:
            message = f"the results of {base.label} cannot serve as the reference ({exc})"
            return failed(shown, message), (head_results, base_results)
        except FuseciError as exc:
            self.session.progress.suite_failed(shown, exc)
            return failed(shown, str(exc)), (head_results, base_results)
        measured = [_measured(pair.base, base, base_results), _measured(pair.head, head, head_results)]
        comparison = audited(comparison, measured)
        if only is not None:
            comparison = with_unchanged(comparison, pair, base, head)
        return comparison, (head_results, base_results)


def _measured(suite: Suite | None, side: Side, results: SuiteResults | None) -> SideMeasurement | None:
    """One side's measurement, for the audit of its case fingerprints (:mod:`fuseci.ab.audit`)."""
    return None if suite is None or results is None else SideMeasurement(suite, side.tree, results.record, side.label)


def keep_head_run(outcome: AbOutcome, pairs: Sequence[SuitePair], head: Side, directory: Path) -> Path | None:
    """Save the head's measured suites as a new run file in ``directory`` (stamped with the head's
    commit, or the commit checked out for the working tree); None when none was measured.

    Raises:
        ReportError: the run file cannot be written.
    """
    if not outcome.measured:
        return None
    stamp = run_files.Stamp(run_files.now_stamp().created, head.commit) if head.commit else None
    paths = {p.name: p.rel.as_posix() for p in pairs}
    return run_files.save_run(outcome.measured, paths, directory, stamp)
