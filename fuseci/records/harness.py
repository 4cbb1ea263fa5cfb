"""The harness record (``<suite>.harness.json`` beside the ``.ncu-rep``): the environment the
harness ran in, each case's checks, which variants it ran in their NVTX ranges and their timings;
``fuseci run`` adds the profiler's facts, so that ``--from-report`` can judge the run again.

Format history (``fuseci-harness-record``):
    1: first version.
    2: the ``profiler`` object holds exactly :class:`ProfilerInfo`'s fields; version 1's
       ``timing_repeats`` is dropped on upgrade.
    Members added since within a version are optional: absent means none or unknown.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field, SerializerFunctionWrapHandler, field_serializer, model_validator

from fuseci import validation as v
from fuseci.errors import ReportError
from fuseci.files.atomic import atomic_write_text
from fuseci.files.versioned import DocumentFormat
from fuseci.records.fusion import Provenance
from fuseci.records.sass import KernelCode


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    profiler = data.get("profiler")
    if isinstance(profiler, dict):
        data = {**data, "profiler": {k: v for k, v in profiler.items() if k != "timing_repeats"}}
    return {**data, "format_version": 2}


FORMAT = DocumentFormat(
    what="harness record",
    name="fuseci-harness-record",
    version=2,
    upgrades={1: _v1_to_v2},
    fix="`fuseci run` writes one next to each .ncu-rep: profile the suite again, or keep the two files together",
    allow_nan=True,  # the error of an output that held NaN is infinite, and recorded so
)


class CaseStatus(enum.Enum):
    """How a case ended inside the harness (the values are what the file holds)."""

    OK = "ok"
    """Every variant checked right, and measured (or timed)."""
    WRONG = "wrong"
    """A variant computed a wrong result; nothing was measured."""
    ERROR = "error"
    """The case could not be run (an import, a crash, a lost CUDA context)."""


def _not_negative(value: float) -> float:
    if value < 0:  # NaN passes: the error of an output that held NaN
        raise ValueError(f"{value} is below the smallest value allowed, 0")
    return value


#: An error of a check: infinite (or NaN) when the output held NaN or infinity, and written so.
Error = Annotated[v.Number, AfterValidator(_not_negative), v.AsWritten]
Figure = Annotated[v.Amount, v.AsWritten]
"""A finite, non-negative number, kept as the file wrote it (an integer stays one)."""
Status = Annotated[CaseStatus, v.Choice(tuple(s.value for s in CaseStatus))]
"""A case's status as the file holds it (its value)."""
Short = Annotated[str, Field(max_length=200)]
"""A short word (what a check compared against, a dtype)."""
CompileOption = Short | bool | None
"""One of ``torch.compile``'s keyword arguments as the suite gave it (a mode, a flag, or unset)."""
AutotunePath = Annotated[
    str,
    Field(pattern=r"^[0-9A-Za-z_-]{1,16}/[0-9a-f]{64}\.best_config$"),
    v.Expect("a path of Inductor's cache like 'ab/<64 hex digits>.best_config'"),
]
"""A ``.best_config`` entry's path in Inductor's cache, as Inductor names it."""
AutotuneField = Annotated[
    str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"), v.Expect("a configuration's field name (XBLOCK, num_warps)")
]
AutotuneValue = Annotated[
    Union[Annotated[str, Field(max_length=256, pattern=r"^[^\x00-\x1f\x7f]*$")], bool, v.Integer, float, None],  # noqa: UP007 (an alias evaluated at run time)
    v.Expect("a number, true/false, null or a short text"),
]
AutotuneEntry = Annotated[Mapping[AutotuneField, AutotuneValue], Field(min_length=1, max_length=64)]
"""One ``.best_config`` entry of Inductor's compile cache: its fields (``XBLOCK``, ``num_warps``...)."""
AutotuneEntries = Annotated[Mapping[AutotunePath, AutotuneEntry], Field(max_length=20_000)]
"""``.best_config`` entries by their path in the cache (also a baseline's autotuning record's)."""
Builds = Annotated[v.Items[KernelCode], Field(min_length=1, max_length=16)]
"""A kernel's builds in one process (autotuning compiles one per configuration)."""


