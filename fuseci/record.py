"""The harness record: what the profiled process saw besides the counters.

The harness writes it next to the ``.ncu-rep`` (``<suite>.harness.json``): the environment it
ran in, each case's correctness checks and which variants it measured. ``fuseci run`` adds the
profiler's own facts (ncu version and settings) once ncu has finished. Re-analysis with
``--from-report`` reads it back, so a report and its record travel together.

``fuseci bench`` runs the harness with ``--time`` instead (no ncu) and writes the same record
as ``<suite>.bench.json``, with the device-to-device copy bandwidth and each variant's CUDA-event
timings added.

Format history:
    1: first version.
    1 (still): optional ``copy_bandwidth`` and per-case ``timings``, written only by
       ``--time`` runs. Both are absent from other records and default to none when missing,
       so readers of either age read files of either age.
    1 (still): optional per-case ``min_bytes`` and ``retimings``, and ``timings`` in profiled
       records too (the timed pass of ``fuseci run``); absent means none, as above.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fuseci.atomic import atomic_write_text
from fuseci.errors import ReportError

FORMAT = "fuseci-harness-record"
FORMAT_VERSION = 1
SUFFIX = ".harness.json"


class CaseStatus:
    """Outcome of a case inside the harness (strings, so the JSON stays readable)."""

    OK = "ok"
    WRONG = "wrong"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class CheckRecord:
    """One output of one variant compared with the unfused output or the reference."""

    variant: str
    """Variant whose output was checked."""
    against: str
    """``unfused`` or ``reference``."""
    output: int
    """Index of the output (variants may return several arrays)."""
    passed: bool
    """Every element within tolerance and none NaN."""
    mismatches: int
    """Elements outside tolerance (NaN counts as outside)."""
    elements: int
    """Elements compared."""
    max_abs_err: float
    """Largest absolute difference (inf when the output holds NaN or inf)."""
    rel_l2_err: float
    """``‖out − expected‖₂ / ‖expected‖₂`` over the whole output (inf when it holds NaN)."""
    worst_index: int
    """Flat index of the largest difference."""
    rtol: float
    """Relative tolerance applied."""
    atol: float
    """Absolute tolerance applied."""

    def describe(self) -> str:
        """One line: which output, against what, by how much."""
        return (
            f"{self.variant} output {self.output} vs {self.against}: {self.mismatches} of {self.elements} "
            f"elements outside rtol={self.rtol:g}, atol={self.atol:g}; max abs err {self.max_abs_err:.3g}, "
            f"relative L2 error {self.rel_l2_err:.3g} (worst at flat index {self.worst_index})"
        )


@dataclass(frozen=True, slots=True)
class VariantTiming:
    """One variant timed with CUDA events outside ncu (``python -m fuseci.harness --time``)."""

    variant: str
    """Variant id."""
    median_ns: float
    """Median over the timed calls of the time between the events bracketing one call."""
    min_ns: float
    """Fastest timed call."""
    max_ns: float
    """Slowest timed call."""
    iqr_ns: float
    """Interquartile range (75th minus 25th percentile, linear interpolation) of the timed calls."""
    repeats: int
    """Timed calls (after the warm-up calls)."""
    input_sets: int
    """Independently generated input sets the calls rotated over, so that caches do not flatter."""
    min_bytes: int
    """Fewest DRAM bytes the variant must move: every input read once, every output written once."""


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """What happened to one case in the harness."""

    case: str
    """Case id."""
    status: str
    """One of :class:`CaseStatus`."""
    message: str = ""
    """Why the case is wrong or broken; empty when ok."""
    checks: tuple[CheckRecord, ...] = ()
    """Correctness checks, in the order run."""
    measured: tuple[str, ...] = ()
    """Variants run inside their NVTX ranges."""
    timings: tuple[VariantTiming, ...] = ()
    """CUDA-event timings per variant, from a ``--time`` run (``fuseci bench``, or the timed
    pass of ``fuseci run``, which copies them into the profiled run's record)."""
    retimings: tuple[tuple[VariantTiming, ...], ...] = ()
    """Further timed passes of a case whose speedup was borderline (``fuseci run`` re-measures
    before declaring a regression), each like :attr:`timings`."""
    min_bytes: int | None = None
    """Fewest DRAM bytes the case can move: every input read once plus every output of the
    ``unfused`` variant written once (None in records older than this field)."""


@dataclass(frozen=True, slots=True)
class HarnessRecord:
    """Everything the harness (and then the profiler run) wrote down."""

    suite: str
    """Suite id."""
    env: Mapping[str, Any]
    """Environment fingerprint fields collected by the harness (GPU, driver, CUDA, CuPy...)."""
    cases: Mapping[str, CaseRecord]
    """By case id."""
    complete: bool = False
    """False until the harness finished every case; a crash leaves it False."""
    profiler: Mapping[str, Any] = field(default_factory=dict)
    """ncu version and settings, added by ``fuseci run`` after profiling."""
    copy_bandwidth: float | None = None
    """Device-to-device copy bandwidth in bytes/s (bytes read plus bytes written over the median
    time of a 1 GiB copy); only in records of ``--time`` runs."""
    running: str | None = None
    """The case the harness is working on (set before a case starts, cleared when it ends), so
    that a run killed by a hang or a crash names the case it was in."""
    interrupted: str = ""
    """Why the run stopped before the harness finished (timeout, crash), added by ``fuseci run``."""

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the file."""
        doc: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "suite": self.suite,
            "complete": self.complete,
            "env": dict(self.env),
            "profiler": dict(self.profiler),
            "cases": {cid: _case_json(c) for cid, c in self.cases.items()},
        }
        # Written only when present, so records of profiled runs stay as they were.
        if self.copy_bandwidth is not None:
            doc["copy_bandwidth"] = self.copy_bandwidth
        if self.running is not None:
            doc["running"] = self.running
        if self.interrupted:
            doc["interrupted"] = self.interrupted
        return doc

    @classmethod
    def from_json(cls, data: Any, path: Path) -> HarnessRecord:
        """Parse a record file's contents.

        Raises:
            ReportError: not a harness record, or from a newer fuseci.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ReportError(f"{path}: not a fuseci harness record")
        version = data.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ReportError(
                f"{path}: harness record format {version!r} is newer than this fuseci reads ({FORMAT_VERSION}); upgrade fuseci"
            )
        try:
            cases = {
                cid: CaseRecord(
                    case=cid,
                    status=c["status"],
                    message=c.get("message", ""),
                    measured=tuple(c.get("measured", ())),
                    checks=tuple(CheckRecord(**k) for k in c.get("checks", ())),
                    timings=tuple(VariantTiming(**t) for t in c.get("timings", ())),
                    retimings=tuple(tuple(VariantTiming(**t) for t in r) for r in c.get("retimings", ())),
                    min_bytes=_optional_int(c.get("min_bytes")),
                )
                for cid, c in data["cases"].items()
            }
            return cls(
                suite=data["suite"],
                env=data.get("env", {}),
                cases=cases,
                complete=bool(data.get("complete", False)),
                profiler=data.get("profiler", {}),
                copy_bandwidth=_optional_float(data.get("copy_bandwidth")),
                running=data.get("running"),
                interrupted=str(data.get("interrupted", "")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ReportError(f"{path}: malformed harness record ({type(exc).__name__}: {exc})") from None

    def with_profiler(self, profiler: Mapping[str, Any]) -> HarnessRecord:
        """A copy with the profiler facts filled in."""
        return replace(self, profiler=dict(profiler))


def _check_json(k: CheckRecord) -> dict[str, Any]:
    return {name: getattr(k, name) for name in CheckRecord.__slots__}


def _timing_json(t: VariantTiming) -> dict[str, Any]:
    return {name: getattr(t, name) for name in VariantTiming.__slots__}


def _case_json(c: CaseRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "status": c.status,
        "message": c.message,
        "measured": list(c.measured),
        "checks": [_check_json(k) for k in c.checks],
    }
    # Written only when present, so that records without them keep their old shape.
    if c.timings:
        doc["timings"] = [_timing_json(t) for t in c.timings]
    if c.retimings:
        doc["retimings"] = [[_timing_json(t) for t in r] for r in c.retimings]
    if c.min_bytes is not None:
        doc["min_bytes"] = c.min_bytes
    return doc


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"min_bytes must be an integer, got {value!r}")
    return value


def _optional_float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"copy_bandwidth must be a number, got {value!r}")
    return float(value)


def record_path_for(report: Path) -> Path:
    """``dir/elementwise.ncu-rep(.xz)`` → ``dir/elementwise.harness.json``."""
    name = report.name
    for suffix in (".xz", ".ncu-rep"):
        name = name.removesuffix(suffix)
    return report.with_name(name + SUFFIX)


def write_record(record: HarnessRecord, path: Path) -> None:
    """Write atomically: a reader never sees half a record."""
    text = json.dumps(record.to_json(), indent=2, sort_keys=True, allow_nan=True) + "\n"
    atomic_write_text(path, text)


def read_record(path: Path) -> HarnessRecord:
    """Read a record file.

    Raises:
        ReportError: missing, unreadable or malformed.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(
            f"{path}: harness record not found; `fuseci run` writes it next to the .ncu-rep "
            "(keep the two files together when you copy a report)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: cannot read harness record: {exc}") from None
    return HarnessRecord.from_json(data, path)
