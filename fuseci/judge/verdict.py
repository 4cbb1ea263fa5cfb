"""The verdict model: what a comparison concludes and what exit code that makes. Its dataclasses are a
results file's objects (:class:`Stored`): reading validates a file into them, writing is their serializer."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import AfterValidator, Field, PlainSerializer, field_serializer, model_validator
from pydantic_core import core_schema

from fuseci import validation as v
from fuseci.config import names
from fuseci.config.model import Suite
from fuseci.config.names import ENV_FIELDS
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP
from fuseci.frames.inventory import KernelLaunch
from fuseci.records.fusion import Ledger, NodeChange


class CheckKind(enum.Enum):
    """What a check looks at (the values are what reports and results files hold)."""

    CORRECTNESS = "correctness"
    """A variant's outputs against unfused, the reference and its own first call (the harness)."""
    GAIN = "gain"
    """A fusion gain (unfused ÷ variant) against the baseline's, within the gate's tolerance."""
    VALUE = "value"
    """A fused variant's own value (occupancy) against the baseline's."""
    INVENTORY = "inventory"
    """The ordered kernels a variant launched against the baseline's."""
    BYTES = "bytes"
    """A fused variant's DRAM bytes against the case's minimum, within its allowance."""
    EXPECT = "expect"
    """A gain against an absolute bound the suite states."""
    PLANTED = "planted"
    """Whether every check meant to catch a planted regression caught it."""
    ASYNCHRONY = "asynchrony"
    """Whether a fused variant's call returns before its GPU work ends, as at baseline."""
    KERNELS = "kernels"
    """The kernels a variant launched against those the suite declares it must launch."""
    LEDGER = "ledger"
    """A compiled forward's kernels, traced to its graph nodes, against the baseline's ledger."""
    COMPILE = "compile"
    """Whether a variant compiled or autotuned inside its measured range (``ERROR`` when it did)."""
    CASE = "case"
    """The case as a whole: could not be measured (``ERROR``) or vanished (``MISSING``)."""


class Verdict(enum.Enum):
    """Outcome of one check; ordered from worst to best by :attr:`rank`."""

    # WARN: worth a look, never a failure (an occupancy drop the times did not feel, a fused
    # kernel under half occupancy, a variant that already waited for the GPU at baseline).
    WRONG = "wrong"
    REGRESSED = "regressed"
    ERROR = "error"
    INCOMPARABLE = "incomparable"
    WARN = "warn"
    MISSING = "missing"
    NEW = "new"
    IMPROVED = "improved"
    PASS = "pass"

    @property
    def rank(self) -> int:
        """0 for the worst verdict."""
        return _RANK[self]

    @property
    def exit_code(self) -> int:
        """What this verdict alone makes the run exit with."""
        match self:
            case Verdict.WRONG | Verdict.REGRESSED:
                return EXIT_REGRESSION
            case Verdict.ERROR | Verdict.INCOMPARABLE:
                return EXIT_SETUP
            case Verdict.WARN | Verdict.MISSING | Verdict.NEW | Verdict.IMPROVED | Verdict.PASS:
                return EXIT_PASS


#: The verdicts a variant's cause is said for (:class:`FindingCause`).
FINDINGS = frozenset({Verdict.WRONG, Verdict.REGRESSED, Verdict.IMPROVED, Verdict.WARN})

#: Most suites in a results file (a merged one holds those of every part), and cases in a suite.
MAX_SUITES = 10_000
MAX_CASES = 10_000


#: Each verdict's place from the worst (a table: sorting a large report asks it millions of times).
_RANK = {v: i for i, v in enumerate(Verdict)}