@dataclass(frozen=True, slots=True)
class CheckRecord(v.Document):
    """One output of one variant compared with the unfused output or the reference."""

    variant: v.Id
    """Variant whose output was checked."""
    against: Short
    """``unfused``, ``reference`` or ``its first call``."""
    output: v.Count
    """Index of the output (variants may return several arrays)."""
    passed: bool
    """Every element within tolerance and none NaN."""
    mismatches: v.Count
    """Elements outside tolerance (NaN counts as outside)."""
    elements: v.Count
    """Elements compared."""
    max_abs_err: Error
    """Largest absolute difference (inf when the output holds NaN or inf)."""
    rel_l2_err: Error
    """``‖out − expected‖₂ / ‖expected‖₂`` over the whole output (inf when it holds NaN)."""
    worst_index: v.Count
    """Flat index of the largest difference."""
    rtol: Figure
    """Relative tolerance applied."""
    atol: Figure
    """Absolute tolerance applied."""
    nan_count: v.Count | None = None
    """Elements NaN in the output where the expected value is not: never written (None in older records)."""
    dtype: Short = ""
    """The output's element type (empty in older records)."""

    def describe(self) -> str:
        """One line: which output, against what, by how much."""
        of = f" for {self.dtype}" if self.dtype else ""
        nan = (
            f"; {self.nan_count} elements NaN where the expected value is not: never written (the harness fills "
            "new memory with NaN bytes before each checked call)"
            if self.nan_count
            else ""
        )
        return (
            f"{self.variant} output {self.output} vs {self.against}: {self.mismatches} of {self.elements} "
            f"elements outside rtol={self.rtol:g}, atol={self.atol:g}{of}; max abs err {self.max_abs_err:.3g}, "
            f"relative L2 error {self.rel_l2_err:.3g} (worst at flat index {self.worst_index}){nan}"
        )


@dataclass(frozen=True, slots=True)
class VariantTiming(v.Document):
    """One variant timed with CUDA events outside ncu (``python -m fuseci.harness --time``)."""

    variant: v.Id
    """Variant id."""
    median_ns: Figure
    """Median over the timed calls of the time between the events bracketing one call."""
    min_ns: Figure
    """Fastest timed call."""
    max_ns: Figure
    """Slowest timed call."""
    iqr_ns: Figure
    """Interquartile range (75th minus 25th percentile, linear interpolation) of the timed calls."""
    repeats: v.Count
    """Timed calls (after the warm-up calls)."""
    input_sets: v.Count
    """Independently generated input sets the calls rotated over, so that caches do not flatter."""
    min_bytes: v.Count
    """Fewest DRAM bytes the variant must move: every input read once, every output written once."""
    q1_ns: Figure | None = None
    """25th percentile of the timed calls (None in records older than this field)."""
    q3_ns: Figure | None = None
    """75th percentile of the timed calls (None in records older than this field)."""
    samples_ns: Annotated[v.Items[v.Amount], Field(max_length=10_000_000)] = ()
    """Every timed call, in the order run (empty in records older than this field)."""
    host_ns: Figure | None = None
    """Median host wall time of a timed call, ns (None in older records): whether calls only launch or wait."""
    blocked_calls: v.Count | None = None
    """Probe calls (of :attr:`block_trials`) that returned only after a spin kernel queued before them ended."""
    block_trials: v.Count | None = None
    """Probe calls made to count :attr:`blocked_calls`."""


Timings = Annotated[v.Items[VariantTiming], Field(max_length=1000)]
"""One timed pass of a case: a timing per variant."""
Words = Annotated[v.Items[v.Text], Field(max_length=100)]
"""What a variant autotuned or compiled."""
Lines = Annotated[v.Items[v.Count], Field(max_length=100_000)]
"""Line numbers in a file."""
TreeFile = Annotated[str, Field(max_length=4096)]
"""A file's path relative to the measured tree, ``/``-separated."""


