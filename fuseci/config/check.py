"""Checking suite files before a GPU is involved (``fuseci check``, and ``fuseci run`` before it measures): each
file, then the files together (suite ids, ``module:function`` references and their parameters). Every problem is
kept with its file and line; notes (not verified, small inputs) fail nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fuseci.config import names
from fuseci.config.dtypes import FRAMEWORKS
from fuseci.config.model import Case, Suite
from fuseci.config.parse import check_suite
from fuseci.config.resolve import ModuleFinder, Parameters, Unresolved, parameters, resolve_suite, suite_finder
from fuseci.config.values import shown, yaml_number_hint
from fuseci.wording import did_you_mean

#: Problems listed per file (a hostile file can hold tens of thousands).
MAX_LISTED = 50

#: The L2 cache of the data-centre cards fuseci knows, in bytes, as the CUDA driver reports it.
KNOWN_L2_BYTES: dict[str, int] = {"H100": 50 << 20, "H200": 60 << 20}
#: Inputs should span this many L2s, else writes stay in L2 and DRAM bytes miss them (as ``event_timing.L2_SPAN``).
L2_SPAN = 4


@dataclass(frozen=True, slots=True)
class SuiteProblem:
    """One thing wrong with (or, as a note, worth saying about) a suite file."""

    path: Path
    """The suite file."""
    line: int
    """Line of the offending key (0 when unknown)."""
    message: str
    """One line: the file, the line, the field, what is wrong and the fix."""
    suite: str
    """The suite's id, or the file's stem when it could not be read."""


@dataclass(frozen=True, slots=True)
class FileCheck:
    """What checking one suite file found."""

    path: Path
    """The suite file, as given."""
    suite: Suite | None
    """The suite, when the file is valid on its own (it may still clash with another file)."""
    problems: tuple[SuiteProblem, ...]
    """The problems listed, in file order: at most :data:`MAX_LISTED`."""
    unlisted: int = 0
    """Problems found beyond those listed."""
    unverified: tuple[Unresolved, ...] = ()
    """References that exist but whose names could not be read from source."""
    warnings: tuple[SuiteProblem, ...] = ()
    """What is worth a look but fails nothing (inputs smaller than the L2 span)."""

    @property
    def problem_count(self) -> int:
        """Every problem found, listed or not."""
        return len(self.problems) + self.unlisted

    @property
    def name(self) -> str:
        """The suite's id, or the file's stem when it could not be read."""
        return self.suite.name if self.suite is not None else self.path.stem

    @property
    def reported(self) -> tuple[SuiteProblem, ...]:
        """The problems to show: those listed, and one that says how many more there are."""
        if not self.unlisted:
            return self.problems
        more = SuiteProblem(
            self.path,
            0,
            f"{self.path}: {_count(self.unlisted, 'more problem')} not listed; fix those above and check again",
            self.name,
        )
        return (*self.problems, more)

    @property
    def unverified_notes(self) -> tuple[SuiteProblem, ...]:
        """Each unverified reference as a note at its line."""
        return tuple(
            SuiteProblem(
                self.path,
                f.line,
                f"{self.path}:{f.line}: {f.field}: {f.ref!r} not verified: {f.resolution.unverified}; the run imports "
                "it and says if it is missing",
                self.name,
            )
            for f in self.unverified
        )

    def summary(self) -> str:
        """One line for a file without problems: ``ok``, or which references are not verified."""
        if self.suite is None:
            return f"{self.path}: {_count(self.problem_count, 'problem')}"
        s = self.suite
        variants = sum(len(c.variants) for c in s.cases)
        line = f"{s.path}: suite {s.name}: {_count(len(s.cases), 'case')}, {_count(variants, 'variant')}"
        line += ", planted regressions" if s.planted else ""
        if self.problem_count:
            return f"{line}: {_count(self.problem_count, 'problem')}"
        if self.unverified:
            why = "; ".join(f"{f.ref!r} (line {f.line}): {f.resolution.unverified}" for f in self.unverified)
            return (
                f"{line}: {_count(len(self.unverified), 'reference')} not verified: {why}; the run imports "
                f"{'them' if len(self.unverified) > 1 else 'it'} and says if one is missing"
            )
        warned = f" ({_count(len(self.warnings), 'warning')})" if self.warnings else ""
        return f"{line}: ok{warned}"


@dataclass(frozen=True, slots=True)
class SuiteCheck:
    """Every file checked, in the order given."""

    files: tuple[FileCheck, ...]
    """One per file."""

    @property
    def suites(self) -> tuple[Suite, ...]:
        """Suites valid on their own (a file may still have problems across files: a shared id, a missing function)."""
        return tuple(f.suite for f in self.files if f.suite is not None)

    @property
    def problems(self) -> tuple[SuiteProblem, ...]:
        """Every problem to show, file by file (:attr:`FileCheck.reported`)."""
        return tuple(p for f in self.files for p in f.reported)

    @property
    def problem_count(self) -> int:
        """Every problem found, listed or not."""
        return sum(f.problem_count for f in self.files)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problem_count

    def summary(self) -> str:
        """The last line of ``fuseci check``: how many files, valid, not verified and with (how many) problems."""
        files = f"fuseci check: {_count(len(self.files), 'suite file')}"
        bad = [f for f in self.files if f.problem_count]
        unverified = [f for f in self.files if not f.problem_count and f.unverified]
        valid = len(self.files) - len(bad) - len(unverified)
        if valid == len(self.files):
            return f"{files}, all valid"
        parts = [f"{valid} valid"] if valid else []
        if unverified:
            parts.append(f"{len(unverified)} not verified")
        if bad:
            parts.append(f"{len(bad)} with {_count(self.problem_count, 'problem')}")
        return f"{files}, {', '.join(parts)}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _read(path: Path, resolve: bool) -> FileCheck:
    read = check_suite(path)
    problems = [SuiteProblem(path, e.line, str(e), path.stem) for e in read.problems]
    if read.partial is not None and resolve:  # the functions of the cases that are right, checked too
        problems = sorted([*problems, *_notes(read.partial, resolve)[0]], key=lambda p: p.line)
    return FileCheck(path, read.suite, tuple(problems[:MAX_LISTED]), max(0, len(problems) - MAX_LISTED))


def _clashing_ids(files: list[FileCheck]) -> dict[int, list[SuiteProblem]]:
    """Suites whose ids are equal, letter case ignored (they would share a baseline file), by index of the file."""
    by_key: dict[str, list[tuple[int, Suite]]] = {}
    for i, f in enumerate(files):
        if f.suite is not None:
            by_key.setdefault(names.id_key(f.suite.name), []).append((i, f.suite))
    found: dict[int, list[SuiteProblem]] = {}
    for same in by_key.values():
        for i, suite in same if len(same) > 1 else ():
            others = ", ".join(f"{o.path}:{o.line}" for _, o in same if o is not suite)
            what = f"duplicate suite id {suite.name!r}"
            if {o.name for _, o in same} != {suite.name}:
                what = f"suite id {suite.name!r} differs only in letter case"
            message = (
                f"{suite.path}:{suite.line}: suite: {what} (also {others}); suites of one id share one baseline "
                "file (ids are compared ignoring case, as macOS and Windows compare file names) and would delete "
                "each other's cases from it: give each file its own id"
            )
            found[i] = [SuiteProblem(suite.path, suite.line, message, suite.name)]
    return found


def input_bytes_warning(suite: Suite, case: Case) -> SuiteProblem | None:
    """A warning when the case's inputs are under :data:`L2_SPAN` times the largest of :data:`KNOWN_L2_BYTES`;
    None for a model case (a variant with a ledger), whose ledger judges global bytes whatever the L2 kept."""
    if any(v.ledger is not None for v in case.variants):
        return None
    total = sum(spec.nbytes for spec in case.inputs)
    card, l2 = max(KNOWN_L2_BYTES.items(), key=lambda item: item[1])
    least = L2_SPAN * l2
    if total >= least:
        return None
    message = (
        f"{suite.path}:{case.line}: case {case.id!r}.inputs: {total / 2**20:.4g} MiB in all, under {L2_SPAN}x the "
        f"largest L2 of the cards fuseci knows ({l2 >> 20} MiB, {card}), so writes may stay in L2 and DRAM bytes "
        f"undercount; make the inputs at least {least >> 20} MiB in all (shape: [67108864] of float32 is 256 MiB)"
    )
    return SuiteProblem(suite.path, case.line, message, suite.name)


def _notes(suite: Suite, resolve: bool) -> tuple[list[SuiteProblem], list[Unresolved], list[SuiteProblem]]:
    """The suite's unresolved references (problems), unverified ones and warnings."""
    problems: list[SuiteProblem] = []
    unverified: list[Unresolved] = []
    for f in resolve_suite(suite) if resolve else ():
        if f.resolution.problem:
            message = (
                f"{suite.path}:{f.line}: {f.field}: {f.ref!r}: {f.resolution.problem}; "
                "fix the reference (module:function) or the module"
            )
            problems.append(SuiteProblem(suite.path, f.line, message, suite.name))
        else:
            unverified.append(f)
    if resolve:
        problems += parameter_problems(suite, suite_finder(suite))
    warnings = [w for w in (input_bytes_warning(suite, c) for c in suite.cases) if w is not None]
    return problems, unverified, warnings


