"""A run file: the suites one ``fuseci run`` measured (:mod:`fuseci.store.runs` names, writes and reads the files),
each stored as its harness record and per-kernel frame (:class:`RunSuite`), read back as its frames
(:func:`suite_results`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import numpy as np
import pandas as pd
from pydantic import Field, PlainSerializer, field_serializer, model_validator, with_config
from typing_extensions import NotRequired, TypedDict

from fuseci import __version__
from fuseci import validation as v
from fuseci.config import names, quantities
from fuseci.errors import FuseciError
from fuseci.frames import report
from fuseci.frames.metrics import SuiteResults, summarize
from fuseci.records.harness import HarnessRecord

#: A commit hash, as a run file holds it (and ``git rev-parse HEAD`` prints it).
COMMIT_PATTERN = "[0-9a-fA-F]{7,64}"

if TYPE_CHECKING:
    KernelFrameRow = dict[str, Any]
else:
    #: A kernel as a run file keeps it: one row of the per-kernel frame (metrics null when not measured).
    KernelFrameRow = with_config(v.OpenModel.model_config)(
        TypedDict(
            "KernelFrameRow",
            {
                "suite": v.Id,
                "case": v.Id,
                "variant": v.Id,
                "kernel_index": v.Count,
                "kernel": v.Name,
                names.DEVICE_NAME: Annotated[str, Field(max_length=1000)],
                **{
                    metric: NotRequired[v.Amount | None]
                    for metric in (*quantities.ncu_metrics(), *report.spread_columns())
                },
            },
        )
    )

Commit = Annotated[str, Field(max_length=64, pattern=f"^{COMMIT_PATTERN}$"), v.Expect("a commit hash")]
Created = Annotated[
    str,
    Field(max_length=20, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"),
    v.Expect("a UTC time (YYYY-mm-ddTHH:MM:SSZ)"),
]


@dataclass(frozen=True, slots=True)
class RunSuite(v.OpenDocument):
    """One suite of a run file, as the file holds it (unknown keys are left out)."""

    suite_path: v.PathText
    """The suite file, as given to ``fuseci run``."""
    record: Any
    """Its harness record, checked by :meth:`HarnessRecord.embedded` when rebuilt (:func:`suite_results`)."""
    kernels: Annotated[v.Items[KernelFrameRow], Field(max_length=1_000_000), PlainSerializer(list)]
    """The per-kernel frame, a row per kernel (written as :func:`kernel_rows` made them)."""

    @classmethod
    def of(cls, results: SuiteResults, suite_path: str) -> RunSuite:
        """A measured suite as its run file keeps it."""
        return cls(suite_path, results.record.to_json(), tuple(kernel_rows(results.kernels)))


if TYPE_CHECKING:
    Suites = Mapping[str, SuiteResults]
else:
    #: The suites by id: in a file, each as :class:`RunSuite`; read back, its frames.
    Suites = Annotated[Mapping[v.Id, RunSuite], Field(max_length=10_000)]

#: Fields of a :class:`Run` that no file holds: never read from one.
_NOT_STORED = ("path", "suite_paths")


@dataclass(frozen=True, slots=True)
class Run(v.OpenDocument):
    """One run file (after ``format`` and ``format_version``, checked by the store's format)."""

    __always__ = frozenset({"fuseci_version", "git_commit", "gpu_name"})

    created: Created
    """UTC time the run was saved, ``YYYY-mm-ddTHH:MM:SSZ``."""
    suites: Suites
    """Measurements by suite id, rebuilt with :func:`fuseci.frames.metrics.summarize`."""
    fuseci_version: Annotated[str, Field(max_length=100)] = __version__
    """fuseci version that wrote it (``?`` in a file that does not say)."""
    git_commit: Commit | None = None
    """Commit the run measured (``--commit``, else ``$GITHUB_SHA``, else ``git rev-parse HEAD``), None when unknown."""
    gpu_name: Annotated[str, Field(max_length=4096)] | None = None
    """GPU the suites ran on (None when the run measured no suite)."""
    suite_paths: Annotated[Mapping[str, str], Field(exclude=True)] = field(default_factory=dict)
    """Suite file of each suite id, as given to ``fuseci run`` (each suite's ``suite_path`` in a file)."""
    path: Annotated[Path, Field(exclude=True)] = Path()
    """The file (not in it: its reader says)."""

    @model_validator(mode="before")
    @classmethod
    def _as_stored(cls, data: Any) -> Any:
        """A file's members only (the reader gives the path); a file that does not say who wrote it: ``?``."""
        if not isinstance(data, dict):
            return data
        return {"fuseci_version": "?", **{k: x for k, x in data.items() if k not in _NOT_STORED}}

    @model_validator(mode="after")
    def _rebuilt(self) -> Run:
        """Each suite's frames, once every value of the file fits."""
        stored = cast("Mapping[str, RunSuite]", self.suites)  # as read, before rebuilding
        return replace(
            self,
            suites={sid: suite_results(sid, s) for sid, s in stored.items()},
            suite_paths={sid: s.suite_path for sid, s in stored.items()},
        )

    @field_serializer("suites")
    def _stored(self, suites: Mapping[str, SuiteResults]) -> dict[str, Any]:
        """Each suite as its file keeps it (:meth:`RunSuite.of`)."""
        return {sid: RunSuite.of(r, self.suite_paths[sid]).to_json() for sid, r in suites.items()}


def _cell(value: Any) -> Any:
    """A frame cell as JSON: native types, NaN (or any missing value) as null."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value


def kernel_rows(kernels: pd.DataFrame) -> list[dict[str, Any]]:
    """The per-kernel frame's rows as a run file keeps them (:data:`KernelFrameRow`); a spread is
    written only where the kernel was profiled more than once (a single pass has none)."""
    columns, spreads = report.kernel_columns(), frozenset(report.spread_columns())
    out = []
    for row in kernels.to_dict("records"):
        cells = {c: _cell(row.get(c)) for c in columns}
        out.append({c: x for c, x in cells.items() if x is not None or c not in spreads})
    return out


def _invalid(loc: v.Loc, problem: str) -> ValueError:
    """A problem of a suite found while rebuilding it, once the file's values all fit."""
    return ValueError(f"{v.json_path(loc)}: {problem}")


def suite_results(sid: str, suite: RunSuite) -> SuiteResults:
    """One suite of a run file as its frames: its record checked and built, its kernels as the per-kernel frame, and
    the two checked to be one run's.

    Raises:
        ValueError: the record is not a harness record, newer, or disallowed, or disagrees with the kernels (prefixed
            with the value's place in the run file).
    """
    at = ("suites", sid, "record")
    try:
        record = HarnessRecord.embedded(suite.record, at)
    except FuseciError as exc:
        raise ValueError(f"{exc} (the record of suite {sid!r})") from None
    except v.Invalid as exc:
        raise ValueError(str(exc)) from None
    if record.suite != sid:
        raise _invalid((*at, "suite"), f"the record filed under suite {sid!r} is of suite {record.suite!r}")
    metrics, columns = frozenset((*quantities.ncu_metrics(), *report.spread_columns())), report.kernel_columns()
    rows = [
        {c: (math.nan if k.get(c) is None else k[c]) if c in metrics else k[c] for c in columns} for k in suite.kernels
    ]
    kernels = pd.DataFrame.from_records(rows, columns=list(columns)) if rows else report.read_report_empty()
    problem = report.mismatch(kernels, record)
    if problem:
        raise _invalid(("suites", sid), f"its kernels and its record are not one run's: {problem}")
    return summarize(kernels, record)
