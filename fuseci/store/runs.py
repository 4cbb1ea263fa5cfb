"""Run files: the measurements of one ``fuseci run`` (``--results-dir DIR``), kept for ``fuseci compare`` and
``fuseci history``. One file per invocation, ``DIR/<YYYYmmddTHHMMSSZ>-<gpu-slug>[-<short commit>].json``, holds per
suite what the verdicts are derived from (suite path, harness record, per-kernel frame), written once, atomically,
never replaced, and stamped with when and at which commit it was measured (:class:`Stamp`)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fuseci import validation as v
from fuseci.config import names
from fuseci.errors import ReportError, UsageError
from fuseci.files.atomic import atomic_write_text
from fuseci.files.versioned import DocumentFormat
from fuseci.frames import report
from fuseci.frames.metrics import SuiteResults
from fuseci.frames.run_file import COMMIT_PATTERN, Run

log = logging.getLogger(__name__)


#: Names of run files as :func:`save_run` writes them; the timestamp orders a directory's runs.
NAME_PATTERN = re.compile(r"\A(\d{8}T\d{6}Z)-[a-z0-9-]+(?:_(\d+))?\.json\Z")

_SHA = re.compile(rf"\A{COMMIT_PATTERN}\Z")
_SHORT_SHA = 7
_WHAT_IS_A_RUN = "a run file is written by `fuseci run --results-dir DIR`: pass one, or DIR itself for its newest run"


def _lookalike(data: Any) -> str:
    if isinstance(data, dict) and "suites" in data and "format" not in data:
        return "it looks like the verdicts of `fuseci run --json`, which cannot be judged again"
    return ""


# allow_nan: a record keeps the infinite error of a NaN output as the harness wrote it.
FORMAT = DocumentFormat(
    what="run file", name="fuseci-run", version=1, fix=_WHAT_IS_A_RUN, allow_nan=True, lookalike=_lookalike
)


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True, slots=True)
class Stamp:
    """When a run was measured, and the commit it measured."""

    created: datetime
    """UTC time of the measurement."""
    commit: str | None
    """The commit, None when unknown."""


def now_stamp() -> Stamp:
    """The stamp of a run measured now: this moment and the commit checked out (:func:`git_commit`)."""
    return Stamp(_now(), git_commit())


def recording_stamp(path: Path) -> Stamp:
    """The stamp of a run re-analysed from the report at ``path``: when ncu recorded it (else its mtime, else now)."""
    started = report.session_started(path)
    if started is None:
        try:
            started = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
        except (OSError, ValueError, OverflowError):
            started = _now()
    return Stamp(started.replace(microsecond=0), None)


_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def given_stamp(commit: str | None, time: str | None, from_report: Path | None) -> Stamp | None:
    """The stamp ``--commit`` and ``--time`` (a re-analysed report) give a run: None without either, else the default
    stamp with what they give in place.

    Raises:
        UsageError: not a commit hash, not a UTC time, or a time given to a run that is not re-analysed.
    """
    if commit is None and time is None:
        return None
    if commit is not None and not _SHA.match(commit):
        raise UsageError(f"--commit {commit!r}: not a commit hash; pass 7 to 64 hex digits (git rev-parse HEAD)")
    when: datetime | None = None
    if time is not None:
        if from_report is None:
            raise UsageError("--time stamps a run re-analysed with --from-report; a profiled run is measured now")
        try:
            when = datetime.strptime(time, _TIME_FORMAT).replace(tzinfo=timezone.utc)
        except ValueError:
            raise UsageError(
                f"--time {time!r}: not a UTC time; pass YYYY-mm-ddTHH:MM:SSZ (2026-11-20T09:00:00Z)"
            ) from None
    default = recording_stamp(from_report) if from_report is not None else Stamp(_now(), None)
    return Stamp(when or default.created, commit.lower() if commit is not None else default.commit)


def git_commit() -> str | None:
    """The commit being measured: ``$GITHUB_SHA``, else ``git rev-parse HEAD`` here, else None; never raises."""
    sha = os.environ.get("GITHUB_SHA", "").strip()
    if _SHA.match(sha):
        return sha.lower()
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no git commit recorded: %s", exc)
        return None
    out = done.stdout.strip()
    return out.lower() if done.returncode == 0 and _SHA.match(out) else None


def _gpu_name(results: Sequence[SuiteResults]) -> str | None:
    gpus = sorted({str(r.env.get("gpu_name")) for r in results if r.env.get("gpu_name")})
    return ", ".join(gpus) or None


def _run(results: Sequence[SuiteResults], suite_paths: Mapping[str, str | Path], stamp: Stamp) -> Run:
    """The run to write: one result per suite name."""
    suites: dict[str, SuiteResults] = {}
    for r in results:
        if r.suite in suites:
            raise ReportError(
                f"suite {r.suite!r} was measured twice in this run ({suite_paths[r.suite]}); a run file keeps "
                "one result per suite name: give each suite file its own `suite:` name"
            )
        suites[r.suite] = r
    return Run(
        created=stamp.created.strftime(_TIME_FORMAT),
        suites=suites,
        git_commit=stamp.commit,
        gpu_name=_gpu_name(results),
        suite_paths={sid: str(suite_paths[sid]) for sid in suites},
    )


def _publish(staged: Path, directory: Path, stem: str) -> Path:
    """Give the staged file the first free name; a hard link never replaces an existing file."""
    n = 1
    while True:
        path = directory / (f"{stem}.json" if n == 1 else f"{stem}_{n}.json")
        n += 1
        try:
            os.link(staged, path)
        except FileExistsError:
            continue
        except OSError:  # no hard links here (some network and FUSE file systems): check, then rename
            if path.exists():
                continue
            os.replace(staged, path)
        return path


def save_run(
    results: Sequence[SuiteResults],
    suite_paths: Mapping[str, str | Path],
    directory: Path,
    stamp: Stamp | None = None,
) -> Path:
    """Write one run file of the measured suites into ``directory`` and return its path (``_2``, ``_3``... added
    when the name is taken); ``suite_paths``: each suite's file as given; ``stamp`` defaults to :func:`now_stamp`.

    Raises:
        ReportError: the directory cannot be created or written, or two results share a suite name.
    """
    stamp = stamp or now_stamp()
    run = _run(results, suite_paths, stamp)
    try:
        text = FORMAT.dumps(run.to_json(), indent=1)
    except ReportError as exc:  # one fuseci compare and history could not read
        raise ReportError(f"{directory}: cannot write the run file: {exc}") from None
    stem = f"{stamp.created.strftime('%Y%m%dT%H%M%SZ')}-{names.gpu_slug(run.gpu_name or 'unknown')}"
    if stamp.commit:
        stem += f"-{stamp.commit[:_SHORT_SHA]}"
    staged = directory / f".{stem}.{os.getpid()}.staged"
    try:
        atomic_write_text(staged, text)
        return _publish(staged, directory, stem)
    except OSError as exc:
        raise ReportError(
            f"{directory}: cannot write the run file: {exc}; make the directory writable or pass another --results-dir"
        ) from None
    finally:
        with contextlib.suppress(OSError):  # a failure to tidy up must not hide the real error
            staged.unlink(missing_ok=True)


def kept_in(path: Path) -> list[Path]:
    """Every run file ``path`` stands for as a command's input: a results directory's (by name), or ``path``."""
    if not path.is_dir():
        return [path]
    try:
        return sorted(p for p in path.iterdir() if NAME_PATTERN.match(p.name))
    except OSError:  # unreadable: the command's own read says so
        return []


def resolve_run(path: Path) -> Path:
    """The run file ``path`` stands for: a file itself, or a directory's newest (name's timestamp, mtime, ``_N``).

    Raises:
        ReportError: nothing exists at ``path``, or the directory holds no run file.
    """
    if path.is_dir():
        found: list[tuple[str, int, int, Path]] = []
        for p in path.iterdir():
            m = NAME_PATTERN.match(p.name)
            if m is None:
                continue
            try:
                if p.is_file():
                    found.append((m.group(1), p.stat().st_mtime_ns, int(m.group(2) or 1), p))
            except OSError:  # vanished or unreadable: not a candidate
                continue
        if not found:
            raise ReportError(
                f"{path}: holds no run file (<YYYYmmddTHHMMSSZ>-<gpu>.json); write one with "
                f"`fuseci run --results-dir {path}`, or pass a run file"
            )
        return max(found)[3]
    if not path.exists():
        raise ReportError(f"{path}: no such run file or results directory; {_WHAT_IS_A_RUN}")
    return path


def load_run(path: Path) -> Run:
    """Read a run file back, each suite's frames rebuilt from its record and kernels.

    Raises:
        ReportError: the file is missing, unreadable, not JSON, not a run file, newer, or holds a forbidden value.
    """
    try:
        data = FORMAT.load(path)
    except FileNotFoundError:
        raise ReportError(f"{path}: run file not found; {_WHAT_IS_A_RUN}") from None
    try:
        return replace(v.validate(Run, data), path=path)
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None