def _mismatches(given: Sequence[str], takes: Parameters) -> list[str]:
    """What is wrong between the names a case gives and the parameters a function takes."""
    out = [
        f"parameter {name!r} is positional-only (before /), but inputs and params are passed by keyword; "
        "move it after the /"
        for name in takes.positional_only
    ]
    unknown = [n for n in given if n not in takes.keywords and not takes.open]
    missing = [n for n in takes.required if n not in given]

    def hint(name: str, options: list[str]) -> str:
        # One name missing and one too many: the one is the other, however unlike.
        paired = f"did you mean {options[0]!r}? " if len(unknown) == len(missing) == 1 else ""
        return did_you_mean(name, options) or paired

    out += [
        f"parameter {name!r} is given by no input or params entry of the case; {hint(name, unknown)}name an input "
        f"or a params entry {name!r}, or give the parameter a default"
        for name in missing
    ]
    out += [
        f"the case gives {name!r}, which it takes no parameter for; {hint(name, missing)}rename the input or params "
        "entry, or add the parameter"
        for name in unknown
    ]
    return out


_TYPES: dict[str, tuple[type, ...]] = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,)}


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _type_problems(params: dict[str, object], takes: Parameters) -> list[str]:
    """Each param whose value is not of the type the function's annotation or default says."""
    out = []
    for name, want, why in takes.kinds:
        value = params.get(name)
        if name not in params or (isinstance(value, _TYPES[want]) and (want == "bool") == isinstance(value, bool)):
            continue
        fix = yaml_number_hint(value) or f"; give it {_a(want)}"
        out.append(f"parameter {name!r} takes {_a(want)} ({why}), but params gives {shown(value)}{fix}")
    return out


