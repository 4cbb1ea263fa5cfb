"""What a suite's measurement depends on in its tree, read statically (nothing imported or run):
the one fingerprint per suite that tells ``fuseci ab`` which of its cases to measure
(:func:`to_measure`). What it covers and what it cannot follow: docs/CI.md, "Skipping what did
not change"."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fuseci import __version__
from fuseci.ab.cases import CasePrint, Prints, changed, source_print
from fuseci.ab.reader import MAX_FILES, Tree
from fuseci.config.model import Suite
from fuseci.judge.baseline import SourcePrint


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a suite's measurement depends on in its tree, as far as can be read."""

    suite_file: str
    """SHA-256 of the suite file's bytes."""
    files: dict[str, str] = field(default_factory=dict)
    """Tree-relative path → SHA-256 of each module file followed and each file read (or ``absent``)."""
    outside: tuple[str, ...] = ()
    """Modules the suite names that are not in the tree (installed packages), sorted."""
    missing: tuple[str, ...] = ()
    """Modules the suite names that are found nowhere, sorted."""
    fuseci_version: str = __version__
    """The fuseci that measures."""
    complete: bool = True
    """False when :data:`MAX_FILES` was reached: the suite is then never skipped."""
    unproven: tuple[str, ...] = ()
    """What the reader could not follow, each ``path:line what`` (sorted): its cases are measured."""
    cases: Mapping[str, CasePrint] = field(default_factory=dict)
    """Each case's fingerprint, by case id: decides which are measured, and is audited (:mod:`fuseci.ab.audit`)."""
    sources: Mapping[str, SourcePrint] = field(default_factory=dict)
    """The same as a baseline keeps them (:func:`fuseci.ab.cases.source_print`); not in :attr:`digest`."""

    @property
    def beside_cases(self) -> tuple[object, ...]:
        """What, when it differs between the sides, has every case measured."""
        return (self.suite_file, self.fuseci_version, self.outside, self.missing, self.complete)

    @property
    def digest(self) -> str:
        """One SHA-256 over everything above: equal digests, identical inputs."""
        h = hashlib.sha256()
        for part in (
            f"fuseci {self.fuseci_version}",
            f"suite {self.suite_file}",
            *(f"file {p} {d}" for p, d in sorted(self.files.items())),
            *(f"outside {m}" for m in self.outside),
            *(f"missing {m}" for m in self.missing),
            f"complete {self.complete}",
            *(f"unproven {u}" for u in self.unproven),
            *(f"case {c} {p.digest}" for c, p in sorted(self.cases.items())),
        ):
            h.update(part.encode("utf-8", "surrogateescape") + b"\n")
        return h.hexdigest()


def differences(a: Fingerprint, b: Fingerprint) -> list[str]:
    """What differs between two fingerprints, for people: the suite file, module files, the fuseci version."""
    out: list[str] = []
    if a.fuseci_version != b.fuseci_version:
        out.append(f"fuseci {a.fuseci_version} -> {b.fuseci_version}")
    if a.suite_file != b.suite_file:
        out.append("the suite file")
    for p in sorted(set(a.files) | set(b.files)):
        if p not in a.files:
            out.append(f"{p} (added)")
        elif p not in b.files:
            out.append(f"{p} (removed)")
        elif a.files[p] != b.files[p]:
            out.append(p)
    if (a.outside, a.missing) != (b.outside, b.missing):
        out.append("which named modules are installed or missing")
    if not (a.complete and b.complete):
        out.append(f"more than {MAX_FILES} files to follow")
    return out


def fingerprint(suite: Suite, tree: Path | Tree) -> Fingerprint:
    """The fingerprint of ``suite`` (its file inside ``tree``) as measured in ``tree``.

    Raises:
        OSError: the suite file cannot be read.
    """
    suite_sha = hashlib.sha256(suite.path.read_bytes()).hexdigest()
    prints = Prints(suite, tree)
    walked = prints.suite_files
    unproven = [*walked.unproven, *(f"{m}: a module the suite names, found nowhere" for m in prints.missing)]
    cases = {case.id: prints.case(case.functions) for case in suite.cases}
    return Fingerprint(
        suite_file=suite_sha,
        files=walked.files,
        outside=tuple(sorted(prints.outside)),
        missing=tuple(sorted(prints.missing)),
        complete=walked.complete,
        unproven=tuple(sorted(unproven)),
        cases=cases,
        sources={cid: source_print(prints, case) for cid, case in cases.items()},
    )


def to_measure(base: Fingerprint, head: Fingerprint, order: Sequence[str]) -> tuple[str, ...] | None:
    """The head's cases to measure, of ``order``: None for every one (:attr:`Fingerprint.beside_cases` differ,
    or a reading was cut short); else :func:`fuseci.ab.cases.changed`'s."""
    if not (base.complete and head.complete) or base.beside_cases != head.beside_cases:
        return None
    return changed(base.cases, head.cases, order)