class Stored(v.OpenDocument):
    """The base of a results file's object (unknown members left out): a member is required unless optional;
    a field that is not a member (a check's case) is neither read nor written."""

    __slots__ = ()
    __document__: ClassVar[tuple[str, ...]] = ()
    """The fields a file holds, in its order (a field's key is its ``validation_alias`` if it has one)."""
    __optional__: ClassVar[frozenset[str]] = frozenset()
    """Those of :attr:`__document__` a file may leave out; written only off their defaults, or in ``__always__``."""

    @classmethod
    def _shape(cls, fields: list[Any]) -> None:
        order = {name: i for i, name in enumerate(cls.__document__)}
        for f in fields:
            inner = f["schema"]
            if f["name"] not in order:  # not the file's: its default, never a file's value
                f["schema"] = _ignored(inner)
                f["serialization_exclude"] = True
            elif inner["type"] == "default" and f["name"] not in cls.__optional__:
                f["schema"] = inner["schema"]
            if isinstance(f.get("validation_alias"), str):
                f["serialization_alias"] = f["validation_alias"]
        fields.sort(key=lambda f: order.get(f["name"], len(order)))


def _ignored(schema: Any) -> core_schema.CoreSchema:
    """A field's schema that takes nothing from a file: its default (None for a field without one)."""
    factory = schema.get("default_factory") if schema["type"] == "default" else None
    value = schema.get("default") if schema["type"] == "default" else None
    return core_schema.with_default_schema(
        core_schema.no_info_plain_validator_function(lambda _: factory() if factory else value),
        **({"default_factory": factory} if factory else {"default": value}),
    )


