"""The harness's command line (:func:`harness_argv`: ``python -m fuseci.harness`` in one of the
:class:`Mode` s) and the files a measurement leaves (:class:`SuiteFiles`): each built in one place."""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The environment variable that names another tree whose modules a harness process must not
#: import (``fuseci ab``: the other side's); the harness refuses to measure when one was
#: (:func:`fuseci.harness.case_runner.foreign_modules`).
FOREIGN_TREE_ENV = "FUSECI_FOREIGN_TREE"

#: The environment variable that names the tree whose files a harness process records running
#: and reading in each case's checked calls (``fuseci ab``: its own side's), for the audit of the
#: case fingerprints (:mod:`fuseci.harness.watch`, :mod:`fuseci.ab.audit`).
AUDIT_TREE_ENV = "FUSECI_AUDIT_TREE"

#: Timed calls per variant after warm-up, in ``fuseci run``'s timed pass and ``fuseci bench``.
DEFAULT_REPEATS = 30
#: Most profiled passes of a variant (a range name numbers its repeats with up to three digits).
MAX_PASSES = 9


class Mode(enum.Enum):
    """What a harness process does; the value names its record and log."""

    PROFILE = "harness"
    """Check every variant, warm up, run each once in its NVTX range (the run ncu profiles)."""
    TIME = "timing"
    """Time every variant with CUDA events, outside ncu, without re-checking (``fuseci run``)."""
    BENCH = "bench"
    """Check, then time every variant with CUDA events (``fuseci bench``)."""
    PROBE = "probe"
    """One tiny kernel in its NVTX range instead of a suite (``fuseci doctor``)."""


@dataclass(frozen=True, slots=True)
class HarnessFiles:
    """What one harness process writes."""

    record: Path
    """Its record (JSON)."""
    log: Path
    """Its stdout and stderr."""


@dataclass(frozen=True, slots=True)
class SuiteFiles:
    """Where measuring one suite writes, inside one directory (``--report-dir``)."""

    directory: Path
    """The directory."""
    suite: str
    """Suite id: the stem of every file name."""

    def _file(self, suffix: str) -> Path:
        return self.directory / f"{self.suite}{suffix}"

    @property
    def report(self) -> Path:
        """The ``.ncu-rep`` ncu exports."""
        return self._file(".ncu-rep")

    @property
    def ncu_log(self) -> Path:
        """ncu's own messages (``==PROF==``, ``==WARNING==``, ``==ERROR==``)."""
        return self._file(".ncu.log")

    def harness(self, mode: Mode) -> HarnessFiles:
        """The record and log of the harness process of ``mode``."""
        return HarnessFiles(self._file(f".{mode.value}.json"), self._file(f".{mode.value}.log"))

    @property
    def record(self) -> Path:
        """The profiled run's harness record, the one kept beside the report."""
        return self.harness(Mode.PROFILE).record

    @property
    def app_log(self) -> Path:
        """The profiled harness's output."""
        return self.harness(Mode.PROFILE).log

    @property
    def written(self) -> list[tuple[Path, str]]:
        """Every file the profiled run and the timed pass write here, with what it is: no report may be one."""
        found = [(self.report, f"the report a profiled run of {self.suite!r} writes"), (self.ncu_log, "ncu's log")]
        for mode in (Mode.PROFILE, Mode.TIME):
            files = self.harness(mode)
            found += [(files.record, f"a harness record of {self.suite!r}"), (files.log, "a harness log")]
        return found


def operand(path: Path) -> str:
    """A path as an argument no option parser takes for an option: ``-x.yaml`` becomes ``./-x.yaml``."""
    text = str(path)
    return f".{os.sep}{text}" if text.startswith("-") else text


def harness_argv(
    mode: Mode,
    record: Path,
    suite_path: Path | None = None,
    *,
    repeats: int | None = None,
    passes: int = 1,
    cases: Sequence[str] = (),
    after: Path | None = None,
    gpu_lock: Path | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The argv of one harness process. Pure: same inputs, same list.

    Args:
        mode: What the process does.
        record: Where it writes its record.
        suite_path: The suite file (every mode but :attr:`Mode.PROBE`).
        repeats: Timed calls per variant (:attr:`Mode.TIME` and :attr:`Mode.BENCH`).
        passes: (:attr:`Mode.PROFILE`) Profiled passes of each variant, each in its NVTX range.
        cases: Only these cases (all when empty).
        after: (:attr:`Mode.TIME`) Start up, wait for this profiled record to complete, time its right cases.
        gpu_lock: A lock file the process holds while it uses the GPU.
        python: The interpreter.

    Raises:
        ValueError: a suite given to the probe or missing for another mode; passes outside the profiled run.
    """
    if (mode is Mode.PROBE) != (suite_path is None):
        raise ValueError("the probe takes no suite; every other mode needs one")
    if passes != 1 and mode is not Mode.PROFILE:
        raise ValueError("only the profiled run has passes")
    argv = [python, "-m", "fuseci.harness"]
    if suite_path is None:
        return [*argv, "--probe", "--record", operand(record)]
    argv += [operand(suite_path), "--record", operand(record)]
    if mode in (Mode.TIME, Mode.BENCH):
        argv += ["--time", "--repeats", str(DEFAULT_REPEATS if repeats is None else repeats)]
    if mode is Mode.TIME:
        argv.append("--no-checks")
    if passes != 1:
        argv += ["--passes", str(passes)]
    if after is not None:
        argv.append(f"--after={after}")
    if gpu_lock is not None:
        argv.append(f"--gpu-lock={gpu_lock}")
    for case in cases:
        argv.append(f"--case={case}")  # '=' so that an id starting with '-' stays a value
    return argv
