"""The profiled run: find ncu, build its command line (a pure function), run it, explain how it ended."""

from __future__ import annotations

import enum
import functools
import glob
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fuseci.config import names, quantities
from fuseci.config.model import NcuSettings
from fuseci.errors import NcuError
from fuseci.measure import process
from fuseci.measure.command import Mode, SuiteFiles, harness_argv, operand
from fuseci.measure.turn import waiting_file

log = logging.getLogger(__name__)

_FALLBACK_GLOBS = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
)

#: How to get ncu, quoted when it cannot be found.
INSTALL_FIX = (
    "install Nsight Compute (it ships with the CUDA toolkit) and put it on PATH, or pass --ncu PATH. "
    "Without a GPU, re-analyse a recorded report with --from-report."
)


def find_ncu(explicit: str | None = None) -> str:
    """Locate the ncu executable: ``explicit``, ``$FUSECI_NCU``, PATH, then usual install dirs.

    Raises:
        NcuError: not found anywhere; the message lists where it looked.
    """
    for candidate in (explicit, os.environ.get("FUSECI_NCU")):
        if candidate:
            if found := shutil.which(candidate):
                return found
            raise NcuError(f"ncu not found at {candidate!r}; check --ncu / FUSECI_NCU")
    if found := shutil.which("ncu"):
        return found
    for pattern in _FALLBACK_GLOBS:
        if matches := sorted(glob.glob(pattern)):
            return matches[-1]
    raise NcuError(f"ncu (Nsight Compute) not found on PATH or in {', '.join(_FALLBACK_GLOBS)}; {INSTALL_FIX}")


def find_ncu_or_none(explicit: str | None = None) -> str | None:
    """:func:`find_ncu`, or None where no ncu is found (for the report reader's fallback)."""
    try:
        return find_ncu(explicit)
    except NcuError:
        return None


@functools.cache
def ncu_version(ncu: str) -> str:
    """The version ``ncu --version`` prints, e.g. ``2025.3.1.0``.

    Raises:
        NcuError: ncu does not run or prints no version.
    """
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NcuError(f"cannot run {ncu} --version: {exc}") from None
    m = re.search(r"Version\s+(\S+)", out.stdout)
    if not m:
        raise NcuError(
            f"{ncu} --version printed no version (exit {out.returncode}): {out.stdout.strip() or out.stderr.strip()}"
        )
    return m.group(1)


def profiler_argv(
    ncu: str, nvtx_filter: str, settings: NcuSettings, files: SuiteFiles, sections: Path | None = None
) -> list[str]:
    """ncu and its options, without the application's argv. Pure: same inputs, same list.

    ``sections``: an empty folder (:func:`no_sections`): fuseci names every metric it reads, so the
    20-odd section and rule files ncu would otherwise parse at start only delay the profiled process.
    """
    return [
        ncu,
        "--config-file", "off",
        *(["--section-folder", operand(sections)] if sections is not None else []),
        "--nvtx",
        "--nvtx-include", nvtx_filter,
        "--nvtx-exclude", names.repeat_filter(),
        "--metrics", ",".join(quantities.ncu_metrics(tma=settings.tma)),
        "--clock-control", settings.clock_control,
        "--cache-control", settings.cache_control,
        "--replay-mode", settings.replay_mode,
        "--export", operand(files.report),
        "--force-overwrite",
        "--log-file", operand(files.ncu_log),
    ]  # fmt: skip


def build_command(
    ncu: str,
    suite_path: Path,
    settings: NcuSettings,
    files: SuiteFiles,
    python: str = sys.executable,
    gpu_lock: Path | None = None,
    cases: Sequence[str] = (),
    sections: Path | None = None,
    passes: int = 1,
) -> list[str]:
    """The full argv of one profiled run of suite ``files.suite`` (only ``cases`` when given). Pure."""
    return [
        *profiler_argv(ncu, names.range_filter(files.suite), settings, files, sections),
        *harness_argv(
            Mode.PROFILE, files.record, suite_path, gpu_lock=gpu_lock, python=python, cases=cases, passes=passes
        ),
    ]


@contextmanager
def no_sections() -> Iterator[Path | None]:
    """An empty folder for ncu's ``--section-folder``, removed after (None when none can be made)."""
    try:
        folder = tempfile.TemporaryDirectory(prefix="fuseci-ncu-sections-")
    except OSError as exc:
        log.debug("no empty section folder for ncu (%s); it loads its own", exc)
        yield None
        return
    with folder as path:
        yield Path(path)


PERMISSION_PROBLEM = "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)"
PERMISSION_FIX = (
    "run as root or with CAP_SYS_ADMIN (containers: --cap-add=SYS_ADMIN, driver >= R565 also CAP_PERFMON); or "
    "allow all users host-wide with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
    "/etc/modprobe.d and a reboot (check: grep RmProfilingAdminOnly /proc/driver/nvidia/params)"
)
DCGM_PROBLEM = "the counters are held by another profiler, usually DCGM"
DCGM_FIX = "pause it around the run with `dcgmi profile --pause` ... `dcgmi profile --resume`"
DISK_FULL_PROBLEM = "the disk ran out of space while ncu wrote the report"
DISK_FULL_FIX = "free space on the file system of --report-dir, or point --report-dir at another one"
#: Lines of a log quoted when ncu or the application failed for a reason the log does not name.
TAIL_LINES = 8