def _framework_problem(framework: str, takes: Parameters) -> str:
    """Why a function whose module imports the other framework, not the case's, cannot take its arrays, or ``""``."""
    others = [f for f in FRAMEWORKS if f in takes.module_imports and f != framework]
    if framework not in FRAMEWORKS or framework in takes.module_imports or len(others) != 1:
        return ""
    return (
        f"is given {framework} arrays (framework: {framework}), but its module imports {others[0]} and not "
        f"{framework}; set `framework: {others[0]}` (in defaults, the case or the variant)"
    )


def parameter_problems(suite: Suite, finder: ModuleFinder) -> list[SuiteProblem]:
    """Every variant and reference whose function does not fit its case as the harness calls it (by keyword): a
    GPU kernel, a parameter not given or a name not taken, a param of the wrong type, arrays of a framework its
    module does not import. A function whose parameters its source cannot show is not checked."""
    read: dict[str, Parameters | None] = {}
    out: list[SuiteProblem] = []
    for case in suite.cases:
        given = [*(i.name for i in case.inputs), *case.params]
        refs = [
            (v.line, f"case {case.id!r}.variants.{v.id}", v.fn, v.factory is not None, v.framework)
            for v in case.variants
        ]
        if case.reference:
            refs.append((case.reference_line, f"case {case.id!r}.reference", case.reference, False, ""))
        for line, where, ref, factory, framework in refs:
            if ref not in read:
                read[ref] = parameters(ref, finder)
            takes = read[ref]
            if takes is None:
                continue
            if takes.kernel:
                wrong = [
                    f"is a GPU kernel (@{takes.kernel}): it is launched on a grid, not called with the case's "
                    "inputs; name the Python function that launches it"
                ]
            else:
                wrong = _mismatches(list(case.params) if factory else given, takes)  # a factory takes params only
                wrong += _type_problems(dict(case.params), takes)
                wrong += [w for w in [_framework_problem(framework, takes)] if w and not factory]
            for one in wrong:
                message = f"{suite.path}:{line}: {where}: {ref!r}: {takes.function}() {one}"
                out.append(SuiteProblem(suite.path, line, message, suite.name))
    return sorted(out, key=lambda p: p.line)


def check_files(paths: Sequence[Path], *, resolve: bool = True) -> SuiteCheck:
    """Check every file on its own and all of them together; ``resolve`` also checks every
    ``module:function`` (skip it when nothing will be imported, as in re-analysing a report)."""
    files = [_read(Path(p), resolve) for p in paths]
    clashes = _clashing_ids(files)
    out: list[FileCheck] = []
    for i, f in enumerate(files):
        if f.suite is None:
            out.append(f)
            continue
        problems, unverified, warnings = _notes(f.suite, resolve)
        problems = [*f.problems, *clashes.get(i, []), *problems]
        out.append(
            FileCheck(
                f.path,
                f.suite,
                tuple(problems[:MAX_LISTED]),
                f.unlisted + max(0, len(problems) - MAX_LISTED),
                tuple(unverified),
                tuple(warnings),
            )
        )
    return SuiteCheck(tuple(out))
