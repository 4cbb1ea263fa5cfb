"""``fuseci ab``'s two sides and the pairs of suite files between them: the trees, which suite files are compared
and how each side has them, what the fingerprints say changed, and what a suite that is not measured says instead.
Nothing here measures (:mod:`fuseci.api.ab` does)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from fuseci import __version__
from fuseci.ab import changed_paths, git
from fuseci.ab.fingerprint import Fingerprint, differences, fingerprint, to_measure
from fuseci.ab.reader import Tree, tree_of
from fuseci.api.sharding import shard
from fuseci.config.model import Case, Suite
from fuseci.config.parse import load_suite
from fuseci.errors import FuseciError, UsageError
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Reference, Verdict

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
    """The repository's working tree, whose import paths are read in this side's tree instead; None: none mapped."""

    @property
    def tree(self) -> Tree:
        """Its tree as its harness processes import from it."""
        return tree_of(self.root, self.repo)


@dataclass(frozen=True, slots=True)
class SuitePair:
    """One suite file, as each side has it."""

    rel: Path
    """Its path relative to the repository's root: the path reports show."""
    base: Suite | None = None
    """The base's suite; None when the base has no such file or it could not be read."""
    head: Suite | None = None
    """The head's suite; None when the head has no such file."""
    base_problem: str = ""
    """Why the base's file could not be read (the head is then judged without a reference)."""
    base_print: Fingerprint | None = None
    """The base's fingerprint, when it has the suite."""
    head_print: Fingerprint | None = None
    """The head's fingerprint, when it has the suite."""
    cases: tuple[str, ...] | None = None
    """The head's cases to measure, in suite order; empty: none; None: every case."""
    seen: tuple[str, ...] = ()
    """Changes outside its cases' fingerprints that have cases measured anyway, said for people."""

    @property
    def name(self) -> str:
        """The suite id (the head's, else the base's)."""
        suite = self.head or self.base
        return suite.name if suite is not None else self.rel.stem

    @property
    def unchanged(self) -> bool:
        """Both sides have it, with the same fingerprint: a whole suite ``unchanged``."""
        a, b = self.base_print, self.head_print
        if a is None or b is None or a.unproven or b.unproven or self.seen:
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
        return [*planted, *differences(self.base_print, self.head_print), *self.seen]

    @property
    def unproven(self) -> list[str]:
        """What either side's fingerprint cannot follow."""
        return sorted({u for p in (self.base_print, self.head_print) if p for u in p.unproven})

    @property
    def unchanged_cases(self) -> list[Case]:
        """The head's cases not measured because their own code is the same on both sides."""
        if self.head is None or self.cases is None or self.unchanged:
            return []
        return [c for c in self.head.cases if c.id not in self.cases]

    def shown(self) -> Suite | None:
        """The head's suite as reports name it: at :attr:`rel`."""
        return None if self.head is None else replace(self.head, path=self.rel)


def reference_label(base: Side) -> str:
    """What the head was judged against, as reports say it: ``base 1a2b3c4 (same runner)``."""
    return f"{base.label} (same runner)"


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
    named: Sequence[Path] | None, base: Side, head: Side, *, cwd: Path, repo: Path, ignore: Sequence[str] = ()
) -> tuple[list[SuitePair], list[str]]:
    """The suite files to compare (default: every ``suites/*.yaml`` of either side, planted ones
    only when named), loaded on each side, with their fingerprints; and the head's files' problems.

    Raises:
        UsageError: no suite found, or a named file is outside the repository or on neither side.
    """
    if named:
        rels = list(dict.fromkeys(relative_suite(p, repo, cwd) for p in named))
    else:
        reldir = relative_suite(Path("suites") / "x.yaml", repo, cwd).parent
        rels = sorted(_default_suites(base.root, reldir) | _default_suites(head.root, reldir))
        if not rels:
            raise UsageError(f"no suite given and no {reldir.as_posix()}/*.yaml on either side; pass --suite FILE")
    pairs: list[SuitePair] = []
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
        before, after = _print(base_suite, base), _print(head_suite, head)
        cases = None
        if before is not None and after is not None and head_suite is not None:
            cases = to_measure(before, after, [c.id for c in head_suite.cases])
        pairs.append(SuitePair(rel, base_suite, head_suite, base_problem, before, after, cases))
    pairs = _with_changes(pairs, base, head, repo, ignore)
    ids: dict[str, Path] = {}
    for p in pairs:
        if p.name in ids:
            problems.append(
                f"{p.rel.as_posix()}: defines suite {p.name!r}, as {ids[p.name].as_posix()} does; give each suite "
                "its own id"
            )
        ids[p.name] = p.rel
    return pairs, problems