class ProfileOutcome(enum.Enum):
    """How a finished ncu run ended, as far as its exit status, log and files tell."""

    REPORT = "report"
    """A report was written."""
    NOTHING_PROFILED = "nothing profiled"
    """ncu exited 0 and said no kernel matched its filters; no report."""
    NO_PERMISSION = "no permission"
    """ncu was refused the performance counters (``ERR_NVGPUCTRPERM``)."""
    COUNTERS_BUSY = "counters busy"
    """Another profiler (DCGM) holds the counters."""
    APP_FAILED = "application failed"
    """Non-zero exit for another reason: usually the profiled application crashed."""
    DISK_FULL = "disk full"
    """Writing the report (or its temporary files) ran out of space."""
    NO_REPORT = "no report"
    """ncu exited 0 but wrote no report and did not say why."""


def classify(returncode: int, ncu_log: str, report_written: bool) -> ProfileOutcome:
    """How an ncu run ended, from its exit status, the text of its ``--log-file`` and its report. Pure."""
    if "ERR_NVGPUCTRPERM" in ncu_log:
        return ProfileOutcome.NO_PERMISSION
    if "driver resource was unavailable" in ncu_log:
        return ProfileOutcome.COUNTERS_BUSY
    if "No space left on device" in ncu_log or "ENOSPC" in ncu_log:
        return ProfileOutcome.DISK_FULL
    if returncode != 0:
        return ProfileOutcome.APP_FAILED
    if report_written:
        return ProfileOutcome.REPORT
    if "No kernels were profiled" in ncu_log:
        return ProfileOutcome.NOTHING_PROFILED
    return ProfileOutcome.NO_REPORT


@dataclass(frozen=True, slots=True)
class ProfileRun:
    """One finished ncu run: how it ended and, when it failed, why and what to do."""

    outcome: ProfileOutcome
    """How it ended."""
    returncode: int
    """ncu's exit status; negative when a signal killed it."""
    problem: str
    """What went wrong, one line; empty for :attr:`ProfileOutcome.REPORT`."""
    fix: str
    """The fix of a cause ncu names in its log; empty when none is known."""
    tail: str
    """The last lines of the application's output (else ncu's log) when the cause is not known."""

    def message(self, files: SuiteFiles) -> str:
        """The whole explanation, on one line: what went wrong, the fix, the logs and their last lines."""
        logs = f"ncu log {files.ncu_log}, harness log {files.app_log}"
        text = f"{self.problem}. Fix: {self.fix}; {logs}" if self.fix else f"{self.problem}; {logs}"
        return f"{text}; last lines: {process.one_line(self.tail)}" if self.tail else text


def finished(returncode: int, files: SuiteFiles) -> ProfileRun:
    """Read what an ncu run left in ``files`` and explain how it ended."""
    ncu_log = files.ncu_log.read_text(encoding="utf-8", errors="replace") if files.ncu_log.exists() else ""
    outcome = classify(returncode, ncu_log, files.report.exists())
    problem, fix, tail = "", "", ""
    if outcome is ProfileOutcome.NO_PERMISSION:
        problem, fix = PERMISSION_PROBLEM, PERMISSION_FIX
    elif outcome is ProfileOutcome.COUNTERS_BUSY:
        problem, fix = DCGM_PROBLEM, DCGM_FIX
    elif outcome is ProfileOutcome.APP_FAILED:
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"
        problem = f"the profiled run {how}"
        tail = process.tail(files.app_log, TAIL_LINES) or process.tail(files.ncu_log, TAIL_LINES)
    elif outcome is ProfileOutcome.DISK_FULL:
        problem, fix = DISK_FULL_PROBLEM, DISK_FULL_FIX
        tail = process.tail(files.ncu_log, TAIL_LINES)
    elif outcome is ProfileOutcome.NO_REPORT:
        problem = f"ncu exited 0 but wrote no report at {files.report}"
        tail = process.tail(files.ncu_log, TAIL_LINES)
    elif outcome is ProfileOutcome.NOTHING_PROFILED:
        problem = "ncu profiled no kernel: none ran inside the NVTX ranges its --nvtx-include filter selects"
    return ProfileRun(outcome, returncode, problem, fix, tail)


def remove_stale(files: SuiteFiles) -> None:
    """Remove what an earlier profiled run of the suite left, so that nothing reads it for new."""
    files.report.parent.mkdir(parents=True, exist_ok=True)
    for stale in (files.report, files.record, files.ncu_log, waiting_file(files.record)):
        stale.unlink(missing_ok=True)


def run_ncu(
    argv: list[str],
    files: SuiteFiles,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    started: Callable[[], object] | None = None,
) -> ProfileRun:
    """Run ncu with its outputs at ``files`` (stale ones removed first) and explain how it ended.

    Raises:
        NcuError: ncu could not be started.
        subprocess.TimeoutExpired: it ran past ``timeout_s``; it and its children were stopped.
    """
    remove_stale(files)
    try:
        returncode = process.run_logged(argv, files.app_log, timeout_s, cwd, env, started=started)
    except FileNotFoundError:
        raise NcuError(f"cannot execute {argv[0]}: file not found") from None
    except PermissionError:
        raise NcuError(f"cannot execute {argv[0]}: permission denied") from None
    return finished(returncode, files)