@dataclass(frozen=True, slots=True)
class CaseRecord(v.OpenDocument):
    """What happened to one case in the harness."""

    __always__ = frozenset({"message", "checks", "measured"})

    case: Annotated[str, Field(exclude=True)]
    """Case id (the record's key for the case: a file does not repeat it)."""
    status: Status
    """How it ended."""
    message: v.Text = ""
    """Why the case is wrong or broken; empty when ok."""
    checks: Annotated[v.Items[CheckRecord], Field(max_length=100_000)] = ()
    """Correctness checks, in the order run."""
    measured: Annotated[v.Items[v.Id], Field(max_length=1000)] = ()
    """Variants run inside their NVTX ranges."""
    timings: Timings = ()
    """CUDA-event timings per variant, from a timed run (``fuseci bench``, or ``fuseci run``'s timed pass)."""
    retimings: Annotated[v.Items[Timings], Field(max_length=100)] = ()
    """Further timed passes of a case whose speedup was borderline, each like :attr:`timings`."""
    min_bytes: v.Count | None = None
    """Fewest DRAM bytes the case can move: inputs read and ``unfused``'s outputs written once (None: older)."""
    first_call_ns: Annotated[Mapping[v.Id, v.Amount], Field(max_length=1000)] = field(default_factory=dict)
    """Wall time of each variant's first call in the process, ns, by variant: its cold start."""
    autotuned: Annotated[Mapping[v.Id, Words], Field(max_length=1000)] = field(default_factory=dict)
    """What each variant autotuned at its first call, by variant (only variants that did)."""
    compiled: Annotated[Mapping[v.Id, Words], Field(max_length=1000)] = field(default_factory=dict)
    """What each variant compiled or autotuned inside its measured range, by variant (only those that did)."""
    notes: Annotated[v.Items[v.Text], Field(max_length=1000)] = ()
    """What a reader of the checks should know (memory the NaN-filling could not cover)."""
    ran: Annotated[Mapping[TreeFile, Lines], Field(max_length=10_000)] = field(default_factory=dict)
    """Under ``fuseci ab``: each tree file whose code ran while the case was checked or imported → the first
    lines of the functions started there, ``0`` for import-time code (:mod:`fuseci.harness.watch`)."""
    read: Annotated[v.Items[TreeFile], Field(max_length=10_000)] = ()
    """Under ``fuseci ab``: the files of the measured tree opened for reading then, tree-relative."""
    provenance: Annotated[Mapping[v.Id, Provenance], Field(max_length=1000)] = field(default_factory=dict)
    """Each ledger variant's provenance, by variant (:class:`~fuseci.records.fusion.Provenance`)."""
    compile_options: Annotated[Mapping[v.Id, Mapping[Short, CompileOption]], Field(max_length=1000)] = field(
        default_factory=dict
    )
    """``torch.compile``'s keyword arguments of each variant the harness compiled (:mod:`fuseci.harness.factory`)."""

    @property
    def ok(self) -> bool:
        """True when the case ran and checked right."""
        return self.status is CaseStatus.OK


@dataclass(frozen=True, slots=True)
class ProfilerInfo(v.OpenDocument):
    """How ``fuseci run`` profiled the suite (ncu, its settings, logs, a timed pass); missing settings read ``""``."""

    __always__ = frozenset({"logs", "timed"})

    ncu_version: v.Text
    """``ncu --version``, e.g. ``2025.3.1.0``."""
    clock_control: v.Text
    """ncu's ``--clock-control``."""
    cache_control: v.Text
    """ncu's ``--cache-control``."""
    replay_mode: v.Text
    """ncu's ``--replay-mode``."""
    logs: v.Text = ""
    """The profiled run's harness and ncu logs, for messages."""
    timed: bool = False
    """True when the suite was also timed with CUDA events outside ncu."""

    @model_validator(mode="before")
    @classmethod
    def _unknown_settings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {**{f.name: "" for f in fields(cls) if f.default is MISSING}, **data}