def _print(suite: Suite | None, side: Side) -> Fingerprint | None:
    """``suite``'s fingerprint in ``side``'s tree; None without the suite, or when its files cannot be read."""
    try:
        return None if suite is None else fingerprint(suite, side.tree)
    except OSError:
        return None


def _with_changes(pairs: list[SuitePair], base: Side, head: Side, repo: Path, ignore: Sequence[str]) -> list[SuitePair]:
    """``pairs`` with the cases that the changes between the sides force to be measured."""
    prints = {BASE: [p.base_print for p in pairs], HEAD: [p.head_print for p in pairs]}
    sights = {
        side.name: changed_paths.sight(
            side.root,
            {f for fp in prints[side.name] if fp is not None for f in fp.files},
            [p.rel.as_posix() for p in pairs if (p.base if side is base else p.head) is not None],
            side.tree.roots,
        )
        for side in (base, head)
    }
    try:
        changes = git.changes(repo, base.commit or "HEAD", head.commit)
    except (git.GitError, ValueError) as exc:
        forced: tuple[str, ...] = (f"what differs between the sides could not be listed ({exc})",)
    else:
        environment = changed_paths.environment_paths([repo, base.root, head.root])
        found = changed_paths.seen(changes, list(sights.values()), environment, ignore)
        forced = found.everything
        if not forced:
            return [_named_data(p, found.data, sights) for p in pairs]
    said = forced[0] + (f" and {len(forced) - 1} more" if len(forced) > 1 else "")
    reason = f"{said}, which no case's proven dependencies explain: every case of every suite measured"
    return [replace(p, cases=None, seen=(reason,)) if p.base and p.head else p for p in pairs]


def _named_data(pair: SuitePair, data: Sequence[str], sights: dict[str, changed_paths.Sight]) -> SuitePair:
    """``pair`` with each case measured whose code names a changed data file its fingerprint lacks."""
    if not data or pair.cases is None or pair.base_print is None or pair.head_print is None or pair.head is None:
        return pair
    more: list[str] = []
    said: list[str] = []
    for case in pair.head.cases:
        if case.id in pair.cases:
            continue
        for side, printed in ((BASE, pair.base_print), (HEAD, pair.head_print)):
            cp = printed.cases.get(case.id)
            held = set() if cp is None else {*cp.files, *cp.functions}
            suite = pair.rel.as_posix()
            named = [d for d in data if d not in held and changed_paths.naming(d, [*held, suite], sights[side])]
            if named:
                more.append(case.id)
                said.append(f"{named[0]} (named by case {case.id}'s code or suite file, not held by its fingerprint)")
                break
    if not more:
        return pair
    cases = tuple(c.id for c in pair.head.cases if c.id in pair.cases or c.id in more)
    return replace(pair, cases=cases, seen=tuple(said))


def pair_state(pair: SuitePair, base: Side, every: bool) -> str:
    """What ``fuseci ab`` does with a suite, for the line it says before measuring."""
    if pair.head is None:
        return f"removed (only in {base.label}): not measured"
    if pair.base is None:
        why = f"unreadable in {base.label}" if pair.base_problem else f"added (not in {base.label})"
        return f"{why}: judged without a reference"
    if pair.unchanged:
        return "unchanged: measured anyway (--all)" if every else "unchanged, not measured"
    changes, unproven = pair.changes, pair.unproven
    state = "changed: " + ", ".join(changes) if changes else "not proven unchanged"
    if unproven:
        said = "; ".join(unproven[:3]) + (f"; and {len(unproven) - 3} more" if len(unproven) > 3 else "")
        state = f"{state} (fuseci ab cannot follow: {said})"
    elif not changes:
        state = "changed: measured"
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


def _cases(n: int) -> str:
    return f"{n} case{'s' if n != 1 else ''}"


