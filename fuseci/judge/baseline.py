"""The baseline: what a suite measured when its baseline was recorded, per case and variant, and the environment it
was recorded under, declared once as the document a baseline file holds (:class:`fuseci.validation.Document`). Gains
are derived from the quantities when comparing. Format 2 added a kernel's sixth member (:class:`KernelCounts`); a
version-1 file reads as it is. A kernel's fifth number (shared memory), ``sources`` and ``code`` are optional."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, Strict, model_validator

from fuseci import __version__
from fuseci import validation as v
from fuseci.config.names import CASE, ENV_FIELDS, FRAMEWORK_ENV_FIELDS, VARIANT
from fuseci.errors import BaselineError
from fuseci.files.versioned import DocumentFormat
from fuseci.frames.inventory import Counts, KernelLaunch
from fuseci.frames.metrics import SuiteResults, inventory
from fuseci.records.sass import KernelCode, pick

_FIX = "restore it from version control (git checkout -- FILE) or re-record it with `fuseci update-baselines`"

FORMAT = DocumentFormat(
    what="baseline", version=2, fix=_FIX, error=BaselineError, upgrades={1: lambda doc: {**doc, "format_version": 2}}
)


@dataclass(frozen=True, slots=True)
class KernelCounts(v.Document):
    """A kernel's counted quantities and how far they moved over the profiled passes (its sixth member in a file)."""

    counts: Counts = field(default_factory=dict)
    spread: Counts = field(default_factory=dict)


def _kernel_row(value: Any) -> Any:
    """Four numbers mean no (or unknown) shared memory: the fifth is 0; a sixth holds the counts (none: empty)."""
    if not isinstance(value, list) or not 4 <= len(value) <= 6:
        raise ValueError(f"expected a list of 4 to 6, got {v.shown(value)}")
    if len(value) == 4:
        return (*value, 0, {})
    return (*value, {}) if len(value) == 5 else tuple(value)


def _launch(row: tuple[str, int, int, int, int, KernelCounts]) -> KernelLaunch:
    return KernelLaunch(*row[:5], counts=dict(row[5].counts), spread=dict(row[5].spread))


def _row(k: KernelLaunch) -> list[Any]:
    """A kernel as a file holds it (:data:`KernelEntry`)."""
    row: list[Any] = [k.name, k.grid, k.block, k.registers]
    if k.counts or k.spread:
        counts: dict[str, Any] = {"counts": _rounded(k.counts)}
        if k.spread:
            counts["spread"] = _rounded(k.spread)
        return [*row, k.shared_mem, counts]
    return [*row, k.shared_mem] if k.shared_mem else row


def _round(value: float) -> float | int | None:
    if not math.isfinite(value):  # not measured, or beyond measuring (a rate over a zero-length time)
        return None
    if value == int(value) and abs(value) < 2**53:
        return int(value)
    return float(f"{value:.6g}")


def _rounded(values: Mapping[str, float]) -> dict[str, float | int | None]:
    return {q: _round(x) for q, x in values.items()}


if TYPE_CHECKING:
    KernelEntry = KernelLaunch
    Amounts = Mapping[str, float]
else:
    #: A kernel: ``[name, grid, block, registers]``, the shared memory per block when there is any,
    #: and its counts (:class:`KernelCounts`) when the baseline holds them.
    KernelEntry = Annotated[
        tuple[v.Name, v.Count, v.Count, v.Count, v.Count, KernelCounts],
        BeforeValidator(_kernel_row),
        AfterValidator(_launch),
        PlainSerializer(_row),
    ]
    #: Quantities by name; null in a file: not measured (NaN). Written rounded.
    Amounts = Annotated[
        Mapping[v.QuantityName, v.Amount | None], Field(max_length=1000), v.NanForNull, PlainSerializer(_rounded)
    ]


#: What a :class:`SourcePart` names for the code a module runs at import.
IMPORT_TIME = "import-time code"


@dataclass(frozen=True, slots=True)
class SourcePart(v.Document):
    """One part a case's measurement depends on in its tree: a top-level definition, import-time code, or a file."""

    file: v.PathText
    """The tree-relative file (``/``-separated); empty for a part outside the tree."""
    name: v.Name
    """The definition's name, :data:`IMPORT_TIME`, empty for a whole file; outside the tree, ``outside torch``..."""
    digest: Annotated[str, Field(max_length=100)]
    """SHA-256 of the part's code (its :func:`ast.dump` without positions, or the file's bytes)."""
    lines: Annotated[tuple[v.Count, v.Count], Strict(False)] | None = None
    """The definition's first and last line (decorators included); None for the other parts."""

    @property
    def key(self) -> tuple[str, str]:
        """What pairs a part with the same part of another fingerprint."""
        return (self.file, self.name)

    def said(self) -> str:
        """``kernels/x.py:12-30 (scale_add)``, ``kernels/x.py (import-time code)``, ``kernels/x.cu``."""
        if not self.file:
            return self.name
        where = f"{self.file}:{self.lines[0]}-{self.lines[1]}" if self.lines else self.file
        return f"{where} ({self.name})" if self.name else where