@dataclass(frozen=True, slots=True)
class HarnessRecord(v.OpenDocument):
    """Everything the harness (and then ``fuseci run``) wrote down about one suite."""

    __always__ = frozenset({"complete", "profiler"})

    suite: v.Id
    """Suite id."""
    env: v.Env
    """Environment fingerprint fields the harness collected (GPU, driver, CUDA, CuPy...)."""
    cases: Annotated[Mapping[v.Id, CaseRecord], Field(max_length=10_000)]
    """By case id."""
    complete: bool = False
    """False until the harness finished every case; a crash leaves it False."""
    profiler: ProfilerInfo | None = None
    """How ncu profiled it; None in a record that no ``fuseci run`` completed."""
    copy_bandwidth: v.Amount | None = None
    """Device-to-device copy bandwidth in bytes/s (read plus written); only in records of timed runs."""
    running: v.Id | None = None
    """The case the harness is working on, so that a run killed by a hang or a crash names it."""
    interrupted: v.Text = ""
    """Why the run stopped before the harness finished (timeout, crash), added by ``fuseci run``."""
    autotune: AutotuneEntries = field(default_factory=dict)
    """The ``.best_config`` entries of Inductor's compile cache the process's kernels used."""
    pinned: v.Text = ""
    """What the harness put in the compile cache from the baseline's autotuning record (a sentence)."""
    code: Annotated[Mapping[v.Name, Builds], Field(max_length=100_000)] = field(default_factory=dict)
    """The compiled code of each kernel the profiled process loaded, by name (:func:`fuseci.records.sass.pick`)."""
    code_notes: Annotated[Mapping[v.Name, v.Text], Field(max_length=100_000)] = field(default_factory=dict)
    """Why a kernel's code could not be read, by kernel name (or by file, where it names no kernel)."""

    @model_validator(mode="before")
    @classmethod
    def _from_document(cls, data: Any) -> Any:
        """A file's shape: ``env`` may be absent, ``profiler`` is ``{}`` until ncu finished, cases by id."""
        if not isinstance(data, dict):
            return data
        out = {"env": {}, **data}
        if data.get("profiler") == {}:
            out["profiler"] = None
        cases = data.get("cases")
        if isinstance(cases, dict):
            out["cases"] = {cid: {**c, "case": cid} if isinstance(c, dict) else c for cid, c in cases.items()}
        return out

    @field_serializer("profiler", mode="wrap")
    def _profiler(self, profiler: ProfilerInfo | None, write: SerializerFunctionWrapHandler) -> Any:
        return {} if profiler is None else write(profiler)

    @property
    def timed(self) -> bool:
        """True when a timed pass put CUDA-event timings into this record."""
        return self.profiler is not None and self.profiler.timed

    def ok_cases(self) -> list[str]:
        """Ids of the cases that ran and checked right."""
        return [cid for cid, c in self.cases.items() if c.ok]

    def with_cases(self, cases: Mapping[str, CaseRecord]) -> HarnessRecord:
        """A copy with these case records replacing those of the same ids."""
        return replace(self, cases={**self.cases, **cases})

    def to_json(self) -> dict[str, Any]:
        """The file's object, with its ``format`` and ``format_version`` (also what a run file embeds)."""
        return FORMAT.document(v.dump(HarnessRecord, self))

    @classmethod
    def from_json(cls, data: Any, path: Path | str) -> HarnessRecord:
        """Parse a record's object as read from a file: its format checked and upgraded, then validated.

        Raises:
            ReportError: not a harness record, from a newer fuseci, or a value its format does not allow.
        """
        data = FORMAT.check(data, path)
        try:
            return v.validate(cls, data)
        except v.Invalid as exc:
            raise FORMAT.invalid(path, exc) from None

    @classmethod
    def embedded(cls, data: object, at: v.Loc) -> HarnessRecord:
        """A record held inside another document at ``at`` (a run file's), checked, upgraded and validated.

        Raises:
            ReportError: not a harness record, or from a newer fuseci (the message names the place).
            Invalid: a value the format does not allow; the enclosing reader names the file.
        """
        return v.validate(cls, FORMAT.check(data, v.json_path(at)), at)


def record_path_for(report: Path) -> Path:
    """``dir/elementwise.ncu-rep(.xz)`` → ``dir/elementwise.harness.json``."""
    return report.with_name(report.name.removesuffix(".xz").removesuffix(".ncu-rep") + ".harness.json")


def write_record(record: HarnessRecord, path: Path) -> None:
    """Write atomically: a reader never sees half a record."""
    atomic_write_text(path, FORMAT.dumps(record.to_json()))


def read_record(path: Path) -> HarnessRecord:
    """Read a record file.

    Raises:
        ReportError: missing, unreadable or malformed.
    """
    try:
        data = FORMAT.load(path)
    except FileNotFoundError:
        raise ReportError(
            f"{path}: harness record not found; `fuseci run` writes it next to the .ncu-rep "
            "(keep the two files together when you copy a report)"
        ) from None
    return HarnessRecord.from_json(data, path)


@dataclass(frozen=True, slots=True)
class ProbeRecord(v.OpenDocument):
    """What ``python -m fuseci.harness --probe`` (``fuseci doctor``) writes: the GPU checked with one
    tiny kernel; each optional member is there once the probe got that far."""

    __always__ = frozenset({"format", "ok", "error", "message", "range", "elements"})

    format: Literal["fuseci-probe"] = "fuseci-probe"
    """Names the document."""
    ok: bool = False
    """The kernel ran and computed the right result."""
    error: str = ""
    """A :class:`fuseci.harness.probe.ProbeFailure` value; empty when ok."""
    message: str = ""
    """What failed, in the probe's words; empty when ok."""
    range: str = ""
    """The NVTX range its kernel ran in."""
    elements: int = 0
    """float32 elements of its input."""
    runtime: str | None = None
    """The device runtime (``cupy`` or ``torch``)."""
    device_count: int | None = None
    """CUDA devices seen."""
    env: v.Env = field(default_factory=dict)
    """:func:`fuseci.harness.env.collect_env` (GPU, CUDA, CuPy); empty when the probe got no device."""
    seed: int | None = None
    """Seed of its random input."""
    max_abs_err: float | None = None
    """Largest error of the kernel's result; None when it did not run or the error is not a number."""
