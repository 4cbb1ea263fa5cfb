"""``fuseci ab``: a pull request judged against its base, both measured now on the same runner: per suite the
base (a temporary git worktree), then the head, each in its own processes and tree, the head judged with
``fuseci run``'s verdicts against the base's results as an in-memory baseline. A suite or case with the same
fingerprint on both sides is not measured unless ``every``. No stored baseline is read or written."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fuseci.ab.audit import Ran, audited
from fuseci.api import ledgers
from fuseci.api.pairs import BASE, HEAD, Side, SuitePair, reference_label, skipped, with_unchanged
from fuseci.api.pairs import pair_state as pair_state
from fuseci.api.pairs import pair_suites as pair_suites
from fuseci.api.pairs import shard_pairs as shard_pairs
from fuseci.api.pairs import trees as trees
from fuseci.api.session import Job, JudgedSuite, Measurement, Progress, Session
from fuseci.config.model import Suite
from fuseci.errors import BaselineError
from fuseci.frames.metrics import SuiteResults
from fuseci.judge.between_runs import baseline_of
from fuseci.judge.compare import LedgerJudged, compare
from fuseci.judge.verdict import Comparison, Reference
from fuseci.ledger import store
from fuseci.measure import turn
from fuseci.measure.command import AUDIT_TREE_ENV, FOREIGN_TREE_ENV, SuiteFiles
from fuseci.measure.run import REFERENCE_PASSES, MeasureOptions
from fuseci.records.fusion import Ledger
from fuseci.store import runs as run_files


@dataclass(frozen=True, slots=True)
class AbOptions:
    """How to measure and judge."""

    report_dir: Path = Path("fuseci-out")
    """Each side's reports, records and logs go to ``<report_dir>/base`` and ``<report_dir>/head``."""
    ncu: str | None = None
    """Explicit ncu executable."""
    accept_env: frozenset[str] = frozenset()
    """Environment fields whose difference between the sides is accepted."""
    every: bool = False
    """Measure unchanged suites too (``--all``)."""
    in_flight: int = 2
    """Measurements in flight at once."""


@dataclass(frozen=True, slots=True)
class AbOutcome:
    """What ``fuseci ab`` concluded."""

    comparisons: tuple[Comparison, ...]
    """One per suite file, in order: judged, unchanged, added or removed."""
    measured: tuple[SuiteResults, ...]
    """The head's results of the suites measured, to keep in a run file."""
    unchanged: tuple[str, ...] = field(default_factory=tuple)
    """Suite ids not measured because nothing they depend on changed."""


def side_env(side: Side, other: Side) -> dict[str, str]:
    """What a side's harness processes' environment adds: no current directory on ``sys.path``, the other side's
    tree named foreign and this side's for the audit, ``PYTHONPATH`` led by this side's roots, none in the other's."""
    env = {"PYTHONSAFEPATH": "1", FOREIGN_TREE_ENV: str(other.root), AUDIT_TREE_ENV: str(side.root)}
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    roots = [str(r) for r in side.tree.roots]
    entries = [*roots, *(e for e in entries if e not in roots)]
    if entries:
        mine, theirs = Path(os.path.realpath(side.root)), Path(os.path.realpath(other.root))

        def foreign(entry: str) -> bool:
            real = Path(os.path.realpath(entry))
            return real.is_relative_to(theirs) and not real.is_relative_to(mine)

        env["PYTHONPATH"] = os.pathsep.join(e for e in entries if not foreign(e))
    return env


def side_options(side: Side, other: Side, options: AbOptions) -> MeasureOptions:
    """How one side is measured: in its own tree, into ``<report_dir>/<side>``, holding the GPU's
    lock, with one compile cache for both sides; the base profiled ``REFERENCE_PASSES`` times."""
    report_dir = options.report_dir.absolute()
    return MeasureOptions(
        report_dir=report_dir / side.name,
        ncu=options.ncu,
        gpu_lock=turn.lock_path(None),
        cwd=side.root,
        extra_env=side_env(side, other),
        cache_root=report_dir,
        passes=REFERENCE_PASSES if side.name == BASE else 1,
    )


def own_files(pairs: Sequence[SuitePair], options: AbOptions) -> list[tuple[Path, str]]:
    """Every file measuring either side of ``pairs`` writes, with what it is."""
    report_dir = options.report_dir.absolute()
    return [f for p in pairs for side in (BASE, HEAD) for f in SuiteFiles(report_dir / side, p.name).written]