@dataclass(frozen=True, slots=True)
class SourcePrint(v.Document):
    """One case's source fingerprint, as a baseline keeps it (:func:`fuseci.ab.cases.source_print`)."""

    parts: Annotated[v.Items[SourcePart], Field(max_length=100_000)]
    """Its parts, sorted by file and name."""
    unproven: Annotated[v.Items[v.Text], Field(max_length=10_000)] = ()
    """What the case depends on that static reading cannot follow (an import named at run time)."""


@dataclass(frozen=True, slots=True)
class VariantBaseline(v.OpenDocument):
    """What one variant measured when the baseline was recorded (unknown keys are left out)."""

    values: Amounts
    """Aggregated quantities by name (see :data:`fuseci.frames.metrics.VARIANT_QUANTITIES`)."""
    kernels: Annotated[v.Items[KernelEntry], Field(max_length=100_000)]
    """Kernel inventory in launch order."""


@dataclass(frozen=True, slots=True)
class Baseline(v.OpenDocument):
    """One suite's baseline on one GPU (after ``format_version``, checked by :data:`FORMAT`)."""

    __always__ = frozenset({"fuseci_version"})

    suite: v.Id
    """Suite id."""
    env: v.Env
    """Environment fingerprint it was recorded under."""
    cases: Annotated[
        Mapping[v.Id, Annotated[Mapping[v.Id, VariantBaseline], Field(max_length=1000)]], Field(max_length=10_000)
    ]
    """case id → variant id → measurements."""
    fuseci_version: Annotated[str, Field(max_length=100)] = __version__
    """fuseci version that wrote it (``?`` in a file that does not say)."""
    sources: Annotated[Mapping[v.Id, SourcePrint], Field(max_length=10_000)] = field(default_factory=dict)
    """case id → its source fingerprint when recorded (empty: not kept)."""
    code: Annotated[
        Mapping[v.Id, Annotated[Mapping[v.Name, KernelCode], Field(max_length=10_000)]], Field(max_length=10_000)
    ] = field(default_factory=dict)
    """case id → kernel name → its compiled code when recorded (empty where no cubin was seen)."""

    @model_validator(mode="before")
    @classmethod
    def _unknown_version(cls, data: Any) -> Any:
        return {"fuseci_version": "?", **data} if isinstance(data, dict) else data

    @classmethod
    def from_json(cls, data: Any, path: Path | str) -> Baseline:
        """Parse (and upgrade) a baseline file's contents.

        Raises:
            BaselineError: malformed, or written by a newer fuseci.
        """
        try:
            return v.validate(cls, FORMAT.check(data, path))
        except v.Invalid as exc:
            raise FORMAT.invalid(path, exc) from None


def normalized(baseline: Baseline) -> Baseline:
    """The baseline as it reads back from its file (values rounded), for exact comparisons."""
    return Baseline.from_json(json.loads(FORMAT.text(baseline.to_json())), "<memory>")


def code_of(kernels: Sequence[KernelLaunch], builds: Mapping[str, Sequence[KernelCode]]) -> dict[str, KernelCode]:
    """Each launched kernel's compiled code among a record's builds, by name: the build with the registers ncu saw
    (:func:`fuseci.records.sass.pick`; a kernel whose build cannot be told is left out)."""
    out = {}
    for k in kernels:
        if k.name not in out and k.name in builds and (code := pick(builds[k.name], k.registers)) is not None:
            out[k.name] = code
    return out


def from_results(results: SuiteResults, cases: set[str]) -> Baseline:
    """A baseline holding those of ``cases`` that the harness ran ok (measured, right results)."""
    ok = set(results.record.ok_cases())
    out: dict[str, dict[str, VariantBaseline]] = {}
    code: dict[str, dict[str, KernelCode]] = {}
    for case in sorted(cases & ok):
        variants: dict[str, VariantBaseline] = {}
        for vid in results.variants[results.variants[CASE] == case][VARIANT]:
            values = results.variant_values(case, vid)
            if values is not None:  # quantities not measured (not timed, say) are left out
                known = {q: v for q, v in values.items() if not math.isnan(v)}
                variants[vid] = VariantBaseline(values=known, kernels=inventory(results.kernels, case, vid))
        out[case] = variants
        launched = [k for vb in variants.values() for k in vb.kernels]
        if found := code_of(launched, results.record.code):
            code[case] = found
    env = {k: results.env.get(k) for k in ENV_FIELDS if k in results.env or k not in FRAMEWORK_ENV_FIELDS}
    return Baseline(suite=results.suite, env=env, cases=out, code=code)
