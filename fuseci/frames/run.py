"""A run: the suites one ``fuseci run`` measured, as its run file (:mod:`fuseci.store.runs`)
gives them back, for the judge to compare runs (``fuseci compare``) and follow them (``fuseci
history``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fuseci.frames.metrics import SuiteResults


@dataclass(frozen=True, slots=True)
class Run:
    """One run file, read back."""

    path: Path
    """The file."""
    fuseci_version: str
    """fuseci version that wrote it."""
    created: str
    """UTC time the run was saved, ``YYYY-mm-ddTHH:MM:SSZ``."""
    git_commit: str | None
    """Commit the run measured (``$GITHUB_SHA``, else ``git rev-parse HEAD``), None when unknown."""
    gpu_name: str | None
    """GPU the suites ran on (None when the run measured no suite)."""
    suites: Mapping[str, SuiteResults]
    """Measurements by suite id, rebuilt with :func:`fuseci.frames.metrics.summarize`."""
    suite_paths: Mapping[str, str]
    """Suite file of each suite id, as given to ``fuseci run``."""
