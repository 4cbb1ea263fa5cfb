"""``fuseci ab``: a pull request judged against its base on the same runner.

The base's suite files and kernel modules come from a temporary git worktree of the base commit
(:mod:`fuseci.ab.git`); the head is the working tree as it is, or a second worktree. Per suite,
both sides are measured on the same GPU in one job, the base first, then the head (A B A B ...,
never all of A then all of B), each in its own processes run in its own tree
(:func:`side_options`). The base's results become, in memory, the baseline the head is judged
against (:func:`fuseci.judge.runs.baseline_of`, as ``fuseci compare`` makes one of a run), with
the head's suite file giving the gates, tolerances and expectations; the verdicts are those of
``fuseci run``. A borderline CUDA-event speedup is re-measured on both sides, pass for pass
(:func:`judge_pair`). No stored baseline is read or written.

A suite whose fingerprint (:mod:`fuseci.ab.fingerprint`) is the same on both sides is not
measured (``unchanged, not measured``) unless ``every``. When only module files differ (the
suite file and fuseci are the same on both sides), only the cases whose own fingerprint
(:mod:`fuseci.ab.cases`) differs are measured, on both sides; the others stand as ``unchanged,
not measured`` cases among the judged ones; what the fingerprints cannot follow is always
measured, and what each measured case ran is audited against its fingerprint
(:mod:`fuseci.ab.audit`). A suite file on one side only is
``added`` (measured and judged without a reference: correctness, expectations, the bytes
allowance, planted regressions) or ``removed`` (said, not measured).
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from fuseci import __version__
from fuseci.ab import git
from fuseci.ab.audit import Measured, audited
from fuseci.ab.cases import changed_cases
from fuseci.ab.fingerprint import Fingerprint, Tree, differences, fingerprint, tree_of
from fuseci.api.running import Progress, Silent
from fuseci.api.sharding import shard
from fuseci.config.model import Case, Suite
from fuseci.config.parse import load_suite
from fuseci.errors import BaselineError, FuseciError, MismatchError, NcuError, UsageError
from fuseci.frames.metrics import SuiteResults, summarize
from fuseci.judge.compare import compare
from fuseci.judge.runs import baseline_of
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Reference, Verdict, failed
from fuseci.measure import devices, process
from fuseci.measure import profile as profiler
from fuseci.measure.command import AUDIT_TREE_ENV, FOREIGN_TREE_ENV, SuiteFiles
from fuseci.measure.record import write_record
from fuseci.measure.run import REFERENCE_PASSES, RETIMES, MeasureOptions, measure, timed_pass
from fuseci.store import runs as run_files

log = logging.getLogger("fuseci.api")

BASE, HEAD = "base", "head"


@dataclass(frozen=True, slots=True)
class Side:
    """One side of the comparison: a tree and what to call it."""

    name: str
    """``base`` or ``head``: also its subdirectory of the report directory."""
    label: str
    """What reports call it: ``base 1a2b3c4``, ``head 5d6e7f8``, ``the working tree``."""
    root: Path
    """The root of its tree (a temporary worktree, or the repository's working tree)."""
    commit: str | None = None
    """Its commit; None for the working tree (which may hold uncommitted changes)."""
    repo: Path | None = None
    """The repository's working tree: where the environment's import paths into the repository
    point (``PYTHONPATH``, ``.pth`` files, editable installs), each read in this side's tree
    instead (:func:`fuseci.ab.fingerprint.tree_of`); None: none are mapped."""

    @property
    def tree(self) -> Tree:
        """Its tree as its harness processes import from it."""
        return tree_of(self.root, self.repo)


@dataclass(frozen=True, slots=True)
class Pair:
    """One suite file, as each side has it."""

    rel: Path
    """Its path relative to the repository's root: the path reports show."""
    base: Suite | None = None
    """The base's suite (its path inside the base tree); None when the base has no such file or
    it could not be read (:attr:`base_problem`)."""
    head: Suite | None = None
    """The head's suite (its path inside the head tree); None when the head has no such file."""
    base_problem: str = ""
    """Why the base's file could not be read (the head is then judged without a reference)."""
    base_print: Fingerprint | None = None
    """The base's fingerprint (both sides loaded)."""
    head_print: Fingerprint | None = None
    """The head's fingerprint (both sides loaded)."""
    cases: tuple[str, ...] | None = None
    """The head's cases whose own fingerprint differs from the base's, in suite order, when only
    module files differ between the sides (:func:`case_changes`); None: every case counts as
    changed (the suite file or fuseci differs, or one side lacks the suite)."""

    @property
    def name(self) -> str:
        """The suite id (the head's, else the base's)."""
        suite = self.head or self.base
        return suite.name if suite is not None else self.rel.stem

    @property
    def unchanged(self) -> bool:
        """Both sides have it, with the same fingerprint (nothing they are measured from differs)."""
        a, b = self.base_print, self.head_print
        if a is None or b is None or a.unproven or b.unproven:
            return False
        return a.complete and a.digest == b.digest

    @property
    def changes(self) -> list[str]:
        """What differs between the sides' fingerprints, for people."""
        if self.base_print is None or self.head_print is None:
            return []
        planted = (
            []
            if self.base is None or self.head is None or self.base.planted == self.head.planted
            else [f"planted: {str(self.base.planted).lower()} -> {str(self.head.planted).lower()}"]
        )
        return [*planted, *differences(self.base_print, self.head_print)]

    @property
    def unproven(self) -> list[str]:
        """What either side's fingerprint cannot follow (its cases are measured whatever changed)."""
        return sorted(
            {
                *(self.base_print.unproven if self.base_print else ()),
                *(self.head_print.unproven if self.head_print else ()),
            }
        )

    @property
    def unchanged_cases(self) -> list[Case]:
        """The head's cases not measured because their own code is the same on both sides
        (none when :attr:`cases` is None)."""
        if self.head is None or self.cases is None or self.unchanged:
            return []
        return [c for c in self.head.cases if c.id not in self.cases]

    def shown(self) -> Suite | None:
        """The head's suite as reports name it: at :attr:`rel`."""
        return None if self.head is None else replace(self.head, path=self.rel)


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


class Measurer(Protocol):
    """How a side's suite is measured; tests stand in for the GPU with recorded reports."""

    def ready(self) -> None:
        """Raise :class:`~fuseci.errors.NcuError` when nothing can be measured here."""

    def measure(self, suite: Suite, options: MeasureOptions) -> SuiteResults:
        """Profile and time ``suite`` (:func:`fuseci.measure.run.measure`)."""

    def retime(self, suite: Suite, options: MeasureOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
        """One more timed pass of ``cases``, in a fresh process; the results with it."""


class Profiler:
    """The real :class:`Measurer`: ncu and the timed pass, as ``fuseci run`` measures."""

    def __init__(self, ncu: str | None = None) -> None:
        self.ncu = ncu

    def ready(self) -> None:
        """ncu is there and runs."""
        profiler.ncu_version(profiler.find_ncu(self.ncu))

    def measure(self, suite: Suite, options: MeasureOptions) -> SuiteResults:
        """:func:`fuseci.measure.run.measure`."""
        return measure(suite, options)

    def retime(self, suite: Suite, options: MeasureOptions, results: SuiteResults, cases: list[str]) -> SuiteResults:
        """One timed pass of ``cases`` added to each case's passes; the record beside the report rewritten."""
        record = timed_pass(suite, options, results.record, cases, again=True)
        write_record(record, SuiteFiles(options.report_dir, suite.name).record)
        return summarize(results.kernels, record)


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


def reference_label(base: Side) -> str:
    """What the head was judged against, as reports say it: ``base 1a2b3c4 (same runner)``."""
    return f"{base.label} (same runner)"


# --- which suites ------------------------------------------------------------------------------


def relative_suite(path: Path, root: Path, cwd: Path) -> Path:
    """A suite file named on the command line, as a path relative to the repository's root.

    Raises:
        UsageError: it lies outside the repository, or is not a .yaml/.yml file.
    """
    full = Path(os.path.realpath(cwd / path))
    real_root = Path(os.path.realpath(root))
    if not full.is_relative_to(real_root):
        raise UsageError(
            f"{path}: is outside the git repository {root}; fuseci ab compares the repository's own suite files: "
            "pass one inside it"
        )
    if full.suffix not in (".yaml", ".yml"):
        raise UsageError(f"{path}: a suite file is a .yaml or .yml file")
    return full.relative_to(real_root)


def _default_suites(root: Path, reldir: Path) -> set[Path]:
    folder = root / reldir
    return {reldir / p.name for p in folder.glob("*.yaml")} if folder.is_dir() else set()


def pair_suites(
    named: Sequence[Path] | None, base: Side, head: Side, *, cwd: Path, repo: Path
) -> tuple[list[Pair], list[str]]:
    """The suite files to compare, loaded on each side, with their fingerprints; and the
    problems of the head's suite files (each one line naming the file and the fix).

    Default: every ``suites/*.yaml`` of either side (the ``suites`` directory under ``cwd``,
    relative to the repository at ``repo``), planted-regression suites only when named, as
    ``fuseci run``. A named file may be on one side only.

    Raises:
        UsageError: no suite named and none found on either side, or a named file is outside the
            repository or on neither side.
    """
    if named:
        rels = list(dict.fromkeys(relative_suite(p, repo, cwd) for p in named))
    else:
        reldir = relative_suite(Path("suites") / "x.yaml", repo, cwd).parent
        rels = sorted(_default_suites(base.root, reldir) | _default_suites(head.root, reldir))
        if not rels:
            raise UsageError(f"no suite given and no {reldir.as_posix()}/*.yaml on either side; pass --suite FILE")
    pairs: list[Pair] = []
    problems: list[str] = []
    for rel in rels:
        in_base, in_head = (base.root / rel).is_file(), (head.root / rel).is_file()
        if not in_base and not in_head:
            raise UsageError(f"{rel.as_posix()}: no such suite file in {base.label} nor in {head.label}")
        head_suite = base_suite = None
        base_problem = ""
        if in_head:
            try:
                head_suite = load_suite(head.root / rel)
            except FuseciError as exc:
                problems.append(_relative_message(str(exc), head.root, rel))
                continue
        if in_base:
            try:
                base_suite = load_suite(base.root / rel)
            except FuseciError as exc:
                base_problem = _relative_message(str(exc), base.root, rel)
        # A planted suite is left out unless named; one whose flag differs between the sides is not
        # (gaining planted: true must not take a suite out of the gate).
        if not named and all(s.planted for s in (head_suite, base_suite) if s is not None):
            log.info("skipping planted-regression suite %s; name the file to run it", rel.as_posix())
            continue
        pair = Pair(rel, base_suite, head_suite, base_problem)
        if head_suite is not None and base_suite is not None:
            pair = replace(
                pair, base_print=fingerprint(base_suite, base.tree), head_print=fingerprint(head_suite, head.tree)
            )
            pair = replace(pair, cases=case_changes(pair, base, head))
        pairs.append(pair)
    ids: dict[str, Path] = {}
    for p in pairs:
        if p.name in ids:
            problems.append(
                f"{p.rel.as_posix()}: defines suite {p.name!r}, as {ids[p.name].as_posix()} does; give each suite "
                "its own id"
            )
        ids[p.name] = p.rel
    return pairs, problems


def case_changes(pair: Pair, base: Side, head: Side) -> tuple[str, ...] | None:
    """The head's cases to measure when the sides differ only in module files: those whose case
    fingerprint differs (:func:`fuseci.ab.cases.changed_cases`), in suite order; None when every
    case is to be measured (the suite file, fuseci, or which named modules are installed differ,
    or a fingerprint is incomplete)."""
    a, b = pair.base_print, pair.head_print
    if pair.base is None or pair.head is None or a is None or b is None or pair.unchanged:
        return None
    if not (a.complete and b.complete) or a.beside_files != b.beside_files:
        return None
    return changed_cases(pair.base, base.tree, pair.head, head.tree)


def pair_state(pair: Pair, base: Side, every: bool) -> str:
    """What ``fuseci ab`` does with a suite, for the line it says before measuring."""
    if pair.head is None:
        return f"removed (only in {base.label}): not measured"
    if pair.base is None:
        if pair.base_problem:
            return f"unreadable in {base.label}: judged without a reference"
        return f"added (not in {base.label}): judged without a reference"
    if pair.unchanged:
        return "unchanged: measured anyway (--all)" if every else "unchanged, not measured"
    state = _changed_state(pair)
    kept = pair.unchanged_cases
    if not kept:
        return state
    total = len(pair.head.cases)
    if every:
        return f"{state}; {_cases(len(kept))} unchanged, measured anyway (--all)"
    if len(kept) == total:
        return f"{state}; no case's code changed: {_cases(total)} unchanged, not measured"
    cases = pair.cases or ()
    return (
        f"{state}; measuring {len(cases)} of {_cases(total)} ({', '.join(cases)}), {len(kept)} unchanged, not measured"
    )


def _changed_state(pair: Pair) -> str:
    """``changed: <what>``, with what the fingerprints cannot follow."""
    changes, unproven = pair.changes, pair.unproven
    state = "changed: " + ", ".join(changes) if changes else "not proven unchanged"
    if not unproven:
        return state if changes else "changed: measured"
    said = "; ".join(unproven[:3]) + (f"; and {len(unproven) - 3} more" if len(unproven) > 3 else "")
    return f"{state} (fuseci ab cannot follow: {said})"


def _cases(n: int) -> str:
    return f"{n} case{'s' if n != 1 else ''}"


def _relative_message(message: str, root: Path, rel: Path) -> str:
    """A suite error's message with the side's temporary path shown as the repository's."""
    return message.replace(str(root / rel), rel.as_posix())


def shard_pairs(pairs: list[Pair], k: int, n: int) -> list[Pair]:
    """Shard ``k`` of ``n``'s pairs: whole suites dealt out as ``fuseci run --shard`` deals them."""
    suites = [p.head or p.base for p in pairs]
    chosen = {id(s) for s in shard([s for s in suites if s is not None], k, n)}
    return [p for p, s in zip(pairs, suites, strict=True) if id(s) in chosen]


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
        gpu_lock=devices.lock_path(None),
        on_stage=on_stage,
        cwd=side.root,
        extra_env=side_env(side, other),
        cache_root=report_dir,
        passes=REFERENCE_PASSES if side.name == BASE else 1,
    )


def own_files(pairs: Sequence[Pair], options: AbOptions) -> list[tuple[Path, str]]:
    """Every file measuring either side of ``pairs`` writes (``<report-dir>/<side>``), with what
    it is: no report may be one of them."""
    report_dir = options.report_dir.absolute()
    return [f for p in pairs for side in (BASE, HEAD) for f in SuiteFiles(report_dir / side, p.name).written]


def _not_measured(pair: Pair, verdict: Verdict, message: str, description: str, base: Side) -> Comparison:
    """A suite fuseci ab did not measure, and why."""
    suite = pair.head or pair.base
    check = MetricDelta("(suite)", "", CheckKind.CASE, "", verdict, message)
    return _unmeasured(pair, (CaseResult("(suite)", suite.line if suite else 0, description, (check,), ()),), base)


def _unmeasured(pair: Pair, cases: tuple[CaseResult, ...], base: Side) -> Comparison:
    """A comparison of ``pair`` made of ``cases`` alone, nothing measured (no environment)."""
    return Comparison(
        suite=pair.name,
        suite_path=pair.rel.as_posix(),
        env={},
        baseline_path=reference_label(base),
        has_baseline=True,
        env_differences=(),
        cases=cases,
        reference=Reference("", name=base.label),
    )


def unchanged_case(case: Case, base: Side, head: Side, *, noted: bool = False) -> CaseResult:
    """A case not measured because the code it runs is the same on both sides: one PASS check
    saying what was compared; with ``noted``, a note saying so too (a table of measured cases
    shows no check that passed)."""
    message = (
        f"unchanged, not measured: the suite file, the code this case runs ({', '.join(case.functions)}, what they "
        f"call, their modules' import-time code and the files they import) and fuseci {__version__} are identical "
        f"in {base.label} and {head.label} (--all measures it anyway)"
    )
    check = MetricDelta(case.id, "", CheckKind.CASE, "", Verdict.PASS, message)
    note = f"unchanged, not measured: its code is identical in {base.label} and {head.label} (--all measures it)"
    return CaseResult(case.id, case.line, case.description, (check,), (), (note,) if noted else ())


def cases_unchanged_comparison(pair: Pair, base: Side, head: Side) -> Comparison:
    """A suite whose module files differ between the sides but no case's code (a comment, code
    no case runs): each case ``unchanged, not measured``."""
    assert pair.head is not None
    return _unmeasured(pair, tuple(unchanged_case(c, base, head) for c in pair.head.cases), base)


def with_unchanged(comparison: Comparison, pair: Pair, base: Side, head: Side) -> Comparison:
    """The comparison of a partly measured suite: the measured cases as judged, each unchanged
    case ``unchanged, not measured``, in suite order (then any case only the base has)."""
    assert pair.head is not None
    kept = {c.id for c in pair.unchanged_cases}
    # A case the base's results hold but the head's were not asked for is no removed case: it
    # was not measured (the suite files are identical, so both sides have the same cases).
    judged = {c.case: c for c in comparison.cases if c.case not in kept}
    cases = [
        unchanged_case(c, base, head, noted=True) if c.id in kept else judged.pop(c.id)
        for c in pair.head.cases
        if c.id in kept or c.id in judged
    ]
    return replace(comparison, cases=(*cases, *judged.values()))


def unchanged_comparison(pair: Pair, base: Side, head: Side) -> Comparison:
    """``unchanged, not measured``: what was compared, and how to measure it anyway."""
    printed = pair.head_print
    files = sorted(printed.files) if printed else []
    listed = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    modules = f"{len(files)} module file{'s' if len(files) != 1 else ''} ({listed})" if files else "no module file"
    version = printed.fuseci_version if printed else "?"
    return _not_measured(
        pair,
        Verdict.PASS,
        f"unchanged, not measured: the suite file, {modules} and fuseci {version} are identical in {base.label} "
        f"and {head.label} (--all measures it anyway)",
        "unchanged, not measured",
        base,
    )


def removed_comparison(pair: Pair, base: Side, head: Side) -> Comparison:
    """A suite file the base has and the head does not: said, not measured, not a failure."""
    return _not_measured(
        pair,
        Verdict.MISSING,
        f"removed: {pair.rel.as_posix()} is in {base.label} but not in {head.label}; not measured",
        "removed",
        base,
    )


def judge(
    pair: Pair,
    head_results: SuiteResults,
    base_results: SuiteResults | None,
    base: Side,
    accept_env: frozenset[str],
    only: tuple[str, ...] | None = None,
) -> Comparison:
    """The head's results judged against the base's, as ``fuseci run`` judges against a stored
    baseline: the base's results made the baseline in memory; without them (an added suite, or a
    base suite file that could not be read) with no reference. With ``only``, the suite's other
    cases are left out (they were not measured).

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
    return compare(
        head_results,
        shown,
        baseline_of(base_results),
        baseline_path=reference_label(base),
        accept_env=accept_env,
        reference=Reference("", name=base.label),
    )


def retry_cases(comparison: Comparison) -> list[str]:
    """The cases with a borderline CUDA-event speedup to re-measure."""
    return sorted({k.case for case in comparison.cases for k in case.checks if k.retry})


class _Flights:
    """The measurements in flight, and what the first machine-wide ncu failure said."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: set[Path] = set()
        self.machine: list[str] = []


def run_ab(
    pairs: Sequence[Pair],
    base: Side,
    head: Side,
    options: AbOptions,
    progress: Progress | None = None,
    measurer: Measurer | None = None,
) -> AbOutcome:
    """Measure and judge every pair; a suite that fails stands as one ``ERROR``, the others
    still run. The comparisons are in the order of ``pairs``.

    Measurements are submitted in order, the base's before the head's of each suite, at most
    :attr:`AbOptions.in_flight` at once; the harness processes take turns on the GPU through
    its lock. Each suite is judged as soon as both its sides are measured, while later ones are
    measured.

    Raises:
        MismatchError: a report and its record are not one run's (nothing is judged then).
    """
    listener = progress or Silent()
    tool = measurer or Profiler(options.ncu)
    flights = _Flights()
    todo = [p for p in pairs if p.head is not None and (options.every or not (p.unchanged or p.cases == ()))]
    total = len(todo)
    order = {id(p): i for i, p in enumerate(todo, 1)}
    if todo:
        try:
            tool.ready()
        except NcuError as exc:
            return _no_ncu(pairs, todo, order, exc, base, head, options, listener)
    sides = {BASE: (base, head), HEAD: (head, base)}

    def heard(pair: Pair, side: str) -> Callable[[str, Path | None], None]:
        shown = pair.shown()

        def stage(what: str, watch: Path | None = None) -> None:
            if shown is not None:
                listener.stage(shown, f"{sides[side][0].label}: {what}", watch)

        return stage

    def one(pair: Pair, side: str) -> SuiteResults:
        shown = pair.shown()
        assert shown is not None
        with flights.lock:
            first = pair.rel not in flights.started
            flights.started.add(pair.rel)
            machine = list(flights.machine)
        if first:
            listener.suite_started(shown, order[id(pair)], total)
        if machine:
            raise NcuError(f"not run: ncu cannot profile on this machine ({machine[0]} says why)")
        suite = pair.base if side == BASE else pair.head
        assert suite is not None
        mine, other = sides[side]
        chosen = replace(side_options(mine, other, options, heard(pair, side)), cases=measured_cases(pair, options))
        try:
            return tool.measure(suite, chosen)
        except NcuError as exc:
            if exc.machine_wide:
                with flights.lock:
                    flights.machine.append(pair.name)
            raise

    pool = ThreadPoolExecutor(max_workers=max(1, options.in_flight))
    futures: dict[tuple[int, str], Future[SuiteResults]] = {}
    comparisons: list[Comparison] = []
    measured: list[SuiteResults] = []
    base_measured: list[SuiteResults] = []
    try:
        for p in todo:
            if p.base is not None:
                futures[(id(p), BASE)] = pool.submit(one, p, BASE)
            futures[(id(p), HEAD)] = pool.submit(one, p, HEAD)
        for p in pairs:
            if id(p) not in order:
                comparisons.append(_skipped(p, base, head, options))
                listener.suite_judged(comparisons[-1])
                continue
            comparison, results = _judged(p, futures, base, head, options, tool, listener, heard)
            comparisons.append(comparison)
            if results[0] is not None:
                measured.append(results[0])
            if results[1] is not None:
                base_measured.append(results[1])
            listener.suite_judged(comparison)
    except BaseException:  # Ctrl-C, SIGTERM or a bug: stop every child of every measurement in flight
        for f in futures.values():
            f.cancel()
        process.stop_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    unchanged = tuple(p.name for p in pairs if id(p) not in order and p.head is not None)
    return AbOutcome(tuple(comparisons), tuple(measured), tuple(base_measured), unchanged)


def _no_ncu(
    pairs: Sequence[Pair],
    todo: list[Pair],
    order: dict[int, int],
    exc: NcuError,
    base: Side,
    head: Side,
    options: AbOptions,
    listener: Progress,
) -> AbOutcome:
    """ncu cannot profile here: the first suite to measure says why, the others point at it."""
    first = todo[0].shown()
    assert first is not None
    listener.suite_failed(first, exc)
    out = []
    for p in pairs:
        shown = p.shown()
        if id(p) not in order or shown is None:
            out.append(_skipped(p, base, head, options))
        elif order[id(p)] == 1:
            out.append(failed(shown, str(exc)))
        else:
            out.append(failed(shown, f"not run: ncu cannot profile here ({first.name} says why)"))
    return AbOutcome(tuple(out), ())


def measured_cases(pair: Pair, options: AbOptions) -> tuple[str, ...] | None:
    """The cases of ``pair`` to measure on both sides; None: every case."""
    return None if options.every or pair.unchanged else pair.cases


def _skipped(pair: Pair, base: Side, head: Side, options: AbOptions) -> Comparison:
    """The comparison of a pair that is not measured: removed, unchanged, or no case changed."""
    if pair.head is None:
        return removed_comparison(pair, base, head)
    if pair.unchanged:
        return unchanged_comparison(pair, base, head)
    return cases_unchanged_comparison(pair, base, head)


def _judged(
    pair: Pair,
    futures: dict[tuple[int, str], Future[SuiteResults]],
    base: Side,
    head: Side,
    options: AbOptions,
    tool: Measurer,
    listener: Progress,
    heard: Callable[[Pair, str], Callable[[str, Path | None], None]],
) -> tuple[Comparison, tuple[SuiteResults | None, SuiteResults | None]]:
    """Wait for a pair's measurements and judge it, re-measuring borderline speedups on both
    sides; an ERROR comparison when a side could not be measured."""
    shown = pair.shown()
    assert shown is not None
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
            who = base.label if side == BASE else head.label
            message = (
                str(exc) if side == HEAD or str(exc).startswith("not run") else f"{who} could not be measured: {exc}"
            )
            listener.suite_failed(shown, FuseciError(message))
            return failed(shown, message), (got[HEAD], got[BASE])
    head_results, base_results = got[HEAD], got[BASE]
    assert head_results is not None
    only = measured_cases(pair, options)
    try:
        comparison = judge(pair, head_results, base_results, base, options.accept_env, only)
        cases = retry_cases(comparison)
        if cases and base_results is not None and pair.base is not None and pair.head is not None:
            # Both sides, pass for pass: a base that happened to measure fast must not stand as the
            # reference while only the head gets more passes (A/A would then fail more often).
            ok_base = [c for c in cases if c in base_results.record.ok_cases()]
            base_opts = side_options(base, head, options, heard(pair, BASE))
            head_opts = side_options(head, base, options, heard(pair, HEAD))
            log.info("%s: re-measuring borderline speedup(s) of %s on both sides", pair.name, ", ".join(cases))
            for _ in range(RETIMES):
                if ok_base:
                    base_results = tool.retime(pair.base, base_opts, base_results, ok_base)
                head_results = tool.retime(pair.head, head_opts, head_results, cases)
            comparison = judge(pair, head_results, base_results, base, options.accept_env, only)
    except BaselineError as exc:
        message = f"the results of {base.label} cannot serve as the reference ({exc})"
        return failed(shown, message), (head_results, base_results)
    except FuseciError as exc:
        listener.suite_failed(shown, exc)
        return failed(shown, str(exc)), (head_results, base_results)
    comparison = audited(
        comparison, [_measured(pair.base, base, base_results), _measured(pair.head, head, head_results)]
    )
    if only is not None:
        comparison = with_unchanged(comparison, pair, base, head)
    return comparison, (head_results, base_results)


def _measured(suite: Suite | None, side: Side, results: SuiteResults | None) -> Measured | None:
    """One side's measurement, for the audit of its case fingerprints (:mod:`fuseci.ab.audit`)."""
    return None if suite is None or results is None else Measured(suite, side.tree, results.record, side.label)


# --- the trees -----------------------------------------------------------------------------------


@contextmanager
def trees(base_ref: str, head_ref: str | None, cwd: Path) -> Iterator[tuple[Path, Side, Side]]:
    """The repository's root and the two sides, for the block: the base a temporary worktree of
    ``base_ref``, the head one of ``head_ref`` or, without it, the working tree as it is
    (uncommitted changes included). The worktrees are removed however the block ends.

    Raises:
        GitError: git is missing, ``cwd`` is in no repository, a ref names no commit, or a
            worktree could not be made.
    """
    repo = git.repo_root(cwd)
    git.prune(repo)  # the registrations a killed run left
    base_sha = git.commit_of(repo, base_ref, "BASE")
    head_sha = git.commit_of(repo, head_ref, "HEAD") if head_ref is not None else None
    with ExitStack() as held:
        base_root = held.enter_context(git.worktree(repo, base_sha))
        base = Side(BASE, f"base {git.short(base_sha)}", base_root, base_sha, repo)
        if head_sha is None:
            head = Side(HEAD, "the working tree", repo, repo=repo)
        else:
            head_root = held.enter_context(git.worktree(repo, head_sha))
            head = Side(HEAD, f"head {git.short(head_sha)}", head_root, head_sha, repo)
        yield repo, base, head


def keep_head_run(outcome: AbOutcome, pairs: Sequence[Pair], head: Side, directory: Path) -> Path | None:
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