def _once(kind: str, key: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A check that each item names its ``key`` (a case or variant id) once, letter case ignored."""

    def check(items: tuple[Any, ...]) -> tuple[Any, ...]:
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            name = getattr(item, key)
            j = first.setdefault(names.id_key(name), i)
            if j == i:
                continue
            earlier = getattr(items[j], key)
            if earlier == name:
                raise ValueError(f"{kind} {name!r} is listed twice ([{j}] and [{i}]); each {kind} is judged once")
            raise ValueError(
                f"{kind} {name!r} ([{i}]) differs from {earlier!r} ([{j}]) only in letter case; ids are compared "
                "ignoring case, as macOS and Windows compare file names"
            )
        return items

    return check


#: A suite's name in results: its id, or ``id@gpu-slug`` once ``fuseci merge`` met it on several cards.
SuiteName = Annotated[str, Field(max_length=300, pattern=r"^[A-Za-z0-9_-]+(?:@[a-z0-9-]+)?$"), v.Expect("a suite id")]
CaseId = Annotated[
    str, Field(max_length=v.MAX_ID_CHARS, pattern=r"^(?:[A-Za-z0-9_-]+|\(suite\))$"), v.Expect("a case id")
]
"""A case id, or ``(suite)`` for the checks of a whole suite."""
VariantId = Annotated[
    str, Field(max_length=v.MAX_ID_CHARS, pattern=r"^[A-Za-z0-9_-]*$"), v.Expect("a variant id (or empty)")
]
"""A variant id, or empty for a case's own checks."""
SignedFigure = Annotated[float, v.AsWritten, PlainSerializer(v.null_for_nan)]
"""A finite number, kept as the file wrote it (an integer stays one); NaN or infinite: null."""
Kernels = Annotated[v.Items[KernelLaunch], Field(max_length=100_000)]
WholeLedger = Annotated[Ledger, PlainSerializer(dataclasses.asdict)]
"""A fusion ledger, written with every member (a ledger file leaves out those not recorded)."""
Notes = Annotated[v.Items[v.Text], Field(max_length=1000)]
if TYPE_CHECKING:
    Values = Mapping[str, float]
    VerdictName = Verdict
    KindName = CheckKind
else:
    #: Quantities by name; null in a file: NaN or infinite.
    Values = Annotated[
        Mapping[v.QuantityName, float | None],
        Field(max_length=1000),
        v.NanForNull,
        PlainSerializer(lambda values: {q: v.null_for_nan(x) for q, x in values.items()}),
    ]
    VerdictName = Annotated[Verdict, v.Choice(tuple(x.value for x in Verdict))]
    KindName = Annotated[CheckKind, v.Choice(tuple(k.value for k in CheckKind))]


@dataclass(frozen=True, slots=True)
class MetricDelta(Stored):
    """One check of one case (in a file, its case is the case's that holds it)."""

    __document__ = (
        *("variant", "check", "quantity", "verdict", "message"),
        *("current", "baseline_value", "change", "tolerance", "retry", "band", "timed_passes", "not_gated"),
    )
    __optional__ = frozenset({"retry", "band", "timed_passes", "not_gated"})

    case: str
    """Case id."""
    variant: VariantId
    """Variant id, or empty for case-level checks."""
    check: KindName
    """Which kind of check it is."""
    quantity: Annotated[str, Field(max_length=200)]
    """Gated quantity (ncu metric name or ``launches``); empty for correctness and case checks."""
    verdict: VerdictName
    """Outcome."""
    message: v.Text
    """One sentence for people: what was expected, what was seen, by how much."""
    current: SignedFigure | None = None
    """Current value (a gain for gain and expect checks)."""
    baseline_value: Annotated[SignedFigure | None, Field(validation_alias="baseline")] = None
    """The baseline's value, when there is one (``baseline`` in a file)."""
    change: SignedFigure | None = None
    """Relative change from the baseline (-0.4 is 40% lower); None without one or when it is 0."""
    tolerance: Annotated[str, Field(max_length=1000)] = ""
    """The tolerance or expectation applied, as written for people."""
    retry: bool = False
    """A borderline CUDA-event speedup regression: re-measure the case before believing it."""
    band: SignedFigure | None = None
    """The band (0.186 is ±18.6%) judged within where noise or a moving count widened the tolerance; else None."""
    timed_passes: Annotated[int, Field(ge=0, lt=1000)] = 0
    """The timed passes whose median :attr:`current` is, where the case was timed again; else 0."""
    not_gated: v.Text = ""
    """Why the quantity is shown and not gated; empty where it is gated."""


class CauseKind(enum.Enum):
    """Why a variant's finding came about (decided by :func:`fuseci.judge.causes.decide`)."""

    CODE = "code"
    """The case's source changed since the baseline: files and line ranges."""
    COMPILER = "compiler"
    """The same source, other compiled code (Triton, Inductor, ptxas, a library upgrade)."""
    AUTOTUNE = "autotune"
    """The same kernels in another configuration than the baseline's."""
    ENVIRONMENT = "environment"
    """The same kernels on another driver, CUDA, library, clock setting or card."""
    MEASUREMENT = "measurement"
    """The measurement itself: a time that moved within the variant's own spread."""
    UNDETERMINED = "undetermined"
    """The evidence does not decide; :attr:`Cause.missing` says what would."""


if TYPE_CHECKING:
    CauseName = CauseKind
else:
    CauseName = Annotated[CauseKind, v.Choice(tuple(k.value for k in CauseKind))]

#: Lines of evidence a cause holds at most (each a fact: a file's lines, a kernel that changed).
MAX_EVIDENCE = 100


@dataclass(frozen=True, slots=True)
class FindingCause(Stored):
    """Why one variant's finding came about, with the evidence that decided it."""

    __document__ = ("kind", "evidence", "also", "missing")
    __optional__ = frozenset({"also", "missing"})

    kind: CauseName
    """Which cause."""
    evidence: Annotated[v.Items[v.Text], Field(max_length=MAX_EVIDENCE)]
    """What decided it, a fact a line (``kernels/x.py:12-30 (scale_add) changed``); ``undetermined``: what was seen."""
    also: Annotated[v.Items[v.Text], Field(max_length=MAX_EVIDENCE)] = ()
    """Environment changes since the baseline, named alongside a cause above them."""
    missing: v.Text = ""
    """For ``undetermined``: what evidence would decide it; empty otherwise."""

    def said(self) -> str:
        """The cause in one line for people: ``code: kernels/x.py:12-30 (scale_add) changed``."""
        parts = [f"{self.kind.value}: {'; '.join(self.evidence)}" if self.evidence else self.kind.value]
        if self.missing:
            parts.append(f"missing: {self.missing}")
        if self.also:
            parts.append(f"the environment changed too: {'; '.join(self.also)}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class VariantMeasurement(Stored):
    """What one variant measured, for reports."""

    __document__ = (
        *("variant", "values", "gains", "kernels", "baseline_values", "baseline_kernels"),
        *("ledger", "baseline_ledger", "cause"),
    )
    __optional__ = frozenset({"baseline_values", "baseline_kernels", "ledger", "baseline_ledger", "cause"})

    variant: v.Id
    """Variant id."""
    values: Values
    """Aggregated quantities (empty when the variant was not measured)."""
    gains: Values
    """Fusion gains (empty for ``unfused``)."""
    kernels: Kernels
    """Kernel inventory."""
    baseline_values: Values = field(default_factory=dict)
    """The quantities of the baseline it is judged against (empty without one)."""
    baseline_kernels: Kernels = ()
    """The kernel inventory of that baseline (empty without one)."""
    ledger: WholeLedger | None = None
    """The fusion ledger of a variant the suite asks one of (``ledger:``)."""
    baseline_ledger: WholeLedger | None = None
    """The ledger of the baseline it is judged against (None without one)."""
    ledger_changes: tuple[NodeChange, ...] = ()
    """What changed from :attr:`baseline_ledger` to :attr:`ledger`, node by node (not in a file)."""
    cause: FindingCause | None = None
    """Why its checks came to a finding (or ``code``: the source changed, nothing regressed); None otherwise."""


@dataclass(frozen=True, slots=True)
class CaseResult(Stored):
    """All checks and measurements of one case."""

    __document__ = ("case", "line", "description", "stated_verdict", "notes", "checks", "variants")
    __optional__ = frozenset({"stated_verdict", "notes"})
    __always__ = frozenset({"stated_verdict", "notes"})

    case: CaseId
    """Case id."""
    line: Annotated[int, Field(ge=0, lt=10**9)]
    """Line of the case in the suite file (0 when unknown)."""
    description: v.Text
    """From the suite."""
    checks: Annotated[v.Items[MetricDelta], Field(max_length=100_000)]
    """Every check, in a stable order."""
    variants: Annotated[
        v.Items[VariantMeasurement], Field(max_length=1000), AfterValidator(_once("variant", "variant"))
    ]
    """Measurements per variant."""
    notes: Notes = ()
    """What a reader of the numbers should know; never a verdict."""
    stated_verdict: Annotated[VerdictName | None, Field(validation_alias="verdict")] = field(
        default=None, compare=False, repr=False
    )
    """The verdict a file states (``verdict``; read back, :attr:`verdict` is derived); None in memory."""

    @field_serializer("stated_verdict")
    def _derived(self, _: Verdict | None) -> str:
        return self.verdict.value

    @model_validator(mode="after")
    def _checks_of_this_case(self) -> CaseResult:
        """A file's checks are the case's that holds them."""
        return replace(self, checks=tuple(replace(k, case=self.case) for k in self.checks))

    @property
    def verdict(self) -> Verdict:
        """The worst verdict among the checks."""
        return min((c.verdict for c in self.checks), key=lambda v: v.rank, default=Verdict.PASS)


@dataclass(frozen=True, slots=True)
class EnvDifference(Stored):
    """One fingerprint field that differs between the baseline and this run."""

    __document__ = ("field", "baseline_value", "current", "accepted")

    field: Annotated[str, Field(max_length=200)]
    """Field name (see :data:`fuseci.config.names.ENV_FIELDS`)."""
    baseline_value: Annotated[v.Scalar, Field(validation_alias="baseline")]
    """Value in the baseline (``baseline`` in a file)."""
    current: v.Scalar
    """Value now."""
    accepted: bool
    """True when the user accepted the difference with ``--accept-env``."""


@dataclass(frozen=True, slots=True)
class Reference:
    """What a run is judged against: the command that re-records it, or none for another run (``fuseci compare``)."""

    command: str
    """``fuseci update-baselines suites/x.yaml`` with this run's inputs; empty when the reference is a run."""
    name: str = "the baseline"
    """What messages call it (``run A``)."""

    def missing(self) -> str:
        """Why a value has nothing to be compared with."""
        if self.command:
            return f"no baseline yet (record one with `{self.command}`)"
        return f"{self.name} did not measure it"

    def if_intended(self) -> str:
        """Advice after a change that may be intended (`` (if intended, record it with ...)``)."""
        return f" (if intended, record it with `{self.command}`)" if self.command else ""

    def keep(self) -> str:
        """Advice after an improvement."""
        return " (update the baseline to keep it)" if self.command else ""

    def incomparable(self, fields: str) -> str:
        """Advice after a blocking environment difference (``fields``: the ``--accept-env`` value accepting it)."""
        instead = (
            f"re-record with `{self.command}`"
            if self.command
            else f"compare with a {self.name} measured in the same environment"
        )
        return f"; if this is intended, {instead}, or compare anyway with --accept-env {fields}"

    def dropped(self, case: str) -> str:
        """A case the reference has and the suite no longer does."""
        if self.command:
            return f"case {case!r} is in the baseline but not in the suite; `{self.command}` drops it"
        return f"case {case!r} is in {self.name} but not in the suite"


@dataclass(frozen=True, slots=True)
class Comparison(Stored):
    """The result of comparing one suite's run with its baseline."""

    __document__ = (
        *("suite", "suite_path", "stated_verdict", "baseline_path", "has_baseline"),
        *("env", "env_differences", "cases", "notes"),
    )
    __optional__ = frozenset({"stated_verdict", "notes"})
    __always__ = frozenset({"stated_verdict"})

    suite: SuiteName
    """Suite id."""
    suite_path: v.PathText
    """Suite file, as given."""
    env: v.Env
    """This run's environment."""
    baseline_path: v.PathText | None
    """Where the baseline was looked for."""
    has_baseline: bool
    """False when no baseline file exists."""
    env_differences: Annotated[v.Items[EnvDifference], Field(max_length=1000)]
    """Fingerprint fields that differ from the baseline's."""
    cases: Annotated[v.Items[CaseResult], Field(max_length=MAX_CASES), AfterValidator(_once("case", "case"))]
    """Per case, in suite order, then cases only the baseline has."""
    reference: Reference | None = None
    """What it was judged against, for the advice reporters give; None when read from a file."""
    notes: Annotated[v.Items[v.Text], Field(max_length=100)] = ()
    """What a reader of the whole suite's numbers should know, said once; never a verdict."""
    stated_verdict: Annotated[VerdictName | None, Field(validation_alias="verdict")] = field(
        default=None, compare=False, repr=False
    )
    """The verdict a file states (``verdict``; read back, :attr:`verdict` is derived); None in memory."""

    @field_serializer("stated_verdict")
    def _derived(self, _: Verdict | None) -> str:
        return self.verdict.value

    @property
    def verdict(self) -> Verdict:
        """The worst verdict of the suite."""
        return min((c.verdict for c in self.cases), key=lambda v: v.rank, default=Verdict.PASS)

    @property
    def comparable(self) -> bool:
        """False when an unaccepted environment difference blocks every baseline comparison."""
        return all(d.accepted for d in self.env_differences)


@dataclass(frozen=True, slots=True)
class Subject:
    """What a person counts: a variant with its checks, a case's own checks (``variant`` empty), or an unrun suite."""

    suite: str
    """Suite id."""
    case: str
    """Case id."""
    variant: str
    """Variant id; empty for the case's own checks."""
    line: int
    """The case's line in the suite file (0 when unknown)."""
    unit: str
    """``variant``, ``case`` or ``suite`` (a suite that could not be run: its stand-in check)."""
    checks: tuple[MetricDelta, ...]
    """Its checks, in report order."""

    @property
    def verdict(self) -> Verdict:
        """Its worst check's verdict."""
        return min((k.verdict for k in self.checks), key=lambda v: v.rank, default=Verdict.PASS)

    @property
    def caught(self) -> bool:
        """A planted regression caught by every check meant to, with nothing worse than a warning beside it."""
        planted = any(k.check is CheckKind.PLANTED and k.verdict is Verdict.PASS for k in self.checks)
        return planted and self.verdict.rank >= Verdict.WARN.rank


def subjects(comparisons: list[Comparison]) -> list[Subject]:
    """Every :class:`Subject`: per suite, per case, its variants in the order their first check comes."""
    out: list[Subject] = []
    for c in comparisons:
        for case in c.cases:
            groups: dict[str, list[MetricDelta]] = {}
            for k in case.checks:
                groups.setdefault(k.variant, []).append(k)
            for variant, checks in groups.items():
                unit = "variant" if variant else "case" if c.env else "suite"
                out.append(Subject(c.suite, case.case, variant, case.line, unit, tuple(checks)))
    return out


CAUGHT = "caught"
"""The outcome of a planted regression caught by every check meant to catch it."""


@dataclass(frozen=True, slots=True)
class Tally:
    """How many subjects of one unit came to one outcome, and how many checks that took."""

    outcome: Verdict | str
    """Their verdict, or :data:`CAUGHT`."""
    unit: str
    """``variant``, ``case`` or ``suite``."""
    subjects: int
    """How many."""
    checks: int
    """Their checks of that verdict (every check, for ``PASS`` and :data:`CAUGHT`)."""


_UNITS = ("suite", "case", "variant")


def tally(comparisons: list[Comparison]) -> tuple[Tally, ...]:
    """Subjects counted by outcome, worst first (caught plants just before passes); then suites, cases, variants."""
    found: dict[tuple[Verdict | str, str], list[int]] = {}
    for s in subjects(comparisons):
        outcome: Verdict | str = CAUGHT if s.caught else s.verdict
        checks = len(s.checks) if outcome in (CAUGHT, Verdict.PASS) else sum(k.verdict is s.verdict for k in s.checks)
        counts = found.setdefault((outcome, s.unit), [0, 0])
        counts[0] += 1
        counts[1] += checks

    def order(key: tuple[Verdict | str, str]) -> tuple[int, int]:
        outcome, unit = key
        rank = Verdict.PASS.rank - 0.5 if outcome == CAUGHT else outcome.rank  # type: ignore[union-attr]
        return (int(rank * 2), _UNITS.index(unit))

    return tuple(Tally(o, u, n, k) for (o, u), (n, k) in sorted(found.items(), key=lambda item: order(item[0])))


def exit_code(comparisons: list[Comparison]) -> int:
    """1 if anything regressed or is wrong; else 3 if anything errored or was incomparable; else 0."""
    codes = {c.exit_code for comp in comparisons for case in comp.cases for c in (x.verdict for x in case.checks)}
    return next((code for code in (EXIT_REGRESSION, EXIT_SETUP) if code in codes), EXIT_PASS)


def env_differences(
    baseline_env: Mapping[str, Any], env: Mapping[str, Any], accept: frozenset[str]
) -> tuple[EnvDifference, ...]:
    """Fingerprint fields that differ; ``accept`` may hold field names or ``all``."""
    return tuple(
        EnvDifference(f, baseline_env.get(f), env.get(f), accepted=f in accept or "all" in accept)
        for f in ENV_FIELDS
        if baseline_env.get(f) != env.get(f)
    )


def failed(suite: Suite, message: str) -> Comparison:
    """A comparison standing for a suite that could not be judged at all (an ERROR check)."""
    return failed_file(suite.name, str(suite.path), message, description="the suite could not be profiled or read")


def failed_file(
    suite: str, path: str, message: str, line: int = 0, *, description: str = "the suite file has a problem"
) -> Comparison:
    """A comparison standing for a suite file that cannot be run, pointing at ``line`` of it."""
    check = MetricDelta("(suite)", "", CheckKind.CASE, "", Verdict.ERROR, message)
    return Comparison(
        suite=suite,
        suite_path=path,
        env={},
        baseline_path=None,
        has_baseline=False,
        env_differences=(),
        cases=(CaseResult("(suite)", line, description, (check,), ()),),
    )


def update_exit_code(comparison: Comparison, kept: tuple[str, ...], refused: bool = False) -> int:
    """``update-baselines``'s exit for one suite: 0 when every case was recorded; 1 when a case was refused, or
    cases it could not record (``kept``) come with a regression or a wrong result; else 3."""
    if refused:
        return EXIT_REGRESSION
    if not kept:
        return EXIT_PASS
    return EXIT_REGRESSION if exit_code([comparison]) == EXIT_REGRESSION else EXIT_SETUP