def _relative_message(message: str, root: Path, rel: Path) -> str:
    """A suite error's message with the side's temporary path shown as the repository's."""
    return message.replace(str(root / rel), rel.as_posix())


def shard_pairs(pairs: list[SuitePair], k: int, n: int) -> list[SuitePair]:
    """Shard ``k`` of ``n``'s pairs: whole suites dealt out as ``fuseci run --shard`` deals them."""
    suites = [p.head or p.base for p in pairs]
    chosen = {id(s) for s in shard([s for s in suites if s is not None], k, n)}
    return [p for p, s in zip(pairs, suites, strict=True) if id(s) in chosen]


def _not_measured(pair: SuitePair, verdict: Verdict, message: str, description: str, base: Side) -> Comparison:
    """A suite fuseci ab did not measure, and why."""
    suite = pair.head or pair.base
    check = MetricDelta("(suite)", "", CheckKind.CASE, "", verdict, message)
    return _unmeasured(pair, (CaseResult("(suite)", suite.line if suite else 0, description, (check,), ()),), base)


def _unmeasured(pair: SuitePair, cases: tuple[CaseResult, ...], base: Side) -> Comparison:
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
    """A case not measured because the code it runs is the same on both sides: one PASS check; with
    ``noted``, a note too (a table of measured cases shows no check that passed)."""
    message = (
        f"unchanged, not measured: the suite file, the code this case runs ({', '.join(case.functions)}, what they "
        f"call, their modules' import-time code and the files they import) and fuseci {__version__} are identical "
        f"in {base.label} and {head.label} (--all measures it anyway)"
    )
    check = MetricDelta(case.id, "", CheckKind.CASE, "", Verdict.PASS, message)
    note = f"unchanged, not measured: its code is identical in {base.label} and {head.label} (--all measures it)"
    return CaseResult(case.id, case.line, case.description, (check,), (), (note,) if noted else ())


def with_unchanged(comparison: Comparison, pair: SuitePair, base: Side, head: Side) -> Comparison:
    """A partly measured suite's comparison: each unchanged case ``unchanged, not measured``, in suite order."""
    assert pair.head is not None
    kept = {c.id for c in pair.unchanged_cases}
    # A case in the base's results the head's were not asked for is unmeasured, not removed (same suite files).
    judged = {c.case: c for c in comparison.cases if c.case not in kept}
    cases = [
        unchanged_case(c, base, head, noted=True) if c.id in kept else judged.pop(c.id)
        for c in pair.head.cases
        if c.id in kept or c.id in judged
    ]
    return replace(comparison, cases=(*cases, *judged.values()))


def unchanged_comparison(pair: SuitePair, base: Side, head: Side) -> Comparison:
    """``unchanged, not measured``: what was compared, and how to measure it anyway."""
    printed = pair.head_print
    files = sorted(printed.files) if printed else []
    listed = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    modules = f"{len(files)} module file{'s' if len(files) != 1 else ''} ({listed})" if files else "no module file"
    version = printed.fuseci_version if printed else "?"
    said = "unchanged, not measured"
    message = f"{said}: the suite file, {modules} and fuseci {version} are identical in {base.label} and {head.label}"
    return _not_measured(pair, Verdict.PASS, f"{message} (--all measures it anyway)", said, base)


def skipped(pair: SuitePair, base: Side, head: Side) -> Comparison:
    """The comparison of a pair that is not measured: removed, unchanged, or no case's code changed."""
    if pair.head is None:
        removed = f"removed: {pair.rel.as_posix()} is in {base.label} but not in {head.label}; not measured"
        return _not_measured(pair, Verdict.MISSING, removed, "removed", base)
    if pair.unchanged:
        return unchanged_comparison(pair, base, head)
    return _unmeasured(pair, tuple(unchanged_case(c, base, head) for c in pair.head.cases), base)


@contextmanager
def trees(base_ref: str, head_ref: str | None, cwd: Path) -> Iterator[tuple[Path, Side, Side]]:
    """The repository's root and the two sides, for the block: temporary worktrees of ``base_ref``
    and ``head_ref`` (without it, the working tree), removed however the block ends.

    Raises:
        GitError: git is missing, ``cwd`` is in no repository, a ref is no commit, or no worktree.
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