@dataclass(slots=True)
class MeasuredBase:
    """What ``fuseci ab`` judges a pair's head against: the base's results and ledgers, measured now."""

    pair: SuitePair
    sides: tuple[Side, Side]
    """The base and the head."""
    options: AbOptions
    base: Measurement | None
    """The base's side of the job; None when it has no such suite."""
    _judged: dict[ledgers.LedgerKey, LedgerJudged] | None = None
    """The head's ledgers judged against the base's, once."""

    def check(self) -> None:
        """Nothing stored to check."""

    def judge(self, results: SuiteResults, base: SuiteResults | None) -> Comparison:
        """The head's ``results`` judged against the base's on the measured cases, audited against
        what each side's cases ran, the cases not measured added as unchanged.

        Raises:
            BaselineError: the base's results cannot serve as a baseline.
        """
        try:
            comparison = self._judge(results, base)
        except BaselineError as exc:
            raise BaselineError(f"the results of {self.sides[0].label} cannot serve as the reference ({exc})") from None
        pair, (base_side, head_side) = self.pair, self.sides
        sides = ((pair.base_print, base_side, base), (pair.head_print, head_side, results))
        comparison = audited(
            comparison, [Ran(p.cases, s.root.resolve(), r.record, s.label) for p, s, r in sides if p and r]
        )
        return (
            comparison if measured_cases(pair, self.options) is None else with_unchanged(comparison, pair, *self.sides)
        )

    def _judge(self, results: SuiteResults, base: SuiteResults | None) -> Comparison:
        pair, side, accept_env = self.pair, self.sides[0], self.options.accept_env
        shown = _shown(pair)
        only = measured_cases(pair, self.options)
        if only is not None:
            shown = replace(shown, cases=tuple(c for c in shown.cases if c.id in only))
        rel = pair.rel.as_posix()
        if base is None:
            why = "added: not there" if not pair.base_problem else f"unreadable there: {pair.base_problem}"
            return compare(
                results,
                shown,
                None,
                baseline_path=f"{rel} of {side.label} ({why})",
                accept_env=accept_env,
                reference=Reference(shlex.join(["fuseci", "update-baselines", rel]), name=side.label),
            )
        against = baseline_of(base)
        if pair.base_print is not None:
            against = replace(against, sources=dict(pair.base_print.sources))
        if self._judged is None:  # once: a re-measurement retimes a pair; its ledgers stay
            self._judged = judge_ledgers(pair, results, base, side)
        return compare(
            results,
            shown,
            against,
            baseline_path=reference_label(side),
            accept_env=accept_env,
            reference=Reference("", name=side.label),
            ledgers=self._judged,
            sources=dict(pair.head_print.sources) if pair.head_print is not None else None,
        )


def judge_ledgers(
    pair: SuitePair, head_results: SuiteResults, base_results: SuiteResults | None, base: Side
) -> dict[ledgers.LedgerKey, LedgerJudged]:
    """The head's ledgers judged against the base's."""
    shown = pair.shown()
    if base_results is None or shown is None or not any(v.ledger for c in shown.cases for v in c.variants):
        return {}
    built = ledgers.built(pair.base, base_results) if pair.base is not None else {}
    base_ledgers = {store.key(*k): x for k, x in built.items() if isinstance(x, Ledger)}
    return ledgers.judged(shown, ledgers.built(shown, head_results), base_ledgers, Reference("", name=base.label))


def measured_cases(pair: SuitePair, options: AbOptions) -> tuple[str, ...] | None:
    """The cases of ``pair`` to measure on both sides; None: every case."""
    return None if options.every else pair.cases


def run_ab(
    pairs: Sequence[SuitePair], base: Side, head: Side, options: AbOptions, progress: Progress | None = None
) -> AbOutcome:
    """Measure and judge every pair, in order; a suite that fails stands as one ``ERROR``, the others still run.

    Raises:
        MismatchError: a report and its record are not one run's (nothing is judged then).
    """
    session = Session(options.ncu, progress, options.in_flight)
    todo = [p for p in pairs if p.head is not None and (options.every or p.cases != ())]
    if todo and (said := session.unready([_shown(p) for p in todo])) is not None:
        by_pair = {id(p): c for p, c in zip(todo, said, strict=True)}
        return AbOutcome(tuple(by_pair[id(p)] if id(p) in by_pair else skipped(p, base, head) for p in pairs), ())
    measured = {id(p) for p in todo}
    done = session.run(
        [_job(p, base, head, options) if id(p) in measured else JudgedSuite(skipped(p, base, head)) for p in pairs]
    )
    return AbOutcome(
        tuple(j.comparison for j in done),
        tuple(j.results for j in done if j.results is not None),
        tuple(p.name for p in pairs if id(p) not in measured and p.head is not None),
    )


def _shown(pair: SuitePair) -> Suite:
    """The head's suite of a pair that is measured, as reports name it."""
    shown = pair.shown()
    assert shown is not None  # a pair is measured only when the head has the suite
    return shown


def _job(pair: SuitePair, base: Side, head: Side, options: AbOptions) -> Job:
    """A measured pair's job: its head, judged against its base measured now (when it has one)."""
    cases = measured_cases(pair, options)

    def side(suite: Suite, mine: Side, other: Side) -> Measurement:
        return Measurement(suite, replace(side_options(mine, other, options), cases=cases), mine.label)

    assert pair.head is not None  # measured: the head has it
    against = MeasuredBase(pair, (base, head), options, None if pair.base is None else side(pair.base, base, head))
    return Job(_shown(pair), side(pair.head, head, base), against)


def keep_head_run(outcome: AbOutcome, pairs: Sequence[SuitePair], head: Side, directory: Path) -> Path | None:
    """Save the head's measured suites as a new run file in ``directory``; None when none was measured.

    Raises:
        ReportError: the run file cannot be written.
    """
    if not outcome.measured:
        return None
    stamp = run_files.Stamp(run_files.now_stamp().created, head.commit) if head.commit else None
    paths = {p.name: p.rel.as_posix() for p in pairs}
    return run_files.save_run(outcome.measured, paths, directory, stamp)
